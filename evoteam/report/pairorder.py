"""Where a re-measurement's order and the finalists' paired rounds disagree below its top.

The order is the store's ranking (the pessimistic end of each pooled interval), and a narrow
interval can rank a slower kernel above a faster one whose interval is wider. For the top,
``better_than_top`` says so; below it nothing did: a batch ranked c7 above c4 right after a
compare had found c4 1.03x faster side by side (mp75)."""

from __future__ import annotations

from evoteam import stats
from evoteam.servers.knowledge.comparisons import paired_verdict


def note_order_against_pairs(mset, records: list) -> None:
    """A note for each two finalists below the top whose paired rounds (every batch and compare of
    the two, pooled) find the one ranked lower significantly better."""
    order = (mset.order_after or [])[1:]
    for i, upper in enumerate(order):
        for lower in order[i + 1:]:
            found = paired_verdict(records, upper, lower)
            if found is not None and found.decides and found.significant and \
                    stats.favours_b(found.estimate[0], found.kind, mset.direction):
                shown = stats.describe(stats.Estimate(*found.estimate, found.runs, found.coverage), "×"
                                       if found.kind == "kernel" else "")
                mset.add_note(f"{lower} ranks below {upper} by its interval, though their paired rounds find "
                              f"{lower} better ({shown}): of the two, {lower} is the faster kernel"
                              if found.kind == "kernel" else
                              f"{lower} ranks below {upper} by its interval, though their runs side by side find "
                              f"{lower} better ({shown})")
