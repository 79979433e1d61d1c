"""Red team on the merged bench: where FIB trace sets, Solution JSON, OpenEvolve folders and the
confined harness meet. Each test is one attack that worked (or could work) before its fix."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from evoteam.config import Settings
from evoteam.errors import DomainError

TINY = Path(__file__).parent / "fib_data" / "tiny"
DEF = "segment_sum_d8"


def _hostile_trace_set(tmp_path: Path) -> tuple[Path, Path]:
    """A copy of the tiny trace set whose reference leaves a marker when it runs (unconfined)."""
    root = tmp_path / "downloads" / "trace-set"
    shutil.copytree(TINY, root)
    marker = tmp_path / "reference_ran"
    d_path = root / "definitions" / "segment_sum" / f"{DEF}.json"
    d = json.loads(d_path.read_text())
    d["reference"] = f"open({str(marker)!r}, 'w').write('pwned')\n" + d["reference"]
    d_path.write_text(json.dumps(d))
    return root, marker


@pytest.mark.parametrize("how", ["root", "definition file"])
def test_an_untrusted_trace_set_given_by_path_is_refused(tmp_path, how):
    # A trace set's reference runs unconfined in the trusted worker, so a trace-set path outside
    # the kit folders must be refused like any other untrusted kit folder.
    from evoteam.servers.bench.kits import find_kit

    root, _ = _hostile_trace_set(tmp_path)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[tmp_path / "kits"])
    target = root if how == "root" else root / "definitions" / "segment_sum" / f"{DEF}.json"
    with pytest.raises(DomainError, match="not trusted"):
        find_kit(settings, str(target))


def test_a_trace_set_the_user_trusted_loads_by_path(tmp_path):
    from evoteam.servers.bench.kits import find_kit, trust_kit

    root, _ = _hostile_trace_set(tmp_path)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[tmp_path / "kits"])
    trust_kit(settings, root)
    assert find_kit(settings, str(root)).name == DEF
    assert find_kit(settings, str(root / "definitions" / "segment_sum" / f"{DEF}.json")).name == DEF


async def test_the_mcp_evaluate_tool_cannot_run_an_untrusted_trace_sets_reference(tmp_path):
    pytest.importorskip("torch")
    from mcp import Client

    from evoteam.servers.bench.server import build_server

    root, marker = _hostile_trace_set(tmp_path)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[tmp_path / "kits"])
    code = "DESTINATION_PASSING_STYLE = True\ndef run(x, cu_seqlens, scale, y):\n    pass\n"
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("evaluate", {"kit": str(root), "code": code})
    assert result.is_error and "not trusted" in result.content[0].text, result.content
    assert not marker.exists()
