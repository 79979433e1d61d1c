"""Where a re-measurement's order and the finalists' paired rounds disagree below its top.

The order is the store's ranking (the pessimistic end of each pooled interval), and a narrow
interval can rank a slower kernel above a faster one whose interval is wider. For the top,
``better_than_top`` says so; below it nothing did: a batch ranked c7 above c4 right after a
compare had found c4 1.03x faster side by side (mp75)."""

from __future__ import annotations

from evoteam import stats
from evoteam.passingstyle import passes_over_returns, styles_of, within_share
from evoteam.servers.knowledge.comparisons import paired_verdict
from evoteam.servers.knowledge.errors import StoreError


async def note_order_against_pairs(store, mset, records: list) -> None:
    """A note for each two finalists below the top whose paired rounds (every batch and compare of
    the two, pooled) find the one ranked lower significantly better. Where that one writes into
    outputs it is given, the other returns its own, and the lead is within that style's share, the
    note says no faster kernel is shown: "of the two, c2 is the faster kernel" was said of a 1.03x
    lead of one kernel over its returning twin (mp76)."""
    order = (mset.order_after or [])[1:]
    for i, upper in enumerate(order):
        for lower in order[i + 1:]:
            found = paired_verdict(records, upper, lower)
            if found is None or not found.decides or not found.significant or \
                    not stats.favours_b(found.estimate[0], found.kind, mset.direction):
                continue
            shown = stats.describe(stats.Estimate(*found.estimate, found.runs, found.coverage), "×"
                                   if found.kind == "kernel" else "")
            if found.kind != "kernel":
                mset.add_note(f"{lower} ranks below {upper} by its interval, though their runs side by side find "
                              f"{lower} better ({shown})")
                continue
            styles = await styles_of(store, [lower, upper], (StoreError,)) if within_share(found.estimate[1]) else {}
            if passes_over_returns(styles.get(lower), styles.get(upper)):
                mset.add_note(f"{lower} ranks below {upper} by its interval; their paired rounds find {lower} ahead "
                              f"({shown}) by no more than destination passing style's share ({lower} writes into "
                              f"outputs it is given, {upper} returns its own): no faster kernel is shown")
            else:
                mset.add_note(f"{lower} ranks below {upper} by its interval, though their paired rounds find "
                              f"{lower} better ({shown}): of the two, {lower} is the faster kernel")
