"""Which run a measurement may go to. A run is bound to one kit's content and, for a kernel kit,
to one timing method (measurement/method.py): scores taken on other content or timed another way
are never pooled into its candidates or ranked against them. core.py records through these
checks; they run once before anything is measured (a refusal costs no device time) and again
when recording."""

from __future__ import annotations

from pydantic import ValidationError

from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation.candidates import check_parent
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.measurement.method import TIMING_METHOD
from evoteam.servers.bench.models import Evaluation
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import KnowledgeStore


async def _bound_metrics(store: KnowledgeStore, run_id: str) -> dict | None:
    """The metrics of the run's first candidate that says which kit content it was evaluated on
    (None: nothing binds the run yet)."""
    page = await store.list_candidates(run_id, limit=10)
    for summary in page.items:
        metrics = (await store.get_candidate(summary.id)).metrics
        if metrics.get("kit_hash"):
            return metrics
    return None


def timing_method(result: Evaluation) -> int | None:
    """How a kernel evaluation was timed (recorded where it was measured, which may be another
    node); None for a program kit, whose evaluator keeps its own time."""
    return (result.metrics.get("timing_method") or 1) if result.kind == "kernel" else None


async def timed_alike(store: KnowledgeStore, run_id: str, method: int | None) -> bool:
    """Whether the run's measurements were taken by ``method`` (or nothing binds it yet)."""
    bound = await _bound_metrics(store, run_id)
    return method is None or bound is None or (bound.get("timing_method") or 1) == method


class BindingError(DomainError):
    """A run this evaluation cannot be recorded in; ``reason`` says why in a few words (for the
    line that names a run skipped by default)."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


async def check_binding(store: KnowledgeStore, kit: Kit, run_id: str, method: int | None) -> None:
    """A run is bound to one kit's content: the kit named by the run, its direction (a run that
    ranks the other way would crown the kit's worst candidate), and the content hash of the
    kit its candidates were evaluated against; and, for a kernel kit, to the timing method its
    candidates were measured by (``method``: this evaluation's; measurement/method.py). A
    candidate scored on other content (a look-alike kit, an edited kit) is refused, so it can
    never become that run's best; one timed another way is refused, so it is never pooled or
    ranked with scores it cannot be compared with."""
    run = await store.get_run(run_id)
    if run.kit and run.kit not in (kit.name, str(kit.root)):
        raise BindingError(f"run {run_id} is for kit {run.kit!r}, not {kit.name!r}; record in a run of this kit "
                           "(omit run_id to use or start one)", f"it is for kit {run.kit!r}")
    want = kit.manifest.direction
    if run.direction != want:
        # A run ranks by its direction: recorded there, this kit's worst candidate would be its best.
        what = "a speedup over the baseline" if kit.manifest.kind == "kernel" else "the evaluator's metric"
        raise BindingError(f"run {run_id} ranks scores to be {run.direction}d, but kit {kit.name!r} scores "
                           f"{what}, to be {want}d (describe_kit); record in a run with direction={want!r}: "
                           f"omit run_id to use or start one, or knowledge.start_run with direction={want!r}. Nothing "
                           f"was measured or recorded; if {run_id} was started by mistake, knowledge.finish_run it "
                           "with status failed", f"it ranks scores to be {run.direction}d, this kit's to be {want}d")
    metrics = await _bound_metrics(store, run_id)
    if metrics is None:
        return
    bound = metrics["kit_hash"]
    if bound != kit.content_hash:
        raise BindingError(f"run {run_id} is bound to kit content {bound[:19]}..., but this evaluation used "
                           f"{kit.content_hash[:19]}... (the kit changed, or another folder has its name); "
                           "start a new run for the changed kit", "it was measured on other kit content")
    was = metrics.get("timing_method") or 1  # recorded since method 2
    if method is not None and was != method:
        raise BindingError(f"run {run_id} was timed by evoteam's timing method {was}, and this evaluation by "
                           f"method {method}, whose scores are not comparable with it (see docs/bench.md, "
                           "Rounds); start a new run for this kit: omit run_id, or knowledge.start_run with "
                           f"seed_from={run_id!r} to continue from it",
                           f"it was timed another way (method {was})")


def check_record_fields(notes: str, documents_used: list[str] | None) -> None:
    """The record's own limits on what the caller gave with the candidate (the record model's,
    so there is one source of them), checked before measuring: a record refused afterwards
    would lose the measurement."""
    try:
        CandidateCreate(run_id="-", notes=notes, documents_used=list(documents_used or []))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        given = len(notes) if field == "notes" else len(documents_used or [])
        raise DomainError(f"{field}: {first['msg']} (given: {given:,}); nothing was measured or "
                          "recorded") from None


async def check_run(store: KnowledgeStore, kit: Kit, parent_id: str | None, run_id: str | None,
                    notes: str = "", documents_used: list[str] | None = None) -> None:
    """What a store will refuse of an evaluation, asked before anything is measured: the notes and
    documents' limits, the parent, and the named run's kit and timing method (the same checks run
    again when recording)."""
    check_record_fields(notes, documents_used)
    if parent_id:
        await check_parent(store, parent_id, run_id)
    if run_id:
        await check_binding(store, kit, run_id, TIMING_METHOD if kit.manifest.kind == "kernel" else None)


async def resolve_run(store: KnowledgeStore, kit: Kit, run_id: str | None, owner: str | None = None,
                       method: int | None = None) -> tuple[str, str | None]:
    """The run to record in: the one named, else the kit's newest active run (of `owner` when
    given: on a shared store, never a colleague's run by default) measured like this one, else a
    new one. With it, a line for the result when a run was started now or an active run of the kit
    was skipped (None otherwise): a model that started a run of its own must learn its evaluations
    went elsewhere, and why."""
    if run_id:
        await check_binding(store, kit, run_id, method)
        run = await store.get_run(run_id)
        # Recorded all the same (a late re-measurement of a finished run's best is fair), but said:
        # a model evaluated into a run it had finished and was told nothing (mp53).
        done = f"run {run_id} is {run.status}: recorded in it all the same (omit run_id to use or start an " \
               "active run for new work)" if run.status in ("finished", "failed", "budget_spent") else None
        return run_id, done
    cursor = None
    skipped: list[tuple[str, str]] = []
    for _ in range(10):
        page = await store.list_runs(status="active", limit=100, cursor=cursor)
        for run in page.items:
            if run.kit == kit.name and (owner is None or run.provenance.user == owner):
                try:
                    await check_binding(store, kit, run.id, method)
                except BindingError as exc:
                    skipped.append((run.id, exc.reason))
                    continue  # bound to other content or timing: use (or start) a run for this one
                return run.id, _skipped(f"recorded in {run.id}, your newest active run of this kit that can take "
                                        "it", skipped) if skipped else None
        cursor = page.next_cursor
        if not cursor:
            break
    m = kit.manifest
    run = await store.start_run(RunCreate(goal=m.goal, kit=kit.name, direction=m.direction, x0=m.x0,
                                          best_known=m.best_known))
    return run.id, _skipped(f"recorded in {run.id}, a run started now", skipped)


def _skipped(line: str, skipped: list[tuple[str, str]]) -> str:
    """The line naming the run used and the active runs of the kit skipped, each with why."""
    if not skipped:
        return line
    said = "; ".join(f"{rid}: {reason}" for rid, reason in skipped[:3]) + (" …" if len(skipped) > 3 else "")
    return (f"{line}; skipped {said} (one started by mistake: knowledge.finish_run it with status failed)")
