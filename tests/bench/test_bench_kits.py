"""Every shipped CPU kit: the baseline (or initial program) passes and scores as it should, a
known-wrong candidate fails, a known-better one scores better. GPU kits: the definitions validate
and the PyTorch references run on tiny shapes on the CPU."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evoteam.servers.bench.evaluation.catalog import describe_kit, list_kits
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.formats.kits import discover, find_kit, trust_kit

CPU_KERNEL_KITS = ["rmsnorm_cpu", "pairwise_distance_cpu"]
PROGRAM_KITS = ["circle_packing_26", "erdos_min_overlap"]
GPU_KITS = ["mla_paged_decode_h16_ckv512_kpe64_ps1", "gdn_prefill_qk4_v8_d128_k_last"]


def test_all_kits_load(bench_settings):
    kits = discover(bench_settings)
    for name in CPU_KERNEL_KITS + PROGRAM_KITS + GPU_KITS:
        assert name in kits, f"kit {name} did not load"
    listed = list_kits(bench_settings, limit=100)
    assert listed.total == len(listed.items) >= 6
    page = list_kits(bench_settings, limit=2)
    assert len(page.items) == 2 and page.next_cursor == "2"


@pytest.mark.parametrize("name", CPU_KERNEL_KITS)
async def test_cpu_kernel_kit(name, bench_settings, tree_hash):
    kit = find_kit(bench_settings, name)
    before = tree_hash(kit.root)
    base = await evaluate_candidate(bench_settings, name, candidate_path=str(kit.starting_point()))
    assert base.status == "PASSED", base.message
    assert len(base.workloads) == len(kit.dev_workloads()) >= 2
    # The baseline against itself: 1.0 within noise (generous bounds: the machine may be busy).
    assert 0.67 < base.score < 1.5, base.score
    wrong = await evaluate_candidate(bench_settings, name, candidate_path=str(kit.file(kit.manifest.examples["wrong"])))
    assert wrong.status == "INCORRECT_NUMERICAL" and wrong.score is None
    better = await evaluate_candidate(bench_settings, name, candidate_path=str(kit.file(kit.manifest.examples["better"])))
    assert better.status == "PASSED", better.message
    assert better.score > 1.0, better.score
    assert better.score > base.score
    assert tree_hash(kit.root) == before
    detail = describe_kit(bench_settings, name)
    assert detail.signature.startswith("run(") and detail.heldout_count >= 1
    assert all(w.name for w in detail.dev_workloads)


NO_EPS = """
import numpy as np


def run(hidden_states, weight, eps):
    x = hidden_states
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) * weight).astype(np.float32)
"""


async def test_rmsnorm_refuses_a_candidate_that_leaves_eps_out(bench_settings):
    """With every row's mean square far above eps, leaving eps out stayed within the tolerance and
    passed (a model found it, 2026-12-03); each input now has a row whose mean square is below it."""
    result = await evaluate_candidate(bench_settings, "rmsnorm_cpu", code=NO_EPS)
    assert result.status == "INCORRECT_NUMERICAL", result.message


@pytest.mark.parametrize("name", PROGRAM_KITS)
async def test_program_kit(name, bench_settings):
    kit = find_kit(bench_settings, name)
    m = kit.manifest
    initial = await evaluate_candidate(bench_settings, name, candidate_path=str(kit.starting_point()))
    assert initial.status == "PASSED", initial.message
    assert initial.score == pytest.approx(m.x0, rel=1e-6)
    assert initial.ndg == pytest.approx(0.0, abs=1e-6)
    better = await evaluate_candidate(bench_settings, name, candidate_path=str(kit.file(m.examples["better"])))
    assert better.status == "PASSED", better.message
    if m.direction == "maximize":
        assert initial.score < better.score <= m.best_known
    else:
        assert initial.score > better.score >= m.best_known
    assert 0 < better.ndg < 100
    wrong = await evaluate_candidate(bench_settings, name, candidate_path=str(kit.file(m.examples["wrong"])))
    assert wrong.status == "INCORRECT_NUMERICAL" and wrong.score is None
    hang = await evaluate_candidate(bench_settings, name, code="def run():\n    raise ValueError('no idea')\n"
                                                               "def run_packing():\n    raise ValueError('no idea')\n")
    assert hang.status == "RUNTIME_ERROR" and "no idea" in hang.message


async def test_program_kit_sandbox(bench_settings, tree_hash):
    kit = find_kit(bench_settings, "circle_packing_26")
    before = tree_hash(kit.root)
    code = f"def run_packing():\n    open({str(kit.root / 'evaluator.py')!r}, 'a').write('# planted')\n"
    result = await evaluate_candidate(bench_settings, "circle_packing_26", code=code)
    assert result.status == "RUNTIME_ERROR" and "not allowed" in result.message
    assert tree_hash(kit.root) == before


def test_flashinfer_style_definition_folder_loads_as_kit(tmp_path, bench_settings):
    src = find_kit(bench_settings, "rmsnorm_cpu")
    folder = tmp_path / "bare"
    folder.mkdir()
    (folder / "definition.json").write_text((src.root / "definition.json").read_text())
    kit = Kit.load(folder)
    assert kit.manifest.kind == "kernel" and kit.manifest.device == "cpu"
    assert kit.baseline_solution() == (None, "reference")


# ---------------------------------------------------------------- GPU kits on the CPU


def _torch():
    return pytest.importorskip("torch", reason="torch is needed to run the GPU kits' references on the CPU")


def _load_gpu_kit(bench_settings, name):
    kit = find_kit(bench_settings, name)
    assert kit.manifest.device == "cuda" and kit.manifest.framework == "torch"
    d = kit.definition
    assert d.reference.strip()
    for spec in list(d.inputs.values()) + list(d.outputs.values()):
        for axis in spec.shape or []:
            assert axis in d.axes, f"{name}: unknown axis {axis}"
    return kit


def _gen_and_ref(kit, axes):
    torch = _torch()
    gen_ns, ref_ns = {}, {}
    exec(kit.inputs_source(), gen_ns)
    exec(kit.definition.reference, ref_ns)
    all_axes = kit.definition.resolve_axes(axes)
    values = gen_ns["make_inputs"](all_axes, 1234, "cpu")
    args = [values[n] for n in kit.definition.inputs]
    with torch.no_grad():
        out = ref_ns["run"](*args)
    return values, out


def test_mla_reference_runs_on_cpu(bench_settings):
    torch = _torch()
    kit = _load_gpu_kit(bench_settings, "mla_paged_decode_h16_ckv512_kpe64_ps1")
    values, out = _gen_and_ref(kit, {"batch_size": 2, "kv_len": 5})
    output, lse = (out["output"], out["lse"]) if isinstance(out, dict) else out
    assert output.shape == (2, 16, 512) and output.dtype == torch.bfloat16
    assert lse.shape == (2, 16) and torch.isfinite(lse).all()
    # Independent check of one row against a direct computation.
    b, h = 1, 3
    idx = values["kv_indices"][values["kv_indptr"][b]:values["kv_indptr"][b + 1]].long()
    kc = values["ckv_cache"][idx, 0].float()
    kp = values["kpe_cache"][idx, 0].float()
    logits = (values["q_nope"][b, h].float() @ kc.T + values["q_pe"][b, h].float() @ kp.T) * values["sm_scale"]
    expect = torch.softmax(logits, -1) @ kc
    assert torch.allclose(output[b, h].float(), expect, atol=2e-2, rtol=2e-2)
    assert torch.allclose(lse[b, h], torch.logsumexp(logits, -1) / np.log(2.0), atol=1e-4)
    ns = {}
    exec(kit.file("baseline_torch.py").read_text(), ns)
    b_out, b_lse = ns["run"](*[values[n] for n in kit.definition.inputs])
    assert torch.allclose(b_out.float(), output.float(), atol=2e-2, rtol=2e-2)
    assert torch.allclose(b_lse, lse, atol=1e-4)
    wl = [json.loads(line) for line in kit.file(kit.manifest.workloads).read_text().splitlines() if line.strip()]
    assert {w["axes"]["batch_size"] for w in wl} >= {1, 16, 64}


def test_gdn_reference_runs_on_cpu(bench_settings):
    torch = _torch()
    kit = _load_gpu_kit(bench_settings, "gdn_prefill_qk4_v8_d128_k_last")
    values, out = _gen_and_ref(kit, {"num_seqs": 2, "seq_len": 5})
    output, new_state = (out["output"], out["new_state"]) if isinstance(out, dict) else out
    total = int(values["cu_seqlens"][-1])
    assert 2 <= total <= 10
    assert output.shape == (total, 8, 128) and output.dtype == torch.bfloat16
    assert new_state.shape == (2, 8, 128, 128) and new_state.dtype == torch.float32
    assert torch.isfinite(output.float()).all() and torch.isfinite(new_state).all()
    # The plain PyTorch baseline (written separately) agrees with the reference.
    ns = {}
    exec(kit.file("baseline_torch.py").read_text(), ns)
    b_out, b_state = ns["run"](*[values[n] for n in kit.definition.inputs])
    assert torch.allclose(b_out.float(), output.float(), atol=2e-2, rtol=2e-2)
    assert torch.allclose(b_state, new_state, atol=1e-4, rtol=1e-4)


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_KITS)
async def test_gpu_kit_baseline_passes(name, bench_settings):
    from evoteam.servers.bench.formats.gpuprobe import cuda_available

    ok, reason = cuda_available()
    if not ok:
        pytest.skip(reason)
    kit = find_kit(bench_settings, name)
    result = await evaluate_candidate(bench_settings, name, candidate_path=str(kit.file(kit.manifest.examples["plain"])))
    assert result.status == "PASSED", result.message
    assert result.score > 0


async def test_a_baseline_that_fails_correctness_is_skipped(fast_kit, fast_settings):
    manifest = json.loads((fast_kit / "kit.json").read_text())
    manifest["baseline"] = ["examples/wrong.py::run", "baseline.py::run"]
    (fast_kit / "kit.json").write_text(json.dumps(manifest))
    result = await evaluate_candidate(fast_settings, str(fast_kit), candidate_path=str(fast_kit / "baseline.py"))
    assert result.status == "PASSED"
    assert result.metrics["baseline"] == "baseline.py::run"
    assert "examples/wrong.py::run" in result.metrics["baseline_notes"][0]


@pytest.mark.parametrize("name,axes", [("mla_paged_decode_h16_ckv512_kpe64_ps1", {"batch_size": 2, "kv_len": 12}),
                                       ("gdn_prefill_qk4_v8_d128_k_last", {"num_seqs": 2, "seq_len": 4})])
async def test_gpu_kit_through_the_harness_on_cpu(name, axes, tmp_path, bench_settings):
    """The torch code paths of the harness (inputs, hashing bf16, aliasing by storage, transfers),
    exercised with a GPU kit moved to the CPU on tiny shapes."""
    import shutil

    _torch()
    src = find_kit(bench_settings, name)
    root = tmp_path / "kits" / name
    shutil.copytree(src.root, root)
    manifest = json.loads((root / "kit.json").read_text())
    manifest.update(device="cpu", baseline=["baseline_torch.py::run"], memory_limit_mb=8192,
                    timing={"warmup": 0, "rounds": 2, "reps_per_round": 1}, heldout=None)
    (root / "kit.json").write_text(json.dumps(manifest))
    wl = json.loads((root / "workloads.jsonl").read_text().splitlines()[0])
    wl.update(uuid="tiny", axes=axes)
    (root / "workloads.jsonl").write_text(json.dumps(wl) + "\n")
    trust_kit(bench_settings, root)  # outside the kit folders: the user's trust, as `evoteam bench trust`
    good = await evaluate_candidate(bench_settings, str(root), candidate_path=str(root / "baseline_torch.py"))
    assert good.status == "PASSED", good.message
    assert good.score > 0
    wrong = await evaluate_candidate(bench_settings, str(root), candidate_path=str(root / "examples" / "wrong.py"))
    assert wrong.status == "INCORRECT_NUMERICAL", wrong.message


async def test_a_programs_failure_is_said_once(bench_settings):
    """A program that fails to import gives its error and its own traceback once: the harness's
    frames and copies of the message as stderr and as a hint (6,079 characters, the traceback four
    times, for one missing import; model-play 2026-12-04) are not added."""
    result = await evaluate_candidate(bench_settings, "circle_packing_26",
                                      code="import not_a_module_here\n\ndef run_packing():\n    return None\n")
    assert result.status == "COMPILE_ERROR"
    assert result.message.count("No module named 'not_a_module_here'") <= 2, result.message  # error + traceback
    assert "; stderr:" not in result.message
    assert not result.workloads[0].message  # the one workload's message is the evaluation's: not twice
    assert "traceback" not in result.artifacts and "stderr" not in result.artifacts, result.artifacts
    assert result.artifacts.get("failure_stage") == "evaluate"


async def test_a_programs_score_has_no_interval_until_its_spread_is_known(bench_settings, tmp_path):
    """One run of a program has no interval: [2.61, 2.61] read as an exact score of an unseeded
    search (model-play 2026-12-04). Five runs alike make it exact, and then it has one."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    kit = find_kit(bench_settings, "erdos_min_overlap")
    better = kit.file(kit.manifest.examples["better"]).read_text()
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="t", client="pytest")) as store:
        once = await evaluate_candidate(bench_settings, "erdos_min_overlap", code=better, store=store)
        assert once.status == "PASSED" and once.score is not None
        assert once.score_interval is None and once.candidate_interval is None, (once.score_interval,
                                                                                  once.candidate_interval)
        assert "spread is unknown" in once.message
        five = await evaluate_candidate(bench_settings, "erdos_min_overlap", code=better, store=store,
                                        run_id=once.run_id, repeats=4)
    assert five.score_interval is None  # four runs alike: still too few on their own...
    assert five.n_measurements == 2 and five.candidate_interval == [five.score, five.score]  # ...five pooled are exact


async def test_a_recorded_candidate_is_measured_again_in_its_own_run(bench_settings, tmp_path):
    """evaluate(candidate_id) without run_id records where the candidate was recorded, so the
    measurement pools into it; the kit's newest active run (another one here) made it a new
    candidate there (model-play 2026-12-04)."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.models import RunCreate
    from evoteam.servers.knowledge.store import Actor

    kit = find_kit(bench_settings, "erdos_min_overlap")
    better = kit.file(kit.manifest.examples["better"]).read_text()
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="t", client="pytest")) as store:
        first = await evaluate_candidate(bench_settings, "erdos_min_overlap", code=better, store=store)
        newer = await store.start_run(RunCreate(goal="again", kit="erdos_min_overlap", direction="minimize"))
        again = await evaluate_candidate(bench_settings, "erdos_min_overlap", candidate_id=first.candidate_id,
                                         store=store)
    assert newer.id != first.run_id
    assert (again.run_id, again.candidate_id, again.n_measurements) == (first.run_id, first.candidate_id, 2)


async def test_a_re_measurement_never_lands_in_a_colleagues_or_a_finished_run_by_default(bench_settings, tmp_path):
    """Its own run is the default only where that is an active run of the kit and, on a shared
    service (owner given), the caller's: a colleague's run is never written by default, and a
    finished one is not reopened."""
    from evoteam.servers.bench.evaluation.core import run_of
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    kit = find_kit(bench_settings, "erdos_min_overlap")
    better = kit.file(kit.manifest.examples["better"]).read_text()
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="ann", client="pytest")) as store:
        mine = await evaluate_candidate(bench_settings, "erdos_min_overlap", code=better, store=store)
        assert await run_of(store, mine.candidate_id, None, kit, "ann") == mine.run_id
        assert await run_of(store, mine.candidate_id, None, kit, "bob") is None  # ann's run: not bob's default
        assert await run_of(store, mine.candidate_id, "run_named", kit, "bob") == "run_named"
        other = find_kit(bench_settings, "circle_packing_26")
        assert await run_of(store, mine.candidate_id, None, other, None) is None  # another kit's run
        await store.update_run(mine.run_id, status="finished", reason="done")
        assert await run_of(store, mine.candidate_id, None, kit, None) is None
        again = await evaluate_candidate(bench_settings, "erdos_min_overlap", candidate_id=mine.candidate_id,
                                         store=store)
        assert again.run_id != mine.run_id and (await store.get_run(mine.run_id)).status == "finished"
