"""EvoDuet's retrieval loop inside a real OpenEvolve run.

The real ``openevolve`` package (0.4.x) runs three iterations on an OpenEvolve-format folder
(our test data) through the shipped example script, against a scripted OpenAI-compatible
chat-completions server on 127.0.0.1 and the local corpus backend. The scripted model decides
the gate (retrieve, then look-up, then no-op), writes queries, forecasts documents and answers
mutation prompts with SEARCH/REPLACE diffs. We check that the gate's decision and the chosen
documents reach the mutation prompts, that N candidates (1 on no-op) are generated and evaluated
by the bench, that the best valid one goes back to OpenEvolve, and that outcomes are credited."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from evoteam.config import SOURCE_ROOT
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.retrieval.core import RetrievalService
from tests.support.scripted_openai import ScriptedChat, user_text

pytestmark = pytest.mark.skipif(importlib.util.find_spec("openevolve") is None,
                                reason="the real openevolve package is not installed: pip install 'evoteam[openevolve]'")

HERE = Path(__file__).parent
FOLDER = SOURCE_ROOT / "tests" / "bench" / "openevolve_data" / "sphere_search"
DECISIONS = ["retrieve", "look-up", "no-op"]
DOC = re.compile(r'<untrusted-([0-9a-f]+) id="([^"]+)">\ntitle: ([^\n]*)')


class Script:
    """The scripted model: gate decisions in order, queries, forecasts and diffs."""

    def __init__(self) -> None:
        self.gates = 0
        self.seen: Counter[str] = Counter()

    def __call__(self, body: dict) -> str | dict:
        text = user_text(body)
        tool = (body.get("tool_choice") or {}).get("function", {}).get("name")
        if tool == "choose_gate":
            decision = DECISIONS[min(self.gates, len(DECISIONS) - 1)]
            self.gates += 1
            return {"tool": tool, "arguments": {"decision": decision, "reason": f"scripted gate {self.gates}"}}
        if tool == "propose_queries":
            return {"tool": tool, "arguments": {"queries": ["random search sample budget", "coordinate descent"]}}
        if tool == "submit_forecasts":
            parent = float(re.search(r"Parent's measured score: ([0-9.eE+-]+)", text).group(1))
            rows = [{"document_id": doc_id, "predicted_score": parent + (0.05 if "budget" in title.lower() else -0.02),
                     "why": "scripted"} for _, doc_id, title in DOC.findall(text)]
            return {"tool": tool, "arguments": {"forecasts": rows, "next_queries": ["line search per coordinate"],
                                                "knowledge_state": {"learned": ["larger budgets help"]}}}
        assert not body.get("tools"), f"unexpected tool {tool}"
        # A mutation prompt: narrow the current program's sampling box towards the minimum.
        current = text.split("# Current Program")[-1]
        lo, hi = re.search(r"rng\.uniform\(([-0-9.]+), ([-0-9.]+)\)", current).groups()
        key = body["messages"][-1]["content"]
        k = self.seen[key]
        self.seen[key] += 1
        if k == 1:  # the second candidate of a prompt is broken: best-of-N must skip it
            return ("Return two coordinates only.\n<<<<<<< SEARCH\n    return best_point\n=======\n"
                    "    return best_point[:2]\n>>>>>>> REPLACE\n")
        new_lo, new_hi = (float(lo) + 1.5) / 2, (float(hi) + 1.5) / 2
        return (f"Sample a smaller box around the region the documents point to.\n<<<<<<< SEARCH\n"
                f"        point = [rng.uniform({lo}, {hi}) for _ in range(3)]\n=======\n"
                f"        point = [rng.uniform({new_lo}, {new_hi}) for _ in range(3)]\n>>>>>>> REPLACE\n")


async def test_openevolve_run_with_the_retrieval_adapter(tmp_path: Path):
    kit = tmp_path / "sphere_search"
    shutil.copytree(FOLDER, kit)
    corpus = tmp_path / "corpus"
    shutil.copytree(HERE / "openevolve_corpus", corpus)
    db = tmp_path / "state" / "kb.db"
    script = Script()
    env = dict(os.environ, EVOTEAM_DB=str(db), HOME=str(tmp_path / "home"), PYTHONPATH=str(SOURCE_ROOT))
    env.pop("EVOTEAM_KITS", None)
    # A folder outside the kit folders runs only once its user trusts it (its evaluator is code).
    subprocess.run([sys.executable, "-m", "evoteam.cli", "bench", "trust", str(kit)], env=env, check=True,
                   capture_output=True, timeout=120)
    with ScriptedChat(script) as chat:
        proc = subprocess.run(
            [sys.executable, str(SOURCE_ROOT / "examples" / "openevolve_retrieval.py"), str(kit), "--iterations", "3",
             "--api-base", chat.base_url, "--api-key", "sk-local", "--corpus", str(corpus), "--n", "2", "--keep", "2",
             "--rounds", "1", "--question", "how can a random search find a point closer to the minimum?",
             "--output", str(tmp_path / "oe_out")],
            capture_output=True, text=True, env=env, timeout=540, cwd=tmp_path)
        requests = list(chat.requests)
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout[proc.stdout.index("{"):])
    run_id = summary["run_id"]

    # The gate was asked once per iteration, with the evolutionary context (the parent's score).
    gates = [r for r in requests if (r.get("tool_choice") or {}).get("function", {}).get("name") == "choose_gate"]
    assert len(gates) == 3 and script.gates == 3
    assert "Parent's measured score: 0.62" in user_text(gates[0])
    assert any(r["tool_choice"]["function"]["name"] == "submit_forecasts" for r in requests if r.get("tools"))

    # Mutation prompts: 2 per iteration with documents, 1 on no-op; each says the gate's decision.
    mutations = [r for r in requests if not r.get("tools")]
    by_decision: dict[str, list[str]] = {}
    for r in mutations:
        text = r["messages"][-1]["content"]
        decision = re.search(r"Retrieval gate decision: (\S+)", text).group(1)
        by_decision.setdefault(decision, []).append(text)
    assert {d: len(v) for d, v in by_decision.items()} == {"retrieve": 2, "look-up": 2, "no-op": 1}
    retrieved = DOC.findall(by_decision["retrieve"][0])
    looked_up = DOC.findall(by_decision["look-up"][0])
    assert retrieved and looked_up and not DOC.findall(by_decision["no-op"][0])
    assert "budget" in retrieved[0][2].lower()  # the best-forecast document comes first

    actor = Actor(user="tester", client="pytest")
    async with LocalKnowledgeStore.open(db, actor) as store:
        # Every generated candidate was evaluated by the bench and recorded in the run.
        page = await store.list_candidates(run_id, limit=50)
        # Identical programs are one candidate whose measurements pool (the mutations converge on
        # one program): five evaluations, three passing and two broken.
        measured = Counter()
        for c in page.items:
            measured[c.status] += c.n_measurements
        assert measured == {"PASSED": 3, "RUNTIME_ERROR": 2}, measured
        assert len(page.items) == len({c.code_hash for c in page.items})
        # the candidates built with documents name them (the provenance of their ideas)
        used = [set((await store.get_candidate(c.id)).documents_used) for c in page.items]
        named = {d[1] for d in retrieved + looked_up}
        assert {d[1] for d in retrieved} in used and all(u <= named for u in used), used
        service = RetrievalService(store)
        # The documents in the prompts are the store's documents, with outcome credit.
        for _, doc_id, title in retrieved + looked_up:
            doc = (await service.lookup(document_id=doc_id)).document
            assert doc.title == title
        credited = (await service.lookup(document_id=retrieved[0][1])).document
        assert credited.outcomes and all(o.realised_score > 0.63 for o in credited.outcomes)
        stats = await service.stats(run_id)
        # Each gate credits its best child; the passing candidates are those bests, and children
        # that are the same program are one candidate (identical code pools), credited once (credit
        # is idempotent per candidate; the first gate's is kept).
        passing = [c for c in page.items if c.status == "PASSED"]
        assert 1 <= len(passing) <= 3 and sum(c.n_measurements for c in passing) == 3
        assert stats.searches == 1 and stats.outcomes == len(passing) and stats.predictions >= 1
        decisions = {d.decision: d for d in stats.by_decision}
        assert set(decisions) == {"retrieve", "look-up", "no-op"}
        assert decisions["retrieve"].outcomes == 1
        assert sum(d.outcomes for d in decisions.values()) == len(passing)
        best_candidate = max((c for c in page.items if c.score is not None), key=lambda c: c.score)
    # OpenEvolve got the best valid candidate back each time: its best is the bench's best, and
    # the run improved on the initial program (0.625).
    assert best_candidate.score > 0.7
    assert summary["best_score"] == pytest.approx(best_candidate.score)
