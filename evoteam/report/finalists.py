"""Which candidates a re-measurement measures (bench.remeasure without candidate_ids): each team
version's best few, room for candidates from too few runs that read beyond them, and how long a
batch of them takes."""

from __future__ import annotations

from evoteam import stats
from evoteam.passingstyle import styles_of
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.comparisons import dev_comparisons, paired_sides
from evoteam.servers.knowledge.listing import all_candidates
from evoteam.servers.knowledge.measurements import (any_contended, beyond, intervals_apart, rank_key,
                                                    widened_for_load)
from evoteam.servers.knowledge.models import CandidateSummary
from evoteam.servers.knowledge.standing import Paired
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.verified import ranks

# A run of one group (no team: the /kernel-loop skill) would otherwise re-measure a single
# finalist, and a batch of one answers no "which ranking holds" question.
SINGLE_GROUP_FINALISTS = 3
# Sides of one batch at most (each is a confined worker timed in every round): the evaluation
# service runs every agent's remeasure, so one call must stay bounded.
MAX_CANDIDATES = 12
# Sides of a default batch kept for candidates from too few runs that read beyond their version's
# measured best: from 12 versions on, the finalists filled the batch and run_report waited on such
# runs for ever (the stop rule never fired; review 2026-12-04).
LEAD_SIDES = 4
# Batches one default call may measure: pooling a batch's rounds moves ranks (a pooled interval
# ranks by its pessimistic end, a program's single run by its value), so a candidate that was not
# measured can become a version's best, and its gain was again read from separate measurements
# (model-play, 2026-12-03). The next batch measures the finalists so far with the new ones.
FINALIST_PASSES = 3
# Candidates the note names of each kind, picked or left out (a long run has many within busy noise).
LEFT_SAID = 3


async def _ranked_groups(store: KnowledgeStore, run_id: str) -> tuple[str, dict[int | None, list[tuple[tuple, CandidateSummary]]]]:
    """A run's direction, and its ranked dev candidates per team version (none: one group), each
    with its rank key (measurements.rank_key: larger is better)."""
    run = await store.get_run(run_id)
    keyed: dict[int | None, list[tuple[tuple, CandidateSummary]]] = {}
    for c in await all_candidates(store, run_id):
        if not ranks(c.status, c.score, c.verified, c.flagged) or c.split != "dev":
            continue
        key = rank_key(c.rank_score, c.score, c.score_interval, run.direction, c.runs is not None)
        keyed.setdefault(c.provenance.team_version, []).append((key, c))
    return run.direction, keyed


def _leaders(direction: str, keyed: dict, measured: set[str]) -> list[CandidateSummary]:
    """Candidates not measured by this call that now rank at or above every measured one of their
    version, or whose score from too few runs is beyond that one's score (once measured, it may rank
    first; one equal to it cannot; the score, as run_report and get_run compare it, not the end of
    a few runs' range): each could be the version's best the report reads. Best score first."""
    found = []
    for items in keyed.values():
        top = max(((k, c) for k, c in items if c.id in measured), default=None, key=lambda kc: kc[0])
        if top is not None:
            found += [c for k, c in items if c.id not in measured and (
                k >= top[0] or (c.runs is not None and beyond(c.score, top[1].score, direction)))]
    return sorted(found, key=lambda c: c.score if direction == "maximize" else -c.score, reverse=True)


def _bests(keyed: dict, per_group: int | None = None,
           paired: Paired | None = None) -> tuple[list[CandidateSummary], dict[str, str]]:
    """The best ranked candidates of each group (``per_group``; default: one, a run of one group
    its best few), groups by version (no version last); after the best, only those that could be
    it (_may_lead), and none whose kept paired rounds with another of its group find it worse
    (``paired``: a default batch re-timed a candidate a compare had found significantly slower than
    its version's best, mp31; and one found slower than the third, which it left out, mp74), the
    next in rank taking its place. With them, each one so left out and the one found faster than it."""
    per_group = per_group or (SINGLE_GROUP_FINALISTS if len(keyed) == 1 else 1)
    out, left = [], {}
    for k in sorted(keyed, key=lambda v: (v is None, v or 0)):
        ranked = _in_rank_order(keyed[k])
        picked = ranked[:1]
        for c in ranked[1:]:
            if len(picked) >= per_group:
                break
            if not _may_lead(c, ranked[0]):
                continue
            # Never one found better than the top: better_than_top is there to confirm it (a cycle of
            # noisy compares dropped it for losing to a third; review).
            slower = None if not paired or paired(ranked[0].id, c.id) == "better" else \
                next((o for o in ranked if o is not c and paired(o.id, c.id) == "worse"), None)
            if slower is None:
                picked.append(c)
            else:
                left[c.id] = slower.id
        out += picked
    return out, left


def _in_rank_order(items: list[tuple[tuple, CandidateSummary]]) -> list[CandidateSummary]:
    """A group's candidates, best rank key first."""
    return [c for _, c in sorted(items, key=lambda kc: kc[0], reverse=True)]


def _may_lead(c: CandidateSummary, best: CandidateSummary) -> bool:
    """Whether ``c`` could be its version's best once measured beside it: its interval, widened
    for a busy machine as every verdict counts one, meets the best's, or either has too few runs
    to tell. A default batch timed a version's copy of the baseline at 1.0x beside its best at
    4.5x (model-play 2026-12-04): nothing a batch could reorder."""
    if not c.score_interval or not best.score_interval or c.runs is not None or best.runs is not None:
        return True
    own, top = (widened_for_load(stats.Estimate(x.score, *x.score_interval, stats.EXACT_MIN_RUNS),
                                 any_contended(x.contended_measurements), True) for x in (c, best))
    return own.hi >= top.lo and top.hi >= own.lo


async def unmeasured_leaders(store: KnowledgeStore, run_id: str, measured: set[str]) -> list[CandidateSummary]:
    """_leaders of the run as it stands now (after a batch pooled its rounds)."""
    return _leaders(*await _ranked_groups(store, run_id), measured)


async def default_sides(store: KnowledgeStore, run_id: str) -> tuple[list[CandidateSummary], str | None]:
    """What a call without named candidates measures: the newest versions' best few (the stop rule
    reads from the newest; up to 3 each while 8 sides hold them), with room kept for candidates
    from too few runs that read beyond their version's measured best (LEAD_SIDES). One read of the
    run's candidates for both. With them, why each beside its version's best was picked, and which
    were left out for their paired rounds (picked_why)."""
    direction, keyed = await _ranked_groups(store, run_id)
    records = await dev_comparisons(store, run_id, (await store.get_run(run_id)).kit)
    paired = paired_sides(records, direction, await _styles_compared(store, records))
    # Each version's best few while they fit: a version's best picked by one busy evaluation was
    # its slower candidate, and its gain, "worse, significant", spoke of that one (model-play 2026-12-04).
    room = MAX_CANDIDATES - LEAD_SIDES
    per_group = max(1, min(SINGLE_GROUP_FINALISTS, room // max(1, len(keyed))))
    tops, left = _bests(keyed, per_group, paired)
    tops = tops[-room:]
    leaders = _leaders(direction, keyed, {c.id for c in tops})[:LEAD_SIDES]
    return [*tops, *leaders], picked_why(keyed, tops, leaders, paired, left)


def picked_why(keyed: dict, tops: list[CandidateSummary], leaders: list[CandidateSummary], paired: Paired,
               left: dict[str, str]) -> str | None:
    """Why each default finalist beside its version's best was picked, as the run stood before the
    batch (which keeps its own paired rounds), and which ones _bests left out for their paired rounds
    (``left``: each, and the one found faster than it): the batch took a deliberately slow control,
    within noise of the best only widened for a busy machine and never paired with it, and left out
    the previous leader, which a compare had found slower (mp78 read "within noise" as the reason
    for both)."""
    picked, said, out = {c.id for c in tops}, [], []
    for items in keyed.values():
        ranked = _in_rank_order(items)
        if not ranked or ranked[0].id not in picked:
            continue
        for c in ranked[1:]:
            if c.id in picked:
                said.append(f"{c.id} ({_why_beside(c, ranked[0], paired(ranked[0].id, c.id))})")
            elif c.id in left:
                out.append(f"{c.id} (paired rounds find it slower than {left[c.id]})")
    said += [f"{c.id} (" + ("from too few runs, it reads beyond" if c.runs is not None else "it ranks with") +
             " its version's measured best)" for c in leaders]
    if not said and not out:
        return None
    head = "before this batch, besides " + ("the run's best" if len(keyed) == 1 else "each team version's best")
    return head + (f", picked: {_some(said)}" if said else "") + (f"; left out: {_some(out)}" if out else "")


def _some(items: list[str]) -> str:
    """The first LEFT_SAID of ``items``, and how many more (a batch of 12 read ~1,000 characters; rev78)."""
    more = f" and {len(items) - LEFT_SAID} more" if len(items) > LEFT_SAID else ""
    return ", ".join(items[:LEFT_SAID]) + more


def _why_beside(c: CandidateSummary, best: CandidateSummary, side: str | None) -> str:
    """Why ``c`` is measured beside its version's ``best`` (_bests picked it; ``side``: their paired
    rounds' verdict on ``c``; "style" either way round, rev78)."""
    if side == "better":
        return f"paired rounds find it better than {best.id}, which ranks above it"
    if c.runs is not None or best.runs is not None:
        return f"too few runs to tell it from {best.id}"
    widened = intervals_apart(c.score_interval, best.score_interval)
    return f"within noise of {best.id}" + (" only as widened for a busy machine" if widened else "") + (
        ", no paired verdict with it" if side is None else ", paired rounds find no difference" if side == "tied" else
        ", the two apart side by side by destination passing style's share alone")


async def _styles_compared(store: KnowledgeStore, records: list) -> dict[str, str | None]:
    """The output style of each candidate the kept compares name: a returning twin behind a
    destination-passing best by that style's share alone read "worse" and was left out, so the
    default batch timed the best alone (mp75)."""
    # Only a side that is no candidate reads as no style: a store away raises, as a read of the run would.
    return await styles_of(store, (i for r in records for i in (r.a_candidate_id, r.b_candidate_id)), (StoreError,))


async def finalists(store: KnowledgeStore, run_id: str) -> list[CandidateSummary]:
    """The best ranked candidate of each team version (candidates of no version count as one group),
    best by the pessimistic end of its interval; a run of one group gives its best few."""
    return _bests((await _ranked_groups(store, run_id))[1])[0]


START_S = {False: 0.3, True: 1.5}  # a timed worker's start, CPU and GPU (a CUDA context), roughly
PATH_MS = 0.5  # the call path around each timed call on a CPU (docs/bench.md, *What the timed interval contains*)


def estimate_seconds(kit, n_sides: int, rounds: int, recorded: list[CandidateSummary | None],
                     processes: int = 1) -> float:
    """A rough duration: start-up, correctness, and the rounds' calls from the recorded times;
    a kernel kit's sides each in ``processes`` (the baseline too: batchruns.COPIED_SIDES)."""
    t = kit.manifest.timing
    if kit.manifest.kind != "kernel":  # a run takes what the finalists' recorded runs took (a flat 5 s said 30 for 3)
        walls = sorted(w for c in recorded if isinstance(w := (getattr(c, "metrics", None) or {}).get("wall_s"),
                                                         (int, float)) and w > 0)
        # An exact program is not run again (_batch); the others up to every round.
        runs = sum(0 if c is not None and stats.every_run_alike(getattr(c, "samples", None) or {}) else rounds
                   for c in recorded) + rounds * max(0, n_sides - len(recorded))
        return runs * (walls[len(walls) // 2] if walls else 5.0)
    # Each timed process (the sides' and the baseline's) costs its start and its calls: the
    # warm-up and every round's, on each workload, at its recorded time plus the call path. Fitted
    # to bench_remeasure_copies.py's batches (7.4-15.1 s; the formula before said 2-3x that).
    calls = rounds * t.reps_per_round + t.warmup
    known = [c for c in recorded if getattr(c, "workloads", None)]

    def per_process(c, field: str) -> float:
        workloads = getattr(c, "workloads", None) or []
        ms = sum(getattr(w, field) or 1.0 for w in workloads) if workloads else 5.0
        return START_S[kit.manifest.device.startswith("cuda")] + calls * (ms + PATH_MS * max(1, len(workloads))) / 1000

    base = per_process(known[0], "baseline_ms") if known else per_process(None, "baseline_ms")
    sides = sum(per_process(c, "candidate_ms") if getattr(c, "workloads", None) else base for c in recorded)
    sides += base * max(0, n_sides - len(recorded))  # the copy of the baseline
    return 1.0 + processes * (sides + base)
