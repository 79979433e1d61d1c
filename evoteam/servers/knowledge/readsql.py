"""The store's read queries that the command line also runs on its own (a run's best ranked
candidate, its counters, its NDG, the listings of runs, of a run's rows and of tokens), as SQL
text and plain functions with no third-party import. The embedded store (local.py) and the
quick local reads of the command line (quickread.py) both use these, so the two cannot drift
apart: one ranking rule, one set of column names."""

from __future__ import annotations

# The SQL condition (over `candidates`) of a candidate that may rank. Flagged results (the
# harness suspected tampering or a measurement it cannot trust) never rank until reviewed;
# self-reported scores never rank (verified.py says who may verify).
RANKED = "status = 'PASSED' AND score IS NOT NULL AND verified = 1 AND flagged = 0"

# Paired rounds of two of a run's candidates, from bench.compare or a re-measurement's batch, are
# artifacts of this kind, named with this prefix and their split (knowledge/comparisons.py). Where
# the run's best is in a kept pair on the dev split, those rounds may crown another (pairedbest.py):
# this finds such a batch (its JSON names the best; the parameter is the id in double quotes).
COMPARISON = "comparison"
COMPARE_PREFIX = "compare-"
BEST_IN_DEV_PAIRED_ROUNDS = (
    f"SELECT 1 FROM artifacts a JOIN blobs b ON b.sha256 = a.sha256 WHERE a.run_id = ? AND a.kind = '{COMPARISON}' "
    f"AND a.name LIKE '{COMPARE_PREFIX}dev-%' AND instr(CAST(b.data AS TEXT), ?) > 0 LIMIT 1")

# A zero-width score's rounds, and a program's (one short list), so a reader can count the runs
# behind it (measurements.estimate_of): one run, a few alike, exact, or too few for a
# 95% interval. A kernel's rounds (every workload's) are left unread.
POINT_SAMPLES = ("CASE WHEN score_lo = score_hi OR substr(samples, 1, 11) = '{\"program\":' THEN samples END "
                 "AS point_samples")

# A row's source where it may say its output style (knowledge/standing.py row_style): the code
# where it names destination passing style or is a Solution JSON, '' for a Python file that does
# not (it returns its outputs), NULL for none. Not every code: a trajectory is read on every evaluation.
STYLE_CODE = ("CASE WHEN code IS NULL THEN NULL WHEN code LIKE '%DESTINATION_PASSING_STYLE%' "
              "OR ltrim(code, ' \t\n\r') LIKE '{%' THEN code ELSE '' END AS style_code")

# Whether a row's rounds are a kernel's (timed: a busy one's interval counts widened), read without
# its rounds: measurements.kernel_row, widened_for_load.
KERNEL_ROUNDS = "(samples IS NOT NULL AND substr(samples, 1, 11) <> '{\"program\":') AS kernel_rounds"

# A run's counters, kept by triggers (counters.py): one row, whatever the size of the run.
COUNTERS = "SELECT candidates, learnings, spent_usd FROM run_counters WHERE run_id = ?"


def rank_order(direction: str) -> str:
    """The ORDER BY clause of every ranking, best first: a score with a 95% interval before one from
    too few runs to have one (measurements.unknown_spread), then by the pessimistic end of the
    interval (a point: its value), then oldest first (by creation, then id, as the report orders)."""
    return f"spread_unknown, rank_score {'DESC' if direction == 'maximize' else 'ASC'}, created_at, id"


def ranked_by(direction: str) -> str:
    """What rank_order orders by, in words for a reader of a listing (a model read a best below
    another candidate's score as stale; model-play 2026-12-04)."""
    end, other = ("lower", "lower") if direction == "maximize" else ("upper", "higher")
    return (f"the {end} end of each score's 95% interval: a score with a wider interval can rank below a {other} "
            "one, and one from too few runs for such an interval (runs) after every one with it")


def best_ranked(direction: str) -> str:
    """The query of a run's best ranked dev candidate (parameter: the run id); a score on other
    workloads (held-out, or split 'all': dev and held-out in one) never makes a run's best."""
    return (f"SELECT id, score, score_lo, score_hi, n_measurements, spread_unknown, {POINT_SAMPLES} FROM candidates "
            f"WHERE run_id = ? AND {RANKED} "
            f"AND split = 'dev' ORDER BY {rank_order(direction)} LIMIT 1")


def leads_from_too_few_runs(direction: str) -> str:
    """Up to 3 of a run's dev candidates from too few runs for a 95% interval whose score is beyond
    the best's, best first (parameters: the run id, the best's score): they rank after the measured
    best. Their score, as run_report's version gains read it (a few runs' median, not the pessimistic
    end of their range: the report waited on a three-run candidate get_run did not name; review
    2026-12-04)."""
    op, order = (">", "DESC") if direction == "maximize" else ("<", "ASC")
    return (f"SELECT id, score, score_lo, score_hi, n_measurements, spread_unknown, {POINT_SAMPLES} FROM candidates "
            f"WHERE run_id = ? AND {RANKED} AND split = 'dev' AND spread_unknown = 1 "
            f"AND score {op} ? ORDER BY score {order}, created_at, id LIMIT 3")


def runs_listing(where: str) -> tuple[str, str]:
    """The count and the page query of the runs matching `where`, newest first (parameters:
    those of `where`, then limit and offset)."""
    return (f"SELECT count(*) FROM runs WHERE {where}",
            f"SELECT * FROM runs WHERE {where} ORDER BY created_at DESC LIMIT ? OFFSET ?")


def run_page(table: str, where: str) -> tuple[str, str]:
    """The count and the page query of a run's rows of `table` matching `where`, oldest first
    (parameters: those of `where`, then limit and offset)."""
    return (f"SELECT count(*) FROM {table} WHERE {where}",
            f"SELECT * FROM {table} WHERE {where} ORDER BY created_at, id LIMIT ? OFFSET ?")


# A run's spend, one maintained line per role and team version (counters.py); the run's spend is
# their sum, in this order.
SPEND_LINES = ("SELECT role, team_version, usd FROM run_spend WHERE run_id = ? AND n > 0 "
               "ORDER BY version_key, role_key")

# The learnings document (learningsdoc.py): a run's count of current learnings, then kind by kind
# its current learnings, most confident and newest first (parameters: run, kind, how many fit).
LEARNINGS_COUNT = "SELECT learnings FROM run_counters WHERE run_id = ?"
LEARNINGS_OF_KIND = ("SELECT * FROM learnings WHERE run_id = ? AND kind = ? AND superseded_by IS NULL "
                     "ORDER BY confidence DESC, created_at DESC LIMIT ?")

# The tokens of a store file, oldest first (auth.py).
TOKENS = "SELECT * FROM tokens ORDER BY created_at"


def normalised_discovery_gain(direction: str, x0: float | None, best_known: float | None,
                              best: float | None) -> float | None:
    """NDG = 100 (E(best) - E(x0)) / (E(SOTA) - E(x0)), direction-aware, uncapped."""
    if x0 is None or best_known is None or best is None or best_known == x0:
        return None
    sign = 1.0 if direction == "maximize" else -1.0
    # Rounded past what a score's digits say: a best equal to an x0 stored with fewer digits read
    # as a gain of 9.5e-14 (model-play 2026-12-04).
    return round(100.0 * sign * (best - x0) / (sign * (best_known - x0)), 9) + 0.0
