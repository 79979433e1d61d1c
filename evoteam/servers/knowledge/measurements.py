"""Measurements pool, and rankings use their pessimistic end (component "knowledge.measurements").

A score is an estimate from rounds (evoteam/stats.py). Two rules follow, kept here for every
view of the store:

- **Identical code is one candidate.** A verified measurement whose `code_hash` matches a
  candidate already measured in the same run and split adds its rounds to that candidate
  (`n_measurements` grows, the score and its interval are re-estimated from all rounds, the
  interval widened where the measurements differ by more than their own intervals allow:
  drift_widened) instead
  of becoming a new candidate whose lucky draw could become the best. A measurement that fails
  turns the pooled candidate into a failure: code that is wrong or crashes some of the time
  does not rank.
- **Rankings never take the maximum of noisy draws.** Every ranking (a run's best,
  `best_candidates`, the trajectory's best so far, and everything built on them) orders by
  `rank_score`: the lower end of the score's interval when maximising, the upper end when
  minimising. A candidate without an interval (a claim, an old import) ranks by its score.
- **A busy machine's interval counts widened.** Separate evaluations on a contended machine differ
  by more than their intervals (the load comes and goes between them, not within one; measured in
  docs/bench.md, "Intervals across evaluations"), so a candidate with any measurement taken on a
  contended machine (`contended_measurements > 0`: its pooled rounds hold that measurement's) can
  still become the best so far, but counts against another evaluation, or x0, only with its
  interval widened 3x each way (`widened_for_load`, stats.load_widened; knowledge/standing.py):
  a 2.3x gain measured busy is "within noise" by intervals. The mark stays with the candidate;
  whether it is better than another is then a side-by-side question (`compare`, `bench.remeasure`,
  whose paired rounds decide team versions' gains: knowledge/comparisons.py, report/data.py).
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from typing import Any

from evoteam import stats
from evoteam.codehash import code_hash
from evoteam.copystats import as_shown, between_measurements, interval_pair, processes_of
from evoteam.servers.knowledge.migrations import register_migrations
from evoteam.servers.knowledge.models import Candidate, CandidateCreate, MeasurementSamples, SampleRanges

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


def mark_unknown_spread(conn: sqlite3.Connection) -> int:
    """Set `spread_unknown` on the stored rows it applies to (a migration step on either backend,
    paged by id as rehash_candidates is); returns how many rows it marked. Every scored row is read:
    a kernel's rounds can be too few as well as a program's runs (only those few are estimated)."""
    marked, after = 0, ""
    while True:
        page = conn.execute(
            "SELECT id, score, score_lo, score_hi, n_measurements, samples, sample_ranges FROM candidates "
            "WHERE score IS NOT NULL AND id > ? ORDER BY id LIMIT ?", (after, REHASH_PAGE)).fetchall()
        if not page:
            return marked
        for row_id, score, lo, hi, n, text, ranges_text in page:
            groups, ranges = _json_dict(text), _json_dict(ranges_text)
            if unknown_spread(score, lo, hi, groups, n, ranges):
                conn.execute("UPDATE candidates SET spread_unknown = 1 WHERE id = ?", (row_id,))
                marked += 1
        after = page[-1][0]


def _json_dict(text: str | None) -> dict | None:
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


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
    # A score from too few runs for a 95% interval ranks after every one with such an interval
    # (unknown_spread); the next step marks the rows stored before.
    """
    ALTER TABLE candidates ADD COLUMN spread_unknown INTEGER NOT NULL DEFAULT 0;
    """,
    mark_unknown_spread,
    # code_hash stopped counting the names of a function's locals (codehash.py): the stored hashes follow.
    rehash_candidates,
])

MAX_ROUNDS_KEPT = 400  # per workload: a candidate measured very often keeps its newest rounds
MAX_HISTORY = 20  # measurement summaries kept in a pooled candidate's metrics
# In a pooled candidate's metrics: its measurements differ beyond chance (copystats.measurements_disagree).
DISAGREE = "measurements_disagree"




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


def shown_and_ranked(samples: MeasurementSamples,
                     ranges: SampleRanges) -> tuple[stats.Estimate | None, stats.Estimate | None]:
    """The interval shown (covering what unresolved rounds allow, as the bench's) and the one that
    ranks: the rounds' own, unresolved times counted at the resolution. Ranked by the covering
    one, a kernel the harness could not resolve under load fell below a resolved copy of the
    baseline (a 2.4x candidate ranked by 0.099 against 0.874 in tests/report on a fresh clone)."""
    shown = estimate(samples, ranges)
    return shown, (estimate(samples) if ranges else shown)


def rank_of(samples: MeasurementSamples | None, ranges: SampleRanges | None, direction: str,
            shown: list[float] | None = None, history: Any = None) -> float | None:
    """What a ranking compares for a measurement's rounds, as the store ranks its candidates: the
    pessimistic end of the rounds' own interval, or of ``shown`` where wider (a measurement in
    copies: copystats.as_shown), widened for the drift between the measurements of ``history``
    (drift_widened); None without rounds."""
    if not samples:
        return None
    _shown, ranked = shown_and_ranked(samples, ranges or {})
    ranked = drift_widened(as_shown(ranked, shown), samples, history)  # unchanged without either
    return None if ranked is None else rank_from(ranked.value, ranked, direction)


def kept_rounds(samples: MeasurementSamples, ranges: SampleRanges) -> tuple[MeasurementSamples, SampleRanges]:
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
    samples, ranges = kept_rounds(spec.samples or {}, spec.sample_ranges or {})
    est, ranked = shown_and_ranked(samples, ranges) if spec.status == "PASSED" else (None, None)
    # The bench's own interval where wider (copystats.as_shown); the rank too where it was timed in
    # copies, whose t interval the rounds do not give (else it covers unresolved rounds: shown_and_ranked).
    shown = spec.metrics.get("score_interval")
    est, ranked = as_shown(est, shown), (as_shown(ranked, shown) if processes_of(spec.metrics) > 1 else ranked)
    score = est.value if est is not None else spec.score
    lo, hi = (est.lo, est.hi) if est is not None else (None, None)
    return {"code_hash": spec.code_hash, "n_measurements": 1, "contended_measurements": contended_count(spec),
            "score": score, "score_lo": lo, "score_hi": hi,
            "rank_score": rank_from(score, ranked, direction),
            "spread_unknown": unknown_spread(score, lo, hi, samples, 1, ranges),
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


def contended_row(row: sqlite3.Row) -> bool:
    return any_contended(row["contended_measurements"])


def _rank(score: float | None, lo: float | None, hi: float | None, direction: str) -> float | None:
    if score is None:
        return None
    if lo is None or hi is None:
        return score
    return lo if direction == "maximize" else hi


def rank_from(score: float | None, ranked: stats.Estimate | None, direction: str) -> float | None:
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
    """The stored estimate of a candidate row (a point when it has no interval); where the row is
    marked `spread_unknown` (a kernel's few rounds), one that says so (stats.spread_unknown)."""
    groups = _point_groups(row)
    est = stored_estimate(row["score"], row["score_lo"], row["score_hi"], groups, row["n_measurements"])
    if est is not None and "spread_unknown" in row.keys() and row["spread_unknown"] and not stats.spread_unknown(est):
        # Its rounds where the row holds them (a kernel's count rounds, not measurements).
        rounds = (stats.runs_of(groups) if groups else None) or est.n
        est = dataclasses.replace(est, n=min(rounds, stats.EXACT_MIN_RUNS - 1), coverage=min(est.coverage, 0.5))
    return est


def stored_estimate(score: float | None, lo: float | None, hi: float | None, groups: dict | None,
                    n_measurements: int | None) -> stats.Estimate | None:
    """A stored score as an estimate: its interval, the runs behind it and what they cover (the
    rows' reader and the store's writers alike, so the rank a row is given and every decision read
    from it agree)."""
    if score is None:
        return None
    if lo is None or hi is None:
        return stats.Estimate(score, score, score, 1, 0.0)
    if lo == hi:  # a point: exact only where enough runs agree on it (stats.spread_unknown)
        return stats.Estimate(score, lo, hi, stats.runs_of(groups) or n_measurements or 1, 0.0)
    if groups and kind_of(groups) == "program":  # its runs, and what an interval of so few covers
        return stats.Estimate(score, lo, hi, stats.runs_of(groups) or 1, stats.runs_coverage(groups))
    return stats.Estimate(score, lo, hi, n_measurements or 1)


def samples_spread_unknown(samples: MeasurementSamples | None) -> bool:
    """Whether one measurement's rounds are too few for a 95% interval (unknown_spread)."""
    est = estimate(samples)
    return est is None or bool(unknown_spread(est.value, est.lo, est.hi, dict(samples or {}), 1))


def runs_if_unknown(row) -> int | None:
    """The runs behind a row's score where they are too few for a 95% interval (its
    `spread_unknown`), else None: what listings show as `runs`."""
    if "spread_unknown" not in row.keys() or not row["spread_unknown"]:
        return None
    est = estimate_of(row)
    return est.n if est is not None else None


def every_run_alike(row) -> bool:
    """Whether a row's rounds (its ``point_samples`` or ``samples``) are enough runs, every one alike."""
    groups = _point_groups(row)
    return bool(groups) and stats.every_run_alike(groups)


def best_runs(row) -> int | None:
    """What get_run says of its best's runs: where its interval has no width, or where its runs are
    too few for a 95% interval, how many (else None): the runs its estimate counts."""
    if row["score_lo"] != row["score_hi"] and not row["spread_unknown"]:
        return None
    est = estimate_of(row)
    return est.n if est is not None else None


def rank_key(rank_score: float | None, score: float | None, interval: list[float] | None, direction: str,
             spread_unknown: bool) -> tuple[int, float] | None:
    """What every ranking compares, as a key where larger is better: a score with a 95% interval
    before one from too few runs (rank_order, in SQL), then the pessimistic end of the interval."""
    value = ranking_of(rank_score, score, interval, direction)
    if value is None:
        return None
    return (0 if spread_unknown else 1, value if direction == "maximize" else -value)


def row_rank_key(row, direction: str) -> tuple[int, float] | None:
    """rank_key of a candidate row (its stored rank_score and spread_unknown)."""
    return rank_key(row["rank_score"], row["score"], None, direction, bool(row["spread_unknown"]))


def unknown_spread(score: float | None, lo: float | None, hi: float | None, groups: dict | None,
                   n_measurements: int | None, ranges: SampleRanges | None = None) -> int:
    """The `spread_unknown` column: 1 where a score is from too few runs for a 95% interval (a
    program's one to four runs, a claim without rounds, a kernel's rounds too few for one). Every
    ranking puts these after the candidates whose interval is known (rank_order): a single lucky
    run outranked a candidate whose five runs spanned it, so measuring more lost rank (review
    2026-12-04). estimate_of reads the mark back, so every decision agrees with the rank."""
    est = stored_estimate(score, lo, hi, groups, n_measurements)
    if est is None:
        return 0
    if stats.spread_unknown(est):
        return 1
    # A kernel's stored interval reads as 95%; its own rounds say whether they give one (one round
    # whose times were unresolved read [1.2, 4.0] and ranked first by its 2.3; review 2026-12-04).
    if groups and kind_of(groups) == "kernel" and (stats.runs_of(groups) or 0) < stats.EXACT_MIN_RUNS:
        try:
            own = shown_and_ranked(groups, ranges or {})
        except ValueError:
            return 1
        return int(any(e is None or stats.spread_unknown(e) for e in own))
    return 0


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


def drift_points(samples: MeasurementSamples, history: Any) -> list[tuple[float, float, float]]:
    """The measurements in ``history`` (a pooled candidate's metrics["measurements"]) that the drift
    between measurements counts, each ``(score, lo, hi)``: a kernel's quiet, passed ones with their
    own interval. A kernel's rounds are one process pair's each time; a program's runs are its
    scores, each a draw already, so none. A measurement on a contended machine is left out: load
    widens its interval where it counts (widened_for_load), it does not place the pool (a busy
    39.5x beside a quiet 15.9x would pull the interval's lower end down to 10)."""
    if kind_of(samples) != "kernel" or not isinstance(history, list):
        return []
    measured = []
    for h in history:
        interval = interval_pair(*h["interval"]) if isinstance(h, dict) and isinstance(h.get("interval"), list) \
            and len(h["interval"]) == 2 else None
        if interval and h.get("status") == "PASSED" and isinstance(h.get("score"), (int, float)) \
                and h.get("contended") is not True:
            measured.append((float(h["score"]), *interval))
    return measured


def drift_widened(est: stats.Estimate | None, samples: MeasurementSamples, history: Any) -> stats.Estimate | None:
    """``est`` widened where the measurements in ``history`` differ by more than their own
    intervals allow (drift_points, copystats.between_measurements)."""
    return est if est is None else between_measurements(est, drift_points(samples, history))


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


def overlaps(a: stats.Estimate | None, b: stats.Estimate | None) -> bool:
    return a is not None and b is not None and a.lo <= b.hi and b.lo <= a.hi


def intervals_apart(a: list[float] | None, b: list[float] | None) -> bool:
    """Whether two [lo, hi] intervals, as shown, leave each other out (a missing one never is apart)."""
    return bool(a and b) and (a[1] < b[0] or b[1] < a[0])


def clears_start(own: stats.Estimate, x0: float, direction: str) -> bool:
    """Whether a score's interval clears the run's starting score x0, a known number (not a point
    of unknown spread): the trajectory's first new best and run_report's first version alike."""
    return stats.clears(own, stats.Estimate(x0, x0, x0, stats.EXACT_MIN_RUNS, 1.0), direction)


def widened_for_load(est: stats.Estimate | None, busy: bool, kernel: bool) -> stats.Estimate | None:
    """An estimate as it counts against another evaluation: as it is where it was measured
    quietly; a busy kernel's widened (stats.load_widened); none for any other busy one (programs are not
    timed: their scores are not marked busy)."""
    if est is None or not busy:
        return est
    if not kernel:
        return None
    return stats.load_widened(est)


def kernel_row(row) -> bool:
    """Whether a trajectory row holds a kernel's rounds (readsql.KERNEL_ROUNDS)."""
    return "kernel_rounds" in row.keys() and bool(row["kernel_rounds"])


def beyond(a: float, b: float, direction: str) -> bool:
    """Whether ``a`` lies on the better side of ``b`` in the run's direction."""
    return a > b if direction == "maximize" else a < b
