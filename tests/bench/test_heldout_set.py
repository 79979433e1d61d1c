"""Every held-out result names the held-out set it was measured on: the same key gives the same
name, another key another name, and the name tells nothing about the key."""

from __future__ import annotations

import secrets

from evoteam.servers.bench.evaluation import core
from evoteam.servers.bench.formats.heldout_key import heldout_set_id
from evoteam.servers.bench.formats.kits import heldout_secret


async def test_held_out_results_name_their_set(fast_settings, fast_kit, monkeypatch):
    monkeypatch.delenv("EVOTEAM_HELDOUT_KEY", raising=False)
    monkeypatch.delenv("EVOTEAM_HELDOUT_KEY_FILE", raising=False)
    baseline = str(fast_kit / "baseline.py")
    own = await core.evaluate_candidate(fast_settings, "rmsnorm_fast", candidate_path=baseline, split="heldout")
    key = heldout_secret(fast_settings)
    assert own.status == "PASSED" and own.metrics["heldout_set"] == heldout_set_id(key)
    assert key.hex() not in own.metrics["heldout_set"] and key.hex()[:12] not in own.metrics["heldout_set"]
    other_key = secrets.token_hex(32)
    monkeypatch.setenv("EVOTEAM_HELDOUT_KEY", other_key)  # an evaluation service's own key
    theirs = await core.evaluate_candidate(fast_settings, "rmsnorm_fast", candidate_path=baseline, split="heldout")
    assert theirs.metrics["heldout_set"] == heldout_set_id(bytes.fromhex(other_key)) != own.metrics["heldout_set"]
