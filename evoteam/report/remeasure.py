"""Fair numbers after the fact: a run's finalists (the best candidate of every team version, the
best few of a run without a team, or named candidates) measured again in ONE interleaved batch
with the baseline, each finalist's new rounds recorded as one more measurement of it, and which
rankings that changed.

Scores recorded during a run come from different hours, loads and sometimes machines. In one
batch every round times every finalist (and a copy of the baseline, an A/A check) on the same
fresh inputs, in a rotating order, so a drift of the machine touches all of them alike (on a
kernel kit of up to batchruns.COPIED_SIDES sides, each side and the baseline in three processes,
so that what differs between processes is measured, not assumed: copies.py). The new
rounds are recorded as a measurement of each finalist (same code hash: the store pools them into
the candidate), and the set is stored as an artifact of kind ``measurement_set`` in the run. A
dev batch also keeps every two finalists' paired rounds (kind ``comparison``,
knowledge/comparisons.py): version gains pool them with compares of the same two.

**The rule that says a ranking changed.** Finalists are ordered as the store ranks them (the
pessimistic end of their rounds' own interval: the lower bound when maximising) before the batch (as
recorded) and after it (pooled with the new rounds). Two finalists whose order reversed are listed
in ``changed`` when their intervals were apart before or are apart after: a clear ranking that no
longer holds, or one that now is clear; a new top is also a change where the paired rounds of the
two find it better (``apart_by_pairs``). (Without named candidates, where pooling the batch's rounds
makes a candidate that was not measured a version's best, the call measures a batch again with it
added, up to FINALIST_PASSES batches: the set is the last batch, and "before" is before the call.)
Finalists whose intervals overlap both times can trade places on noise alone (three equally fast
ones did in more than half of re-measurements, review of 2026-12-03), and that is not a change.
``within_noise_of_top`` lists the finalists the top is not established as better than: as the paired
rounds of the two decide it where they do (``apart_by_pairs``), else those whose interval after the
batch overlaps the top one's.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from evoteam import stats
from evoteam.config import Settings
from evoteam.copystats import processes_of
from evoteam.report.batchruns import PairedRounds, measure_sides, processes_per_side
from evoteam.report.finalists import FINALIST_PASSES, MAX_CANDIDATES, default_sides, estimate_seconds, unmeasured_leaders
from evoteam.report.measurementset import MeasurementSet, Remeasured
from evoteam.servers.bench.measurement.machine import QUIET_WHEN
from evoteam.report.pairorder import note_order_against_pairs
from evoteam.report.styles import drop_style_leads, note_style_top
from evoteam.servers.bench.evaluation.settle import earlier_runs, every_alike
from evoteam.servers.bench.models import BASELINE_ID
from evoteam.servers.knowledge.measurements import intervals_apart, rank_key, rank_of, samples_spread_unknown
from evoteam.servers.knowledge.models import ArtifactCreate, Candidate
from evoteam.servers.knowledge.store import KnowledgeStore
from evoteam.servers.knowledge.listing import all_artifacts
from evoteam.servers.knowledge.errors import Forbidden, TooLarge
from evoteam.servers.knowledge.comparisons import dev_comparisons, keep_comparisons, paired_verdict, record_of
from evoteam.servers.knowledge.verified import MEASUREMENT_SET

KIND = MEASUREMENT_SET
BASELINE = BASELINE_ID  # the kit's baseline in a set's entries
BUSY_POOLING = ": the new rounds pool with these"
BUSY_NOTE = ("measured on a busy machine (contended): every finalist shared the same rounds, but the intervals are "
             "wider, so a quiet batch may tell apart finalists this one does not; call it again when the "
             f"machine is quieter {QUIET_WHEN}" + BUSY_POOLING)
COPY_NOTE = "a copy of the kit's baseline timed as a finalist: an A/A check, whose interval holds 1 in a fair batch"


def judge(mset: MeasurementSet) -> None:
    """Apply the rule (module docstring): ranks before and after, changed, within noise of the top."""
    direction = mset.direction
    cands = [e for e in mset.entries if e.candidate_id != BASELINE]

    def order(rank) -> list[Remeasured]:
        known = [(e, key) for e in cands if (key := rank(e)) is not None]
        return [e for e, _ in sorted(known, key=lambda pair: pair[1], reverse=True)]

    before = order(lambda e: rank_key(e.rank_score_before, e.recorded_score, e.recorded_interval, direction,
                                      e.spread_unknown_before))
    after = order(lambda e: rank_key(e.rank_score_after, e.pooled_score if e.pooled_score is not None else e.score,
                                     _after(e), direction, e.spread_unknown_after))
    for rank, e in enumerate(before, 1):
        e.rank_before = rank
    for rank, e in enumerate(after, 1):
        e.rank_after = rank
    mset.order_before = [e.candidate_id for e in before]
    mset.order_after = [e.candidate_id for e in after]
    moved = {c for pair in _moved_pairs(cands) for c in pair}
    mset.changed = [c for c in mset.order_before if c in moved]
    if after:
        top = after[0]
        t_lo, t_hi = (top.pooled_interval or top.score_interval or [top.score, top.score])
        mset.within_noise_of_top = [e.candidate_id for e in after[1:]
                                    if (iv := e.pooled_interval or e.score_interval) and iv[0] <= t_hi and iv[1] >= t_lo]


def caveats(mset: MeasurementSet) -> None:
    """What the batch itself says about how far its readings can be trusted, in the note: a busy
    machine (``contended`` alone came with no advice, mp42), a top that swapped within noise, and a
    copy of the baseline whose interval left out 1 (the batch may have leaned by that much)."""
    if mset.contended:  # (where nothing pools, the note already says so: the last clause would contradict it)
        mset.add_note(BUSY_NOTE if mset.pooled else BUSY_NOTE.removesuffix(BUSY_POOLING))
    before, after = mset.order_before[:1], mset.order_after[:1]
    if before and after and before != after and before[0] in mset.within_noise_of_top:  # swapped silently (mp44)
        mset.add_note(f"the top moved within noise, {before[0]} to {after[0]}: not a change; "
                      "report the two as one result, or bench.compare them by id to tell them apart")
    by_id = {e.candidate_id: e for e in mset.entries}
    # Only where every finalist has an interval: one from too few runs is never listed within noise
    # of the top, its place unknown (review 2026-12-06).
    measured = all(c in by_id and _after(by_id[c]) and not by_id[c].spread_unknown_after for c in mset.order_after)
    if len(after) == 1 and len(mset.order_after) > 1 and mset.order_before == mset.order_after and measured and \
            not (mset.changed or mset.within_noise_of_top or mset.better_than_top):
        # The lists a reply leaves out when empty read as a promise it did not keep (mp51, mp52).
        mset.add_note(f"the order held and {after[0]} leads the others beyond noise: no rank changed, none is within "
                      "noise of the top or better than it (changed, within_noise_of_top, better_than_top: absent)")
    elif mset.within_noise_of_top:  # the rest of the order said, not left to an absence (mp79)
        below = [c for c in mset.order_after[1:] if c not in mset.within_noise_of_top + mset.better_than_top and
                 c in by_id and _after(by_id[c]) and not by_id[c].spread_unknown_after]
        if below:
            mset.add_note(f"{', '.join(below)} rank behind the top beyond noise")  # either direction (rev79)
    copy = next((e for e in mset.entries if e.candidate_id == BASELINE), None)
    readings = [("dev", copy.score, copy.score_interval), ("held-out", copy.heldout_score, copy.heldout_interval)] \
        if copy is not None else []
    if held := [split for split, score, iv in readings if score is not None and iv and iv[0] <= 1 <= iv[1]]:
        copy.note = f"{COPY_NOTE}: it held 1 on {' and '.join(held)}"  # said, not left to the reader (mp78)
    for split, score, iv in readings:
        if score is not None and iv and not iv[0] <= 1 <= iv[1]:
            read = stats.describe(stats.Estimate(score, *iv, 10), "×")
            mset.add_note(f"the baseline's copy read {read} on {split}, apart from 1: this batch may have leaned by "
                          "about that much (or it is the 1 in 20 a fair batch gives), so a difference of that size "
                          "between finalists there is not established (bench.compare the two to settle it)")


def _moved_pairs(cands: list[Remeasured]) -> set[frozenset[str]]:
    """The two candidates of every swap in the order whose unpaired intervals were apart before or
    after. Only a place known both times can have moved (a held-out-only batch has no order after)."""
    known = [e for e in cands if e.rank_before is not None and e.rank_after is not None]
    moved: set[frozenset[str]] = set()
    for i, x in enumerate(known):
        for y in known[i + 1:]:
            reversed_ = (x.rank_before < y.rank_before) != (x.rank_after < y.rank_after)
            # A score from too few runs has no interval to be apart by: two single runs' points were
            # "apart before" and their swap read as a change (model-play 2026-12-04).
            apart = (intervals_apart(x.recorded_interval, y.recorded_interval)
                     and not (x.spread_unknown_before or y.spread_unknown_before)) or \
                    (intervals_apart(_after(x), _after(y)) and not (x.spread_unknown_after or y.spread_unknown_after))
            if reversed_ and apart:
                moved.add(frozenset((x.candidate_id, y.candidate_id)))
    return moved


def apart_by_pairs(mset: MeasurementSet, records: list) -> None:
    """``within_noise_of_top`` as the paired rounds of each finalist and the top (every batch and
    compare of the two, pooled) decide it, where they do: two unpaired intervals overlapped where
    the run's version gain, from the same rounds paired, read significant (model-play,
    2026-12-03). Listed where the pair finds no difference or the finalist better (the top is
    then not established as better: the order came from the unpaired bounds); left out where the
    top is significantly better; by the intervals where the pair decides nothing."""
    if not mset.order_after:
        return
    top, listed, better = mset.order_after[0], set(mset.within_noise_of_top), set()
    before = {e.candidate_id: e.rank_before for e in mset.entries}
    pairs = _moved_pairs([e for e in mset.entries if e.candidate_id != BASELINE])
    for c in mset.order_after[1:]:
        # The top is the best of the finalists: read at the confidence picking it needs.
        found = paired_verdict(records, c, top, picked_of=len(mset.order_after))
        if found is None or not found.decides:
            continue
        top_better = found.significant and stats.favours_b(found.estimate[0], found.kind, mset.direction)
        listed = listed - {c} if top_better else listed | {c}
        if not found.significant and found.picked_of > 1 and (named := paired_verdict(records, c, top)) and \
                named.significant and stats.favours_b(named.estimate[0], named.kind, mset.direction):
            # "within noise" beside a version gain "worse, significant" from the same rounds (mp43)
            mset.add_note(f"{c} is within noise of the top at the {stats.picked_confidence(found.picked_of):.1%} "
                          f"a top picked of {found.picked_of} needs; at 95% (a comparison named beforehand) its "
                          f"paired rounds find {top} better")
        if found.significant and not top_better:  # said, not left as "within noise" (review 2026-12-04)
            better.add(c)
        # A new top that the paired rounds find better than the old one is a change, however the
        # unpaired intervals overlap (the top two swapped with no `changed` and nothing within noise
        # of the top: a reply that contradicted itself; model-play 2026-12-04).
        if top_better and None not in (before.get(c), before.get(top)) and before[c] < before[top]:
            pairs.add(frozenset((c, top)))
        # A swap the paired rounds find no difference in is no change, however the unpaired
        # intervals parted (a renamed copy "changed" the top and read significant: mp38).
        if not found.significant:
            pairs.discard(frozenset((c, top)))
    moved = {c for pair in pairs for c in pair}
    mset.within_noise_of_top = [c for c in mset.order_after[1:] if c in listed]
    mset.better_than_top = [c for c in mset.order_after[1:] if c in better]
    mset.changed = [c for c in mset.order_before if c in moved]


def _after(e: Remeasured) -> list[float] | None:
    return e.pooled_interval if e.pooled_score is not None else e.score_interval




async def remeasure_run(settings: Settings, store: KnowledgeStore, run_id: str, *, rounds: int = 10,
                        split: str = "dev", candidate_ids: list[str] | None = None,
                        progress: Callable[[str], None] | None = None) -> MeasurementSet:
    """Measure the finalists (or ``candidate_ids``) and, on a kernel kit, a copy of the baseline
    again in a batch of ``rounds`` rounds (more batches where pooling promoted an unmeasured one); record each finalist's new rounds as a measurement of it; store and return
    the measurement set."""
    from evoteam.errors import DomainError
    from evoteam.servers.bench.formats.kits import find_kit

    run = await store.get_run(run_id)
    if not run.kit:
        raise DomainError(f"run {run_id} is not bound to a kit: there is nothing to re-measure against")
    kit = find_kit(settings, run.kit)
    if candidate_ids and BASELINE in candidate_ids:
        if kit.manifest.kind != "kernel":
            raise DomainError(f"kit {kit.name} is a program kit: a batch has no baseline in it; name candidates "
                              "(cand_...), or none for each version's best")
        # A kernel kit's batch always times a copy of the baseline: naming it asks for nothing more.
        candidate_ids = [c for c in candidate_ids if c != BASELINE]
    if candidate_ids and len(candidate_ids) > MAX_CANDIDATES:  # one batch times every side in every round
        raise DomainError(f"remeasure takes at most {MAX_CANDIDATES} candidates in one batch, not "
                          f"{len(candidate_ids)}: name the finalists (default: each version's best)")
    why = None  # why the default finalists beside each version's best (finalists.picked_why)
    if candidate_ids:
        chosen = [await store.get_candidate(cid) for cid in dict.fromkeys(candidate_ids)]  # each once
        if other := next((c for c in chosen if c.run_id != run_id), None):
            raise DomainError(f"every candidate must belong to run {run_id}; {other.id} is of run {other.run_id} "
                              "(bench.compare measures a candidate of another run against one of yours)")
    else:
        sides, why = await default_sides(store, run_id)
        chosen = [await store.get_candidate(c.id) for c in sides]
    offered = len(chosen)
    chosen = [c for c in chosen if c.code]
    if not chosen:
        raise DomainError(f"run {run_id} has no ranked candidate with code to re-measure")
    entries = [_entry(c) for c in chosen]
    codes = {c.id: c.code for c in chosen}
    start = kit.starting_point()
    if start is not None and kit.manifest.kind == "kernel":
        entries.insert(0, Remeasured(candidate_id=BASELINE, note=COPY_NOTE))
        codes[BASELINE] = start.read_text(encoding="utf-8")
    splits = ["dev", "heldout"] if split == "all" else [split]
    from evoteam.servers.bench.evaluation.binding import check_binding, timed_alike
    from evoteam.servers.bench.measurement.method import TIMING_METHOD

    # Asked before measuring: a run of other kit content is refused at once; a run timed by an
    # earlier method is still measured (one batch compares its finalists soundly) but nothing is
    # pooled into its candidates.
    method = TIMING_METHOD if kit.manifest.kind == "kernel" else None
    pooled = await timed_alike(store, run_id, method)
    await check_binding(store, kit, run_id, method if pooled else None)
    if progress:
        each = processes_per_side(kit, len(entries))
        # Said with the baseline: "3 sides in 3 processes each" read as 9 processes, and 12 ran (mp42).
        copied = f" and the baseline, {each} processes each," if each > 1 else ""
        seconds = estimate_seconds(kit, len(entries), rounds, chosen, each) * len(splits)
        progress(f"{len(entries)} sides{copied} x {rounds} rounds on {', '.join(splits)}: about {seconds:.0f} s")
    heldout_set = None
    if "heldout" in splits:  # the set the batch draws from (evaluate's metrics.heldout_set)
        from evoteam.servers.bench.formats.kits import heldout_choice

        heldout_set = heldout_choice(settings, kit).set_id
    contended, unkept, batches, added, per_side = False, [], 0, [], None
    for attempt in range(FINALIST_PASSES if "dev" in splits else 0):
        busy, each = await _batch(settings, store, kit, run, entries, codes, "dev", rounds, pooled, progress, unkept)
        contended, per_side = contended or busy, _fewest(per_side, each)
        batches += 1
        if candidate_ids or not pooled or attempt == FINALIST_PASSES - 1:
            break
        # Pooling moved ranks: a finalist not measured may now be a version's best (module docstring).
        sides = MAX_CANDIDATES - sum(e.candidate_id != BASELINE for e in entries)
        newer = [await store.get_candidate(c.id)
                 for c in (await unmeasured_leaders(store, run_id, set(codes)))[:max(0, sides)]]
        newer = [c for c in newer if c.code]
        if not newer:
            break
        if progress:
            progress(f"a version's best changed: measuring again with {', '.join(c.id for c in newer)}")
        entries += [_entry(c) for c in newer]
        codes.update({c.id: c.code for c in newer})
        added += [c.id for c in newer]
    short = [e.candidate_id for e in entries if e.settled is False and (e.runs or rounds) < rounds]  # dev's (mp59)
    if "heldout" in splits:  # once, on the finalists the dev batches settled
        busy, each = await _batch(settings, store, kit, run, entries, codes, "heldout", rounds, pooled, progress)
        contended, per_side = contended or busy, _fewest(per_side, each)
    mset = MeasurementSet(run_id=run_id, kit=kit.name, measured_at=datetime.now(UTC), rounds=rounds, splits=splits,
                          direction=run.direction, entries=entries, contended=contended, pooled=pooled,
                          heldout_set=heldout_set, batches=max(1, batches), added_after_pooling=added,
                          processes_per_side=per_side,
                          note=None if pooled else (
                              f"run {run_id} was timed by an earlier timing method than this batch (evoteam's "
                              f"method {TIMING_METHOD}; docs/bench.md, Rounds): the recorded scores and these rounds "
                              "are not comparable, so the new rounds were not pooled into the finalists; compare the "
                              "finalists by this batch's scores (now), and start a new run to go on"))
    if why and offered > 1:  # one alone: the note below says why
        mset.add_note(why)
    if short:
        mset.add_note(f"{', '.join(short)} ran fewer times than rounds ({rounds}) on dev: its earlier runs count "
                      "toward them; a larger rounds runs more")
    records = await dev_comparisons(store, run_id, kit.name)
    if unkept:  # the rounds still pooled into the candidates; only the version gains cannot use them
        mset.add_note(f"the finalists' paired rounds were not kept: {unkept[-1][0]}")
        records += [r for _, batch in unkept for r in batch]  # this call's verdicts still read them
        mset._kept = False
    judge(mset)
    apart_by_pairs(mset, records)
    await drop_style_leads(store, mset, records)
    caveats(mset)
    await note_style_top(store, mset, records)
    await note_order_against_pairs(store, mset, records)
    if not candidate_ids and offered == 1 and not added:  # a ranking of one (mp46)
        mset.add_note("only the run's best was re-measured: no other ranked candidate could lead it (there is "
                      "none, or each is worse by paired rounds or apart by intervals); name candidate_ids to "
                      "re-measure others beside it")
    # Stored as the bench (in process it holds the verifier capability; over a shared server the
    # token decides): an older set without paired rounds decides a busy version's gain (report/data.py).
    bench = store.with_actor(store.actor.model_copy(update={"verifier": True}))
    try:
        await bench.put_artifact(ArtifactCreate(run_id=run_id, kind=KIND,
                                                name=f"remeasure-{mset.measured_at:%Y%m%dT%H%M%S}.json",
                                                text=mset.model_dump_json(indent=2)))
    except (Forbidden, TooLarge) as exc:  # a token that is not a verifier's, a tiny limit; any other failure is raised
        mset.add_note(f"not stored in the run: {exc}")
        mset._kept = False
    return mset


def _fewest(a: int | None, b: int | None) -> int | None:
    """The processes a side every batch of the call timed in: the fewest (None: a program's)."""
    return min(a, b) if a is not None and b is not None else (a if b is None else b)


def _entry(c: Candidate) -> Remeasured:
    """A finalist as recorded before this call measured it."""
    return Remeasured(candidate_id=c.id, team_version=c.provenance.team_version, recorded_score=c.score,
                      recorded_interval=c.score_interval, rank_score_before=c.rank_score,
                      spread_unknown_before=c.runs is not None, recorded_runs=c.runs)


async def _batch(settings: Settings, store: KnowledgeStore, kit, run, entries: list[Remeasured],
                 codes: dict[str, str], split: str, rounds: int, pooled: bool,
                 progress: Callable[[str], None] | None, unkept: list | None = None) -> tuple[bool, int | None]:
    """Every entry measured in one batch on ``split``, its new rounds pooled into its candidate
    (``pooled``); whether the machine was contended, and the processes each side was scored by (a
    kernel kit's; None for a program's). Paired rounds the store did not keep go to ``unkept`` with
    the reason."""
    from evoteam.servers.bench.evaluation.core import record_evaluation

    earlier = await _earlier_runs(store, entries, kit) if split == "dev" and kit.manifest.kind == "program" else {}
    # Exact before (5+ runs alike): more runs give the same number, so none is made (mp29, 2026-12-04).
    exact = {cid for cid, runs in earlier.items() if every_alike(runs, [])}
    left = {cid: code for cid, code in codes.items() if cid not in exact}
    results, paired = await measure_sides(settings, kit, left, split, rounds, progress, earlier) if left else ({}, None)
    contended = False
    for e in entries:
        if e.candidate_id in exact:
            await _as_recorded(store, e)
            continue
        r = results[e.candidate_id]
        contended = contended or r.contended
        if r.status != "PASSED":
            e.status = r.status
        if kit.manifest.kind == "program":
            made = list((r.samples or {}).get("program") or [])
            # Exact (5+ alike with the earlier runs): the rest would give the same number (settle.settled).
            e.settled = split == "dev" and r.status == "PASSED" and every_alike(earlier.get(e.candidate_id, []), made)
            # Said: a model could not tell what a 104 s call had run (mp36); a failure has no count here.
            e.runs = len(made) or None
        if split == "dev":
            e.score, e.score_interval = r.score, r.score_interval
        else:
            e.heldout_score, e.heldout_interval = r.score, r.score_interval
        ranked_by_store = False
        if e.candidate_id != BASELINE and pooled:
            await record_evaluation(settings, store, kit, r, codes[e.candidate_id], run_id=run.id,
                                    notes=f"re-measured in one batch ({rounds} rounds) by bench.remeasure")
            if split != "dev":
                e.heldout_candidate_id = r.candidate_id
            if split == "dev":
                e.pooled_score, e.pooled_interval = r.candidate_score, r.candidate_interval
                e.n_measurements = r.n_measurements
                if r.candidate_id:  # ranked as the store ranks the pooled candidate
                    pooled_now = await store.get_candidate(r.candidate_id)
                    e.rank_score_after, e.spread_unknown_after = pooled_now.rank_score, pooled_now.runs is not None
                    e.pooled_runs = pooled_now.runs
                    ranked_by_store = True
        if split == "dev" and not ranked_by_store:  # nothing pooled: this batch's rounds alone
            # In copies, by the interval shown (its processes' t interval), as the store ranks such a measurement.
            e.rank_score_after = rank_of(r.samples, r.sample_ranges, run.direction,
                                         r.score_interval if processes_of(r.metrics) > 1 else None)
            e.spread_unknown_after = samples_spread_unknown(r.samples)
    if split == "dev":
        records = _pairs(kit, results, paired, contended, earlier if pooled else None)
        if (why := await keep_comparisons(store, run.id, records, "remeasure")) and unkept is not None:
            unkept.append((why, records))
    # As the sides were scored: one that fell back to its first process (a baseline copy failed) says 1.
    scored = [processes_of(r.metrics) for r in results.values() if r.metrics]
    return contended, (min(scored, default=1) if paired is not None else None)


async def _as_recorded(store: KnowledgeStore, e: Remeasured) -> None:
    """An exact program's entry, not run again: what the store holds of it, before and after."""
    c = await store.get_candidate(e.candidate_id)
    e.settled, e.runs, e.n_measurements = True, 0, c.n_measurements
    e.pooled_score, e.pooled_interval = c.score, c.score_interval
    e.rank_score_after, e.spread_unknown_after = c.rank_score, False


async def _earlier_runs(store: KnowledgeStore, entries: list[Remeasured], kit) -> dict[str, list[float]]:
    """Each finalist's dev runs recorded before (a program's pooled runs), by candidate id."""
    return {e.candidate_id: await earlier_runs(store, e.candidate_id, kit) for e in entries if e.candidate_id != BASELINE}


def _pairs(kit, results: dict, paired: PairedRounds | None, contended: bool, earlier: dict | None) -> list:
    """Every two passing finalists' paired rounds of this dev batch, kept: a version gain pools them."""
    from evoteam.servers.bench.measurement.method import TIMING_METHOD

    ids = [cid for cid, r in results.items() if cid != BASELINE and r.status == "PASSED" and r.samples]
    at, records = datetime.now(UTC), []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            spread = None
            whole = paired is None and earlier is not None and bool(earlier.get(a)) and bool(earlier.get(b))
            if paired is None:  # a program: every run of each code where both have earlier ones (cumulative)
                samples, ranges = {side: [*(earlier[c] if whole else []), *results[c].samples["program"]]
                                   for side, c in (("a", a), ("b", b))}, None
            else:  # in copies: their processes' contrasts and spread, as a compare keeps them
                samples, ranges, spread = paired.samples(a, b), paired.ranges(a, b), paired.spread(a, b)
            if not all(samples.values()):
                continue
            records.append(record_of(a, b, kit=kit.name, split="dev", kind=kit.manifest.kind, samples=samples,
                                     ranges=ranges, contended=contended, measured_at=at, kit_hash=kit.content_hash,
                                     timing_method=TIMING_METHOD if paired is not None else None, spread=spread,
                                     cumulative=whole))
    return records


async def latest_measurement_set(store: KnowledgeStore, run_id: str) -> MeasurementSet | None:
    """The newest set that ranked two finalists or more, else the newest: a later call for one named
    candidate (or held-out only) ranks nothing, and run_report lost the tie the set before had found
    (mp44)."""
    found = sorted(await all_artifacts(store, run_id, KIND), key=lambda a: (a.provenance.created_at, a.id),
                   reverse=True)
    sets = []
    for artifact in found[:10]:
        try:
            sets.append(MeasurementSet.model_validate_json((await store.get_artifact(artifact.id)).text or "{}"))
        except ValueError:
            sets.append(None)  # a set stored by an older version: re-measure to get one the report can show
        if sets[-1] is not None and len(sets[-1].order_after) >= 2:
            return sets[-1]
    return sets[0] if sets else None
