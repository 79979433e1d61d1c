"""``compare``: is B faster than A, or is the difference noise?

Kernel kits: A, B and the baseline in one interleaved batch (batch.py), A and B each in three
processes (copies.py): every round times all seven on the same fresh inputs, in a rotating order,
so each round gives a paired ratio of A's time over B's (each the geometric mean of its
processes'). Per workload the ratio is the median over rounds, its interval the wider of the
rounds' order-statistic one and the copies' t interval; over the kit, the geometric mean of the
workloads' medians, its interval the wider of a bootstrap one and the copies'.
``significant`` is true only when that interval excludes 1; ``repeats`` times the kit's rounds
(3 by default: a decision deserves a narrower interval than one evaluation's). Program kits: the
two evaluators run alternately ``repeats`` times each (5 by default: fewer give no 95% interval),
a recorded side only until its runs, with its earlier ones, are 5+ alike (settle.py); the contrast
is B's median score minus A's. On the dev split a side given as a recorded candidate has its runs
pooled into it, as remeasure's are (_pool_runs).

When both sides are recorded candidates of one run, compared on the dev split, the paired rounds are
kept in that run (knowledge/comparisons.py): a version gain between the two pools them with every
other paired batch of the two (compares, re-measurements) in ``run_report``, ``reflect`` and the report page.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

from evoteam import stats
from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation.binding import BindingError, check_binding
from evoteam.servers.bench.confinement import scratch
from evoteam.servers.bench.measurement import copies, timing
from evoteam.servers.bench.measurement.batch import IN_PLACE_CLAUSE, MS_CLAUSE, ms_disagree, run_kernel_batch
from evoteam.servers.bench.evaluation.core import (Progress, _deny_roots, _noop, _run_program, _workload_specs,
                                                   median_run, prepare_candidate, record_evaluation, stored_candidate)
from evoteam.servers.bench.evaluation.settle import earlier_runs, settled
from evoteam.servers.bench.evaluation.standing import run_standing, stands_in_run
from evoteam.servers.bench.formats.kits import find_kit, heldout_choice
from evoteam.servers.bench.models import (BASELINE_ID, ComparedSide, Comparison, Evaluation, PooledComparison, Split,
                                          WorkloadComparison)
from evoteam.servers.bench.measurement.machine import contention_line
from evoteam.passingstyle import within_share
from evoteam.servers.bench.measurement.method import TIMING_METHOD, styles_clause
from evoteam.servers.bench.measurement.session import SideSpec
from evoteam.servers.knowledge.comparisons import (PairedVerdict, dev_comparisons, keep_comparison, paired_verdict,
                                                   record_of)
from evoteam.servers.knowledge.errors import Forbidden
from evoteam.servers.knowledge.standing import x0_is_baseline
from evoteam.servers.knowledge.store import KnowledgeStore

MESSAGE_LIMIT, NOTE_LIMIT = 300, 120
AA_NOTE = "the kit's baseline, timed beside its own rounds: an A/A check, whose interval holds 1 in a fair batch"


def _baseline_file(kit) -> str:
    """The file of the baseline a kernel's speedups are over (the first usable entry: a GPU kit's
    flashinfer one is skipped where flashinfer is missing), a program kit's starting program."""
    if kit.manifest.kind == "kernel":
        solution, _ = kit.baseline_solution()
        if solution is not None and solution["function"] == (kit.manifest.entry or "run"):
            return str(Path(solution["dir"]) / solution["file"])
        start = None
    else:
        start = kit.starting_point()
    if start is None:
        raise DomainError(f"kit {kit.name} has no baseline file (its reference is the baseline): every evaluation's "
                          "speedup is already over it")
    return str(start)


def _side(evaluations: dict[str, Evaluation], label: str, count: int | None = None) -> Evaluation:
    """A side's evaluation: its first process's, or the first of its other processes' that failed
    (a candidate that fails in one of its processes fails), said of the side the caller named."""
    first = evaluations[label]
    if first.status != "PASSED":
        return first
    for other in copies.labels(label, count)[1:]:
        e = evaluations[other]
        if e.status != "PASSED":
            return copies.named_evaluation(e, label)
    return first


def _brief(e: Evaluation, candidate_id: str | None = None, note: str | None = None,
           styles_in_verdict: bool = False, batch: bool = False) -> ComparedSide:
    msg = e.message
    # The comparison's `contended` says it once; each side repeated the same long clause (and lost its end).
    line = contention_line(e.metrics.get("contention") or {}, e.split)
    if msg and line:
        msg = msg.replace("; " + line, "")
    if msg:  # each side's ms against the baseline's: the sides' own ratios are the verdict's (a model read
        # "baseline_ms / candidate_ms is 1.6" of the baseline against itself as a bug; model-play 2026-12-04)
        msg = "; ".join(c for c in msg.split("; ") if MS_CLAUSE not in c)
    if msg and styles_in_verdict:  # the verdict says which side's outputs are outside the clock, once
        msg = "; ".join(c for c in msg.split("; ") if not c.startswith(IN_PLACE_CLAUSE))
    if msg and len(msg) > MESSAGE_LIMIT:  # whole clauses only: a cut "paired ratios (..." read as garbled
        cut = msg.rfind("; ", 0, MESSAGE_LIMIT)
        msg = (msg[:cut] if cut > 0 else msg[:MESSAGE_LIMIT].rsplit(" ", 1)[0]) + "; …"
    # Its note's start: with ids alone a model swapped two candidates' learnings (mp34, 2026-12-05); a
    # kernel side's score is this batch's, not the candidate's, which pools its evaluations (mp63).
    msg = f"in this batch, {msg}" if msg and batch else msg
    note = " ".join((note or "").split())
    note = (note[:NOTE_LIMIT].rsplit(" ", 1)[0] + " …" if len(note) > NOTE_LIMIT else note) or None
    return ComparedSide(candidate_id=candidate_id, note=note, status=e.status, score=e.score,
                        score_interval=e.score_interval, message=msg)


def _ms_note(row: WorkloadComparison) -> str | None:
    """Where a_ms / b_ms reads otherwise than the paired ratio (batch.ms_disagree), which to read."""
    if not (row.a_ms and row.b_ms and row.b_speedup_over_a) or not ms_disagree(row.a_ms / row.b_ms,
                                                                                row.b_speedup_over_a):
        return None
    return (f"a_ms / b_ms is {stats.sig3(row.a_ms / row.b_ms)} but b_speedup_over_a is "
            f"{stats.sig3(row.b_speedup_over_a)}: each ms is one side's own median; read the paired ratio")


def _verdict(ea: Evaluation, eb: Evaluation, est: stats.Estimate | None, kind: str) -> str:
    if ea.status != "PASSED" and eb.status != "PASSED":
        return "neither candidate passed"
    if eb.status != "PASSED":
        return "A passes, B does not"
    if ea.status != "PASSED":
        return "B passes, A does not"
    if est is None:
        return "no measurement to compare"
    what = "B's speedup over A" if kind == "kernel" else "B's score minus A's"
    text = f"{what} {stats.describe(est, '×' if kind == 'kernel' else '')}"
    if not stats.confident(est) and est.coverage > 0:
        # Too few to tell: not a tie ("no significant difference ... is a 75% interval" read as one
        # beside paired differences all on one side; model-play 2026-12-04).
        more = "runs per side (repeats=5 or more)" if kind == "program" else "rounds (a larger repeats)"
        if est.lo == est.hi:  # every run alike, but too few of them to call it exact
            return f"not established: {text}, too few {more} to call the difference exact"
        return f"not established: {text} is a {est.coverage:.0%} interval, too few {more} for a 95% one"
    if not stats.significant(est, kind):
        return f"no significant difference: {text}; the interval includes {stats.no_effect(kind):g}"
    if kind == "kernel":
        return f"{'B' if est.value > 1 else 'A'} is faster: {text}, significant"
    better_b = stats.favours_b(est.value, "program", ea.direction)
    # Its size beside the score: an exact 8.1e-07 read as "significant" alone (mp32, 2026-12-04).
    size = f" ({stats.sig3(abs(100 * est.value / ea.score))}% of A's score)" if ea.score else ""
    return f"{'B' if better_b else 'A'} is better ({ea.direction}): {text}, significant{size}"


async def compare_candidates(settings: Settings, kit: str, a: dict, b: dict, split: Split = "dev",
                             store: KnowledgeStore | None = None, progress: Progress | None = None,
                             repeats: int | None = None, owner: str | None = None) -> Comparison:
    """Compare two candidates (each ``{"candidate_path" | "code" | "candidate_id": ...}``; the
    candidate id "baseline" is the kit's own) in one interleaved batch. The verdict is kept in the
    run when both are its recorded candidates (a program kit's runs pool into them too); a kernel
    kit's rounds are recorded of neither side."""
    progress = progress or _noop
    the_kit = find_kit(settings, kit)
    ok, reason = the_kit.availability()
    if not ok:
        raise DomainError(f"kit {the_kit.name} cannot run here: {reason}")
    kernel = the_kit.manifest.kind == "kernel"
    if repeats is None:  # a kernel batch: three evaluations' rounds; a program: enough runs for a 95% interval
        repeats = 3 if kernel else stats.BOOTSTRAP_MIN_VALUES["program"]
    if not 1 <= repeats <= 20 or (not kernel and repeats < 2):
        raise DomainError(f"repeats must be between {1 if kernel else 2} and 20 (kernel kits: times the kit's rounds;"
                          " program kits: evaluator runs per side)")
    cands, codes, notes = {}, {}, {}
    styled, b_in_place = False, False  # one side writes into given outputs, the other returns its own
    try:
        for label, spec in (("A", a), ("B", b)):
            code, path = spec.get("code"), spec.get("candidate_path")
            if spec.get("candidate_id") == BASELINE_ID:
                code, path = None, _baseline_file(the_kit)
                notes[label] = AA_NOTE if kernel else "the kit's baseline"  # a speedup over itself (mp76)
            elif spec.get("candidate_id"):
                stored = await stored_candidate(store, spec["candidate_id"])
                if stored.split == "heldout" and split == "dev":  # timed and kept under the wrong record (mp44)
                    of = stored.parent_id or "its dev candidate"
                    other = (b if label == "A" else a).get("candidate_id")
                    then = (f"{of} is the other side already: the same code" if other == stored.parent_id else
                            f"compare {of} on the dev split")  # (both advices compared one code with itself; mp45)
                    raise DomainError(f"{stored.id} is a held-out record{' of ' + of if stored.parent_id else ''}: "
                                      f"{then}, or pass split 'heldout'")
                code = codes[label] = stored.code
                notes[label] = stored.notes
            cands[label] = prepare_candidate(the_kit, path, code, settings)
            if kernel:  # its other processes (copies.py), each from a folder of its own
                for other in copies.labels(label)[1:]:
                    cands[other] = prepare_candidate(the_kit, path, code, settings)
        if kernel:
            pair = (copies.labels("A"), copies.labels("B"))
            sides = [SideSpec(label, cands[label].folder, cands[label].file, cands[label].function, cands[label].dps)
                     for label in copies.rotation(*pair, b_first=random.random() < 0.5)]
            found = await run_kernel_batch(settings, the_kit, sides, split, progress, True,
                                           _workload_specs(the_kit, split, settings), _deny_roots(settings, the_kit),
                                           rounds=the_kit.manifest.timing.rounds * repeats)
            ea, eb = _side(found.evaluations, "A"), _side(found.evaluations, "B")
            rows, samples, ranges, kept_offsets = [], {}, {}, []
            for wa, wb in zip(ea.workloads, eb.workloads):
                rounds = found.rounds.get(wa.workload)
                ratios = rounds.group_contrast(*pair) if rounds and wa.status == wb.status == "PASSED" else []
                row = WorkloadComparison(workload=wa.workload, a_status=wa.status, b_status=wb.status,
                                         a_ms=wa.candidate_ms, b_ms=wb.candidate_ms)
                est = copies.workload_estimate(rounds, *pair) if ratios else None
                if est is not None:
                    samples[wa.workload] = ratios
                    ranges[wa.workload] = rounds.group_bounds(*pair)
                    kept_offsets.append(copies.offsets(rounds, *pair))
                    row.b_speedup_over_a, row.interval = est.value, [est.lo, est.hi]
                    row.significant = stats.significant(est)
                    row.note = _ms_note(row)
                rows.append(row)
            passed = ea.status == eb.status == "PASSED" and len(samples) == len(rows)
            spread = copies.spread(kept_offsets) if kept_offsets else None
            est = copies.kit_estimate(timing.kit_estimate(samples, ranges=ranges), spread) \
                if passed and samples else None
            n_rounds = min((len(v) for v in samples.values()), default=None)
            contended = bool(found.contention.get("contended"))
            busy_because = "; ".join(found.contention.get("reasons") or [])
            kind = "kernel"
            # As the workers reported their style at import (what decides how they were timed).
            styled = est is not None and found.styles.get("A") != found.styles.get("B")
            b_in_place = bool(found.styles.get("B"))
        else:
            earlier = {label: await earlier_runs(store, spec.get("candidate_id"), the_kit) if split == "dev" else []
                       for label, spec in (("A", a), ("B", b))}
            # Where the runs will pool, decided before any is made: a refusal after them lost the batch.
            pool_in, not_pooled = await _pool_targets(store, the_kit, a, b, owner) if split == "dev" else ({}, "")
            ea, eb, est, scores, runs = await _program_contrast(settings, the_kit, cands, split, progress, repeats,
                                                                earlier)
            made = {label: len(evals) for label, evals in runs.items()}
            rows, n_rounds, contended, kind, busy_because = [], max(made.values()), False, "program", ""
            spread = None
            # Kept with every earlier run of each side where both pool (cumulative, below): a kept
            # batch of one run a side would decide nothing, and five lucky runs would decide alone.
            samples, ranges = {"a": scores["A"], "b": scores["B"]}, None
    finally:
        for c in cands.values():
            scratch.remove_folder(c.folder)
    verdict = _verdict(ea, eb, est, kind)
    ids = (a.get("candidate_id"), b.get("candidate_id"))
    if styled:
        verdict = _style_lead(verdict, b_in_place, est, ids) + _styles_clause(b_in_place, est)
    whole = False  # a program's record of every run of both codes (ComparisonRecord.cumulative)
    if kind == "program" and est is not None:
        verdict += _settled_clause(made, scores, repeats)
        said = await _pool_runs(settings, store, the_kit, pool_in, codes, runs) if pool_in else ""
        verdict += said + (f"; runs not pooled into the candidates: {not_pooled}" if not_pooled else "")
        whole = len(pool_in) == 2 and "not pooled" not in said and all(earlier.values())
        if not whole:  # this batch's runs alone: a later record's earlier runs will not hold them
            samples = {side.lower(): [e.score for e in runs[side]] for side in ("A", "B")}
    kept, pooled, lead = "", None, ""
    if est is not None and store is not None:
        kept, pooled, lead = await _keep(store, the_kit, a, b, split, kind, contended, samples, ranges, spread,
                                         whole)
    if contended:  # the sides' messages lose their contention clause (_brief): the verdict says it once
        # Load widens a paired interval, it does not make a difference appear (A/A with two busy
        # loops: 0 of 20 significant, docs/bench.md): only "no difference" is in doubt.
        busy = f"; measured on a busy machine (contended{': ' + busy_because if busy_because else ''})"
        # The pooling hint only where this compare was kept: beside "not kept: ... different runs" it
        # told a model to repeat a compare that could not pool (model-play mp34, 2026-12-05).
        # "still excludes no difference" read as "excludes nothing" (mp49).
        # "leaves out 1 (no difference)" read as "no difference" (mp58).
        verdict += (f"{busy}: even the wider interval leaves out {'1' if kind == 'kernel' else '0'}, so the "
                    "difference holds"
                    if est is not None and stats.significant(est, kind) else
                    f"{busy}: its wider interval can hide a small difference"
                    + ("; compares of the same two by id pool into a narrower one, quiet ones most"
                       if "; kept in run" in kept else ""))
    if lead and styled and pooled is not None:
        lead = _style_lead(lead, b_in_place, stats.Estimate(pooled.b_speedup_over_a, *pooled.interval, 0), ids)
    alone = "this batch alone" if kind == "kernel" else "these runs, each side's earlier ones too"
    verdict = f"{lead}; {alone}: {verdict}{kept}" if lead else verdict + kept
    batch = kind == "kernel"
    return Comparison(kit=the_kit.name, split=split, a=_brief(ea, a.get("candidate_id"), notes.get("A"), styled, batch),
                      b=_brief(eb, b.get("candidate_id"), notes.get("B"), styled, batch),
                      b_speedup_over_a=est.value if est else None, interval=[est.lo, est.hi] if est else None,
                      significant=bool(est and stats.significant(est, kind)), rounds=n_rounds, workloads=rows,
                      verdict=verdict, contended=contended, pooled=pooled,
                      heldout_set=heldout_choice(settings, the_kit).set_id if split != "dev" else None)


async def _keep(store: KnowledgeStore, kit, a: dict, b: dict, split: str, kind: str, contended: bool,
                samples: dict, ranges: dict | None, spread: tuple[float, float] | None,
                cumulative: bool = False) -> tuple[str, PooledComparison | None, str]:
    """Keep the verdict and its rounds in the run both sides belong to; what the verdict adds
    about it, every kept batch of the two pooled where this is not the first, and the pool's
    verdict that opens the reply then."""
    ids = [side.get("candidate_id") for side in (a, b)]
    if not all(ids) or split != "dev" or ids.count(BASELINE_ID) == 2:  # only dev rounds decide a version gain
        return "", None, ""
    if BASELINE_ID in ids:
        # A kernel against the baseline, kept in the kernel's run: its paired rounds place it against x0
        # (a busy score's interval counts widened there, so a compare with the baseline, which the texts
        # advise, was the only way to tell and changed nothing; mp53). Read only where x0 is the
        # baseline's own speedup (knowledge/standing.py): elsewhere kept for nothing.
        if kind != "kernel":
            return "", None, ""
        shown = await store.get_candidate(next(i for i in ids if i != BASELINE_ID))
        run = await store.get_run(shown.run_id)
        if not x0_is_baseline(run.x0):
            return "", None, ""
        said = (f"its compares with the baseline pool, and place {shown.id} against x0 where a busy measurement's "
                "widened interval leaves it open")
        compared_with, who = BASELINE_ID, shown.id
    else:
        first, shown = [await store.get_candidate(i) for i in ids]
        if first.run_id != shown.run_id:
            # Said: a compare with a colleague's best was read as pooling like one within a run (model-play 2026-12-04).
            return (f"; not kept: the two are of different runs ({first.run_id}, {shown.run_id}), and only "
                    "compares within a run are kept and pooled"), None, ""
        run = await store.get_run(first.run_id)
        # Short: it ended each of a model's eight compares (190 characters each; mp33, 2026-12-04).
        said = "its verdicts between these two pool every compare and re-measurement of them"
        compared_with, who = first.id, "B"
    if run.kit is not None and run.kit != kit.name:
        return "", None, ""
    if refused := await _unbound(store, kit, run.id):
        return refused, None, ""
    record = record_of(ids[0], ids[1], kit=kit.name, split=split, kind=kind, samples=samples, ranges=ranges,
                       contended=contended, measured_at=datetime.now(UTC), kit_hash=kit.content_hash,
                       timing_method=TIMING_METHOD if kind == "kernel" else None, spread=spread,
                       cumulative=cumulative)
    refused = await keep_comparison(store, run.id, record)
    if refused:
        return f"; not kept in run {run.id}: {refused}", None, ""
    kept = f"; kept in run {run.id}: {said}" + _finished(run)
    # Where B now stands in the run: a compare that made B the run's best said nothing of it (mp46).
    if (line := await run_standing(store, shown, kind, again=True, compared_with=compared_with)) is not None:
        # Named as no part of this pair's verdict: "B in the run: the run's best" after "no significant
        # difference" read as B winning the pair (mp70).
        kept += stands_in_run(who, compared_with, line)
    # The pool is what decides; a model that compared again saw only the newest batch (model-play 2026-12-04).
    found = paired_verdict(await dev_comparisons(store, run.id, kit.name), ids[0], ids[1])
    if found is None or found.batches < 2 or cumulative:  # a program's verdict is over every run: the pool
        return kept, None, ""
    lead, pooled = pooled_clause(found, run.direction)
    return kept, pooled, lead


def _finished(run) -> str:
    """Said where the run was ended: its verdicts still move with what is kept there (mp54: nothing said)."""
    return f" (the run is {run.status}: its verdicts move all the same)" \
        if run.status in ("finished", "failed", "budget_spent") else ""


async def _unbound(store: KnowledgeStore, kit, run_id: str) -> str:
    """Why a compare's rounds may not be kept in ``run_id`` (another kit's content or timing
    method: evaluate refuses to record them there, so its verdicts must not read them), or ""."""
    try:
        await check_binding(store, kit, run_id, TIMING_METHOD if kit.manifest.kind == "kernel" else None)
    except BindingError as exc:
        return f"; not kept in run {run_id}: {exc.reason or exc}"
    return ""


def pooled_clause(found: PairedVerdict, direction: str = "maximize") -> tuple[str, PooledComparison]:
    """What a compare's verdict says first of every kept batch of its two candidates, pooled: what
    the run's verdicts read. Said after this batch's, "no significant difference" here and
    "significant: A is faster" there read as one reply contradicting itself (mp46, 2026-12-06)."""
    value, lo, hi = found.estimate
    pooled = PooledComparison(b_speedup_over_a=value, interval=[lo, hi], significant=found.significant,
                              batches=found.batches)
    # Under a full 95% interval the pool decides nothing, as the run's verdicts read it (review 2026-12-04);
    # a significant one names the better side (it said "significant" beside this batch's "no
    # significant difference"; model-play 2026-12-04).
    better = "B" if stats.favours_b(value, found.kind, direction) else "A"
    said = (f"significant: {better} is {'faster' if found.kind == 'kernel' else 'better'}" if found.significant
            else "no significant difference") if found.decides else \
        f"not established: a {found.coverage:.0%} interval, too few rounds or runs for a 95% one"
    unit = "×" if found.kind == "kernel" else ""
    shown = stats.describe(stats.Estimate(value, lo, hi, found.runs, found.coverage), unit)  # as the batch's
    batches = "both batches" if found.batches == 2 else f"all {found.batches} batches"
    what = "B over A" if found.kind == "kernel" else "B minus A"  # a bare -0.0008 said nothing (mp50)
    return f"{batches} of the two pooled, which the run reads: {what} {shown}, {said}", pooled


async def _program_contrast(settings, kit, cands, split, progress, repeats, earlier: dict[str, list[float]]):
    """A's and B's evaluators alternately (A B, B A, ...), up to ``repeats`` runs each, and each
    side's scores. A side stops once its runs, with its code's earlier dev runs (``earlier``), are
    settled (settle.settled: 5+ alike); its scores then include those earlier runs, which are the
    same number (a compare of two exact programs ran each 5 times, 10 evaluations' time for a
    difference already known; model-play 2026-12-04). A side that failed any run is that run's
    failure, as evaluate with repeats reports it: a contrast of its passing runs alone would hide
    that it fails."""
    runs: dict[str, list[Evaluation]] = {"A": [], "B": []}
    for r in range(repeats):
        for label in (("A", "B") if r % 2 == 0 else ("B", "A")):
            if runs[label] and settled(earlier[label], runs[label]):
                continue
            await progress(len(runs["A"]) + len(runs["B"]), 2 * repeats, f"{label}: run {r + 1}/{repeats}")
            runs[label].append(await _run_program(settings, kit, cands[label], split, _noop))
    scores = {label: [e.score for e in evals if e.status == "PASSED" and e.score is not None]
              for label, evals in runs.items()}
    failed = {label: next((e for e in evals if e.status != "PASSED" or e.score is None), None)
              for label, evals in runs.items()}
    ea, eb = failed["A"] or runs["A"][-1], failed["B"] or runs["B"][-1]
    if ea.status != "PASSED" or eb.status != "PASSED" or not scores["A"] or not scores["B"]:
        return ea, eb, None, scores, runs
    # Each side as its runs' median (its message's figure too: a side's score read 0.383826 beside
    # "overlap = 0.383873", its last run's; mp32, 2026-12-04), on copies: the runs may be recorded.
    ea, eb = (median_run(kit, [e.model_copy(deep=True) for e in runs[label]])[0] for label in ("A", "B"))
    for label in scores:  # every run of its code: a program's runs are not paired (mp61)
        scores[label] = list(earlier[label]) + scores[label]
    for e, label in ((ea, "A"), (eb, "B")):
        own = stats.score_estimate({"program": scores[label]}, "program")
        e.score, e.score_interval = own.value, [own.lo, own.hi]
    return ea, eb, stats.contrast_estimate({"program": scores["A"]}, {"program": scores["B"]}, "program"), scores, runs


async def _pool_targets(store: KnowledgeStore | None, kit, a: dict, b: dict,
                        owner: str | None) -> tuple[dict[str, str], str]:
    """Per side given as a recorded candidate, the run its program runs pool into: its own, where
    that is an active run of this kit and content, and ``owner``'s where given (on the evaluation
    service: evaluate's rule for a re-measurement, core.run_of); and why a side's will not, where
    a reason is worth saying. A compare with the baseline pools its candidate's runs too (they
    were counted as "5 alike" and then run again by the next compare; mp33, 2026-12-04)."""
    targets, why = {}, []
    for label, side in (("A", a), ("B", b)):
        cid = side.get("candidate_id")
        if store is None or not cid or cid == BASELINE_ID:
            continue
        run = await store.get_run((await store.get_candidate(cid)).run_id)
        if run.status != "active" or run.kit not in (None, kit.name) or owner not in (None, run.provenance.user):
            why.append(f"{label}'s run {run.id} is not an active run{' of yours' if owner else ''} of this kit")
            continue
        try:
            await check_binding(store, kit, run.id, None)
        except BindingError as exc:
            why.append(f"{label}'s: {exc.reason}")
            continue
        targets[label] = run.id
    return targets, "; ".join(why)


async def _pool_runs(settings, store: KnowledgeStore, kit, targets: dict[str, str], codes: dict[str, str],
                     runs: dict[str, list[Evaluation]]) -> str:
    """A program's runs of a recorded candidate (_pool_targets), on the dev split, pooled into it
    as remeasure's are: its runs and its rank count them, and the next compare of it stops as soon
    as they settle. Kept out of them, a candidate compared three times ran 12 more times for a
    number known exactly, and one exact over five compare runs ranked after a single unseeded run
    (model-play mp32, 2026-12-04). Only as the bench's verified measurements: a plain token's would
    add unverified copies. A kernel's compare rounds are paired contrasts, and stay so."""
    pooled = []
    for label, run_id in targets.items():
        evals = runs[label]
        if evals and all(e.status == "PASSED" and e.score is not None for e in evals):
            measured = median_run(kit, [e.model_copy(deep=True) for e in evals])[0]
            try:
                await record_evaluation(settings, store, kit, measured, codes[label], run_id=run_id, credit=False,
                                        notes=f"{len(evals)} run(s) by bench.compare", claim=False)
            except (Forbidden, DomainError) as exc:  # the batch's verdict stands; only the pooling is refused
                said = f" ({', '.join(pooled)} pooled)" if pooled else ""
                return f"; runs not pooled into the candidates{said}: {exc}"
            pooled.append(f"{label}'s {len(evals)} into {measured.candidate_id}")
    return f"; runs pooled as evaluations ({', '.join(pooled)})" if pooled else ""


def _style_lead(verdict: str, b_is_dps: bool, est: stats.Estimate | None,
                ids: tuple[str | None, str | None] = (None, None)) -> str:
    """A verdict that names the destination passing side faster by no more than that style's share, said
    as no faster kernel: "B is faster: ..., significant" led a model to crown a same-work rewrite by the
    skill's own rule, while the trajectory and run_report called it no gain (mp57). Not against the baseline
    (``ids``): the run reads speedups over it as measured, style and all (x0, the trajectory), and the
    clause after the verdict tells the style's share (review 2026-12-06)."""
    if est is None or BASELINE_ID in ids:
        return verdict
    dps = "B" if b_is_dps else "A"
    lo = est.lo if b_is_dps else 1 / est.hi  # the destination passing side over the other
    if not within_share(lo) or lo <= 1.0:
        return verdict
    return verdict.replace(f"{dps} is faster: ", "no faster kernel shown: ", 1).replace(
        f"significant: {dps} is faster", "significant, no faster kernel shown", 1)


def _styles_clause(b_is_dps: bool, est: stats.Estimate | None = None) -> str:
    """Said where one side writes into the harness's output slots and the other returns its outputs;
    where the destination-passing side's lead could be that share alone, said too (a supervisor
    credited a significant 1.10x (1.07-1.13) to a role's kernel; mp48)."""
    dps, other = ("B", "A") if b_is_dps else ("A", "B")
    said = "; " + styles_clause(dps, other)
    if est is not None:
        lo, hi = (est.lo, est.hi) if b_is_dps else (1 / est.hi, 1 / est.lo)  # the DPS side over the other
        # Only a significant lead: "the whole of B's lead" was said beside 1.00x and 1.01x (mp58, mp74); a returning
        # side ahead leads despite the style (mp74; twins read 0.89x, the style's cost: mp79); past the share, a kernel's.
        if hi < 1.0 and stats.significant(est, "kernel"):
            said += (f", which favoured {dps} there; {other} leads here even so: a faster kernel, unless the two are "
                     "the same arithmetic (then it is what that style costs here)")
        elif not within_share(lo) and stats.significant(est, "kernel"):
            said += f"; {dps}'s lead, at least {stats.sig3(lo)}x, is more than that: a faster kernel"
        elif within_share(lo) and lo > 1.0:
            # What tells the kernel's own gain: the share is a range measured on other kernels, and a
            # model wrote the same-style copy itself to find 1.29x behind a 1.38x (mp60).
            said += (f", so the whole of {dps}'s lead here may be that style's share, not a faster kernel "
                     f"(compare {other} with {dps} rewritten to return its outputs: one style; where {other} is "
                     f"that already, this is the style's own share here)")
    return said


def _settled_clause(made: dict[str, int], scores: dict[str, list[float]], repeats: int) -> str:
    """Which side stopped before ``repeats`` runs because its runs settled, said once."""
    said = [f"{label} ran {made[label]} time(s): with its earlier runs, {len(scores[label])} alike, "
            "so more give the same number" for label in ("A", "B") if made[label] < repeats and scores[label]]
    return "; " + "; ".join(said) if said else ""
