"""What misled a helper playing the model through /kernel-loop and a team brief on rmsnorm_cpu
(real MCP clients, real evaluations of a small copy of the kit), kept as tests:

- a PENDING answer of evaluate(wait=false) showed `recorded: false`, `passed: 0`, `contended:
  false`, read as a result ("it will not be recorded");
- a passing but flagged evaluation's message began "all 3 workloads correct; geomean speedup
  38.5×": the flag that keeps it from ranking was only in `flags`;
- remeasure's default on a run without a team (one group) measured one finalist, so the skill's
  "which ranking holds" had nothing to rank;
- compare repeated the contention clause in both sides' messages, cut off mid-word;
- a role's brief sent it to get_candidate with detail=true for the code (every sample too) while
  the tool and the skills say include_code=true, and the summary repeated the machine's
  description, the kit's path and hash and figures the score already gives.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client

from evoteam.config import Settings
from evoteam.servers.bench.server import build_server as bench_server
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.server import build_server as knowledge_server
from evoteam.servers.team.server import build_server as team_server
from tests.bench.conftest import small_kit


FLOAT32 = '''
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states
    ms = np.einsum("ij,ij->i", x, x) / np.float32(x.shape[-1])
    return (x * (1.0 / np.sqrt(ms + np.float32(eps)))[:, None].astype(np.float32)) * weight
'''

FLOAT64 = '''
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return y.astype(np.float32)
'''


@pytest.fixture
async def store(tmp_path: Path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as opened:
        yield opened


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    small_kit(tmp_path / "kits" / "rmsnorm_walk", workload_s=10)
    return Settings(db=tmp_path / "kb.db", kits_dirs=[tmp_path / "kits"])


async def start_run(settings, store) -> str:
    async with Client(knowledge_server(settings, store)) as kb:
        run = await kb.call_tool("start_run", {"goal": "fast rmsnorm", "kit": "rmsnorm_walk"})
    return run.structured_content["id"]


async def test_a_pending_answer_shows_only_what_is_known(settings, store):
    run_id = await start_run(settings, store)
    async with Client(bench_server(settings, store)) as bench:
        pending = await bench.call_tool("evaluate", {"kit": "rmsnorm_walk", "code": FLOAT32, "run_id": run_id,
                                                     "wait": False})
        done = await bench.call_tool("evaluation_result", {"ticket": pending.structured_content["ticket"],
                                                           "wait_s": 300})
    shown = json.loads(pending.content[0].text)
    assert shown["status"] == "PENDING" and shown["ticket"].startswith("tkt_") and "queue_position" in shown
    for field in ("recorded", "passed", "total", "contended", "flagged"):
        assert field not in shown, (field, shown)
    # The finished answer still says all of it, and the candidate was recorded after all.
    final = json.loads(done.content[0].text)
    assert final["status"] == "PASSED" and final["recorded"] is True and final["total"] == 1, final


async def test_remeasure_of_a_run_without_a_team_ranks_its_best_few(settings, store):
    run_id = await start_run(settings, store)
    async with Client(bench_server(settings, store)) as bench:
        ids = []
        for code in (FLOAT32, FLOAT64):
            result = await bench.call_tool("evaluate", {"kit": "rmsnorm_walk", "code": code, "run_id": run_id})
            assert result.structured_content["status"] == "PASSED", result.content[0].text
            ids.append(result.structured_content["candidate_id"])
        measured = await bench.call_tool("remeasure", {"run_id": run_id, "rounds": 2})
    assert not measured.is_error, measured.content[0].text
    finalists = [e["candidate_id"] for e in measured.structured_content["entries"] if e["candidate_id"] != "baseline"]
    assert sorted(finalists) == sorted(ids)
    assert sorted(measured.structured_content["order_after"]) == sorted(ids)
    # A kernel kit's entries say nothing of a program's settling (`"settled": false` on each; mp31).
    assert '"settled"' not in measured.content[0].text
    # No team, no version gains: the empty list is not in the text either.
    assert measured.structured_content["version_gains"] == [] and "version_gains" not in measured.content[0].text
    # The rule is the same in every reply: programs get it, the text does not (~330 characters; mp42).
    assert "pessimistic" in measured.structured_content["rule"] and '"rule"' not in measured.content[0].text
    # The baseline's entry says what it is in the text, not only in the output schema (mp42).
    shown = json.loads(measured.content[0].text)
    assert "A/A" in next(e for e in shown["entries"] if e["candidate_id"] == "baseline")["note"]
    assert all("note" not in e for e in shown["entries"] if e["candidate_id"] != "baseline")


async def test_a_busy_remeasure_says_what_to_do(settings, store):
    """`contended: true` came with no advice (mp42): the note says what a busy batch means for the
    ranking and what to do."""
    from evoteam.servers.bench.formats.kits import state_dir
    from evoteam.servers.bench.measurement.method import TIMING_METHOD

    run_id = await start_run(settings, store)
    async with Client(bench_server(settings, store)) as bench:
        done = await bench.call_tool("evaluate", {"kit": "rmsnorm_walk", "code": FLOAT32, "run_id": run_id})
        assert done.structured_content["status"] == "PASSED", done.content[0].text
        # As in test_compare_says_contention_once: every batch from now on reads as contended.
        (state_dir(settings) / "call_path_floor.json").write_text(
            json.dumps({f"cpu rmsnorm_walk method {TIMING_METHOD}": [0.001]}))
        measured = await bench.call_tool("remeasure", {"run_id": run_id, "rounds": 2})
    shown = json.loads(measured.content[0].text)
    assert shown["contended"] is True, shown
    assert "busy machine" in shown["note"] and "call it again when the machine is quieter" in shown["note"], shown


async def test_a_role_is_sent_to_the_code_by_the_short_way(settings, store, tmp_path: Path):
    run_id = await start_run(settings, store)
    async with Client(bench_server(settings, store)) as bench:
        done = await bench.call_tool("evaluate", {"kit": "rmsnorm_walk", "code": FLOAT32, "run_id": run_id})
    cand = done.structured_content["candidate_id"]
    # The evaluate text leaves the call path's per-workload figures to programs (structuredContent).
    assert '"call_path_subtracted_us"' not in done.content[0].text and '"pinned_cpus"' not in done.content[0].text
    assert done.structured_content["metrics"]["timing"]
    project = tmp_path / "project"
    project.mkdir()
    async with Client(team_server(settings, store, project_dir=project)) as team:
        plan = await team.call_tool("design_team", {
            "run_id": run_id, "diagnosis": "v1", "rationale": "one tuner",
            "roles": [{"name": "Tuner", "mandate": "beat the best", "isolation": "shared"}]})
    assert not plan.is_error, plan.content[0].text
    brief = (project / ".claude" / "agents" / "tuner.md").read_text()
    reads = brief.split("## Read before you act", 1)[1].split("## Deliver", 1)[0]
    assert "get_candidate` with include_code=true" in reads, reads
    async with Client(knowledge_server(settings, store)) as kb:
        short = await kb.call_tool("get_candidate", {"candidate_id": cand, "include_code": True})
        full = await kb.call_tool("get_candidate", {"candidate_id": cand, "detail": True})
    text = short.content[0].text
    assert "def run(" in json.loads(text)["code"]
    for noise in ('"environment"', '"kit_hash"', '"kit_source"', '"geomean_speedup"', '"samples"'):
        assert noise not in text, noise
    assert '"contention"' in text and '"workloads"' in text  # what explains the score stays
    assert '"environment"' in full.content[0].text  # detail=true still has everything
    assert len(text) < len(full.content[0].text)


async def test_a_flagged_passing_result_says_so_first(tmp_path: Path, store):
    # A baseline that sleeps 50 ms and a sanity bound of 2x: the float32 candidate passes and is
    # flagged on any machine, however busy (it would have to take over 25 ms to stay under).
    kit = small_kit(tmp_path / "kits" / "rmsnorm_slowbase", workload_s=10, max_plausible_speedup=2.0)
    baseline = (kit / "baseline.py").read_text()
    (kit / "baseline.py").write_text("import time\n" + baseline.replace(
        "def run(hidden_states, weight, eps):\n", "def run(hidden_states, weight, eps):\n    time.sleep(0.05)\n"))
    settings = Settings(db=tmp_path / "kb.db", kits_dirs=[tmp_path / "kits"])
    async with Client(bench_server(settings, store)) as bench:
        result = await bench.call_tool("evaluate", {"kit": "rmsnorm_slowbase", "code": FLOAT32})
    shown = json.loads(result.content[0].text)
    assert shown["status"] == "PASSED" and shown["flagged"] is True, shown
    assert shown["message"].startswith("FLAGGED, does not rank until reviewed"), shown["message"]


async def test_compare_says_contention_once(settings, store):
    # The best call-path floor this bench has seen, set far below any real one: every batch now
    # reads as contended, as it did on the helper's busy machine.
    from evoteam.servers.bench.formats.kits import state_dir
    from evoteam.servers.bench.measurement.method import TIMING_METHOD

    state_dir(settings).mkdir(parents=True, exist_ok=True)
    (state_dir(settings) / "call_path_floor.json").write_text(json.dumps({f"cpu rmsnorm_walk method {TIMING_METHOD}": [0.001]}))
    async with Client(bench_server(settings, store)) as bench:
        result = await bench.call_tool("compare", {"kit": "rmsnorm_walk", "a_code": FLOAT64, "b_code": FLOAT32,
                                                   "repeats": 2})
    shown = json.loads(result.content[0].text)
    assert shown["contended"] is True, shown
    for side in ("a", "b"):
        message = shown[side]["message"]
        # (a side may also be FLAGGED on a loaded machine, which its message then says first)
        assert "all 1 workloads correct" in message and "contended machine" not in message, message


async def test_a_measurement_the_store_refuses_is_not_blamed_on_the_arguments(settings, store, monkeypatch):
    """The store refused ranges the bench had computed, and the reply said "invalid arguments": a
    model checked arguments that were exactly what the skill prescribed (held-out, repeats 5; mp43)."""
    from evoteam.servers.bench.evaluation import core
    from evoteam.servers.knowledge.models import CandidateCreate

    def refused(**fields):  # what the store's own check raised there
        return CandidateCreate(**{**fields, "samples": {"w": [2.0]}, "sample_ranges": {"w": ([2.1], [2.2])}})

    monkeypatch.setattr(core, "CandidateCreate", refused)
    run_id = await start_run(settings, store)
    async with Client(bench_server(settings, store)) as bench:
        result = await bench.call_tool("evaluate", {"kit": "rmsnorm_walk", "code": FLOAT32, "run_id": run_id})
    text = result.content[0].text
    assert result.is_error and "invalid arguments" not in text, text
    assert "the store refused this measurement's own figures" in text and "hold its sample" in text, text
    assert "arguments were checked before it ran" in text and "Value error" not in text, text


async def test_a_held_out_record_is_not_compared_on_the_dev_split(settings, store):
    """compare took a held-out record's id on the dev split without a word, and kept the rounds
    under that record (mp44): it is refused before anything is timed, naming the dev candidate."""
    from evoteam.servers.knowledge.models import CandidateCreate
    from evoteam.servers.knowledge.store import Actor

    run_id = await start_run(settings, store)
    bench_store = store.with_actor(Actor(user="u", client="t", verifier=True))
    dev = await bench_store.record_candidate(CandidateCreate(run_id=run_id, code=FLOAT32, status="PASSED", score=2.0))
    held = await bench_store.record_candidate(CandidateCreate(run_id=run_id, code=FLOAT32, status="PASSED", score=1.9,
                                                              split="heldout", parent_id=dev.id))
    async with Client(bench_server(settings, store)) as bench:
        result = await bench.call_tool("compare", {"kit": "rmsnorm_walk", "a_candidate_id": "baseline",
                                                   "b_candidate_id": held.id})
        itself = await bench.call_tool("compare", {"kit": "rmsnorm_walk", "a_candidate_id": dev.id,
                                                   "b_candidate_id": held.id})
    text = result.content[0].text
    assert result.is_error and f"{held.id} is a held-out record of {dev.id}: compare {dev.id}" in text, text
    # Against its own dev candidate, "compare that one" would time one code against itself (mp45).
    text = itself.content[0].text
    assert itself.is_error and f"{dev.id} is the other side already: the same code" in text, text
