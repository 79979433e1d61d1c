"""A run's best as a one-line listing says it (`evoteam kb runs`, `kb finish`, `team status`, the
supervisor's live view, the live page's runs): with its 95% interval where it has one, else all
its digits, and where a line has room, the candidate and the paired best. A listing said "best
4.35123" for a kernel whose interval was 3.9–5.0."""

from __future__ import annotations

from evoteam.stats import describe_score


def listed_interval(interval: list[float] | None, unknown: bool) -> list[float] | None:
    """The best's interval where it is a 95% one (a range of too few runs, or a zero-width point,
    is not one: knowledge.get_run says what it is). ``unknown``: its runs are too few to know its
    spread, or it has no width (Run.best_runs is set)."""
    return interval if interval and not unknown and interval[0] != interval[1] else None


def run_interval(run) -> list[float] | None:
    """listed_interval of a run's best, from the store's Run (``best_runs`` set where its runs are
    too few or it has no width) or a quick read's view of it (``best_spread_unknown``)."""
    unknown = getattr(run, "best_spread_unknown", None)
    return listed_interval(run.best_interval, run.best_runs is not None if unknown is None else unknown)


def listed_best(value: float | None, interval: list[float] | None) -> str:
    """"4.4 (3.9–5.0)" from a 95% interval (listed_interval's), else all the value's digits: an
    exact program best moves in its fourth (review 2026-12-04); "none" where nothing ranks."""
    if value is None:
        return "none"
    return describe_score(value, interval) if interval else f"{value:.7g}"


def named_best(value: float | None, interval: list[float] | None, candidate_id: str | None,
               paired_best: str | None = None, tied: str | None = None) -> str:
    """listed_best, the candidate, and the one the run's compares find better where they do
    (Run.paired_best): `team status` said "crown it" where `kb finish`, where a model crowns, named
    neither (review)."""
    text = listed_best(value, interval)
    if candidate_id:
        text += f" {candidate_id}" + (f" (compares find {paired_best} better: crown it)" if paired_best else
                                      f" (one result with {tied}, the last new best)" if tied else "")
    return text
