"""Destination passing style's share of a lead, where two candidates differ in it.

A kernel that writes into output slots the harness allocated outside the clock (destination
passing) reads 1.08-1.13x over the same arithmetic returning its outputs, which allocates inside
it (docs/bench.md, *Outputs given or allocated*). A lead of one over the other within that share
is not a faster kernel: `run_report` reads such a version gain as none (data.py), and
`bench.remeasure` does not list such a finalist as better than its top (a model was sent round in
a loop of re-measurements by it; mp55)."""

from __future__ import annotations

import json

from evoteam.servers.bench.formats.solutions import declares_dps
from evoteam.servers.bench.measurement.method import STYLE_SHARE
from evoteam.servers.knowledge.comparisons import paired_verdict
from evoteam.servers.knowledge.store import KnowledgeStore


def python_file(code: str | None) -> bool:
    """A candidate given as Python source (a Solution JSON says its style in its spec instead,
    destination passing by default, which reading the source would take for "returns")."""
    if not code:
        return False
    try:
        return not isinstance(json.loads(code), dict)
    except ValueError:
        return True


async def dps_over_returning(store: KnowledgeStore, own_id: str, other_id: str) -> bool:
    """Whether ``own_id`` passes destination style and ``other_id`` returns its outputs (Python files)."""
    own, other = await store.get_candidate(own_id), await store.get_candidate(other_id)
    return python_file(own.code) and python_file(other.code) and declares_dps(own.code) \
        and not declares_dps(other.code)


def within_share(low: float) -> bool:
    """Whether a lead whose interval starts at ``low`` could be the style's share alone."""
    return low <= STYLE_SHARE[1]


async def drop_style_leads(store: KnowledgeStore, mset, records: list) -> None:
    """Leave out of ``better_than_top`` a finalist whose paired lead over the top is no more than
    destination passing style's share, and say why in the note."""
    if not mset.better_than_top or not mset.order_after:
        return
    top, kept = mset.order_after[0], []
    for c in mset.better_than_top:
        found = paired_verdict(records, top, c)
        if found is not None and found.kind == "kernel" and within_share(found.estimate[1]) and \
                await dps_over_returning(store, c, top):
            mset.add_note(f"{c} reads faster than {top} side by side by no more than destination passing style's "
                          f"share ({c} writes into given outputs, {top} returns its own: {STYLE_SHARE[0]:.2f}-"
                          f"{STYLE_SHARE[1]:.2f}x on a memory-bound kernel, docs/bench.md), so it is not listed in "
                          "better_than_top: not a faster kernel")
            continue
        kept.append(c)
    mset.better_than_top = kept
