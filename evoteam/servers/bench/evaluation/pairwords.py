"""How a standing line tells two candidates apart (evaluation/standing.py): what their kept paired
rounds found, the compare that would tell them apart, the re-measurement that lets the ranking
follow, or destination passing style's share, which makes a lead no faster kernel; and the same
in a program's words."""

from __future__ import annotations

from evoteam.passingstyle import passes_over_returns, share_text
from evoteam.servers.knowledge.standing import Paired


def program_words(line: str) -> str:
    """A standing line in a program's words: its runs are not paired with the other side's ("paired
    rounds" beside a compare whose code counts every run; mp62), and a difference its runs do not
    find is no proof of one score (a program that lost 0.5 in half its runs read "report the two as
    one result"; mp62)."""
    return line.replace(NO_DIFFERENCE, PROGRAM_NO_DIFFERENCE).replace(
        NO_DIFFERENCE.removeprefix(NO_DIFFERENCE_HEAD), PROGRAM_THEN).replace(
        "their paired rounds", "their runs side by side")


def apart(compared_with: str | None, own: str, other: str, paired: Paired | None = None, leads: bool = False,
          styles: dict[str, str | None] | None = None) -> str:
    """How to tell ``own`` from ``other``, neither's point judged against the other: what their kept
    paired rounds found (``paired``, the run's, read as the trajectory reads them), else the compare,
    with what the ranking reads. Two compared minutes before were sent to compare again (mp76).
    ``leads``: ``own`` ranks above ``other`` (it took the lead from it), else below."""
    side = paired(other, own) if paired is not None and compared_with != other else None
    if side == "tied":
        return f"; with {other}, {NO_DIFFERENCE}"
    if side == "better":
        return f"; their paired rounds find it better than {other} too" if leads else \
            f"; their paired rounds find it better than {other}, which ranks above it {RANKING}: " \
            + remeasure_two(own, other)
    if side == "worse":
        return f"; their paired rounds find it worse than {other}" + (
            f", the better of the two: bench.remeasure with candidate_ids [{own}, {other}] on a quiet machine "
            "lets the ranking follow" if leads else "")
    if side == "style":
        return f"; with {other}, their paired rounds find the two apart by destination passing style's share " \
            f"alone: {by_share(own, other, styles or {})}"
    return f"; {verdict_or_compare(compared_with, own, other)} {RANKING}"


def verdict_or_compare(compared_with: str | None, own: str, other: str, then: str = "to tell them apart") -> str:
    """The compare of ``own`` and ``other`` and what it is for: never another compare of the two a
    compare's reply is about (its verdict is the answer; mp53)."""
    if compared_with == other:
        return "the verdict above is what their paired rounds say"
    return f"{compare_two(own, other)} {then}"


# The ranking reads every run of a candidate, not the batch a compare's reply shows the intervals of (mp63).
RANKING = "(the ranking reads the pessimistic end of each one's interval over all its runs)"


def compare_two(own: str, other: str) -> str:
    """The compare that tells two candidates apart, both named: after a compare of A and B, "the two"
    in B's standing meant B and the run's best and read as A and B (mp55)."""
    return f"bench.compare {own} and {other} by id"


def twin_aside(own: str, other: str, styles: dict[str, str | None] | None) -> str:
    """Said after a compare named between two of different output styles: where one is the other's
    twin, their compare measures that style's share only, and a model sent to it by the standing ran
    it against kernel-loop's rule to skip it (mp81). Whether they are twins only their author knows
    (the same arithmetic). Either's style unknown: nothing said."""
    mine, theirs = (styles or {}).get(own), (styles or {}).get(other)
    if mine is None or theirs is None or mine == theirs:
        return ""
    # Conditional, the two named: a bare "no compare for twins" read as said of every such pair (mp83).
    return f"; if {own} and {other} are twins (one arithmetic in both output styles), they are one result: no compare"


def by_share(own: str, other: str, styles: dict[str, str | None], compared_with: str | None = None) -> str:
    """Two apart by destination passing style's share alone, in the direction their styles give (a
    returning lead behind a passing best read "it is ahead of" that best; mp76)."""
    if passes_over_returns(styles.get(other), styles.get(own)):
        return (f"{other} is ahead of it by no more than destination passing style's share ({other} writes into "
                f"outputs it is given, {own} returns its own: {share_text()}), so no slower kernel is shown")
    if passes_over_returns(styles.get(own), styles.get(other)):
        return style_share(own, other, compared_with)
    return (f"within noise of {other} by destination passing style's share ({share_text()}): one of the two "
            "writes into outputs it is given, so no faster kernel either way")


def style_share(own: str, other: str, compared_with: str | None = None) -> str:
    """A lead that is no more than destination passing style's share (evoteam/passingstyle.py): the
    trajectory announced a same-work rewrite into that style as a new best while run_report called
    its version a stall (mp56). Decided by paired rounds or by intervals: said as neither (review)."""
    if compared_with == other:  # in a compare of the two, whose reply says the styles and the share (mp73)
        return (f"it is ahead of {other} by no more than destination passing style's share: no faster kernel is "
                "shown; a lead over a best of its own style shows one")
    return (f"it is ahead of {other} by no more than destination passing style's share ({own} writes into outputs "
            f"it is given, {other} returns its own: {share_text()}), so no faster kernel is shown; a lead over a "
            "best of its own style shows one")


def remeasure_two(own: str, best: str) -> str:
    """The re-measurement that lets the ranking follow a candidate its paired rounds find better."""
    # On a busy machine a re-measurement may leave the intervals as wide, and the ranking as it was
    # (mp64): the paired verdict is what decides the faster kernel meanwhile.
    return (f"it is the better of the two; bench.remeasure with candidate_ids [{best}, {own}] on a quiet "
            "machine lets the ranking follow")


# Where paired rounds found no difference, another compare is no advice (mp53: said after two).
# "with repeats above its default" came right after a compare with twice the default (mp60): more
# rounds of the two by id are what resolves less, whatever repeats gave these.
NO_DIFFERENCE_HEAD = "their paired rounds find no difference: "
NO_DIFFERENCE = NO_DIFFERENCE_HEAD + "report the two as one result (each further bench.compare of the two by id " \
    "pools with these rounds and resolves a smaller difference)"
PROGRAM_TAIL = "not shown to be one score: each further bench.compare of the two by id adds runs to both and narrows it"
PROGRAM_NO_DIFFERENCE = "their runs find no significant difference, " + PROGRAM_TAIL
PROGRAM_THEN = "no significant difference, " + PROGRAM_TAIL
