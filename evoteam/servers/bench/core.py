"""The bench's core: list and describe kits, evaluate candidates, compare two candidates.

``evaluate_candidate`` is the one entry point the MCP server, the CLI and the supervisor share.
It runs the harness (in threads: the harness blocks), and records the candidate in the knowledge
store when one is given.
"""

from __future__ import annotations

import asyncio
import math
import shutil
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from evoteam.config import Settings
from evoteam.servers.bench import fib, harness, openevolve, solutions
from evoteam.servers.bench.candidates import check_candidate_path, record_measured
from evoteam.servers.bench.harness import KernelSession, WorkerFailure, WorkloadSpec, WorkloadVerdict
from evoteam.servers.bench.kits import Kit, discover, find_kit, heldout_secret, kit_dirs, state_dir
from evoteam.servers.bench.models import (
    Comparison,
    Evaluation,
    KitDetail,
    KitList,
    KitSummary,
    Split,
    WorkloadComparison,
    WorkloadInfo,
    WorkloadOutcome,
)
from evoteam.servers.bench.workerenv import tuning_env
from evoteam.errors import DomainError
from evoteam.servers.knowledge.models import (
    CandidateCreate,
    RunCreate,
    WorkloadResult,
    normalised_discovery_gain,
)
from evoteam.servers.knowledge.store import KnowledgeStore

Progress = Callable[[float, float, str], Awaitable[None]]
STATUS_ORDER = ["COMPILE_ERROR", "TIMEOUT", "RUNTIME_ERROR", "INCORRECT_SHAPE", "INCORRECT_DTYPE",
                "INCORRECT_NUMERICAL", "PASSED"]
MAX_CODE = 2_000_000


# ---------------------------------------------------------------- kits


def _page(items: list, limit: int, cursor: str | None) -> tuple[list, str | None]:
    try:
        start = int(cursor) if cursor else 0
    except ValueError:
        raise DomainError("bad cursor; pass back the next_cursor of the previous page") from None
    limit = max(1, min(limit, 100))
    chunk = items[start:start + limit]
    nxt = str(start + limit) if start + limit < len(items) else None
    return chunk, nxt


def list_kits(settings: Settings, kind: str | None = None, limit: int = 20, cursor: str | None = None) -> KitList:
    rows = []
    for kit in discover(settings).values():
        if kind and kit.manifest.kind != kind:
            continue
        ok, reason = kit.availability()
        rows.append(KitSummary(name=kit.name, kind=kit.manifest.kind, device=kit.manifest.device,
                               direction=kit.manifest.direction, goal=kit.manifest.goal.strip().splitlines()[0][:200],
                               available=ok, unavailable_reason=reason))
    chunk, nxt = _page(rows, limit, cursor)
    return KitList(items=chunk, total=len(rows), next_cursor=nxt)


def _signature(kit: Kit) -> str:
    d = kit.definition
    ins = ", ".join(f"{n}: {s.dtype}[{', '.join(s.shape)}]" if s.shape is not None else f"{n}: {s.dtype}"
                    for n, s in d.inputs.items())
    outs = ", ".join(f"{n}: {s.dtype}[{', '.join(s.shape or [])}]" for n, s in d.outputs.items())
    return (f"{kit.manifest.entry}({ins}) -> ({outs}). Inputs come positionally in this order; return the outputs "
            f"in this order (a tuple, or a dict by name). With DESTINATION_PASSING_STYLE = True at module level the "
            f"outputs are passed as extra arguments after the inputs and must be written in place.")


def describe_kit(settings: Settings, name: str, detail: bool = False) -> KitDetail:
    kit = find_kit(settings, name)
    m = kit.manifest
    ok, reason = kit.availability()
    start = kit.starting_point()
    out = KitDetail(name=kit.name, kind=m.kind, device=m.device, framework=m.framework, goal=m.goal,
                    direction=m.direction, x0=m.x0, best_known=m.best_known, available=ok,
                    unavailable_reason=reason, starting_point=str(start) if start else None,
                    # What the harness will pass to every worker (threads apply to CPU kernel kits).
                    worker_env=tuning_env(m.threads if m.kind == "kernel" else None, m.device == "cuda",
                                          m.worker_env))
    if m.kind == "kernel":
        _, label = kit.baseline_solution()
        out.entry = m.entry
        out.signature = _signature(kit)
        out.tolerance = m.tolerance
        out.dev_workloads = [WorkloadInfo(name=w.uuid, axes=w.axes) for w in kit.dev_workloads()]
        out.heldout_count = m.heldout.count if m.heldout else 0
        out.baseline = label
        out.timing_note = m.timing_note
        out.solutions = sorted(kit.solutions()) if hasattr(kit, "solutions") else []
        if detail:
            out.reference = kit.definition.reference
            out.definition = kit.definition.model_dump(exclude={"reference"})
    else:
        out.entry = "a program file; the kit's evaluator runs it"
        out.signature = f"score = metric {m.objective!r} from the kit's evaluator ({m.direction})"
        out.heldout_count = m.program_heldout.count if m.program_heldout else 0
    return out


# ---------------------------------------------------------------- candidates


class PreparedCandidate:
    def __init__(self, folder: Path, file: str, function: str, dps: bool | None, code: str):
        self.folder, self.file, self.function, self.dps, self.code = folder, file, function, dps, code


def prepare_candidate(kit: Kit, candidate_path: str | None, code: str | None,
                      settings: Settings | None = None) -> PreparedCandidate:
    """Copy just the candidate's own files into a fresh scratch folder."""
    if bool(candidate_path) == bool(code):
        raise DomainError("pass exactly one of candidate_path (a .py file or a FlashInfer-Bench solution .json) "
                          "or code (the source of a .py file)")
    entry = kit.manifest.entry if kit.manifest.kind == "kernel" else "run"
    folder = Path(tempfile.mkdtemp(prefix="evoteam-cand-"))
    try:
        if code is not None:
            if len(code) > MAX_CODE:
                raise DomainError(f"the code is {len(code)} characters; the limit is {MAX_CODE}")
            (folder / "candidate.py").write_text(code)
            return PreparedCandidate(folder, "candidate.py", entry, None, code)
        path = Path(candidate_path).expanduser()
        named = kit.solutions() if hasattr(kit, "solutions") and not path.is_file() else {}
        if candidate_path in named:  # a trace-set kit's solution, by name
            path = named[candidate_path]
        if settings is not None:
            path = check_candidate_path(settings, str(path), extra_roots=(kit.root,))
        if not path.is_file():
            raise DomainError(f"candidate file {path} does not exist; pass an existing .py path or the code itself")
        text = path.read_text()
        if len(text) > MAX_CODE:
            raise DomainError(f"{path} is {len(text)} characters; the limit is {MAX_CODE}")
        if path.suffix == ".json":
            rel, function, dps = solutions.materialise(solutions.parse(text, str(path)), folder, entry)
            return PreparedCandidate(folder, rel, function, dps, text)
        shutil.copyfile(path, folder / "candidate.py")
        return PreparedCandidate(folder, "candidate.py", entry, None, text)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _store_files(settings: Settings) -> list[str]:
    """What a kit's evaluator must never open: the bench's state (held-out secret) and the store."""
    return [str(state_dir(settings)), *(str(f) for f in settings.store_files)]


def _deny_roots(settings: Settings, kit: Kit) -> list[str]:
    roots = {str(kit.root), str(state_dir(settings))}
    for d in kit_dirs(settings):
        roots.add(str(d.resolve()))
    return sorted(roots)


def _workload_specs(kit: Kit, split: Split, settings: Settings) -> list[tuple[WorkloadSpec, str | None]]:
    d = kit.definition
    rows = []
    if split in ("dev", "all"):
        rows += [(w, False) for w in kit.dev_workloads()]
    if split in ("heldout", "all"):
        held = kit.heldout_workloads(heldout_secret(settings))
        if not held and split == "heldout":
            raise DomainError(f"kit {kit.name} has no held-out workloads; use split='dev'")
        rows += [(w, True) for w in held]
    if not rows:
        raise DomainError(f"kit {kit.name} has no {split} workloads")
    out = []
    for index, (w, hidden) in enumerate(rows):
        axes = d.resolve_axes(w.axes)
        problem = None
        missing = [a for a in d.axes if a not in axes]
        scalars = {}
        for name, spec in w.inputs.items():
            if spec.type == "scalar":
                scalars[name] = spec.value
            elif spec.type == "safetensors" and not kit.fib_inputs():
                problem = "safetensors inputs need FIB inputs (a torch kit without its own input generator)"
        if missing and not kit.manifest.inputs:
            problem = f"workload does not bind the axes {missing}"
        if kit.fib_inputs() and not problem:
            problem = fib.workload_problem(kit, w, axes)
            if not hidden:  # dev workloads come first, in the order the FIB input plan lists them
                axes[fib.WORKLOAD_AXIS] = index
        expected = {}
        for name, spec in d.outputs.items():
            try:
                expected[name] = (d.shape_of(spec, axes), spec.dtype)
            except KeyError:
                # An axis the input generator derives (e.g. a total length): the reference's
                # output shape is the expectation.
                expected[name] = (None, spec.dtype)
        out.append((WorkloadSpec(w.uuid, axes, scalars, expected, hidden=hidden), problem))
    return out


def _public_name(spec: WorkloadSpec) -> str:
    return spec.name


def redact_heldout(v: WorkloadVerdict) -> None:
    """Held-out shapes are secret: a failing held-out workload reports its status and nothing the
    candidate or the comparison said (error text, shapes, printed output can all carry them)."""
    if v.status != "PASSED" or v.message:
        v.message = None if v.status == "PASSED" else (
            f"{v.status} on a held-out workload; details are hidden because held-out shapes are secret "
            "(reproduce it on dev workloads with other shapes)")
    v.notes = [n for n in v.notes if "sanity bound" in n]
    v.max_abs = v.max_abs if v.status == "PASSED" else 0.0
    v.max_rel = v.max_rel if v.status == "PASSED" else 0.0


def missing_protections(sandbox: str) -> list[str]:
    """The confinement layers a worker reported as missing (named in capitals with the reason)."""
    return [part for part in sandbox.split("+") if part.startswith("NO-")]


async def _noop(done: float, total: float, message: str) -> None:
    return None


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


async def _run_kernel(settings: Settings, kit: Kit, cand: PreparedCandidate, split: Split, progress: Progress,
                      use_landlock: bool) -> Evaluation:
    m = kit.manifest
    specs = _workload_specs(kit, split, settings)
    total = len(specs)
    outcomes: list[WorkloadOutcome] = []
    verdicts: list[WorkloadVerdict] = []
    t_start = time.perf_counter()
    await progress(0, total, f"waiting for the {m.device} and starting workers")
    lock = harness.device_lock(state_dir(settings) / "locks", m.device)
    await asyncio.to_thread(lock.__enter__)
    session = None
    baseline_notes: list[str] = []
    try:
        for baseline, baseline_label in kit.baseline_solutions():
            session = await asyncio.to_thread(lambda: KernelSession(
                definition=kit.definition.model_dump(), framework=m.framework, device=m.device,
                inputs_source=kit.inputs_source(), reference_source=kit.definition.reference, baseline=baseline,
                candidate_dir=cand.folder, candidate_file=cand.file, function=cand.function, dps=cand.dps,
                deny=_deny_roots(settings, kit), memory_mb=m.memory_limit_mb, timeouts=m.timeouts,
                tolerance=m.tolerance, timing=m.timing, use_landlock=use_landlock, threads=m.threads,
                worker_env=m.worker_env))
            try:
                await asyncio.to_thread(session.start)
            except RuntimeError as exc:
                if baseline is None:
                    raise DomainError(f"kit {kit.name} is broken: {exc}") from None
                problem = str(exc)
            else:
                usable = [s for s, p in specs if not p]
                problem = None
                if baseline is not None and usable and not session.dead:
                    try:
                        problem = await asyncio.to_thread(session.check_baseline, usable[0])
                    except RuntimeError as exc:
                        raise DomainError(f"kit {kit.name} is broken: {exc}") from None
            if problem is None:
                break
            baseline_notes.append(f"baseline {baseline_label} was skipped: {problem[:300]}")
            await asyncio.to_thread(session.close)
            session = None
        metrics_base: dict[str, Any] = {"baseline": baseline_label, "device": m.device, "kit_source": str(kit.root),
                                        "environment": fib.environment(m.device)}
        if m.timing_note:
            metrics_base["timing_note"] = m.timing_note
        if baseline_notes:
            metrics_base["baseline_notes"] = baseline_notes
        failed_before = False
        for i, (spec, problem) in enumerate(specs):
            label = spec.name
            if problem:
                v = WorkloadVerdict("RUNTIME_ERROR", f"kit problem: {problem}")
            elif session.dead:
                err = session.candidate_error
                first = not outcomes or all(o.status == "PASSED" for o in outcomes)
                v = WorkloadVerdict(err.status, err.message if first and not any(
                    o.message == err.message for o in outcomes) else
                    f"not run: the candidate's process failed earlier ({err.status})", err.flagged)
            else:
                try:
                    v = await asyncio.to_thread(session.check_correctness, spec)
                    if v.status == "PASSED" and not failed_before:
                        await progress(i + 0.5, total, f"{label}: correct; timing")
                        await asyncio.to_thread(session.measure, spec, v)
                except WorkerFailure as exc:
                    v = WorkloadVerdict(exc.status, exc.message, exc.flagged)
                except RuntimeError as exc:
                    raise DomainError(f"kit {kit.name} is broken: {exc}") from None
                if v.status == "PASSED" and v.speedup is not None and v.speedup > m.max_plausible_speedup:
                    v.flagged = True
                    v.notes.append(f"speedup {v.speedup:.1f}x is above the sanity bound of "
                                   f"{m.max_plausible_speedup:g}x; flagged for review")
            if v.status != "PASSED":
                failed_before = True
            if spec.hidden:
                redact_heldout(v)
            verdicts.append(v)
            message = v.message or ("; ".join(v.notes) if v.notes else None)
            outcomes.append(WorkloadOutcome(
                workload=label, status=v.status, speedup=v.speedup, candidate_ms=v.candidate_ms,
                baseline_ms=v.baseline_ms, max_abs_error=v.max_abs if v.max_abs else None,
                max_rel_error=v.max_rel if v.max_rel and math.isfinite(v.max_rel) else None,
                message=message, flagged=v.flagged))
            await progress(i + 1, total, f"{label}: {v.status}"
                           + (f" {v.speedup:.2f}x" if v.speedup is not None else ""))
    finally:
        try:
            if session is not None:
                await asyncio.to_thread(session.close)
        finally:
            lock.__exit__(None, None, None)  # whatever happened, the device is free again
    wall = time.perf_counter() - t_start
    passed = sum(o.status == "PASSED" for o in outcomes)
    status = "PASSED" if passed == len(outcomes) else min(
        (o.status for o in outcomes if o.status != "PASSED"), key=STATUS_ORDER.index)
    score = None
    metrics: dict[str, Any] = dict(metrics_base, workloads_passed=passed, workloads=len(outcomes))
    if status == "PASSED":
        speedups = [o.speedup for o in outcomes if o.speedup is not None]
        if speedups and all(s > 0 and math.isfinite(s) for s in speedups):
            score = _geomean(speedups)
            metrics.update(geomean_speedup=score, min_speedup=min(speedups), max_speedup=max(speedups))
    kernel_s = sum(v.kernel_s for v in verdicts)
    metrics["wall_s"] = round(wall, 3)
    metrics["harness_overhead_s"] = round(max(0.0, wall - kernel_s), 3)
    sandbox_desc = session.sandbox if session else ""
    missing = missing_protections(sandbox_desc)
    if missing:
        metrics["protections_missing"] = missing
    flags = [f"{o.workload}: {o.message}" for o in outcomes if o.flagged]
    first_bad = next((o for o in outcomes if o.status != "PASSED"), None)
    return Evaluation(kit=kit.name, kind="kernel", split=split, status=status, score=score, direction=m.direction,
                      passed=passed, total=len(outcomes), workloads=outcomes, metrics=metrics,
                      flagged=bool(flags), flags=flags,
                      message=(f"{first_bad.workload}: {first_bad.message}" if first_bad else
                               f"all {passed} workloads correct; geomean speedup {score:.3f}x over {baseline_label}"
                               if score is not None else None),
                      best_known=m.best_known, wall_s=round(wall, 3), sandbox=sandbox_desc)


IN_PROCESS_FLAG = ("the kit's evaluator ran the program inside its own process (it imported or exec'd it), where "
                   "the program can change how it is scored: the score is kept but does not rank until a person "
                   "reviews it (`evoteam kb review`). An evaluator that runs the program with evoteam's "
                   "sandbox.run_program, or in a subprocess, gives scores that rank (docs/kits.md)")


async def _run_program(settings: Settings, kit: Kit, cand: PreparedCandidate, split: Split,
                       progress: Progress) -> Evaluation:
    m = kit.manifest
    if not m.evaluator or not m.objective:
        raise DomainError(f"kit {kit.name} names no evaluator or objective in its kit.json")
    kwargs = dict(m.evaluator_args)
    if split == "all":
        split = "dev"
    if m.program_heldout is not None:
        plan = m.program_heldout
        kwargs[plan.argument] = (list(plan.dev) if split == "dev" else
                                 openevolve.heldout_instances(heldout_secret(settings), kit.name, plan))
    elif split == "heldout":
        raise DomainError(f"kit {kit.name} is a program kit without held-out instances (no 'heldout' in its "
                          "kit.json or in the evoteam section of its config.yaml); use split='dev'")
    start = kit.starting_point()
    if m.enforce_evolve_blocks and start is not None and start.is_file():
        problem = openevolve.evolve_block_problem(start.read_text(errors="replace"), cand.code)
        if problem:
            raise DomainError(f"kit {kit.name}: {problem}")
    # Stage functions take only the program path (as in OpenEvolve), so instances passed as an
    # argument mean a direct evaluate(): a cascade would score the stages without them.
    thresholds = None if m.program_heldout is not None else m.cascade_thresholds
    stages = len(thresholds) + 1 if thresholds is not None else 1
    options = {"cascade_thresholds": thresholds, "kwargs": kwargs,
               "stage_timeout_s": m.timeouts.program_s}
    t_start = time.perf_counter()
    await progress(0, 1, "waiting for the cpu and running the evaluator")
    lock = harness.device_lock(state_dir(settings) / "locks", "cpu")
    await asyncio.to_thread(lock.__enter__)
    result: dict[str, Any] = {}
    flagged = False
    try:
        program = cand.folder / cand.file
        try:
            result = await asyncio.to_thread(harness.run_evaluator, kit.file(m.evaluator), program,
                                             m.timeouts.program_s * min(stages, 3), m.memory_limit_mb,
                                             _deny_roots(settings, kit), options, kit.root,
                                             _store_files(settings), m.worker_env)
            failure = result.get("failure")
        except WorkerFailure as exc:
            failure, flagged = {"status": exc.status, "message": exc.message}, exc.flagged
    finally:
        lock.__exit__(None, None, None)
    metrics: dict[str, Any] = dict(result.get("metrics") or {})
    stage_rows = list(result.get("stages") or [])
    if failure:
        verdict = openevolve.Verdict(failure["status"], failure["message"])
    else:
        verdict = openevolve.interpret(metrics, m.objective, STATUS_ORDER)
    status, message, score = verdict.status, verdict.message, verdict.score
    stopped = next((r for r in stage_rows if r.get("passed") is False), None)
    artifacts = dict(result.get("artifacts") or {})
    if status != "PASSED":
        message = openevolve.with_artifact_hint(message, artifacts)
    if status == "PASSED":
        if stopped:
            message += (f" (cascade stopped after {stopped['stage']}: fitness {stopped['fitness']} is below its "
                        f"threshold {stopped['threshold']})")
        if m.best_known is not None:
            message += f" (best known {m.best_known:g})"
    await progress(1, 1, status)
    wall = time.perf_counter() - t_start
    metrics = dict(metrics, wall_s=round(wall, 3))
    if m.program_heldout is not None:
        metrics["instances"] = len(kwargs[m.program_heldout.argument])
    flags = [message] if flagged and message else []
    if result.get("program_in_process"):
        # The program ran inside the evaluator's process, where it can change what the evaluator
        # computes or returns: its score is kept, and ranks only once a person has reviewed it.
        flagged = True
        flags.append(IN_PROCESS_FLAG)
    outcome = WorkloadOutcome(workload="program", status=status, message=message, flagged=flagged)
    ndg = normalised_discovery_gain(m.direction, m.x0, m.best_known, score)
    return Evaluation(kit=kit.name, kind="program", split=split, status=status,
                      score=score, direction=m.direction, passed=int(status == "PASSED"), total=1,
                      workloads=[outcome], metrics=metrics, flagged=flagged,
                      flags=flags, message=message, ndg=ndg,
                      best_known=m.best_known, wall_s=round(wall, 3),
                      sandbox="kit evaluator: " + str(result.get("sandbox") or "program worker"),
                      artifacts=artifacts, stages=stage_rows)


async def _check_binding(store: KnowledgeStore, kit: Kit, run_id: str) -> None:
    """A run is bound to one kit's content: the kit named by the run, and the content hash of the
    kit its candidates were evaluated against. A candidate scored on other content (a look-alike
    kit, an edited kit) is refused, so it can never become that run's best."""
    run = await store.get_run(run_id)
    if run.kit and run.kit not in (kit.name, str(kit.root)):
        raise DomainError(f"run {run_id} is for kit {run.kit!r}, not {kit.name!r}; record in a run of this kit "
                          "(omit run_id to use or start one)")
    page = await store.list_candidates(run_id, limit=10)
    for summary in page.items:
        bound = (await store.get_candidate(summary.id)).metrics.get("kit_hash")
        if bound:
            if bound != kit.content_hash:
                raise DomainError(f"run {run_id} is bound to kit content {bound[:19]}..., but this evaluation used "
                                  f"{kit.content_hash[:19]}... (the kit changed, or another folder has its name); "
                                  "start a new run for the changed kit")
            return


async def _resolve_run(store: KnowledgeStore, kit: Kit, run_id: str | None) -> str:
    if run_id:
        await _check_binding(store, kit, run_id)
        return run_id
    cursor = None
    for _ in range(10):
        page = await store.list_runs(status="active", limit=100, cursor=cursor)
        for run in page.items:
            if run.kit == kit.name:
                try:
                    await _check_binding(store, kit, run.id)
                except DomainError:
                    continue  # bound to other content: use (or start) a run for this content
                return run.id
        cursor = page.next_cursor
        if not cursor:
            break
    m = kit.manifest
    run = await store.start_run(RunCreate(goal=m.goal, kit=kit.name, direction=m.direction, x0=m.x0,
                                          best_known=m.best_known))
    return run.id


async def evaluate_candidate(settings: Settings, kit: str | Kit, *, candidate_path: str | None = None,
                             code: str | None = None, split: Split = "dev", store: KnowledgeStore | None = None,
                             run_id: str | None = None, parent_id: str | None = None,
                             documents_used: list[str] | None = None, notes: str = "",
                             progress: Progress | None = None, use_landlock: bool = True,
                             credit_documents: bool = True) -> Evaluation:
    """Evaluate one candidate on a kit's split and, when ``store`` is given, record it there (in
    ``run_id``, or the kit's newest active run, or a new run for the kit). The documents it was
    built from are credited with its score unless ``credit_documents`` is false (a caller that
    credits once for several candidates, such as the OpenEvolve adapter keeping the best of N)."""
    kit = kit if isinstance(kit, Kit) else find_kit(settings, kit)
    ok, reason = kit.availability()
    if not ok:
        raise DomainError(f"kit {kit.name} cannot run here: {reason}")
    if split not in ("dev", "heldout", "all"):
        raise DomainError("split must be dev, heldout or all")
    progress = progress or _noop
    cand = prepare_candidate(kit, candidate_path, code, settings)
    try:
        if kit.manifest.kind == "kernel":
            result = await _run_kernel(settings, kit, cand, split, progress, use_landlock)
        else:
            result = await _run_program(settings, kit, cand, split, progress)
    finally:
        shutil.rmtree(cand.folder, ignore_errors=True)
    m = kit.manifest
    result.metrics["kit_hash"] = kit.content_hash
    if result.kind == "kernel" and result.score is not None:
        result.ndg = normalised_discovery_gain(m.direction, m.x0, m.best_known, result.score)
    if store is not None:
        rid = await _resolve_run(store, kit, run_id)
        record = CandidateCreate(
            run_id=rid, code=cand.code, status=result.status, score=result.score, split=result.split,
            metrics=dict(result.metrics, kit=kit.name, kit_hash=kit.content_hash, flags=result.flags[:10],
                         message=(result.message or "")[:2000],
                         **openevolve.stored_extras(result.artifacts, result.stages)),
            workloads=[WorkloadResult(**o.model_dump(exclude={"flagged"})) for o in result.workloads],
            parent_id=parent_id, documents_used=list(documents_used or []), notes=notes, flagged=result.flagged)
        saved, note = await record_measured(store, record)
        if note:
            result.message = f"{result.message}; {note}" if result.message else note
        result.candidate_id, result.run_id, result.recorded = saved.id, rid, True
        if documents_used and credit_documents and result.score is not None:
            await _credit_documents(store, rid, saved.id, list(documents_used), result.score, parent_id)
    return result


async def _credit_documents(store: KnowledgeStore, run_id: str, candidate_id: str, documents: list[str],
                            score: float, parent_id: str | None) -> None:
    """Outcome credit: the retrieved documents this candidate was built from get its realised
    score (and whether it beat its parent), so later look-ups rank by what actually helped."""
    from evoteam.servers.retrieval.core import credit_documents

    parent = await store.get_candidate(parent_id) if parent_id else None
    # A parent's self-reported score is a claim: only a measured one is a baseline for credit.
    parent_score = parent.score if parent is not None and parent.verified and not parent.flagged else None
    await credit_documents(store, run_id, documents, score, parent_score, candidate_id=candidate_id)


async def compare_candidates(settings: Settings, kit: str, a: dict, b: dict, split: Split = "dev",
                             store: KnowledgeStore | None = None, progress: Progress | None = None,
                             record: bool = False, run_id: str | None = None) -> Comparison:
    """Evaluate two candidates (each ``{"candidate_path"| "code" | "candidate_id": ...}``) one after the other
    and line their workloads up."""
    progress = progress or _noop
    the_kit = find_kit(settings, kit)
    evals = []
    for label, spec in (("A", a), ("B", b)):
        spec = dict(spec)
        if spec.get("candidate_id"):
            if store is None:
                raise DomainError("candidate ids need the knowledge store; pass code or a path instead")
            stored = await store.get_candidate(spec.pop("candidate_id"))
            if not stored.code:
                raise DomainError(f"candidate {stored.id} has no code stored; pass its path instead")
            spec["code"] = stored.code

        async def sub(done: float, total: float, message: str, _label=label, _n=len(evals)) -> None:
            await progress(_n * total + done, 2 * total, f"{_label}: {message}")

        evals.append(await evaluate_candidate(settings, the_kit, candidate_path=spec.get("candidate_path"),
                                              code=spec.get("code"), split=split,
                                              store=store if record else None, run_id=run_id, progress=sub))
    ea, eb = evals
    rows = []
    by_b = {w.workload: w for w in eb.workloads}
    for wa in ea.workloads:
        wb = by_b.get(wa.workload)
        if wb is None:
            continue
        ratio = wa.candidate_ms / wb.candidate_ms if wa.candidate_ms and wb.candidate_ms else None
        rows.append(WorkloadComparison(workload=wa.workload, a_status=wa.status, b_status=wb.status,
                                       a_ms=wa.candidate_ms, b_ms=wb.candidate_ms, b_over_a=ratio))
    if ea.score is None and eb.score is None:
        verdict = "neither candidate passed"
    elif eb.score is None:
        verdict = "A passes, B does not"
    elif ea.score is None:
        verdict = "B passes, A does not"
    else:
        better_b = eb.score > ea.score if ea.direction == "maximize" else eb.score < ea.score
        verdict = (f"{'B' if better_b else 'A'} is better: A scores {ea.score:.4g}, B scores {eb.score:.4g} "
                   f"({ea.direction})")
    for e in (ea, eb):
        for w in e.workloads:
            if w.message and len(w.message) > 400:
                w.message = w.message[:400] + "..."
    return Comparison(kit=the_kit.name, split=split, a=ea, b=eb, workloads=rows, verdict=verdict)
