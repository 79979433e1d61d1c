"""Issue 23 (program kits): held-out instances never reach an agent, and a program's output
never becomes code in the evaluator. Kits are our own folders in the SkyDiscover/EvoDuet and
OpenEvolve layouts (tests/bench/openevolve_data)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from evoteam.config import Settings
from evoteam.servers.bench.formats import openevolve
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import find_kit, heldout_secret
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor

DATA = Path(__file__).parent.parent / "bench" / "openevolve_data"

INITIAL = (DATA / "seeded_mean" / "initial_program.py").read_text()
LEAKY = INITIAL.replace('    return 50.0\n', '    print("instance", instance)\n    raise ValueError(f"seed={instance}")\n')
assert LEAKY != INITIAL


def shows(number: int, text: str) -> bool:
    """Whether ``number`` appears in ``text`` as a number of its own. Ids and hashes are hex
    (``run_83861a29737d4210``) and hold any short run of digits by chance: they are masked first,
    so that a four-digit instance seed is not "found" inside one (a CI run failed that way); so is
    the harness's sandbox description, the kit's limits (a CI run found seed 4352 in
    ``memory.max=4352MiB``, 4096 + 256), and a number glued to a word (``sha256``)."""
    masked = re.sub(r"(?=[0-9a-f]*[a-f])[0-9a-f]{12,}", "#", text)
    masked = re.sub(r'"sandbox":"[^"]*"', '"sandbox":"#"', masked)
    return re.search(rf"(?<![0-9.A-Za-z]){number}(?![0-9A-Za-z])", masked) is not None


def test_shows_finds_a_seed_in_a_message_and_not_inside_an_id():
    assert shows(2973, "ValueError: seed=2973") and shows(2973, "[2973, 11]") and shows(7, "instance 7\n")
    assert shows(4352, '{"message":"seed=4352","sandbox":"x"}')
    assert not shows(2973, "run_83861a29737d4210") and not shows(2973, "uid429735") and not shows(459, "0.459")
    assert not shows(4352, '{"sandbox":"tree-limits(cgroup1:memory.max=4352MiB,pids.max=512)"}')
    assert not shows(256, '"code_hash":"sha256:#"')


@pytest.fixture
def seeded(tmp_path: Path) -> Settings:
    shutil.copytree(DATA / "seeded_mean", tmp_path / "kits" / "seeded_mean")
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[tmp_path / "kits"])


async def test_a_program_that_raises_with_its_seed_learns_nothing_of_the_heldout_instances(seeded, tmp_path):
    kit = find_kit(seeded, "seeded_mean_heldout")
    secret = openevolve.heldout_instances(heldout_secret(seeded), kit.name, kit.manifest.program_heldout)
    async with LocalKnowledgeStore.open(seeded.db, Actor(user="a", client="t")) as store:
        dev = await evaluate_candidate(seeded, kit, code=LEAKY, store=store)
        assert "seed=1" in dev.model_dump_json()  # on dev instances the message helps, as before
        held = await evaluate_candidate(seeded, kit, code=LEAKY, split="heldout", store=store)
        stored = await store.get_candidate(held.candidate_id)
    assert held.status != "PASSED"
    for text in (held.model_dump_json(), stored.model_dump_json()):
        for seed in secret:
            assert not shows(seed, text), (seed, text)
    assert "held-out" in held.message


async def test_a_passing_heldout_evaluation_keeps_its_score_and_drops_what_the_evaluator_echoed(seeded):
    kit = find_kit(seeded, "seeded_mean_heldout")
    program = DATA / "seeded_mean" / "initial_program.py"
    secret = openevolve.heldout_instances(heldout_secret(seeded), kit.name, kit.manifest.program_heldout)
    held = await evaluate_candidate(seeded, kit, candidate_path=str(program), split="heldout")
    assert held.status == "PASSED" and held.metrics["instances"] == 4
    assert "smallest_instance" not in held.metrics  # the evaluator echoes min(seeds) on dev
    assert not shows(min(secret), held.model_dump_json())
