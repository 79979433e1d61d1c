"""Across servers, on the embedded file and on a shared knowledge server alike: documents found
by the retrieval loop are used by a candidate, bench.evaluate measures and records it, the
documents get outcome credit, and a later look-up ranks them by what they realised."""

from __future__ import annotations

import shutil
from pathlib import Path

from mcp import Client

from evoteam.config import SOURCE_ROOT, load_settings
from evoteam.servers.bench.server import build_server as build_bench
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.retrieval.backends import BackendSet, LocalBackend
from evoteam.servers.retrieval.predictor import AnthropicPredictor
from evoteam.servers.retrieval.server import build_server as build_retrieval
from tests.knowledge.conftest import held, knowledge_server, store  # noqa: F401 (fixtures)
from tests.retrieval.conftest import CORPUS, ScriptedModel

KIT = "rmsnorm_cpu"


async def call(client: Client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, result.content
    return result.structured_content


async def test_documents_used_by_an_evaluated_candidate_get_credit(store, tmp_path: Path):  # noqa: F811
    corpus = tmp_path / "corpus"
    shutil.copytree(CORPUS, corpus)
    settings = load_settings()
    settings.corpus_dirs = [corpus]
    run = await store.start_run(RunCreate(goal="fast RMSNorm", kit=KIT, direction="maximize", x0=1.0))
    retrieval = build_retrieval(settings, store, backends=BackendSet([LocalBackend([corpus])]),
                                predictor=AnthropicPredictor("sk-test", "claude-test",
                                                             transport=ScriptedModel().transport))
    bench = build_bench(settings, store)
    async with held(Client(retrieval)) as r, held(Client(bench)) as b:
        gate = await call(r, "gate", {"run_id": run.id, "decision": "retrieve", "parent_score": 1.0,
                                      "open_questions": ["how to avoid three passes over the row"]})
        found = await call(r, "search", {"gate_id": gate["gate_id"]})
        used = found["documents"][0]["id"]
        better = SOURCE_ROOT / "task_kits" / KIT / "examples" / "better.py"
        evaluation = await call(b, "evaluate", {"kit": KIT, "candidate_path": str(better), "run_id": run.id,
                                                "documents_used": [used], "notes": "fused single pass"})
        assert evaluation["status"] == "PASSED" and evaluation["score"] > 1.0
        stored = await store.get_candidate(evaluation["candidate_id"])
        assert stored.documents_used == [used]
        doc = (await call(r, "lookup", {"document_id": used}))["document"]
        assert doc["outcomes"] and doc["outcomes"][0]["realised_score"] == evaluation["score"]
        stats = await call(r, "retrieval_stats", {"run_id": run.id})
        assert stats["outcomes"] == 1
