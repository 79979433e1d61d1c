"""A verified measurement of code a run already holds joins that candidate: its rounds pool, its
history grows, and its score, interval and rank are re-estimated by the rules of
knowledge/measurements.py, inside the store's write."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from typing import Any

import aiosqlite

from evoteam import stats
from evoteam.copystats import between_measurements, interval_pair, measurements_disagree
from evoteam.servers.knowledge.measurements import (DISAGREE, MAX_HISTORY, columns, contended_count, drift_points,
                                                    kept_rounds, kind_of, rank_from, shown_and_ranked, unknown_spread,
                                                    was_contended)
from evoteam.servers.knowledge.models import CandidateCreate, MeasurementSamples, SampleRanges, WorkloadResult
from evoteam.servers.knowledge.readsql import RANKED, rank_order


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
        f"{rank_order(direction)}{' LIMIT 1' if spec.split == 'dev' else ''}",
        (spec.run_id, spec.code_hash, spec.split)) as cur:
        if spec.split == "dev":
            return await cur.fetchone()
        rows = await cur.fetchall()
    held_set = spec.metrics.get("heldout_set")
    return next((r for r in rows if json.loads(r["metrics"] or "{}").get("heldout_set") == held_set), None)


def _pooled_workloads(old: list[dict], new: list[WorkloadResult], samples: MeasurementSamples,
                      ranges: SampleRanges, measurement: int) -> list[dict]:
    """The candidate's workloads with this measurement (its ``measurement``-th) merged in: speedups
    from all the rounds, times from the newest measurement that gave them (said per workload)."""
    by_name = {w["workload"]: dict(w) for w in old}
    if measurement == 2:  # the first measurement's times, kept where this one gives none, say so too
        for w in by_name.values():
            if w.get("candidate_ms") is not None or w.get("baseline_ms") is not None:
                w["ms_from_measurement"] = 1
    for w in new:
        merged = dict(by_name.get(w.workload, {}), **w.model_dump(exclude_none=True))
        if w.candidate_ms is not None or w.baseline_ms is not None:  # both from this one: no mixed pair
            merged.update(candidate_ms=w.candidate_ms, baseline_ms=w.baseline_ms, ms_from_measurement=measurement)
        rounds = samples.get(w.workload)
        # A program's runs are scores, not speedups: its score interval says what they give.
        if rounds and w.status == "PASSED" and merged.get("status") == "PASSED" and kind_of(samples) == "kernel":
            est = stats.censored_ratio_interval(rounds, *ranges.get(w.workload, (None, None)))
            merged.update(speedup=est.value, speedup_interval=[est.lo, est.hi], rounds=len(rounds))
        by_name[w.workload] = merged
    return list(by_name.values())


def _own_interval(spec: CandidateCreate) -> list[float] | None:
    """A measurement's own interval, as the store would show it were it the code's first."""
    shown = columns(spec, "maximize")
    return interval_pair(shown["score_lo"], shown["score_hi"])


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
        samples, ranges = kept_rounds(samples, ranges)
    status = _worse_status(row["status"], spec.status)
    flagged = bool(row["flagged"]) or spec.flagged
    metrics = json.loads(row["metrics"] or "{}")
    history = list(metrics.get("measurements") or [])
    if not history:  # the first measurement, as it was recorded (its row's interval is its own if it is one)
        history.append({"at": row["created_at"], "status": row["status"], "score": row["score"],
                        "interval": interval_pair(row["score_lo"], row["score_hi"])
                        if (row["n_measurements"] or 1) == 1 else None,
                        "user": row["user"], "role": row["role"],
                        "contended": was_contended(metrics)})
    history.append({"at": who["created_at"], "status": spec.status, "score": spec.score,
                    "interval": await asyncio.to_thread(_own_interval, spec) if passed_now else None,
                    "user": who["user"], "role": who["role"], "contended": was_contended(spec.metrics)})
    metrics["measurements"] = history[-MAX_HISTORY:]
    # Off the event loop: up to MAX_ROUNDS_KEPT rounds per workload bootstrap in ~40 ms.
    est, ranked = await asyncio.to_thread(shown_and_ranked, samples, ranges) if status == "PASSED" else (None, None)
    measured = drift_points(samples, metrics["measurements"])  # read once: widens both, and is said
    est, ranked = between_measurements(est, measured), between_measurements(ranked, measured)
    # Said with the candidate (its evaluate reply), so a wider interval after one more measurement is
    # explained; only where they differ at 95%, not wherever the estimate widened a little.
    metrics.pop(DISAGREE, None)
    if est is not None and measurements_disagree(measured):
        metrics[DISAGREE] = True
    score = est.value if est is not None else row["score"]
    lo, hi = (est.lo, est.hi) if est is not None else (None, None)
    rank = rank_from(score, ranked, direction)
    if not passed_now:
        metrics["failed_measurement"] = {"status": spec.status, "message": str(spec.metrics.get("message") or "")[:500]}
    workloads = _pooled_workloads(json.loads(row["workloads"] or "[]"), spec.workloads, samples, ranges,
                                  (row["n_measurements"] or 1) + 1)
    await conn.execute(
        "UPDATE candidates SET status = ?, score = ?, score_lo = ?, score_hi = ?, rank_score = ?, spread_unknown = ?, "
        "samples = ?, n_measurements = n_measurements + 1, contended_measurements = contended_measurements + ?, "
        "flagged = ?, metrics = ?, workloads = ?, sample_ranges = ? WHERE id = ?",
        (status, score, lo, hi, rank, unknown_spread(score, lo, hi, samples, (row["n_measurements"] or 1) + 1, ranges),
         json.dumps(samples) if samples else None,
         contended_count(spec), int(flagged), json.dumps(metrics, default=str), json.dumps(workloads),
         json.dumps(ranges) if ranges else None, row["id"]))
