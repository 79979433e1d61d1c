"""FlashInfer-Bench trace sets run unchanged: definitions as kits, FIB workload inputs (random,
scalar, safetensors), Solution JSON with FIB's defaults, C++ builds in the sandbox, and the
results exported as FIB Trace records. The test data is our own tiny trace set
(tests/bench/fib_data/tiny, written by make_tiny.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client

pytest.importorskip("torch", reason="FlashInfer-Bench definitions are torch programs; torch is not installed")
pytest.importorskip("safetensors", reason="FIB blobs are safetensors files; safetensors is not installed")

from evoteam.config import Settings  # noqa: E402
from evoteam.exitcodes import CANDIDATE_FAILED  # noqa: E402
from evoteam.servers.bench.evaluation import catalog, core  # noqa: E402
from evoteam.servers.bench.formats.gpuprobe import cuda_available  # noqa: E402
from evoteam.servers.bench.formats.kits import find_kit  # noqa: E402
from evoteam.servers.bench.server import build_server  # noqa: E402
from evoteam.servers.knowledge.local import LocalKnowledgeStore  # noqa: E402
from evoteam.servers.knowledge.store import Actor  # noqa: E402

TINY = Path(__file__).parent / "fib_data" / "tiny"
DEF = "segment_sum_d8"
SOLUTIONS = TINY / "solutions" / "alice" / "segment_sum" / DEF
HAS_CUDA = cuda_available()[0]


@pytest.fixture
def fib_settings(tmp_path: Path) -> Settings:
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[TINY])


def _cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, EVOTEAM_DB=str(tmp_path / "state" / "kb.db"), EVOTEAM_KITS=str(TINY))
    return subprocess.run([sys.executable, "-m", "evoteam.cli", "bench", *args], capture_output=True, text=True,
                          env=env, timeout=600)


def test_every_definition_is_a_kit_with_fib_defaults_and_its_solutions(fib_settings):
    listed = catalog.list_kits(fib_settings, limit=100)
    assert [k.name for k in listed.items] == [DEF]
    d = catalog.describe_kit(fib_settings, DEF)
    assert d.solutions == ["segsum_cpp", "segsum_cpp_broken", "segsum_cuda", "segsum_dps", "segsum_returning",
                           "segsum_tvm_ffi", "segsum_wrong"]
    assert (d.tolerance.atol, d.tolerance.rtol) == (1e-2, 1e-2)  # FIB's defaults, not ours (1e-5)
    kit = find_kit(fib_settings, DEF)
    assert kit.manifest.goal == "Sum the segments fast."  # kits/<definition>.json overrides
    assert kit.manifest.timing.rounds == 2
    if not HAS_CUDA:
        assert d.device == "cpu" and "not representative" in d.timing_note
    # The trace-set root itself, given as a path, is the same kit.
    assert find_kit(fib_settings, str(TINY)).name == DEF


async def test_python_solutions_with_fib_defaults_run_unchanged(fib_settings):
    # segsum_dps has no destination_passing_style: FIB's default (destination passing) applies.
    # (segsum_returning and segsum_wrong run through the CLI below.)
    for name, status in (("segsum_dps", "PASSED"),):
        e = await core.evaluate_candidate(fib_settings, DEF, candidate_path=name)
        assert e.status == status, (name, e.message)
        assert [w.workload for w in e.workloads] == ["w3", "w2"]
        if status == "PASSED":
            assert e.score and all(w.candidate_ms for w in e.workloads)
            assert e.metrics["environment"]["libs"]["torch"]
            if not HAS_CUDA:
                assert "not representative" in e.metrics["timing_note"]


async def test_safetensors_index_input_is_loaded_from_the_blob(fib_settings, tmp_path):
    # A candidate that checks the segment boundaries it receives against the blob's values.
    code = ("import torch\n"
            "def run(x, cu_seqlens, scale, y):\n"
            "    expected = {14: [0, 5, 5, 14], 23: [0, 16, 23]}[x.shape[0]]\n"
            "    assert cu_seqlens.tolist() == expected, cu_seqlens.tolist()\n"
            "    for s in range(len(expected) - 1):\n"
            "        y[s] = x[expected[s]:expected[s + 1]].sum(0) * scale\n")
    e = await core.evaluate_candidate(fib_settings, DEF, code=code.replace("def run", "DESTINATION_PASSING_STYLE = True\ndef run"))
    assert e.status == "PASSED", e.message


def _broken_copy(tmp_path: Path) -> Path:
    root = tmp_path / "ts"
    shutil.copytree(TINY, root)
    (tmp_path / "outside.safetensors").write_bytes((root / "blob/workloads/segment_sum/segment_sum_d8/"
                                                   "segment_sum_d8_w2.safetensors").read_bytes())
    wl = root / "workloads" / "segment_sum" / f"{DEF}.jsonl"
    good = json.loads(wl.read_text().splitlines()[1])
    rows = [good]
    for uuid, cu in (("missing_blob", {"path": "blob/nope.safetensors", "tensor_key": "cu_seqlens"}),
                     ("wrong_key", {"path": good["workload"]["inputs"]["cu_seqlens"]["path"], "tensor_key": "nope"}),
                     ("outside_root", {"path": "../outside.safetensors", "tensor_key": "cu_seqlens"})):
        row = json.loads(json.dumps(good))
        row["workload"]["uuid"] = uuid
        row["workload"]["inputs"]["cu_seqlens"] = {"type": "safetensors", **cu}
        rows.append(row)
    row = json.loads(json.dumps(good))
    row["workload"]["uuid"] = "wrong_shape"
    row["workload"]["axes"]["len_cu_seqlens"] = 5
    rows.append(row)
    wl.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root


async def test_a_workload_that_cannot_be_built_is_a_kit_problem_naming_it(tmp_path):
    root = _broken_copy(tmp_path)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[root])
    e = await core.evaluate_candidate(settings, DEF, candidate_path="segsum_dps")
    by = {w.workload: w for w in e.workloads}
    assert by["w2"].status == "PASSED"
    for uuid, words in (("missing_blob", "cannot read blob/nope.safetensors"), ("wrong_key", "no tensor 'nope'"),
                        ("outside_root", "outside the trace set root"), ("wrong_shape", "has shape [3]")):
        assert by[uuid].status == "RUNTIME_ERROR", uuid
        assert by[uuid].message.startswith(f"kit problem: workload {uuid}: input 'cu_seqlens'"), by[uuid].message
        assert words in by[uuid].message, by[uuid].message


async def test_cuda_solution_says_needs_cuda_and_a_broken_build_shows_the_compiler(fib_settings):
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no C++ compiler on this machine")
    e = await core.evaluate_candidate(fib_settings, DEF, candidate_path="segsum_cpp_broken")
    assert e.status == "COMPILE_ERROR"
    assert "kernel.cpp:2" in e.message and "error: expected" in e.message, e.message
    if not HAS_CUDA:
        e = await core.evaluate_candidate(fib_settings, DEF, candidate_path="segsum_cuda")
        assert e.status == "COMPILE_ERROR" and "needs CUDA" in e.message, e.message


async def test_input_mutation_is_flagged_on_a_fib_kit(fib_settings):
    code = ("DESTINATION_PASSING_STYLE = True\n"
            "def run(x, cu_seqlens, scale, y):\n"
            "    idx = cu_seqlens.tolist()\n"
            "    for s in range(len(idx) - 1):\n"
            "        y[s] = x[idx[s]:idx[s + 1]].sum(0) * scale\n"
            "    x.zero_()\n")
    e = await core.evaluate_candidate(fib_settings, DEF, code=code)
    assert e.status == "RUNTIME_ERROR" and e.flagged and "modified its input 'x'" in e.message, e.message


async def test_cpp_solution_with_fibs_default_binding_builds_with_tvm_ffi(fib_settings):
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no C++ compiler on this machine")
    try:
        import tvm_ffi  # noqa: F401
    except ImportError:
        pytest.skip("apache-tvm-ffi is not installed (pip install apache-tvm-ffi); tvm-ffi builds not checked")
    e = await core.evaluate_candidate(fib_settings, DEF, candidate_path="segsum_tvm_ffi")
    assert e.status == "PASSED", e.message


CORRECT_DPS = ("DESTINATION_PASSING_STYLE = True\n"
               "def run(x, cu_seqlens, scale, y):\n"
               "    idx = cu_seqlens.tolist()\n"
               "    for s in range(len(idx) - 1):\n"
               "        y[s] = x[idx[s]:idx[s + 1]].sum(0) * scale\n")


async def test_the_preloaded_blobs_are_out_of_the_candidates_reach(fib_settings):
    # Blob tensors are loaded by the trusted worker only (it makes every input; the harness copies
    # each call's inputs in): a candidate hunting for them in its own process finds nothing to
    # tamper with, and says so by failing if it does find them.
    code = CORRECT_DPS + ("    import gc\n"
                          "    for o in gc.get_objects():\n"
                          "        if type(o).__name__ == 'WorkloadInputs':\n"
                          "            raise RuntimeError('found the blobs')\n")
    e = await core.evaluate_candidate(fib_settings, DEF, code=code)
    assert e.status == "PASSED", e.message


async def test_reading_the_trace_set_is_refused_and_flagged(fib_settings):
    target = TINY / "definitions" / "segment_sum" / f"{DEF}.json"
    code = CORRECT_DPS + f"    open({str(target)!r}).read()\n"
    e = await core.evaluate_candidate(fib_settings, DEF, code=code)
    assert e.status == "RUNTIME_ERROR" and e.flagged and "not allowed" in e.message, e.message


GEMM_REFERENCE = """import torch


def run(a, b):
    return (a.float() @ b.float()).half()
"""


async def test_bare_definition_gets_fib_tolerance_so_a_correct_fp16_gemm_passes(tmp_path):
    kit = tmp_path / "kits" / "gemm_fp16"
    kit.mkdir(parents=True)
    (kit / "definition.json").write_text(json.dumps({
        "name": "gemm_fp16", "op_type": "gemm",
        "axes": {"m": {"type": "var"}, "n": {"type": "const", "value": 64}, "k": {"type": "const", "value": 64}},
        "inputs": {"a": {"shape": ["m", "k"], "dtype": "float16"}, "b": {"shape": ["k", "n"], "dtype": "float16"}},
        "outputs": {"c": {"shape": ["m", "n"], "dtype": "float16"}}, "reference": GEMM_REFERENCE}))
    (kit / "workloads.jsonl").write_text(json.dumps({"uuid": "m32", "axes": {"m": 32},
                                                     "inputs": {"a": {"type": "random"}, "b": {"type": "random"}}}) + "\n")
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[kit.parent])
    # Split-K with fp16 partial sums: correct, and about one fp16 step from the fp32 reference.
    code = ("def run(a, b):\n"
            "    lo = (a[:, :32].float() @ b[:32].float()).half()\n"
            "    hi = (a[:, 32:].float() @ b[32:].float()).half()\n"
            "    return lo + hi\n")
    e = await core.evaluate_candidate(settings, "gemm_fp16", code=code)
    assert e.status == "PASSED", e.message
    assert e.workloads[0].max_abs_error and e.workloads[0].max_abs_error > 1e-5  # would fail at 1e-5
    if not HAS_CUDA:
        assert find_kit(settings, "gemm_fp16").manifest.device == "cpu"


@pytest.mark.slow
async def test_cpp_solution_builds_in_the_sandbox_through_the_mcp_tool(fib_settings, tmp_path):
    if shutil.which("g++") is None and shutil.which("c++") is None:
        pytest.skip("no C++ compiler on this machine")
    actor = Actor(user="tester", client="pytest")
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", actor) as kb:
        async with Client(build_server(fib_settings, kb)) as client:
            res = await client.call_tool("evaluate", {"kit": str(TINY), "candidate_path": "segsum_cpp"})
    assert not res.is_error, res.content[0].text
    e = res.structured_content
    assert e["status"] == "PASSED", e["message"]
    assert e["recorded"] and e["kit"] == DEF


def test_cli_runs_by_name_and_exports_fib_traces(tmp_path):
    first = _cli(tmp_path, "run", DEF, "segsum_returning", "--json")
    assert first.returncode == 0, first.stderr
    run_id = json.loads(first.stdout)["run_id"]
    second = _cli(tmp_path, "run", DEF, str(SOLUTIONS / "segsum_wrong.json"), "--run", run_id, "--json")
    assert second.returncode == CANDIDATE_FAILED and json.loads(second.stdout)["status"] == "INCORRECT_NUMERICAL"
    out = tmp_path / "traces"
    exported = _cli(tmp_path, "export-traces", run_id, "-o", str(out), "--json")
    assert exported.returncode == 0, exported.stderr
    result = json.loads(exported.stdout)
    assert result["traces"] == 4 and sorted(result["solutions"]) == ["segsum_returning", "segsum_wrong"]
    lines = [json.loads(x) for x in (out / "traces" / "alice" / "segment_sum" / f"{DEF}.jsonl").read_text().splitlines()]
    by = {(t["solution"], t["workload"]["uuid"]): t["evaluation"] for t in lines}
    ok = by[("segsum_returning", "w3")]
    assert ok["status"] == "PASSED" and ok["performance"]["latency_ms"] > 0 and ok["performance"]["speedup_factor"] > 0
    bad = by[("segsum_wrong", "w2")]
    assert bad["status"] == "INCORRECT_NUMERICAL" and "performance" not in bad and bad["correctness"]["max_absolute_error"] > 0
    assert (out / "blob/workloads/segment_sum/segment_sum_d8/segment_sum_d8_w3.safetensors").is_file()
    solution = json.loads((out / "solutions/alice/segment_sum" / DEF / "segsum_returning.json").read_text())
    assert solution["spec"]["destination_passing_style"] is False and solution["definition"] == DEF
    # exporting again into the same folder adds nothing: one trace per solution and workload
    again = _cli(tmp_path, "export-traces", run_id, "-o", str(out), "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["traces"] == 0, again.stdout
    assert len((out / "traces" / "alice" / "segment_sum" / f"{DEF}.jsonl").read_text().splitlines()) == 4
    _validate_with_fib(out)


def _validate_with_fib(folder: Path) -> None:
    """FIB's own models read what we wrote (where flashinfer_bench is installed)."""
    try:
        from flashinfer_bench.data import TraceSet
    except Exception as exc:  # noqa: BLE001 - any import failure means: not available here
        pytest.skip(f"flashinfer_bench is not importable here ({type(exc).__name__}); FIB's models not checked")
    ts = TraceSet.from_path(str(folder))
    assert len(ts.traces[DEF]) == 4 and len(ts.workloads[DEF]) == 2
    assert {s.name for s in ts.solutions[DEF]} == {"segsum_returning", "segsum_wrong"}
    d = ts.definitions[DEF]
    for w in ts.workloads[DEF]:
        assert set(w.workload.axes) == set(d.var_axes) and set(w.workload.inputs) == set(d.inputs)
    source = TraceSet.from_path(str(TINY))
    assert len(source.solutions[DEF]) == 7
    assert source.get_solution("segsum_dps").spec.destination_passing_style is True


@pytest.mark.parametrize("kit_name", ["mla_paged_decode_h16_ckv512_kpe64_ps1", "gdn_prefill_qk4_v8_d128_k_last"])
def test_gpu_kits_as_fib_trace_sets_follow_fib_workload_rules(kit_name):
    from evoteam.config import SOURCE_ROOT
    from evoteam.servers.bench.formats import fib, traceset

    root = SOURCE_ROOT / "task_kits" / kit_name / "fib"
    kit = traceset.find_in_trace_set(root)
    d = kit.definition
    var_axes = {a for a, spec in d.axes.items() if spec.type == "var"}
    workloads = kit.dev_workloads()
    assert workloads
    for w in workloads:
        # FIB's validator: every variable axis bound, no extra axes, every input named.
        assert set(w.axes) == var_axes and set(w.inputs) == set(d.inputs), w.uuid
        assert fib.workload_problem(kit, w, d.resolve_axes(w.axes)) is None
    assert any(s.type == "safetensors" for w in workloads for s in w.inputs.values())
    try:
        from flashinfer_bench.data import TraceSet
    except Exception as exc:  # noqa: BLE001
        pytest.skip(f"flashinfer_bench is not importable here ({type(exc).__name__}); FIB's models not checked")
    ts = TraceSet.from_path(str(root))
    assert len(ts.workloads[kit_name]) == len(workloads)
