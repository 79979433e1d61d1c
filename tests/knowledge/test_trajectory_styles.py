"""A lead that is destination passing style's share alone is no new best in the trajectory either.

A same-work rewrite of a run's best into destination passing style (its outputs allocated outside
the clock) was found faster side by side by that style's share; the trajectory announced it as the
run's new best, as did the compare's standing line, while run_report called its version a stall:
the supervisor guide's "the best moved" reads either, so the two disagreed on what progress was
(model-play mp56). Every store kind: the trajectory reads each candidate's style from its code.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime

from evoteam.codehash import code_hash
from evoteam.servers.bench.evaluation.standing import run_standing, standing_line
from evoteam.servers.knowledge.comparisons import keep_comparison, record_of
from evoteam.servers.knowledge.models import CandidateCreate, RunCreate
from evoteam.servers.knowledge.standing import STYLE

RETURNING = "import numpy as np\n\ndef run(x):\n    return x * 2\n"
DPS = "import numpy as np\n\nDESTINATION_PASSING_STYLE = True\n\ndef run(x, out):\n    np.multiply(x, 2, out=out)\n"
DPS_FASTER = "import numpy as np\n\nDESTINATION_PASSING_STYLE = True\n\ndef run(x, out):\n    np.add(x, x, out=out)\n"
# A Solution JSON says its style in its spec (destination passing by default): not read as returning.
SOLUTION = '{"name": "s", "definition": "d", "spec": {"language": "python"}, "sources": []}'


def rounds(center: float, seed: int) -> dict[str, list[float]]:
    rng = random.Random(seed)
    return {w: [center * (1 + rng.uniform(-0.02, 0.02)) for _ in range(20)] for w in ("a", "b", "c")}


async def _record(verifier, run_id: str, code: str, score: float, seed: int) -> str:
    return (await verifier.record_candidate(CandidateCreate(
        run_id=run_id, code=code, code_hash=code_hash(code), status="PASSED", score=score, verified=True,
        samples=rounds(score, seed)))).id


async def _paired(verifier, run_id: str, a: str, b: str, ratio: float) -> None:
    record = record_of(a, b, kit="k", split="dev", kind="kernel",
                       samples={w: [ratio * (1 + (i % 5 - 2) / 200) for i in range(30)] for w in ("a", "b", "c")},
                       ranges=None, contended=False, measured_at=datetime.now(UTC))
    assert await keep_comparison(verifier, run_id, record) is None


async def test_a_lead_within_the_styles_share_is_no_new_best(store, verifier):
    run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    top = await _record(verifier, run.id, RETURNING, 3.0, 1)
    rewrite = await _record(verifier, run.id, DPS, 3.2, 2)
    # Before any compare, the lead says what a compare must find: more than the style's share (a
    # model ran the compare its line promised would settle it, and it did not; mp57).
    before = await run_standing(verifier, await verifier.get_candidate(rewrite), "kernel")
    assert f"within noise of {top}" in before and "it is progress only once their paired rounds find it better by " \
        f"more than destination passing style's share ({rewrite} writes into outputs it is given, {top} returns " \
        "its own: 1.02-1.30x, most on short calls) (bench.compare" in before, before
    # Within the share, the compare it names cannot tell its kernel: one of its own style can (mp77).
    assert before.endswith("; within that share, a compare with a kernel of its own style tells whether its kernel "
                           f"is faster; if {rewrite} and {top} are twins (one arithmetic in both output styles), they "
                           "are one result: no compare"), before
    await _paired(verifier, run.id, top, rewrite, 1.07)  # significant, and no more than the style's share
    points = {p.candidate_id: p for p in (await store.trajectory(run.id)).points}
    assert points[top].new_best
    assert not points[rewrite].new_best and points[rewrite].within_noise_of == top, points[rewrite]
    assert points[rewrite].decided_by == STYLE == "destination passing style's share"
    trajectory = await store.trajectory(run.id)
    # The styles as run_standing reads them: which of the two is ahead by the share is said by them (a
    # returning lead behind a passing best is within noise of it too; mp76). Unknown, neither is named.
    unknown = standing_line(trajectory, rewrite, "×")
    assert unknown.endswith(f"within noise of {top} by destination passing style's share (1.02-1.30x, most on "
                            "short calls): one of the two writes into outputs it is given, so no faster kernel "
                            "either way"), unknown
    styles = {rewrite: "dps", top: "returns"}
    line = standing_line(trajectory, rewrite, "×", styles=styles)
    assert line.startswith(f"leads the run's ranking but is not a new best: it is ahead of {top} by no more than "
                           "destination passing style's share"), line
    # No advice that the tools could not follow up: a compare with some third candidate decides nothing here.
    assert line.endswith("so no faster kernel is shown; a lead over a best of its own style shows one"), line
    # In a compare of the two, whose reply says the styles and the share already: said short (three times in
    # one reply, 2,645 characters; mp73).
    short = standing_line(trajectory, rewrite, "×", compared_with=top, styles=styles)
    assert short == (f"leads the run's ranking but is not a new best: it is ahead of {top} by no more than destination "
                     "passing style's share: no faster kernel is shown; a lead over a best of its own style shows "
                     "one"), short
    # The one it passed, measured again: no advice to compare what was compared (mp56).
    again = standing_line(trajectory, top, "×", styles=styles)
    assert again.startswith(f"not the run's best: that is {rewrite}") and "bench.compare" not in again, again
    assert "ahead of it by no more than destination passing style's share (no faster kernel)" in again, again
    # As run_standing reads the styles (its own, the run's best's), and unknown: neither named ahead.
    assert again == await run_standing(verifier, await verifier.get_candidate(top), "kernel", again=True)
    assert "apart from it by no more than destination passing style's share (no faster kernel either way)" in \
        standing_line(trajectory, top, "×")
    # The leader was never announced: said, beside its own "not a new best" (mp63).
    assert ", which leads the run's ranking but is not a new best, ahead of it" in again, again

    # Beyond the share, a rewrite in that style is a faster kernel, and announced.
    faster = await _record(verifier, run.id, DPS_FASTER, 4.5, 3)
    await _paired(verifier, run.id, rewrite, faster, 1.45)
    point = next(p for p in (await store.trajectory(run.id)).points if p.candidate_id == faster)
    assert point.new_best and point.decided_by == "paired rounds", point


async def _lead_over(store, verifier, before_code: str, own_code: str, ratio: float, paired: bool = True):
    """The trajectory point of ``own_code`` recorded after ``before_code`` in a run of its own, at
    ``ratio`` times its score, with a kept compare of the two at that ratio where ``paired``."""
    run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    before = await _record(verifier, run.id, before_code, 3.0, 1)
    own = await _record(verifier, run.id, own_code, 3.0 * ratio, 2)
    if paired:
        await _paired(verifier, run.id, before, own, ratio)
    return next(p for p in (await store.trajectory(run.id)).points if p.candidate_id == own)


async def test_the_same_lead_between_two_of_one_style_is_a_new_best(store, verifier):
    """Only a lead of destination passing style over a returning best is that style's; the same
    1.07x between two returning kernels, two passing ones or over a Solution JSON (its style in its
    spec) is a faster kernel, found by their paired rounds."""
    for before_code, own_code in ((RETURNING, RETURNING.replace("x * 2", "x + x")), (DPS, DPS_FASTER),
                                  (SOLUTION, DPS)):
        point = await _lead_over(store, verifier, before_code, own_code, 1.07)
        assert point.new_best and point.decided_by == "paired rounds", (before_code, point)


async def test_a_lead_of_the_styles_share_is_no_new_best_by_intervals_either(store, verifier):
    """With no compare of the two, their intervals decided: a rewrite into destination passing
    style whose intervals clear the best's by no more than that style's share was announced while
    run_report called its version a stall (review 2026-12-06); beyond the share it is announced."""
    for ratio, announced in ((1.2, False), (1.6, True)):
        point = await _lead_over(store, verifier, RETURNING, DPS, ratio, paired=False)
        assert point.new_best is announced, (ratio, point)
        assert point.decided_by == ("intervals" if announced else STYLE), (ratio, point)


async def test_the_style_is_read_as_the_worker_reads_it(store, verifier):
    """An annotated flag is destination passing style when timed (the worker reads the module's
    attribute), and a Solution JSON after a blank line says its style in its spec: neither is a
    returning best, so a 1.07x lead of passing style over either is a faster kernel (review 2026-12-06)."""
    annotated = DPS.replace("DESTINATION_PASSING_STYLE = True", "DESTINATION_PASSING_STYLE: bool = True")
    for before_code in (annotated, "\n" + SOLUTION):
        point = await _lead_over(store, verifier, before_code, DPS_FASTER, 1.07)
        assert point.new_best and point.decided_by == "paired rounds", (before_code, point)


async def test_a_returning_kernel_behind_a_passing_best_by_the_share_alone_is_not_worse(store, verifier):
    """A returning kernel behind a destination-passing best by no more than that style's share read
    "worse_than" the best by paired rounds, beside remeasure's "no faster kernel" for the same two
    (mp61): read either way round, it is within noise of the best, and a wider gap is worse."""
    for ratio, worse in ((1 / 1.07, False), (1 / 1.45, True)):
        run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        best = await _record(verifier, run.id, DPS, 3.3, 1)
        behind = await _record(verifier, run.id, RETURNING, 3.3 * ratio, 2)
        await _paired(verifier, run.id, best, behind, ratio)
        point = next(p for p in (await store.trajectory(run.id)).points if p.candidate_id == behind)
        if worse:
            assert point.worse_than == best and point.decided_by == "paired rounds", point
        else:
            assert point.within_noise_of == best and point.worse_than is None and point.decided_by == STYLE, point
            line = await run_standing(verifier, await verifier.get_candidate(behind), "kernel")
            assert line == (f"not a new best: {best} is ahead of it by no more than destination passing style's "
                            f"share ({best} writes into outputs it is given, {behind} returns its own: 1.02-1.30x, "
                            "most on short calls), so no slower kernel is shown"), line


async def test_a_returning_best_that_loses_the_lead_to_a_passing_one_reads_the_right_way_round(store, verifier):
    """A returning kernel measured again falls behind a destination-passing best by the style's share:
    its line said the returning one "writes into outputs it is given" (review 2026-12-06)."""
    run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    best = await _record(verifier, run.id, DPS, 3.3, 1)
    behind = await _record(verifier, run.id, RETURNING, 3.6, 2)
    await _paired(verifier, run.id, best, behind, 1 / 1.07)
    assert (await verifier.get_run(run.id)).best_candidate_id == behind  # by its interval, before
    again = await _record(verifier, run.id, RETURNING, 2.6, 3)  # pooled: now behind
    assert again == behind and (await verifier.get_run(run.id)).best_candidate_id == best
    line = await run_standing(verifier, await verifier.get_candidate(behind), "kernel", prior_best=behind)
    assert line == (f"no longer the run's best: {best} at " + line.split(" at ", 1)[1].split(" now leads")[0]
                    + f" now leads; {best} is ahead of it by no more than destination passing style's share ({best} "
                    f"writes into outputs it is given, {behind} returns its own: 1.02-1.30x, most on short calls), "
                    "so no slower kernel is shown"), line


async def test_a_returning_kernel_within_noise_of_a_passing_best_is_sent_to_one_of_its_own_style(store, verifier):
    """Within noise of a destination-passing best by intervals, a returning kernel was told to
    compare the two, whose verdict could only say "no faster kernel shown" either way (mp62)."""
    run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    best = await _record(verifier, run.id, DPS, 3.3, 1)
    close = await _record(verifier, run.id, RETURNING, 3.28, 2)
    line = await run_standing(verifier, await verifier.get_candidate(close), "kernel")
    assert line.startswith(f"not a new best: within noise of the run's best {best} at ") and line.endswith(
        f", which writes into outputs it is given while {close} returns its own: a compare of the two cannot tell "
        "kernels apart within destination passing style's share (1.02-1.30x, most on short calls); compare it "
        "with a kernel of its own style"), line
    # Two of one style: the compare of the two is the advice, as before.
    run = await store.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
    best = await _record(verifier, run.id, RETURNING.replace("x * 2", "x + x"), 3.3, 1)
    close = await _record(verifier, run.id, RETURNING, 3.28, 2)
    line = await run_standing(verifier, await verifier.get_candidate(close), "kernel")
    assert line.endswith(f"bench.compare {close} and {best} by id to tell them apart"), line
