"""Which earlier bests a new lead is judged against, as the bench's lines name them: the last new
best, and the leader just before it as the store's rule reads it (standing.trajectory_points), with
the roles the lines give each."""

from __future__ import annotations

from evoteam.servers.knowledge.trajectory import TrajectoryPoint


def earlier(before: list[TrajectoryPoint]) -> str:
    """The candidates a new best clears, by the trajectory's rule: the last new best and the leader
    just before it ("beyond noise of the run's earlier best" named neither; mp49). Both: where it is
    not shown better than one, shown_and_not says which ("c1 or c3" read as beating both; mp73)."""
    last_new, leader = last_new_and_leader(before)
    if last_new and leader and last_new != leader:  # "(c1 or c3)" did not say which was which (mp68)
        return f"{last_new}, the last new best, and {leader}, {leader_role(before, leader)}"
    return last_new or leader or ""


def last_new_and_leader(before: list[TrajectoryPoint]) -> tuple[str | None, str | None]:
    """The last new best and the leader a new lead is judged against, as the store's rule reads them
    (standing.trajectory_points): the last that took the lead and was not found worse than a best
    (a lead found worse side by side is no step to clear; the rank leader read in its place; review)."""
    last_new = next((p.candidate_id for p in reversed(before) if p.new_best), None)
    leader = next((p.candidate_id for p in reversed(before) if p.best_so_far_id == p.candidate_id
                   and not p.worse_than), None)
    return last_new, leader


def shown_and_not(before: list[TrajectoryPoint], not_shown: str | None) -> tuple[str, str] | None:
    """Where a new best is not shown better than one of the two it may clear (``not_shown``), the
    other and that one, each with its role: "c1 or c3" read as beating the leader c3, which a
    compare then found faster (mp73)."""
    last_new, leader = last_new_and_leader(before)
    if not (last_new and leader and last_new != leader and not_shown in (last_new, leader)):
        return None
    led = leader_role(before, leader)
    if not_shown == leader:
        return f"{last_new}, the last new best", f"{leader}, {led}"
    return f"{leader}, {led}", f"{last_new}, the last new best"


def leader_role(before: list[TrajectoryPoint], leader: str) -> str:
    """"the leader before it", or, where a lead found worse side by side ranked above it, which one
    it led by paired rounds: listings show that other as the leader (review)."""
    ranked = before[-1].best_so_far_id if before else None
    return "the leader before it" if ranked in (None, leader) else \
        f"the leader before it by paired rounds ({ranked}, which ranked first, was found worse than it)"
