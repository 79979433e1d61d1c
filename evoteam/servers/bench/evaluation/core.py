"""The bench's core: evaluate a candidate here and record it (listing and describing kits is
``catalog.py``'s, comparing two candidates ``compare.py``'s).

``evaluate_candidate`` is the one entry point the MCP server, the CLI and the supervisor share.
It runs the harness (in threads: the harness blocks), and records the candidate in the knowledge
store when one is given.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoteam.config import Settings
from evoteam import stats
from evoteam.codehash import code_hash
from evoteam.servers.bench.confinement import scratch
from evoteam.servers.bench.formats import fib, openevolve, solutions
from evoteam.servers.bench.measurement import copies, harness, redact
from evoteam.servers.bench.measurement.batch import BUSY_SETTLE, BUSY_UNSHOWN, STATUS_ORDER, run_kernel_batch
from evoteam.servers.bench.measurement.machine import BUSY_RULE, STANDING_SAYS
from evoteam.servers.bench.evaluation.candidates import (check_candidate_path, few_runs_note, pooled_lead, unrecorded,
                                                         record_measured, same_as_parent, state_paths)
from evoteam.servers.bench.measurement.harness import WorkerFailure
from evoteam.servers.bench.measurement.session import CANDIDATE, SideSpec, WorkloadSpec
from evoteam.servers.bench.evaluation.binding import check_run, resolve_run, timing_method  # noqa: F401 - check_run: callers import it from here
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.formats.kits import find_kit, heldout_choice, kit_dirs, state_dir
from evoteam.servers.bench.models import Evaluation, Split, WorkloadOutcome
from evoteam.errors import DomainError, Missing
from evoteam.servers.knowledge.models import CandidateCreate, WorkloadResult
from evoteam.servers.knowledge.readsql import normalised_discovery_gain
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.measurements import candidate_estimate
from evoteam.servers.bench.evaluation.credit import credit_documents_used as _credit_documents
from evoteam.servers.bench.evaluation.busypairs import keep_busy_pairs
from evoteam.servers.bench.evaluation.standing import best_before, run_standing

Progress = Callable[[float, float, str], Awaitable[None]]
MAX_CODE = 2_000_000


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
    folder = scratch.new_folder("cand")
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
            raise Missing(f"candidate file {path} does not exist; pass an existing .py path or the code itself")
        text = path.read_text()
        if len(text) > MAX_CODE:
            raise DomainError(f"{path} is {len(text)} characters; the limit is {MAX_CODE}")
        if path.suffix == ".json":
            rel, function, dps = solutions.materialise(solutions.parse(text, str(path)), folder, entry)
            return PreparedCandidate(folder, rel, function, dps, text)
        shutil.copyfile(path, folder / "candidate.py")
        return PreparedCandidate(folder, "candidate.py", entry, None, text)
    except BaseException:
        scratch.remove_folder(folder)
        raise


def _store_files(settings: Settings) -> list[str]:
    """What a kit's evaluator must never open: evoteam's own files (the store, the bench's state)."""
    return [str(path) for path, _ in state_paths(settings)]


def _deny_roots(settings: Settings, kit: Kit) -> list[str]:
    roots = {str(kit.root), str(state_dir(settings))}
    for d in kit_dirs(settings):
        roots.add(str(d.resolve()))
    return sorted(roots)


def _evaluator_reads(settings: Settings, kit: Kit) -> list[str]:
    """The kit's declared read-only paths for its evaluator: each beside the kit (inside the
    folder that holds it), existing, and holding none of evoteam's state or store."""
    beside = kit.root.parent.resolve()
    secret = [Path(p) for p in _store_files(settings)]
    out = []
    for rel in kit.manifest.evaluator_reads:
        path = (kit.root / rel).resolve()
        if Path(rel).is_absolute() or not path.is_relative_to(beside) or path == beside.parent:
            raise DomainError(f"kit {kit.name}: evaluator_reads entry {rel[:80]!r} is not beside the kit (it must "
                              f"stay inside {beside})")
        if not path.exists():
            raise DomainError(f"kit {kit.name}: evaluator_reads entry {rel[:80]!r} does not exist")
        if path == beside or any(s.is_relative_to(path) or path.is_relative_to(s) for s in secret):
            raise DomainError(f"kit {kit.name}: evaluator_reads entry {rel[:80]!r} would open evoteam's state or "
                              f"the whole folder of kits; name the files the evaluator needs")
        out.append(str(path))
    return out


def _workload_specs(kit: Kit, split: Split, settings: Settings) -> list[tuple[WorkloadSpec, str | None]]:
    d = kit.definition
    rows = []
    if split in ("dev", "all"):
        rows += [(w, False) for w in kit.dev_workloads()]
    if split in ("heldout", "all"):
        held = heldout_choice(settings, kit).workloads
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


async def _noop(done: float, total: float, message: str) -> None:
    return None


async def _run_kernel(settings: Settings, kit: Kit, cand: PreparedCandidate, split: Split, progress: Progress,
                      use_landlock: bool, rounds: int | None = None, device: str | None = None,
                      copied: bool = False) -> Evaluation:
    """One candidate against the baseline; ``copied``: each in three processes (copies.py)."""
    side = SideSpec(CANDIDATE, cand.folder, cand.file, cand.function, cand.dps)
    found = await run_kernel_batch(settings, kit, [side], split, progress, use_landlock,
                                   _workload_specs(kit, split, settings), _deny_roots(settings, kit), rounds,
                                   device=device, copied=copied)
    return found.evaluations[CANDIDATE]


IN_PROCESS_FLAG = ("the kit's evaluator ran the program inside its own process (it imported or exec'd it), where "
                   "the program can change how it is scored: the score is kept but does not rank until a person "
                   "reviews it (`evoteam kb review`). An evaluator that runs the program with evoteam's "
                   "measurement.program.run_program, or in a subprocess, gives scores that rank "
                   "(docs/bench.md, \"Program kits\")")


async def _run_program(settings: Settings, kit: Kit, cand: PreparedCandidate, split: Split,
                       progress: Progress, device: str | None = None) -> Evaluation:
    m = kit.manifest
    if not m.evaluator or not m.objective:
        raise DomainError(f"kit {kit.name} names no evaluator or objective in its kit.json")
    kwargs = dict(m.evaluator_args)
    if split == "all":
        split = "dev"
    if m.program_heldout is not None:
        plan = m.program_heldout
        kwargs[plan.argument] = (list(plan.dev) if split == "dev" else
                                 heldout_choice(settings, kit).instances)
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
    lock = harness.device_lock(state_dir(settings) / "locks", device or "cpu")  # a pool slot's own lock
    await asyncio.to_thread(lock.__enter__)
    result: dict[str, Any] = {}
    flagged = False
    try:
        program = cand.folder / cand.file
        try:
            result = await asyncio.to_thread(harness.run_evaluator, kit.file(m.evaluator), program,
                                             m.timeouts.program_s * min(stages, 3), m.memory_limit_mb,
                                             _deny_roots(settings, kit), options, kit.root,
                                             _store_files(settings), m.worker_env, _evaluator_reads(settings, kit))
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
            message += f" (best known {m.best_known:.7g})"
    await progress(1, 1, status)
    wall = time.perf_counter() - t_start
    metrics = dict(metrics, wall_s=round(wall, 3))
    if m.program_heldout is not None:
        metrics["instances"] = len(kwargs[m.program_heldout.argument])
    if split == "heldout":
        message, metrics, artifacts, stage_rows = redact.program_heldout(status, score, m.objective, metrics,
                                                                         stage_rows)
    flags = [message] if flagged and message else []
    if result.get("program_in_process"):
        # The program ran inside the evaluator's process, where it can change what the evaluator
        # computes or returns: its score is kept, and ranks only once a person has reviewed it.
        flagged = True
        flags.append(IN_PROCESS_FLAG)
    outcome = WorkloadOutcome(workload="program", status=status, flagged=flagged)  # its message: the evaluation's
    ndg = normalised_discovery_gain(m.direction, m.x0, m.best_known, score)
    return Evaluation(kit=kit.name, kind="program", split=split, status=status,
                      score=score, direction=m.direction, passed=int(status == "PASSED"), total=1,
                      workloads=[outcome], metrics=metrics, flagged=flagged,
                      flags=flags, message=message, ndg=ndg,
                      best_known=m.best_known, wall_s=round(wall, 3),
                      sandbox="kit evaluator: " + str(result.get("sandbox") or "program worker"),
                      artifacts=artifacts, stages=stage_rows)


def median_run(kit: Kit, runs: list[Evaluation]) -> tuple[Evaluation, stats.Estimate]:
    """Passed runs of one program as one evaluation: the median of their scores with its interval.
    The run nearest the median speaks for the rest (metrics, message), with the objective and NDG
    of the median (the last run's, which they were, disagreed with the score)."""
    scores = [r.score for r in runs]
    est = stats.score_estimate({"program": scores}, "program")
    result = min(reversed(runs), key=lambda r: abs(r.score - est.value))
    m = kit.manifest
    # An even count's median is no run's: the message's figure is the median's, as the score is
    # (it quoted the nearest run's 0.383051 beside a median of 0.3830484; 2026-12-04).
    head = f"{m.objective} = {result.score:.6g}"
    if result.score != est.value and result.message.startswith(head):
        result.message = f"{m.objective} = {est.value:.6g}" + result.message[len(head):]
    result.samples = {"program": scores}
    result.score, result.score_interval = est.value, [est.lo, est.hi]
    if m.objective in result.metrics:
        result.metrics[m.objective] = est.value
    result.ndg = normalised_discovery_gain(m.direction, m.x0, m.best_known, est.value)
    result.flagged = any(r.flagged for r in runs)
    return result, est


async def _run_program_repeated(settings: Settings, kit: Kit, cand: PreparedCandidate, split: Split,
                                progress: Progress, repeats: int, device: str | None = None) -> Evaluation:
    """The evaluator run ``repeats`` times: the score is the median of the runs with its
    order-statistic interval (a deterministic evaluator gives a point). The first run that does
    not pass is the result."""
    runs: list[Evaluation] = []
    for i in range(repeats):
        async def sub(done: float, total: float, message: str, _i=i) -> None:
            await progress(_i + done / max(total, 1), repeats, f"repeat {_i + 1}/{repeats}: {message}")

        result = await _run_program(settings, kit, cand, split, sub if repeats > 1 else progress, device)
        if result.status != "PASSED" or result.score is None:
            return result
        runs.append(result)
    result, est = median_run(kit, runs)
    if stats.spread_unknown(est):  # [2.61, 2.61] of one run read as exact (model-play 2026-12-04)
        result.score_interval = None
    if repeats > 1:
        result.metrics["repeats"] = result.samples["program"]
        result.wall_s = round(sum(r.wall_s for r in runs), 3)
    # One run's score_interval has no width: that is not a measured spread. What follows from too
    # few runs is said once the candidate is known (few_runs_note): its code may have run before.
    result.message += f"; median of {repeats} runs {stats.describe(est)}" if repeats > 1 else "; one run, so its spread is unknown"
    return result


async def evaluate_candidate(settings: Settings, kit: str | Kit, *, candidate_path: str | None = None,
                             code: str | None = None, candidate_id: str | None = None, split: Split = "dev",
                             store: KnowledgeStore | None = None, run_id: str | None = None,
                             parent_id: str | None = None, documents_used: list[str] | None = None, notes: str = "",
                             progress: Progress | None = None, use_landlock: bool = True,
                             credit_documents: bool = True, owner: str | None = None,
                             repeats: int = 1, device: str | None = None) -> Evaluation:
    """Evaluate one candidate on a kit's split and, when ``store`` is given, record it there (in
    ``run_id``, or the kit's newest active run, or a new run for the kit). Identical code (same
    code hash) already in the run is one candidate: this evaluation is pooled into it, and
    ``candidate_score``/``candidate_interval``/``n_measurements`` say what the pooled
    measurements give. ``candidate_id`` re-measures a recorded candidate's code. ``repeats``:
    kernel kits, 2+, time candidate and baseline in three processes each (copies.evaluation_rounds);
    program kits run the evaluator that many times (score: the median). The documents it was built
    from are credited with its score unless ``credit_documents`` is false (a caller that credits
    once for several candidates, such as the OpenEvolve adapter keeping the best of N).
    ``device`` is the pool slot this evaluation holds (scheduling/); default: the kit's device."""
    kit, code = await checked_request(settings, kit, split, repeats, store, candidate_path, code, candidate_id)
    progress = progress or _noop
    run_id = await run_of(store, candidate_id, run_id, kit, owner)
    if store is not None:  # before any measuring: a refusal costs nothing
        await check_run(store, kit, parent_id, run_id, notes, documents_used)
    cand = prepare_candidate(kit, candidate_path, code, settings)
    try:
        if kit.manifest.kind == "kernel":  # with repeats: candidate and baseline in copies (copies.py)
            rounds = copies.evaluation_rounds(kit.manifest.timing.rounds, repeats) if repeats > 1 else None
            result = await _run_kernel(settings, kit, cand, split, progress, use_landlock, rounds, device,
                                       copied=repeats > 1)
        else:
            result = await _run_program_repeated(settings, kit, cand, split, progress, repeats, device)
    finally:
        scratch.remove_folder(cand.folder)
    result.code_hash = code_hash(cand.code)
    if store is not None:
        await record_evaluation(settings, store, kit, result, cand.code, run_id=run_id, parent_id=parent_id,
                                documents_used=documents_used, notes=notes, credit=credit_documents, owner=owner,
                                standing=True)
    else:
        _finish(settings, kit, result)
        if kit.manifest.kind == "program" and result.samples and result.status == "PASSED":
            result.message += few_runs_note(stats.runs_of(result.samples) or 1, None, result.samples)
    return result


def _finish(settings: Settings, kit: Kit, result: Evaluation) -> None:
    m = kit.manifest
    result.metrics["kit_hash"] = kit.content_hash
    if result.split != "dev" and (m.heldout if m.kind == "kernel" else m.program_heldout):
        result.metrics["heldout_set"] = heldout_choice(settings, kit).set_id
    if result.kind == "kernel" and result.score is not None:
        result.ndg = normalised_discovery_gain(m.direction, m.x0, m.best_known, result.score)


async def checked_request(settings: Settings, kit: str | Kit, split: str, repeats: int,
                          store: KnowledgeStore | None, candidate_path: str | None, code: str | None,
                          candidate_id: str | None) -> tuple[Kit, str | None]:
    """The checks every evaluation request passes before anything runs, here or on the pool:
    the kit (found and runnable here), the split, the repeats and one source of code. Gives the
    kit and the code (a recorded candidate's, for ``candidate_id``)."""
    kit = kit if isinstance(kit, Kit) else find_kit(settings, kit)
    ok, reason = kit.availability()
    if not ok:
        raise DomainError(f"kit {kit.name} cannot run here: {reason}")
    if split not in ("dev", "heldout", "all"):
        raise DomainError("split must be dev, heldout or all")
    if not 1 <= repeats <= 20:
        raise DomainError("repeats must be between 1 and 20")
    if candidate_id:
        if candidate_path or code:
            raise DomainError("pass one of candidate_path, code or candidate_id")
        code = await stored_code(store, candidate_id)
    return kit, code


async def run_of(store: KnowledgeStore | None, candidate_id: str | None, run_id: str | None, kit: Kit,
                 owner: str | None) -> str | None:
    """The run named, else a recorded candidate's own where a re-measurement pools, if active, this kit's and
    (shared service) the caller's: the newest active run made it another run's candidate (2026-12-04)."""
    if not (candidate_id and run_id is None and store is not None):
        return run_id
    run = await store.get_run((await store.get_candidate(candidate_id)).run_id)
    return run.id if run.status == "active" and run.kit == kit.name and owner in (None, run.provenance.user) else None


async def stored_code(store: KnowledgeStore | None, candidate_id: str) -> str:
    """A recorded candidate's code, to measure it again."""
    return (await stored_candidate(store, candidate_id)).code


async def stored_candidate(store: KnowledgeStore | None, candidate_id: str):
    """A recorded candidate that has its code stored, to measure it again."""
    if store is None:
        raise DomainError("candidate ids need the knowledge store; pass code or a path instead")
    stored = await store.get_candidate(candidate_id)
    if not stored.code:
        raise DomainError(f"candidate {stored.id} has no code stored; pass its path instead")
    return stored


async def record_evaluation(settings: Settings, store: KnowledgeStore, kit: Kit, result: Evaluation, code: str, *,
                            run_id: str | None = None, parent_id: str | None = None,
                            documents_used: list[str] | None = None, notes: str = "",
                            credit: bool = True, owner: str | None = None, claim: bool = True,
                            standing: bool = False) -> None:
    """Record one evaluation as a verified measurement of its code in a run (pooled by the store
    with earlier measurements of the same code), and copy the pooled candidate's figures back.
    ``claim``: where the store refuses a verified record, keep it as an unverified claim (else
    the refusal is raised). ``standing``: say where it leaves the run (evaluate's reply only: a
    trajectory read that compare's and remeasure's records would not show)."""
    _finish(settings, kit, result)
    rid, started = await resolve_run(store, kit, run_id, owner, timing_method(result))
    prior_best = await best_before(store, rid) if standing else None
    try:  # the caller's notes and documents were checked before measuring (check_run): the bench's own figures
        record = CandidateCreate(
            run_id=rid, code=code, status=result.status, score=result.score, split=result.split,
            metrics=dict(result.metrics, kit=kit.name, kit_hash=kit.content_hash, flags=result.flags[:10],
                         message=(result.message or "")[:2000], score_interval=result.score_interval,
                         **openevolve.stored_extras(result.artifacts, result.stages)),
            workloads=[WorkloadResult(**o.model_dump(exclude={"flagged"})) for o in result.workloads],
            parent_id=parent_id, documents_used=list(documents_used or []), notes=notes, flagged=result.flagged,
            # Always a measurement ({} when it failed), so a failure of known code pools into it too.
            code_hash=result.code_hash or code_hash(code), samples=result.samples or {},
            sample_ranges={k: r for k, r in result.sample_ranges.items() if k in (result.samples or {})} or None)
    except ValidationError as exc:
        raise unrecorded(exc) from exc
    saved, note = await record_measured(store, record, claim)
    result.unverified = True if not saved.verified else None
    for line in (note, started):
        if line:
            result.message = f"{result.message}; {line}" if result.message else line
    result.candidate_id, result.run_id, result.recorded = saved.id, rid, True
    result.candidate_score = saved.score
    # Until the store pools this code with earlier measurements, the candidate is this one.
    result.candidate_interval = saved.score_interval or (result.score_interval if saved.n_measurements <= 1 else None)
    if (shown := candidate_estimate(saved)) is not None and stats.spread_unknown(shown):
        result.candidate_interval = None  # too few runs for one: the message says so
    result.n_measurements = saved.n_measurements
    if saved.n_measurements > 1:
        # Said first: a model read this measurement's score (the top-level `score`) as the candidate's.
        # Its own interval, where it is one: quiet, with width, a program's from 5+ runs.
        own = result.score_interval if not result.contended and result.score_interval and \
            result.score_interval[0] < result.score_interval[1] and (kit.manifest.kind == "kernel" or (
                stats.runs_of(result.samples) or 0) >= stats.EXACT_MIN_RUNS) else None
        result.message = pooled_lead(saved, result.message or result.status, notes, kit.manifest.kind, own, parent_id)
    elif parent_id is not None and (same := await same_as_parent(store, parent_id, saved)):
        result.message = (result.message or result.status) + same
    if saved.runs is not None and saved.status == "PASSED" and not saved.flagged and kit.manifest.kind == "program":
        result.message += few_runs_note(saved.runs, saved.id)
    if documents_used and credit and result.score is not None:
        await _credit_documents(store, rid, saved.id, list(documents_used), result.score, parent_id,
                                timing_method(result), result.split, result.score_interval,
                                stats.runs_of(result.samples) if result.samples else 1, bool(result.contended))
    if result.contended and saved.verified and result.status == "PASSED" and result.split == "dev" and \
            await keep_busy_pairs(store, kit, rid, saved.id, result) and result.message:
        result.message = placed_by_kept_rounds(result.message, rid)
    if standing:  # last: it reads the run as this record left it
        result.standing = await run_standing(store, saved, kit.manifest.kind, prior_best=prior_best)
        if result.standing and result.message:  # the standing applies the busy rule and says its outcome
            result.message = result.message.replace(BUSY_RULE, STANDING_SAYS)


def placed_by_kept_rounds(message: str, rid: str) -> str:
    """A busy kernel's message once its own rounds with the baseline are kept in run ``rid``: they
    place it against x0, so the widened range and the compare that would have settled it go (mp56
    read a contradiction in both; mp78 read ~600 characters of it on each busy evaluation)."""
    start = message.find(BUSY_UNSHOWN)
    settle = message.find(BUSY_SETTLE, start) if start >= 0 else -1
    end = message.find(")", settle) + 1 if settle >= 0 else 0
    if end <= 0:
        return message
    # "(no compare needed)" read as about the best the standing named a compare with; "widened for the load, as
    # the run reads ..., it would not show it" did not parse (mp79).
    return message[:start] + f"; these rounds, kept in {rid}, place it against x0 too: no compare with the " \
        "baseline needed" + message[end:]
