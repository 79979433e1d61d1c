"""Issue 23: an empty id is refused in one line that names the argument and says what to pass.

An empty `gate_id` used to reach the store as a key ("record_outcome failed inside the
server"), or was silently taken for "no gate" by `search`. Real MCP client in memory against
the retrieval server on a real store file and the clean-room corpus fixture."""

from __future__ import annotations

import pytest
from mcp import Client

from evoteam.servers.retrieval.predictor import AgentPredictor
from tests.retrieval.test_loop import make_server


@pytest.mark.parametrize("tool,args,named", [
    ("search", {"gate_id": ""}, "gate_id"),
    ("search", {"gate_id": "  ", "with_run": True}, "gate_id"),
    ("record_outcome", {"gate_id": "", "realised_score": 1.0, "with_run": True}, "gate_id"),
    ("record_outcome", {"gate_id": "", "realised_score": 1.0, "document_ids": ["doc_x"], "with_run": True}, "gate_id"),
    ("record_outcome", {"candidate_id": "", "realised_score": 1.0, "with_run": True}, "candidate_id"),
    ("record_outcome", {"run_id": "", "realised_score": 1.0}, "run_id"),
    ("gate", {"run_id": "", "decision": "no-op"}, "run_id"),
    ("score_documents", {"search_id": "", "scores": []}, "search_id"),
])
async def test_an_empty_id_names_the_argument_and_what_to_pass(store, run, corpus_dir, tool, args, named):
    args = dict(args)
    if args.pop("with_run", False):
        args["run_id"] = run.id
    async with Client(make_server(store, corpus_dir, AgentPredictor())) as client:
        result = await client.call_tool(tool, args)
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert f"{named} is empty: pass " in text, text
    assert "\n" not in text and "failed inside the server" not in text
