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
    from evoteam.servers.bench.formats.kits import find_kit

    root, _ = _hostile_trace_set(tmp_path)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[tmp_path / "kits"])
    target = root if how == "root" else root / "definitions" / "segment_sum" / f"{DEF}.json"
    with pytest.raises(DomainError, match="not trusted"):
        find_kit(settings, str(target))


def test_a_trace_set_the_user_trusted_loads_by_path(tmp_path):
    from evoteam.servers.bench.formats.kits import find_kit, trust_kit

    root, _ = _hostile_trace_set(tmp_path)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[tmp_path / "kits"])
    definition = root / "definitions" / "segment_sum" / f"{DEF}.json"
    assert trust_kit(settings, definition) == root.resolve()  # `bench run --trust-kit DEFINITION.json`
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


# ---------------------------------------------------------------- FIB Solution JSON candidates


def _solution(tmp_path: Path, sources: list[dict], *, language: str = "python", entry: str = "main.py::run",
              dps: bool = True, binding: str | None = None) -> Path:
    spec = {"language": language, "target_hardware": ["cpu"], "entry_point": entry,
            "destination_passing_style": dps}
    if binding:
        spec["binding"] = binding
    path = tmp_path / "project" / "hostile.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"name": "hostile", "definition": DEF, "author": "mallory", "spec": spec,
                                "sources": sources}))
    return path


@pytest.mark.parametrize("paths", [["main.py", "main.py/x.py"], ["main.py", "../../outside.py"],
                                   ["main.py", "/tmp/outside.py"], ["main.py", "sub/a\x00.py"]])
def test_solution_sources_that_escape_or_clash_are_refused_in_one_line(tmp_path, monkeypatch, paths):
    from evoteam.servers.bench.evaluation import core
    from evoteam.servers.bench.formats.kits import find_kit

    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[TINY])
    path = _solution(tmp_path, [{"path": p, "content": "def run(*a):\n    pass\n"} for p in paths])
    monkeypatch.chdir(path.parent)
    with pytest.raises(DomainError) as info:
        core.prepare_candidate(find_kit(settings, DEF), str(path), None, settings)
    assert "\n" not in str(info.value).split("validation error")[0]
    assert not (tmp_path / "outside.py").exists() and not Path("/tmp/outside.py").exists()


CORRECT_BODY = ("    idx = cu_seqlens.tolist()\n"
                "    for s in range(len(idx) - 1):\n"
                "        y[s] = x[idx[s]:idx[s + 1]].sum(0) * scale\n")


async def test_fib_solution_that_finishes_after_returning_does_not_pass(tmp_path, monkeypatch):
    # Work moved out of the timed region: the call returns at once and a thread fills the output.
    pytest.importorskip("torch")
    from evoteam.servers.bench.evaluation import core

    code = ("import threading, time\n"
            "def _late(x, cu_seqlens, scale, y):\n"
            "    time.sleep(0.05)\n" + CORRECT_BODY +
            "def run(x, cu_seqlens, scale, y):\n"
            "    threading.Thread(target=_late, args=(x, cu_seqlens, scale, y), daemon=True).start()\n")
    path = _solution(tmp_path, [{"path": "main.py", "content": code}])
    monkeypatch.chdir(path.parent)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[TINY])
    e = await core.evaluate_candidate(settings, DEF, candidate_path=str(path))
    assert e.status == "INCORRECT_NUMERICAL", (e.status, e.message)


async def test_fib_solution_returning_an_input_as_its_output_is_flagged(tmp_path, monkeypatch):
    # Return style, output aliased to an input: the sums are written into x's own rows.
    pytest.importorskip("torch")
    from evoteam.servers.bench.evaluation import core

    code = ("def run(x, cu_seqlens, scale):\n"
            "    idx = cu_seqlens.tolist()\n"
            "    for s in range(len(idx) - 1):\n"
            "        x[s] = x[idx[s]:idx[s + 1]].sum(0) * scale\n"
            "    return x[:len(idx) - 1]\n")
    path = _solution(tmp_path, [{"path": "main.py", "content": code}], dps=False)
    monkeypatch.chdir(path.parent)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[TINY])
    e = await core.evaluate_candidate(settings, DEF, candidate_path=str(path))
    assert e.status == "RUNTIME_ERROR" and e.flagged and "modified its input 'x'" in e.message, e.message


async def test_cpp_solution_build_cannot_read_the_trace_set(tmp_path, monkeypatch):
    # The compiler runs in the candidate's sandbox: an #include of a kit file is refused, and its
    # text never comes back in the compiler's diagnostics.
    pytest.importorskip("torch")
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler on this machine")
    from evoteam.servers.bench.evaluation import core

    root = tmp_path / "kits" / "tiny"
    shutil.copytree(TINY, root)
    (root / "notes.h").write_text("KIT_SENTINEL_8513 this line is the kit's own\n")
    source = (f'#include "{root / "notes.h"}"\n#include <torch/extension.h>\n'
              "void run(torch::Tensor x, torch::Tensor c, double s, torch::Tensor y) {}\n"
              "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"run\", &run); }\n")
    path = _solution(tmp_path, [{"path": "main.cpp", "content": source}], language="cpp", entry="main.cpp::run",
                     binding="torch")
    monkeypatch.chdir(path.parent)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[root])
    e = await core.evaluate_candidate(settings, DEF, candidate_path=str(path))
    assert e.status == "COMPILE_ERROR", (e.status, e.message)
    assert "KIT_SENTINEL_8513" not in e.message and "notes.h" in e.message, e.message


# An OpenEvolve evaluator that runs the program in its own process: tests/bench/test_evaluator_jail.py


def test_a_blob_reached_through_a_symlink_out_of_the_root_is_refused(tmp_path):
    from evoteam.servers.bench.formats.fib import resolve_blob

    root = tmp_path / "ts"
    (root / "blob").mkdir(parents=True)
    outside = tmp_path / "secret.safetensors"
    outside.write_bytes(b"\0" * 16)
    (root / "blob" / "w.safetensors").symlink_to(outside)
    (root / "blob" / "up").symlink_to(tmp_path)
    for rel in ("blob/w.safetensors", "blob/up/secret.safetensors", "../secret.safetensors", str(outside)):
        with pytest.raises(ValueError, match="outside the trace set root"):
            resolve_blob(root, rel)
