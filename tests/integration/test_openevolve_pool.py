"""An OpenEvolve run with ``parallel_evaluations: 4`` evaluates on the device pool.

The real ``openevolve`` package runs four iterations at once (four worker processes) on an
OpenEvolve-format folder through the shipped example script, against a scripted chat server on
127.0.0.1. With ``EVOTEAM_BENCH_BACKEND=pool`` and four declared CPU slots, the adapter's bench
evaluations go through the pool: each worker process keeps a pool of its own, and the slots'
claim files spread them over the slots, so they run at once instead of queueing for the one CPU
lock, and each child is recorded once in the evoteam run."""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from evoteam.config import SOURCE_ROOT
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from tests.support.scripted_openai import ScriptedChat

pytestmark = pytest.mark.skipif(importlib.util.find_spec("openevolve") is None,
                                reason="the real openevolve package is not installed: pip install 'evoteam[openevolve]'")

FOLDER = SOURCE_ROOT / "tests" / "bench" / "openevolve_data" / "sphere_search"
WORKERS = 4


class Script:
    """Every gate says no-op (one child per iteration); every child is a different program that
    takes a while to run, so the four workers' evaluations overlap."""

    def __init__(self) -> None:
        self.children = itertools.count()

    def __call__(self, body: dict) -> str | dict:
        tool = (body.get("tool_choice") or {}).get("function", {}).get("name")
        if tool == "choose_gate":
            return {"tool": tool, "arguments": {"decision": "no-op", "reason": "scripted"}}
        assert not body.get("tools"), f"unexpected tool {tool}"
        k = next(self.children)
        return ("Take a little longer.\n<<<<<<< SEARCH\n    rng = random.Random(seed)\n=======\n"
                f"    import time\n    time.sleep(1.5)\n    rng = random.Random(seed + {k})\n>>>>>>> REPLACE\n")


async def test_openevolve_parallel_evaluations_run_on_the_pool(tmp_path: Path):
    kit = tmp_path / "sphere_search"
    shutil.copytree(FOLDER, kit)
    config = kit / "config.yaml"
    config.write_text(re.sub(r"parallel_evaluations: \d+", f"parallel_evaluations: {WORKERS}", config.read_text()))
    db = tmp_path / "state" / "kb.db"
    env = dict(os.environ, EVOTEAM_DB=str(db), HOME=str(tmp_path / "home"), PYTHONPATH=str(SOURCE_ROOT),
               EVOTEAM_BENCH_BACKEND="pool", EVOTEAM_DEVICES=",".join(f"cpu:{i}" for i in range(WORKERS)))
    env.pop("EVOTEAM_KITS", None)
    subprocess.run([sys.executable, "-m", "evoteam.cli", "bench", "trust", str(kit)], env=env, check=True,
                   capture_output=True, timeout=120)
    with ScriptedChat(Script()) as chat:
        proc = subprocess.run(
            [sys.executable, str(SOURCE_ROOT / "examples" / "openevolve_retrieval.py"), str(kit),
             "--iterations", str(WORKERS), "--api-base", chat.base_url, "--api-key", "sk-local",
             "--decision", "no-op", "--output", str(tmp_path / "oe_out")],
            capture_output=True, text=True, env=env, timeout=540, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    run_id = json.loads(proc.stdout[proc.stdout.index("{"):])["run_id"]

    async with LocalKnowledgeStore.open(db, Actor(user="tester", client="pytest")) as store:
        page = await store.list_candidates(run_id, limit=50)
        stored = [await store.get_candidate(c.id) for c in page.items]
    # One candidate per child, each measured once, every one on a slot of the pool.
    assert len(stored) == WORKERS and all(c.n_measurements == 1 for c in stored), [c.status for c in stored]
    assert all(c.status == "PASSED" for c in stored), [c.metrics.get("message") for c in stored]
    places = [c.metrics["placement"] for c in stored]
    assert all(p["backend"] == "pool" for p in places), places
    assert len({p["slot"] for p in places}) >= 2, places
    spans = sorted((p["started_at"], p["finished_at"]) for p in places)
    assert any(b[0] < a[1] for a, b in zip(spans, spans[1:])), f"no two evaluations overlapped: {spans}"
