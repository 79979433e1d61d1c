"""Measurements pool, and rankings use their pessimistic end (component "knowledge.measurements").

A score is an estimate from rounds (evoteam/stats.py). Two rules follow, kept here for every
view of the store:

- **Identical code is one candidate.** A verified measurement whose `code_hash` matches a
  candidate already measured in the same run and split adds its rounds to that candidate
  (`n_measurements` grows, the score and its interval are re-estimated from all rounds) instead
  of becoming a new candidate whose lucky draw could become the best. A measurement that fails
  turns the pooled candidate into a failure: code that is wrong or crashes some of the time
  does not rank.
- **Rankings never take the maximum of noisy draws.** Every ranking (a run's best,
  `best_candidates`, the trajectory's best so far, and everything built on them) orders by
  `rank_score`: the lower end of the score's interval when maximising, the upper end when
  minimising. A candidate without an interval (a claim, an old import) ranks by its score.
- **A busy machine announces nothing.** Separate evaluations on a contended machine differ by
  more than their intervals (the load comes and goes between them, not within one; measured in
  docs/bench.md, "Intervals across evaluations"), so a candidate with any measurement taken on a
  contended machine (`contended_measurements > 0`: its pooled rounds hold that measurement's) can
  still become the best so far, but is never announced as a new best by its interval, nor is
  another announced for clearing its interval (only paired rounds announce either: _lead). The
  mark stays with the candidate; whether it is better than another
  is then a side-by-side question (`compare`, `bench.remeasure`, whose paired rounds decide team
  versions' gains: knowledge/comparisons.py, report/data.py).
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import aiosqlite

from evoteam import stats
from evoteam.codehash import code_hash
from evoteam.servers.knowledge.migrations import register_migrations
# The ORDER BY of every ranking lives with the other read SQL (readsql.py).
from evoteam.servers.knowledge.readsql import RANKED, rank_order
from evoteam.servers.knowledge.models import (Candidate, CandidateCreate, MeasurementSamples, SampleRanges,
                                             TrajectoryPoint, WorkloadResult)
from evoteam.servers.knowledge.verified import ranks

REHASH_PAGE = 500  # candidate rows read per query when hashes are recomputed (code can be large)


def rehash_candidates(conn: sqlite3.Connection) -> int:
    """Recompute `code_hash` for every candidate that holds its code (a migration step, on a
    sqlite3.Connection or pg.py's _SyncConnection alike); returns how many rows changed.

    Paged by id so that a store of many candidates never holds all their code at once; only rows
    whose hash changes are written. Candidates of one run and split that now share a hash stay
    separate: their measurements are not merged here, and a later measurement of that code pools
    into the one of them that ranks highest (find_same_code)."""
    changed, after = 0, ""
    while True:
        page = conn.execute("SELECT id, code, code_hash FROM candidates WHERE code IS NOT NULL AND id > ? "
                            "ORDER BY id LIMIT ?", (after, REHASH_PAGE)).fetchall()
        if not page:
            return changed
        for row_id, code, old in page:
            if (new := code_hash(code)) != old:
                conn.execute("UPDATE candidates SET code_hash = ? WHERE id = ?", (new, row_id))
                changed += 1
        after = page[-1][0]


register_migrations("knowledge.measurements", [
    """
    ALTER TABLE candidates ADD COLUMN code_hash TEXT;
    ALTER TABLE candidates ADD COLUMN n_measurements INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE candidates ADD COLUMN score_lo REAL;
    ALTER TABLE candidates ADD COLUMN score_hi REAL;
    ALTER TABLE candidates ADD COLUMN rank_score REAL;
    ALTER TABLE candidates ADD COLUMN samples TEXT;
    UPDATE candidates SET rank_score = score;
    CREATE INDEX candidates_code ON candidates(run_id, code_hash, split);
    CREATE INDEX candidates_rank ON candidates(run_id, status, rank_score);
    """,
    # How many of a candidate's measurements the bench marked contended. The next step gives rows
    # from before one where a measurement says so (the first's metrics or the pooled history, in
    # json.dumps's spacing, on both backends), only where a timing method was recorded (2 and
    # later: the contention rule before misread quiet machines; machine.py).
    """
    ALTER TABLE candidates ADD COLUMN contended_measurements INTEGER NOT NULL DEFAULT 0;
    """,
    # A step of its own (steps are appended, never edited: a store may already be at the one above).
    """
    UPDATE candidates SET contended_measurements = 1
        WHERE contended_measurements = 0
          AND metrics LIKE '%"contended": true%' AND metrics LIKE '%"timing_method": %';
    """,
    # Each round's possible ratios where its time was below the bench's resolution (models.py,
    # SampleRanges): without them the pooled interval was narrower than the measurement's own.
    """
    ALTER TABLE candidates ADD COLUMN sample_ranges TEXT;
    """,
    # code_hash stopped counting docstrings (codehash.py): the stored hashes follow.
    rehash_candidates,
])

MAX_ROUNDS_KEPT = 400  # per workload: a candidate measured very often keeps its newest rounds
MAX_HISTORY = 20  # measurement summaries kept in a pooled candidate's metrics




def kind_of(samples: MeasurementSamples) -> str:
    """Program kits report one score per evaluation under "program"; kernel kits per workload."""
    return "program" if set(samples) == {"program"} else "kernel"


def estimate(samples: MeasurementSamples | None, ranges: SampleRanges | None = None) -> stats.Estimate | None:
    """The score and its interval from the rounds (and, where some time was below the bench's
    resolution, their possible ratios: the same rule as the bench's, stats.py)."""
    if not samples or not any(samples.values()):
        return None
    try:
        return stats.censored_score_estimate(samples, ranges, kind_of(samples))
    except ValueError:
        return None


def _estimates(samples: MeasurementSamples, ranges: SampleRanges) -> tuple[stats.Estimate | None, stats.Estimate | None]:
    """The interval shown (covering what unresolved rounds allow, as the bench's) and the one that
    ranks: the rounds' own, unresolved times counted at the resolution. Ranked by the covering
    one, a kernel the harness could not resolve under load fell below a resolved copy of the
    baseline (a 2.4x candidate ranked by 0.099 against 0.874 in tests/report on a fresh clone)."""
    shown = estimate(samples, ranges)
    return shown, (estimate(samples) if ranges else shown)


def rank_of(samples: MeasurementSamples | None, ranges: SampleRanges | None, direction: str) -> float | None:
    """What a ranking compares for a measurement's rounds, as the store ranks its candidates: the
    pessimistic end of the rounds' own interval (None without rounds)."""
    if not samples:
        return None
    _shown, ranked = _estimates(samples, ranges or {})
    return None if ranked is None else _ranked(ranked.value, ranked, direction)


def _kept(samples: MeasurementSamples, ranges: SampleRanges) -> tuple[MeasurementSamples, SampleRanges]:
    """The newest MAX_ROUNDS_KEPT rounds per workload, their ranges alike; ranges only where some
    round's differ from its sample."""
    samples = {k: list(v)[-MAX_ROUNDS_KEPT:] for k, v in samples.items()}
    kept = {}
    for k, (lows, highs) in ranges.items():
        lows, highs = list(lows)[-MAX_ROUNDS_KEPT:], list(highs)[-MAX_ROUNDS_KEPT:]
        if k in samples and lows != highs:
            kept[k] = (lows, highs)
    return samples, kept


def columns(spec: CandidateCreate, direction: str) -> dict[str, Any]:
    """The measurement columns of a new candidate row: score, interval and rank from its rounds
    (the newest MAX_ROUNDS_KEPT per workload, as pooling keeps: the estimate runs inside the write)."""
    samples, ranges = _kept(spec.samples or {}, spec.sample_ranges or {})
    est, ranked = _estimates(samples, ranges) if spec.status == "PASSED" else (None, None)
    score = est.value if est is not None else spec.score
    lo, hi = (est.lo, est.hi) if est is not None else (None, None)
    return {"code_hash": spec.code_hash, "n_measurements": 1, "contended_measurements": contended_count(spec),
            "score": score, "score_lo": lo, "score_hi": hi,
            "rank_score": _ranked(score, ranked, direction),
            "samples": json.dumps(samples) if samples else None,
            "sample_ranges": json.dumps(ranges) if ranges else None}


def contended_count(spec: CandidateCreate) -> int:
    """1 when this measurement (rounds from the bench) was taken on a contended machine, else 0."""
    return int(spec.samples is not None and was_contended(spec.metrics) is True)


def any_contended(contended_measurements: int | None) -> bool:
    """A measurement of the candidate was taken on a contended machine: its pooled rounds hold
    that measurement's, so its score is not steady enough to announce a new best from."""
    return (contended_measurements or 0) > 0


def counted_before(metrics: dict) -> int:
    """The count a candidate recorded before the count existed (an older bundle) gets: the same
    as the migration's backfill, 1 where its metrics say a measurement was contended, for
    evaluations that recorded their timing method."""
    if "timing_method" not in metrics:
        return 0
    history = metrics.get("measurements") if isinstance(metrics.get("measurements"), list) else []
    return int(was_contended(metrics) is True or any(isinstance(m, dict) and m.get("contended") is True
                                                      for m in history))


def _contended_row(row: sqlite3.Row) -> bool:
    return any_contended(row["contended_measurements"])


def _rank(score: float | None, lo: float | None, hi: float | None, direction: str) -> float | None:
    if score is None:
        return None
    if lo is None or hi is None:
        return score
    return lo if direction == "maximize" else hi


def _ranked(score: float | None, ranked: stats.Estimate | None, direction: str) -> float | None:
    """A row's rank_score: the pessimistic end of its rounds' own interval (no rounds: the score)."""
    return _rank(score, ranked.lo if ranked else None, ranked.hi if ranked else None, direction)


def rank_value(score: float | None, interval: list[float] | None, direction: str) -> float | None:
    """`rank_score` of a candidate given as a model (imports)."""
    lo, hi = (interval or [None, None])[:2] if interval and len(interval) == 2 else (None, None)
    return _rank(score, lo, hi, direction)


def ranking_of(rank_score: float | None, score: float | None, interval: list[float] | None,
               direction: str) -> float | None:
    """What a ranking compares for a candidate given as a model: its `rank_score` (the rounds'
    own interval) where the store gave one, else the pessimistic end of the interval shown."""
    return rank_score if rank_score is not None else rank_value(score, interval, direction)


def interval_of(row: sqlite3.Row) -> list[float] | None:
    lo, hi = row["score_lo"], row["score_hi"]
    return None if lo is None or hi is None else [lo, hi]


def estimate_of(row: sqlite3.Row) -> stats.Estimate | None:
    """The stored estimate of a candidate row (a point when it has no interval)."""
    if row["score"] is None:
        return None
    lo, hi = row["score_lo"], row["score_hi"]
    if lo is None or hi is None:
        return stats.Estimate(row["score"], row["score"], row["score"], 1, 0.0)
    if lo == hi:  # a point: exact only where enough runs agree on it (stats.spread_unknown)
        return stats.Estimate(row["score"], lo, hi, point_runs(row), 0.0)
    groups = _point_groups(row)
    if groups is not None and kind_of(groups) == "program":  # its runs, and what an interval of so few covers
        return stats.Estimate(row["score"], lo, hi, stats.runs_of(groups) or 1, stats.runs_coverage(groups))
    return stats.Estimate(row["score"], lo, hi, row["n_measurements"] or 1)


def candidate_estimate(c: Candidate) -> stats.Estimate | None:
    """A candidate's score and the interval it shows (all its measurements), with the runs behind
    it (its rounds, else its measurements): a point from a few runs is not known to be exact."""
    if c.score is None or not c.score_interval:
        return None
    coverage = stats.runs_coverage(c.samples) if c.samples else stats.CONFIDENCE
    return stats.Estimate(c.score, *c.score_interval, stats.runs_of(c.samples) or max(1, c.n_measurements or 1),
                          coverage)


def _point_groups(row) -> dict | None:
    """The rounds the row's query selected beside its interval (``point_samples``, or ``samples``)."""
    keys = row.keys()
    text = row["point_samples"] if "point_samples" in keys else row["samples"] if "samples" in keys else None
    try:
        groups = json.loads(text) if text else None
    except ValueError:
        groups = None
    return groups if isinstance(groups, dict) else None


def point_runs(row) -> int:
    """The runs behind a zero-width score: the fewest values of any group of its rounds, from the
    row's ``point_samples`` (or ``samples``); without them, its measurements (each one run at least)."""
    groups = _point_groups(row)
    return (stats.runs_of(groups) if groups is not None else None) or row["n_measurements"] or 1


async def find_same_code(conn: aiosqlite.Connection, spec: CandidateCreate, direction: str) -> sqlite3.Row | None:
    """The verified candidate of this run and split with the same code, if any. Where several
    share it (twins from before a change of the hashing rule: rehash_candidates leaves them
    apart), the one that ranks highest, a ranked one before a failed or flagged one: its lucky
    draw is what more rounds must correct (into the earliest, a re-measurement of the best never
    reached it, and it stayed the best; review 2026-12-04). Held-out rounds pool only within one
    held-out set (``metrics.heldout_set``): two services' secrets draw other shapes under the same
    workload names, and their rounds mixed into one interval (review 2026-12-04)."""
    if not (spec.verified and spec.code_hash) or spec.samples is None:
        return None  # only a measurement (the bench sends rounds, {} for a failure) pools
    async with conn.execute(
        "SELECT * FROM candidates WHERE run_id = ? AND code_hash = ? AND split = ? AND verified = 1 "
        f"ORDER BY CASE WHEN {RANKED} THEN 0 ELSE 1 END, CASE WHEN rank_score IS NULL THEN 1 ELSE 0 END, "
        f"{rank_order(direction)}, id{' LIMIT 1' if spec.split == 'dev' else ''}",
        (spec.run_id, spec.code_hash, spec.split)) as cur:
        if spec.split == "dev":
            return await cur.fetchone()
        rows = await cur.fetchall()
    held_set = spec.metrics.get("heldout_set")
    return next((r for r in rows if json.loads(r["metrics"] or "{}").get("heldout_set") == held_set), None)


def _pooled_workloads(old: list[dict], new: list[WorkloadResult], samples: MeasurementSamples,
                      ranges: SampleRanges) -> list[dict]:
    by_name = {w["workload"]: dict(w) for w in old}
    for w in new:
        merged = dict(by_name.get(w.workload, {}), **w.model_dump(exclude_none=True))
        rounds = samples.get(w.workload)
        # A program's runs are scores, not speedups: its score interval says what they give.
        if rounds and w.status == "PASSED" and merged.get("status") == "PASSED" and kind_of(samples) == "kernel":
            est = stats.censored_ratio_interval(rounds, *ranges.get(w.workload, (None, None)))
            merged.update(speedup=est.value, speedup_interval=[est.lo, est.hi], rounds=len(rounds))
        by_name[w.workload] = merged
    return list(by_name.values())


def _worse_status(a: str, b: str) -> str:
    if a == "PASSED":
        return b
    return a


async def pool(conn: aiosqlite.Connection, row: sqlite3.Row, spec: CandidateCreate, direction: str,
               who: dict[str, Any]) -> None:
    """Add one measurement (``spec``) to the candidate ``row`` with the same code."""
    samples: dict[str, list[float]] = json.loads(row["samples"] or "null") or {}
    ranges: dict[str, list[list[float]]] = json.loads(row["sample_ranges"] or "null") or {}
    passed_now = spec.status == "PASSED"
    if passed_now and spec.samples:
        new_ranges = spec.sample_ranges or {}
        for name, values in spec.samples.items():
            old = samples.get(name, [])
            if name in ranges or name in new_ranges:  # a resolved round's range is its own value
                lows_old, highs_old = ranges.get(name, (old, old))
                lows_new, highs_new = new_ranges.get(name, (values, values))
                ranges[name] = [list(lows_old) + list(lows_new), list(highs_old) + list(highs_new)]
            samples[name] = old + list(values)
        samples, ranges = _kept(samples, ranges)
    status = _worse_status(row["status"], spec.status)
    flagged = bool(row["flagged"]) or spec.flagged
    # Off the event loop: up to MAX_ROUNDS_KEPT rounds per workload bootstrap in ~40 ms.
    est, ranked = await asyncio.to_thread(_estimates, samples, ranges) if status == "PASSED" else (None, None)
    score = est.value if est is not None else row["score"]
    lo, hi = (est.lo, est.hi) if est is not None else (None, None)
    rank = _ranked(score, ranked, direction)
    metrics = json.loads(row["metrics"] or "{}")
    history = list(metrics.get("measurements") or [])
    if not history:  # the first measurement, as it was recorded
        history.append({"at": row["created_at"], "status": row["status"], "score": row["score"],
                        "user": row["user"], "role": row["role"],
                        "contended": was_contended(metrics)})
    history.append({"at": who["created_at"], "status": spec.status, "score": spec.score,
                    "user": who["user"], "role": who["role"], "contended": was_contended(spec.metrics)})
    metrics["measurements"] = history[-MAX_HISTORY:]
    if not passed_now:
        metrics["failed_measurement"] = {"status": spec.status, "message": str(spec.metrics.get("message") or "")[:500]}
    workloads = _pooled_workloads(json.loads(row["workloads"] or "[]"), spec.workloads, samples, ranges)
    await conn.execute(
        "UPDATE candidates SET status = ?, score = ?, score_lo = ?, score_hi = ?, rank_score = ?, samples = ?, "
        "n_measurements = n_measurements + 1, contended_measurements = contended_measurements + ?, flagged = ?, "
        "metrics = ?, workloads = ?, sample_ranges = ? WHERE id = ?",
        (status, score, lo, hi, rank, json.dumps(samples) if samples else None,
         contended_count(spec), int(flagged), json.dumps(metrics, default=str), json.dumps(workloads),
         json.dumps(ranges) if ranges else None, row["id"]))


def was_contended(metrics: dict) -> bool | None:
    """Whether the bench marked a measurement contended: it says so in ``metrics.contention``
    (until 2026-12-02 the history read a top-level key the bench never wrote, and kept None)."""
    contention = metrics.get("contention")
    found = contention.get("contended") if isinstance(contention, dict) else None
    return found if isinstance(found, bool) else metrics.get("contended")


def first_line(text: str | None, limit: int = 120) -> str | None:
    """The first line of a note, for listings (None when there is none)."""
    line = (text or "").strip().split("\n", 1)[0].strip()
    return (line[: limit - 1] + "…" if len(line) > limit else line) or None


def _overlap(a: stats.Estimate | None, b: stats.Estimate | None) -> bool:
    return a is not None and b is not None and a.lo <= b.hi and b.lo <= a.hi


def clears_start(own: stats.Estimate, x0: float, direction: str) -> bool:
    """Whether a score's interval clears the run's starting score x0, a known number (not a point
    of unknown spread): the trajectory's first new best and run_report's first version alike."""
    return stats.clears(own, stats.Estimate(x0, x0, x0, stats.EXACT_MIN_RUNS, 1.0), direction)


# How the paired rounds of two candidates read (B over A): None where they do not decide.
Side = Literal["better", "worse", "tied"]
Paired = Callable[[str, str], "Side | None"]
START = "x0"  # what within_noise_of / worse_than name for the run's starting score
PAIRS, INTERVALS = "paired rounds", "intervals"  # what decided a point's standing


class Standing(NamedTuple):
    """How a ranked candidate stands against the bests before it (TrajectoryPoint's fields)."""

    new_best: bool = False
    within_noise_of: str | None = None
    worse_than: str | None = None
    too_few_runs: bool = False
    decided_by: Literal["paired rounds", "intervals"] | None = None
    better_than: str | None = None


def _side(paired: Paired | None, ref: sqlite3.Row | None, row: sqlite3.Row) -> Side | None:
    if paired is None or ref is None or ref["id"] == row["id"]:
        return None
    return paired(ref["id"], row["id"])


def beyond(a: float, b: float, direction: str) -> bool:
    """Whether ``a`` lies on the better side of ``b`` in the run's direction."""
    return a > b if direction == "maximize" else a < b


def _by_pair(side: Side | None, ref_id: str) -> Standing | None:
    """What decided paired rounds with ``ref_id`` say, None where they decide nothing."""
    if side is None:
        return None
    return Standing(new_best=side == "better", within_noise_of=ref_id if side == "tied" else None,
                    worse_than=ref_id if side == "worse" else None, decided_by=PAIRS)


def _against_start(own: stats.Estimate, x0: float, direction: str) -> Standing:
    """Short of the starting score: within its noise, or wholly on the wrong side of it (never
    from a point whose spread is unknown: one run of a program tells nothing apart, and is not
    known to be worse: too_few_runs where it is not x0 itself)."""
    below = own.hi < x0 if direction == "maximize" else own.lo > x0
    if below and stats.spread_unknown(own):
        return Standing(too_few_runs=True)
    return Standing(worse_than=START, decided_by=INTERVALS) if below else \
        Standing(within_noise_of=START, decided_by=INTERVALS)


def _clears(own: stats.Estimate, ref: sqlite3.Row | None, direction: str) -> bool:
    """Its interval clears a quiet best's (a busy one's interval is not trusted to be where it says)."""
    return ref is not None and not _contended_row(ref) and stats.clears(own, estimate_of(ref), direction)


def _lead(row: sqlite3.Row, announced: sqlite3.Row | None, incumbent: sqlite3.Row | None, x0: float | None,
          direction: str, paired: Paired | None) -> Standing:
    """How a candidate that took the lead stands.

    A new best clears the last one announced, or, once one has been, the best just before it
    (which leads that one): by their paired rounds where those decide, else interval against
    interval, never by the interval of a busy machine; with nothing announced yet, it clears the
    run's starting score x0. So a chain of leads each within noise of the one before cannot hide a
    gain over the last announced best, and nothing below x0 is announced for beating another below
    it (review 2026-12-04). Paired rounds with the last announced best decide first: a step over
    the best before it that they find no different from the announced one is no new best here,
    though run_report's version gain, which asks about the version's best against the best before
    it, may call it significant."""
    if announced is not None and (decided := _by_pair(_side(paired, announced, row), announced["id"])):
        return decided
    before = incumbent if incumbent is not None and incumbent is not announced else None
    side = _side(paired, before, row)
    if side == "worse":
        return Standing(worse_than=before["id"], decided_by=PAIRS)
    busy, own = _contended_row(row), estimate_of(row)
    if announced is None:
        # Beyond a best side by side counts only past x0 (its own paired rounds against the baseline).
        if side == "better" and (x0 is None or clears_start(own, x0, direction)):
            return Standing(new_best=True, decided_by=PAIRS)
        if busy:  # its interval is not trusted: `contended` says why it is not announced
            return Standing(within_noise_of=before["id"] if before is not None else None)
        if x0 is None or clears_start(own, x0, direction):  # the first quiet leader, or past x0
            return Standing(new_best=True, decided_by=None if x0 is None else INTERVALS)
        if stats.spread_unknown(own) and beyond(own.value, x0, direction):
            return Standing(too_few_runs=True)
        if before is not None and (side == "tied" or _contended_row(before) or _overlap(own, estimate_of(before))):
            return Standing(within_noise_of=before["id"], decided_by=PAIRS if side == "tied" else INTERVALS)
        return _against_start(own, x0, direction)
    if side == "better":
        return Standing(new_best=True, decided_by=PAIRS)
    if not busy and (_clears(own, announced, direction) or _clears(own, before, direction)):
        return Standing(new_best=True, decided_by=INTERVALS)
    if side == "tied":
        return Standing(within_noise_of=before["id"], decided_by=PAIRS)
    # A program's point from too few runs is not noise, just not known: said as such (a model read
    # "within noise" of a deterministic gain as no progress; 2026-12-03).
    ref = estimate_of(announced)
    unknown = stats.spread_unknown(own) or stats.spread_unknown(ref)
    if not busy and unknown and beyond(own.value, ref.value, direction):
        return Standing(too_few_runs=True)
    return Standing(within_noise_of=announced["id"], decided_by=INTERVALS)


def _behind(row: sqlite3.Row, best: sqlite3.Row, paired: Paired | None) -> Standing:
    """How a candidate behind the best stands: within its noise, or told apart and worse."""
    side = _side(paired, best, row)
    if side is not None:
        # Ranked below by its wider interval, yet found better side by side: said, not left blank
        # beside a version gain run_report calls significant from the same rounds (review 2026-12-04).
        return Standing(within_noise_of=best["id"] if side == "tied" else None,
                        worse_than=best["id"] if side == "worse" else None,
                        better_than=best["id"] if side == "better" else None, decided_by=PAIRS)
    own, top = estimate_of(row), estimate_of(best)
    if _contended_row(row) or _contended_row(best) or _overlap(own, top):
        return Standing(within_noise_of=best["id"], decided_by=INTERVALS)
    # Apart, but one is a point from too few runs: not known to be worse, nor within noise (a
    # program at 0.5 behind a best at 0.386 read "within noise of" it; 2026-12-04).
    if stats.spread_unknown(own) or stats.spread_unknown(top):
        return Standing(too_few_runs=True)
    return Standing(worse_than=best["id"], decided_by=INTERVALS)


def trajectory_points(rows: list[sqlite3.Row], direction: str, x0: float | None = None,
                      paired: Paired | None = None) -> tuple[list[TrajectoryPoint], sqlite3.Row | None]:
    """The trajectory of candidate rows in creation order, and the best row: the best so far by
    `rank_score`; ``new_best`` only where the new best clears the last announced best (_lead);
    ``within_noise_of`` names the best a ranked candidate cannot be told apart from. ``paired``
    reads two candidates' kept paired rounds (knowledge/comparisons.py), where there are some."""
    best = announced = stepping = None
    points = []
    for r in rows:
        standing = Standing()
        if ranks(r["status"], r["score"], bool(r["verified"]), bool(r["flagged"])):
            if best is None or beyond(r["rank_score"], best["rank_score"], direction):
                standing = _lead(r, announced, stepping, x0, direction, paired)
                best = r
                announced = r if standing.new_best else announced
                # A lead found worse than a best is no step for the next to clear (review 2026-12-04).
                stepping = stepping if standing.worse_than else r
            else:
                standing = _behind(r, best, paired)
        points.append(TrajectoryPoint(
            candidate_id=r["id"], at=r["created_at"], score=r["score"], score_interval=interval_of(r),
            best_so_far=best["score"] if best is not None else None,
            best_so_far_id=best["id"] if best is not None else None, new_best=standing.new_best,
            within_noise_of=standing.within_noise_of, worse_than=standing.worse_than,
            better_than=standing.better_than, decided_by=standing.decided_by,
            too_few_runs=True if standing.too_few_runs else None,
            status=r["status"], verified=bool(r["verified"]), n_measurements=r["n_measurements"] or 1,
            contended=True if r["verified"] and _contended_row(r) else None,
            code_hash=r["code_hash"], note=first_line(r["notes"]), role=r["role"], team_version=r["team_version"]))
    return points, best
