"""Destination passing style's share of a lead, where two candidates differ in it.

A lead of a candidate in destination passing style over one returning its outputs within that
style's share is not a faster kernel (evoteam/passingstyle.py): `run_report` reads such a version
gain as none (data.py), and `bench.remeasure` does not list such a finalist as better than its top
(a model was sent round in a loop of re-measurements by it; mp55)."""

from __future__ import annotations

from evoteam import stats
from evoteam.passingstyle import passes_over_returns, share_text, style_of, styles_of, within_share
from evoteam.passingstyle import dps_over_returning as codes_dps_over_returning
from evoteam.servers.knowledge.comparisons import paired_verdict
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.measurements import candidate_estimate, clears_start
from evoteam.servers.knowledge.pairedbest import paired_top
from evoteam.servers.knowledge.store import KnowledgeStore


async def dps_over_returning(store: KnowledgeStore, own_id: str, other_id: str) -> bool:
    """Whether ``own_id`` passes destination style and ``other_id`` returns its outputs (Python files)."""
    own, other = await store.get_candidate(own_id), await store.get_candidate(other_id)
    return codes_dps_over_returning(own.code, other.code)


async def within_style_share(store: KnowledgeStore, v) -> None:
    """A version's kernel gain over the best before it, where one of the two passes destination style
    and the other returns its outputs, within what that style alone gains (its outputs allocated
    outside the clock): no faster kernel, and no slower one. A same-work rewrite into that style read
    as a significant 1.08x version gain and counted as progress, where one plain process found 1.01
    (mp54); its returning twin as the version's best read "worse, significant" beside the
    trajectory's "no slower kernel" (rev76). Counted as no gain (significant False, a stall): left
    undecided, nothing could settle it and the stop rule skipped it (review 2026-12-06)."""
    # Behind by the share, only as paired rounds find it (comparisons.paired_sides): by intervals the
    # trajectory reads the style's share one way round alone (standing._style_only).
    if not (v.gain_is_ratio and v.gain_interval and v.best_before_id and v.best_candidate_id) or \
            v.gain_interval[0] <= 0 or not (v.significant or v.worse and v.paired_batches):
        return
    # The lower end of the leader's lead, as comparisons.paired_sides reads the style's share.
    ahead, behind, lead = (v.best_candidate_id, v.best_before_id, v.gain_interval[0]) if v.significant else \
        (v.best_before_id, v.best_candidate_id, 1 / v.gain_interval[1])
    if within_share(lead) and await dps_over_returning(store, ahead, behind):
        v.significant, v.worse, v.style_share = False, False, True


async def over_own_style(store: KnowledgeStore, v, earlier: list[str], records: list, picked_of: int,
                         x0: float | None = None, direction: str = "maximize") -> None:
    """A version gain not found over a best in destination passing style, where the version's best
    returns its outputs: read again over the best before it that returns its outputs too (``earlier``:
    the ranked ids before the version, best first), by the two's kept paired rounds. That style's
    share let a destination-passing v1 kernel rank first, and a v2 kernel 1.14x (1.02-1.28) faster
    than v1's returning one, side by side, read "no significant difference" over it (mp63). A
    faster kernel of the version's own style is a gain (significant); none decided says how to
    decide it (``v.own_style``). Only where the gain over the best before it has an interval whose
    lower end leaves that best's lead within the style's share (ahead by more, it is a faster
    kernel), where nothing else left the version without one (short of x0, an unmeasured lead), and
    where the version's best clears x0 (review)."""
    if v.significant or v.short_of_start or v.unmeasured_lead or not v.gain_is_ratio or not v.gain_interval \
            or not v.best_before_id or not v.best_candidate_id or not v.gain or v.gain_interval[0] <= 0:
        return
    if not within_share(1 / v.gain_interval[0]):  # its lead's upper end: how far ahead it may be
        return
    own, before = await store.get_candidate(v.best_candidate_id), await store.get_candidate(v.best_before_id)
    if not passes_over_returns(style_of(before.code), style_of(own.code)):
        return
    same = None
    for cid in earlier:
        if cid not in (v.best_before_id, own.id) and style_of((await store.get_candidate(cid)).code) == "returns":
            same = cid
            break
    if same is None:
        return
    which = f"{same}, the best before it that returns its outputs as the version's best does"
    found = paired_verdict(records, same, own.id, picked_of=picked_of)
    if found is None or not found.decides or found.kind != "kernel":
        v.own_style = f"over {which}: bench.compare {same} and {own.id} by id (a lead over it is a faster kernel)"
        return
    shown = stats.describe(stats.Estimate(*found.estimate, found.runs, found.coverage), "×")
    est = candidate_estimate(own)
    past_x0 = x0 is None or (est is not None and clears_start(est, x0, direction))
    if found.significant and found.estimate[0] > 1 and past_x0:
        v.over_before, v.significant, v.worse = (v.significant, v.worse), True, False
        v.own_style = f"{shown} over {which}, timed side by side: significant, a faster kernel"
    elif found.significant and found.estimate[0] > 1:
        v.own_style = f"over {which}: {shown}, timed side by side: faster, but short of the starting score x0: no gain"
    else:
        said = "slower" if found.significant else "no significant difference"
        v.own_style = f"over {which}: {shown}, timed side by side: {said}"
        # No faster kernel than one before it, side by side: no gain, however the busy bests read
        # (mp82); not where only the picking level hid a lead significant at 95% (rev80).
        plain = paired_verdict(records, same, own.id) if picked_of > 1 else found
        if plain is None or not (plain.significant and plain.estimate[0] > 1):
            v.over_before, v.significant, v.worse = (v.significant, v.worse), False, False
            v.own_style += ", so no gain"


# Why a gain over a destination-passing best before it is read again (gain_text says it beside the gain).
DPS_BEFORE = f"the best before it writes into outputs allocated outside the clock (destination passing), " \
    f"which alone was {share_text()}"


async def _ahead_by_share(store: KnowledgeStore, records: list, ahead: str, behind: str) -> bool:
    """Whether ``ahead`` leads ``behind`` side by side (their kept paired rounds, pooled) by a
    significant lead no more than destination passing style's share, ``ahead`` passing that style
    and ``behind`` returning its outputs."""
    found = paired_verdict(records, behind, ahead)
    return found is not None and found.kind == "kernel" and found.significant and found.estimate[1] > 1 and \
        within_share(found.estimate[1]) and await dps_over_returning(store, ahead, behind)


async def drop_style_leads(store: KnowledgeStore, mset, records: list) -> None:
    """Leave out of ``better_than_top`` a finalist whose paired lead over the top is no more than
    destination passing style's share, and say why in the note."""
    if not mset.better_than_top or not mset.order_after:
        return
    top, kept = mset.order_after[0], []
    for c in mset.better_than_top:
        if await _ahead_by_share(store, records, c, top):
            mset.add_note(f"{c} reads faster than {top} side by side by no more than destination passing style's "
                          f"share ({c} writes into given outputs, {top} returns its own: {share_text()}, "
                          "docs/bench.md), so it is not listed in "
                          "better_than_top: not a faster kernel")
            continue
        kept.append(c)
    mset.better_than_top = kept


async def note_style_top(store: KnowledgeStore, mset, records: list) -> None:
    """Say where the top passes destination style and leads a finalist that returns its outputs, side
    by side, by no more than that style's share: "the order held and X leads the others beyond
    noise" crowned a same-work rewrite that run_report called a stall (mp57)."""
    if len(mset.order_after or []) < 2:
        return
    top = mset.order_after[0]
    for c in mset.order_after[1:]:
        if await _ahead_by_share(store, records, top, c):
            faster = await _faster_in_its_style(store, records, mset, c)
            also = f"; {faster}, which returns its outputs as {c} does, is found faster than {c} side by side: a " \
                "faster kernel" if faster else ""
            mset.add_note(f"{top} leads {c} side by side by no more than destination passing style's share ({top} "
                          f"writes into given outputs, {c} returns its own: {share_text()}): no faster kernel shown "
                          f"by these two{also}")


async def _faster_in_its_style(store: KnowledgeStore, records: list, mset, behind: str) -> str | None:
    """Another finalist returning its outputs, as ``behind`` does, that is found better than it side
    by side: a faster kernel shown without the style. Said beside "no faster kernel", not in its place:
    a returning twin of the top was found 1.13x faster than ``behind`` (mp73), but an unrelated one
    says nothing of the top's own kernel (review)."""
    own = (await styles_of(store, [behind], (StoreError,)))[behind]  # read once, not per finalist
    for other in mset.order_after:
        if other in (behind, mset.order_after[0]):
            continue
        found = paired_verdict(records, behind, other)
        if found is None or found.kind != "kernel" or not found.significant or found.estimate[0] <= 1:
            continue
        if own == "returns" == (await styles_of(store, [other], (StoreError,)))[other]:
            return other
    return None


async def better_as_pair(store: KnowledgeStore, v, records: list, direction: str) -> bool:
    """Whether a version gain that is no significant one at its picking's level (``v.picked_of``)
    is one as a named pair at 95%, as compare's verdict and the run's crown (get_run's paired_best)
    read it: the gain line then says both (mp67 read "crown B" beside "no significant difference").
    By the crown's own rule (paired_top of the two), so not for a lead of destination passing
    style's share alone, which no crown follows (review)."""
    if v.significant is not False or v.worse or not v.paired_batches or v.picked_of <= 1 \
            or v.over_before is not None or v.style_share or v.short_of_start or v.unmeasured_lead:
        return False
    return await paired_top(store, [v.best_before_id, v.best_candidate_id], records, direction) == \
        v.best_candidate_id
