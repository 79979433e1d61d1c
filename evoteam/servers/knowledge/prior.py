"""Prior work: what earlier runs of the same kit in this project found, as a new run's first read.

The point of sharing a store is that the next run starts from what the last one learned. So
`start_run` (and the session-start hook, and the first step of the skills) hands back, for the
same kit and project: the earlier runs with their owner, status and best; the best candidates
with their one-line notes and ids; the top learnings and the dead ends. It is bounded (a few
thousand characters of JSON) so it can sit in an agent's first context without crowding it.

Built only on the `KnowledgeStore` interface, so it reads the embedded file and a shared
server alike, and sees only what the caller's token may see.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import PurePath
from typing import NamedTuple

from pydantic import BaseModel, Field

from evoteam.stats import describe_listed
from evoteam.servers.knowledge.errors import Invalid
from evoteam.servers.knowledge.measurements import rank_key
from evoteam.servers.knowledge.models import Direction, Run, RunCreate
from evoteam.servers.knowledge.pairedbest import with_paired_best
from evoteam.servers.knowledge.store import KnowledgeStore

PRIOR_CHARS = 4000  # the JSON of a PriorWork stays within this
MAX_RUNS = 5
MAX_BEST = 5
MAX_LEARNINGS = 6
MAX_DEAD_ENDS = 4
NOTE_CHARS = 160
LEARNING_WINDOW = 200  # the newest learnings of a run that compete for the top places
TEXT_CHARS = 300
HINT = ("Start from the best candidate: get_candidate(id, include_code=true) returns its code in one "
        "call; evaluate your variant with parent_id set to it. search finds more (each hit names its "
        "owner and run).")
# Said where there is nothing: an empty list alone left a model unsure whether the lookup ran.
NO_PRIOR = ("No earlier run of this kit is visible to you in this store: start from the kit's starting "
            "point (bench.describe_kit).")
# Said where the earlier runs listed rank nothing: HINT sent a model to a best that was not there (mp47).
NO_BEST_HEAD, NO_BEST_TAIL = ("The earlier runs listed hold no ranked candidate",
                              ": start from the kit's starting point (bench.describe_kit); what they learned still "
                              "applies.")
NO_BEST = NO_BEST_HEAD + NO_BEST_TAIL


def beyond_generic(hint: str | None) -> str:
    """A hint less its generic advice (HINT, NO_PRIOR, NO_BEST with its count of older runs): what is
    said of this start alone (the CLI prints that on stderr)."""
    text = (hint or "").replace(HINT, "").replace(NO_PRIOR, "")
    return re.sub(re.escape(NO_BEST_HEAD) + r".*?" + re.escape(NO_BEST_TAIL), "", text).strip()


class PriorRun(BaseModel):
    id: str
    kit: str | None = None
    owner: str
    status: str
    status_reason: str | None = None
    best_score: float | None = None
    best_interval: list[float] | None = Field(default=None, description="the best candidate's 95% interval, "
                                              "where the bench measured one")
    best_runs: int | None = Field(default=None, description="set where that best is from too few runs for a "
                                  "95% interval: how many")
    best_exact_runs: int | None = Field(default=None, description="set where every run of that best is alike "
                                        "(an exact score): how many")
    best_candidate_id: str | None = None
    paired_best: str | None = Field(default=None, description="a candidate the run's kept paired rounds find "
                                    "better than that best side by side (Run.paired_best)")
    best_within_noise_of: str | None = Field(default=None, description="the last new best, which that best is not "
                                             "told apart from (Run.best_within_noise_of)")
    candidates: int = 0
    learnings: int = 0
    started_at: datetime


class PriorCandidate(BaseModel):
    id: str
    run_id: str
    owner: str
    score: float | None
    score_interval: list[float] | None = None
    note: str = ""
    timing_method: int | None = Field(default=None, description="how its kernel kit timed it "
                                      "(metrics.timing_method; 1 when none was recorded); scores timed "
                                      "differently are not comparable, so the newest method's rank first")
    other_kit_content: bool | None = Field(default=None, description="true where measured on other kit content "
                                           "(workloads, evaluator) than the newest run's: not comparable, so it "
                                           "ranks after")
    runs: int | None = Field(default=None, description="set where the score is from too few runs for a 95% "
                             "interval: how many (it ranks after those with one)")
    exact_runs: int | None = Field(default=None, description="set where every run of this score is alike (an "
                                   "exact score): how many")
    # Named for what it is: "dead_end": "lrn_..." on a run's best read as "this best is a dead end" (mp53).
    cited_by_dead_end: str | None = Field(default=None, description="set where a listed dead end cites it as "
                                          "evidence (often as the reference it was measured against): that "
                                          "learning's id, to read before building on this candidate")
    # What the store ranks it by (CandidateSummary.rank_score); used to order, never shown.
    rank_score: float | None = Field(default=None, exclude=True)
    kit_hash: str | None = Field(default=None, exclude=True)


class PriorLearning(BaseModel):
    id: str
    run_id: str
    owner: str
    kind: str
    confidence: float
    text: str


class PriorWork(BaseModel):
    """Earlier runs of this kit in this project, their best candidates, top learnings and dead
    ends (ranked scores only: measured by the bench, unflagged). Bounded in size."""

    kit: str | None
    runs: list[PriorRun] = Field(default_factory=list)
    best: list[PriorCandidate] = Field(default_factory=list)
    learnings: list[PriorLearning] = Field(default_factory=list)
    dead_ends: list[PriorLearning] = Field(default_factory=list)
    more_runs: int = 0  # earlier runs of the kit not listed
    truncated: bool = False  # items were left out to keep within the bound
    hint: str | None = None


class StartedRun(Run):
    """A new run, with the prior work it starts from."""

    prior_work: PriorWork


def _clip(text: str, limit: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def kit_key(kit: str | None) -> str | None:
    """A kit's name however it was written (`task_kits/<kit>`, a folder path, the bare name)."""
    if not kit:
        return None
    return PurePath(kit.rstrip("/")).name or kit


def _interval(summary) -> list[float] | None:
    # Measured candidates carry their score's interval; claims and older rows have none.
    return list(summary.score_interval) if summary.score_interval else None


async def _runs_of_kit(store: KnowledgeStore, kit: str | None, exclude: set[str],
                       seed: str | None) -> list[Run]:
    """Every earlier run of the kit the caller can see, the seed run first, then newest first."""
    key, found, cursor = kit_key(kit), [], None
    for _ in range(20):  # at most 2,000 runs are looked through
        page = await store.list_runs(limit=100, cursor=cursor)
        found += [r for r in page.items if r.id not in exclude and (key is None or kit_key(r.kit) == key)]
        cursor = page.next_cursor
        if not cursor:
            break
    if seed and seed not in exclude and not any(r.id == seed for r in found):
        found.append(await store.get_run(seed))
    found.sort(key=lambda r: (r.id != seed,))  # stable: the seed first, the rest stay newest first
    return found


async def _exact_runs(store: KnowledgeStore, run_id: str, top) -> int | None:
    """How many runs the run's best is from where every one is alike, else None: a listing knows
    only that a zero-width interval is from enough runs ("5+ runs, the middle ones alike" of an
    exact best of 15; model-play 2026-12-04), the run's own record says which."""
    interval = _interval(top)
    if top.runs is not None or not interval or interval[0] != interval[1]:
        return None
    run = await store.get_run(run_id)
    return run.best_runs if run.best_exact and run.best_candidate_id == top.id else None


async def _newest_learnings(store: KnowledgeStore, run_id: str):
    """The run's newest LEARNING_WINDOW current learnings (listings are oldest first: start near
    the end)."""
    from evoteam.servers.knowledge.rows import encode_cursor  # the store's cursor format

    window = LEARNING_WINDOW
    page = await store.list_learnings(run_id, limit=window)
    if page.total <= window:
        return page.items
    return (await store.list_learnings(run_id, limit=window, cursor=encode_cursor(page.total - window))).items


async def gather_prior_work(store: KnowledgeStore, kit: str | None, *, exclude: set[str] | None = None,
                            seed: str | None = None, direction: Direction | None = None,
                            max_chars: int = PRIOR_CHARS, found: list[Run] | None = None) -> PriorWork:
    """Prior work on `kit` (None: every kit) in the caller's project, bounded by `max_chars`.
    ``found``: the kit's runs (_runs_of_kit) where the caller has read them already."""
    found = await _runs_of_kit(store, kit, exclude or set(), seed) if found is None else found
    # Unsaid (`evoteam kb prior KIT`), the way the kit's newest run ranks: maximising by default
    # listed a minimising kit's candidates worst first (review 2026-12-04).
    direction = direction or (found[0].direction if found else "maximize")
    runs = found[:MAX_RUNS]
    prior = PriorWork(kit=kit_key(kit), more_runs=max(0, len(found) - MAX_RUNS))
    best: list[PriorCandidate] = []
    hashes: dict[str, str | None] = {}
    learned: list[PriorLearning] = []
    cited: dict[str, str] = {}  # candidate id -> the dead end that cites it
    for run in runs:
        run = await with_paired_best(store, run)
        top = await store.best_candidates(run.id, k=3, split="dev")
        exact = await _exact_runs(store, run.id, top[0]) if top else None
        prior.runs.append(PriorRun(
            id=run.id, kit=run.kit, owner=run.provenance.user, status=run.status, status_reason=run.status_reason,
            best_score=run.best_score, best_interval=_interval(top[0]) if top else None,
            best_runs=top[0].runs if top else None, best_exact_runs=exact,
            best_candidate_id=run.best_candidate_id, paired_best=run.paired_best,
            best_within_noise_of=run.best_within_noise_of, candidates=run.candidates, learnings=run.learnings,
            started_at=run.provenance.created_at))
        for summary in top:
            full = await store.get_candidate(summary.id)
            hashes[summary.id] = summary.code_hash
            best.append(PriorCandidate(id=summary.id, run_id=run.id, owner=summary.provenance.user,
                                       score=summary.score, score_interval=_interval(summary),
                                       rank_score=summary.rank_score, runs=summary.runs,
                                       exact_runs=exact if summary is top[0] else None,
                                       timing_method=_timing_method(full.metrics, bool(full.workloads)),
                                       kit_hash=full.metrics.get("kit_hash"),
                                       note=_clip(full.notes.splitlines()[0] if full.notes else "", NOTE_CHARS)))
        if run.learnings:
            items = [item for item in await _newest_learnings(store, run.id) if item.kind not in ("checkpoint", "process")]
            learned += [PriorLearning(id=item.id, run_id=run.id, owner=item.provenance.user, kind=item.kind,
                                      confidence=item.confidence, text=_clip(item.text, TEXT_CHARS)) for item in items]
            for item in items:
                if item.kind == "dead_end":
                    for ref in item.evidence:
                        cited.setdefault(ref, item.id)
    kits = {r.kit for r in runs}
    # Scores of different kits do not compare: each run's best, newest run first. Runs that are all
    # of one kit rank as the kit's do (a session start listed a colleague's worse best first; 2026-12-04).
    if kit is None and (len(kits) != 1 or None in kits):
        firsts = {}
        for c in best:
            firsts.setdefault(c.run_id, c)
        prior.best = list(firsts.values())[:MAX_BEST]
    else:
        # Across runs too, ranked as within a run (measurements.rank_key), larger is better.
        def ranked_key(c: PriorCandidate) -> tuple:
            return rank_key(c.rank_score, c.score, c.score_interval, direction, c.runs is not None) or (0, 0.0)

        # Scores rank only among those of one timing method and one kit content (a kit that changed
        # measures other workloads; review 2026-12-04): the newest method's first, then the newest
        # run's content.
        started = {r.id: r.started_at for r in prior.runs}  # the seed run comes first, not by age
        hashed = [c for c in best if c.kit_hash]
        newest = max(hashed, key=lambda c: started[c.run_id]).kit_hash if hashed else None
        for c in best:
            c.other_kit_content = True if newest and c.kit_hash and c.kit_hash != newest else None
        ranked = sorted(best, key=lambda c: (-(c.timing_method or 0), bool(c.other_kit_content),
                                             tuple(-x for x in ranked_key(c))))
        # Identical code measured in several runs is one entry (its best-ranked), not a row per run
        # whose order is noise.
        seen: set[str] = set()
        for c in ranked:
            code = hashes.get(c.id)
            if code in seen:
                continue
            if code:
                seen.add(code)
            prior.best.append(c)
        prior.best = prior.best[:MAX_BEST]
        # Said only where it tells entries apart: "timing_method: 3" on every entry was read as
        # something to understand (model-play mp34, 2026-12-05).
        if len({c.timing_method for c in prior.best}) == 1:
            for c in prior.best:
                c.timing_method = None
    learned.sort(key=lambda item: -item.confidence)  # stable: newest runs first among equals
    prior.learnings = [item for item in learned if item.kind != "dead_end"][:MAX_LEARNINGS]
    prior.dead_ends = [item for item in learned if item.kind == "dead_end"][:MAX_DEAD_ENDS]
    # A candidate listed as a best and cited by a listed dead end read as two answers (model-play mp34):
    # the entry names the dead end, which says what was tried on it.
    listed = {item.id for item in prior.dead_ends}
    for c in prior.best:
        c.cited_by_dead_end = cited.get(c.id) if cited.get(c.id) in listed else None
    n = prior.more_runs
    older = f" ({n} older run{'s are' if n != 1 else ' is'} not listed: knowledge.list_runs)" if n else ""
    prior.hint = (HINT if prior.best else NO_BEST_HEAD + older + NO_BEST_TAIL) if prior.runs else \
        NO_PRIOR if kit else None
    return _bounded(prior, max_chars)


def _timing_method(metrics: dict, kernel: bool) -> int | None:
    """The timing method a kernel evaluation recorded (the bench writes it since method 2; one
    without it was timed the first way); None for a program kit's candidate."""
    found = metrics.get("timing_method")
    if isinstance(found, int) and not isinstance(found, bool):
        return found
    return 1 if kernel else None


def _bounded(prior: PriorWork, max_chars: int) -> PriorWork:
    """Drop the lowest-ranked items of the largest list until the JSON fits."""
    lists = ("learnings", "dead_ends", "best", "runs")
    while len(prior.model_dump_json()) > max_chars:
        sizes = {name: sum(len(x.model_dump_json()) for x in getattr(prior, name)) for name in lists
                 if len(getattr(prior, name)) > (1 if name in ("best", "runs") else 0)}
        if not sizes:
            break
        getattr(prior, max(sizes, key=sizes.get)).pop()
        prior.truncated = True
    return prior


class KitFacts(NamedTuple):
    """What a kit found on this machine says of itself (evoteam/servers/stdio.py)."""

    name: str
    direction: Direction
    x0: float | None = None
    best_known: float | None = None


def _kits_own(given: float | None, kits: float | None) -> float | None:
    """The kit's value where none is given, or where the one given is the kit's as tool output
    rounds it (describe_kit shows five significant digits: a model copies 2.636 for 2.635983, and
    every NDG of the run came out a little off the bench's)."""
    if given is None or (kits is not None and float(f"{kits:.5g}") == float(f"{given:.5g}")):
        return kits
    return given


async def start_run_with_prior(store: KnowledgeStore, *, goal: str | None, kit: str | None,
                               direction: Direction | None, x0: float | None, best_known: float | None,
                               budget_usd: float | None, project: str | None,
                               seed_from: str | None,
                               local_kit: Callable[[str], KitFacts | None] | None = None) -> StartedRun:
    """Start a run (seeded from another when `seed_from` names one: its goal, kit, direction, x0
    and best-known are the defaults, the last three only where the kit is the seed's) and return
    it with the prior work on its kit. ``local_kit``: where the kits are at hand (a stdio server
    on the engineer's machine), what a kit says of itself: a run of it takes its name (a folder
    given for it), its direction (which the run must have) and, unless given, its x0 and best-known."""
    asked = direction
    seed = await store.get_run(seed_from) if seed_from else None
    if seed is not None:
        # A seed of another kit lends its goal and its prior work, not what its numbers mean: its
        # direction, x0 and best-known belong to its kit.
        same_kit = kit is None or kit == seed.kit
        goal, kit = goal or seed.goal, kit or seed.kit
        if same_kit:
            direction = direction or seed.direction
            x0 = seed.x0 if x0 is None else x0
            best_known = seed.best_known if best_known is None else best_known
    if not goal:
        raise Invalid("start_run needs a goal (or seed_from: the run to continue from)")
    # Off the event loop: finding a kit may read every kit folder on the machine.
    facts = await asyncio.to_thread(local_kit, kit) if kit and local_kit else None
    if facts:
        if asked and asked != facts.direction:
            # A run ranks by its direction: the other way, its kit's worst candidate would be its best,
            # and the bench refuses to record into it. Said here, before anything is built on it.
            raise Invalid(f"kit {kit!r} scores to be {facts.direction}d (bench.describe_kit), not {asked}d; "
                          f"start_run with direction={facts.direction!r}, or omit direction (a run of a kit "
                          "takes the kit's)")
        kit, direction = facts.name, facts.direction  # the bench finds a kit's runs by its name
        x0 = _kits_own(x0, facts.x0)
        best_known = _kits_own(best_known, facts.best_known)
    defaulted = direction is None  # by nothing: not asked, not the kit's, not a seed's of this kit
    run = await store.start_run(RunCreate(goal=goal, kit=kit, direction=direction or "maximize", x0=x0,
                                          best_known=best_known, budget_usd=budget_usd, project=project,
                                          seeded_from=seed_from))
    unknown = _unknown_kit(run) if run.kit and defaulted else None
    if run.kit is None and seed is None:
        prior = PriorWork(kit=None)  # no kit: nothing to compare with
    else:
        found = await _runs_of_kit(store, run.kit, {run.id}, seed_from)
        prior = await gather_prior_work(store, run.kit, seed=seed_from, direction=run.direction, found=found)
        hint = _own_active_runs(found, run, seed_from, sure=facts is not None)
        if hint or unknown:
            prior.hint = " ".join(filter(None, [hint, unknown, prior.hint]))
            prior = _bounded(prior, PRIOR_CHARS)
    return StartedRun(**run.model_dump(), prior_work=prior)


def _unknown_kit(run: Run) -> str:
    """Said where a run names a kit this server cannot read and was given no direction: it ranks by a
    default that may be the kit's opposite (a minimising kit's run was started maximising, and
    only the first evaluate said so; mp47, 2026-12-06)."""
    return (f"Kit {run.kit!r} is not found on this server, so this run ranks to be {run.direction}d by default"
            f"{' and has no starting score x0' if run.x0 is None else ''}: where bench.describe_kit says otherwise, "
            "knowledge.finish_run it with status failed and start_run again with that direction and x0.")


def _own_active_runs(found: list[Run], run: Run, seed_from: str | None, sure: bool) -> str | None:
    """A line on the caller's other active runs of this run's kit: a model told to continue its own
    active run may have started another instead; where two rank opposite ways one is a mistake —
    the other one when ``sure`` (this run's direction is the kit's own), else describe_kit says.
    ``found``: the kit's other runs (_runs_of_kit)."""
    same: list[str] = []
    other: list[str] = []
    for r in found:
        if r.status == "active" and r.id != seed_from and r.provenance.user == run.provenance.user:
            (same if r.direction == run.direction else other).append(r.id)
    parts = []
    if same:
        parts.append(f"You already have an active run of this kit: {', '.join(same[:3])}. Continue it (pass its "
                     f"run_id) unless you meant a fresh start; if {run.id} was started by mistake, "
                     "knowledge.finish_run it with status failed.")
    if other and sure:
        parts.append(f"Your active run {', '.join(other[:3])} of this kit ranks scores the other way, which the "
                     "bench records nothing in: knowledge.finish_run it with status failed.")
    elif other:
        parts.append(f"Your active run {', '.join(other[:3])} of this kit ranks scores the other way from this one "
                     f"({run.direction}): one of them is a mistake (bench.describe_kit gives the kit's direction); "
                     "knowledge.finish_run it with status failed.")
    return " ".join(parts) or None


def render_prior(prior: PriorWork, max_chars: int = PRIOR_CHARS) -> str:
    """Prior work as a few Markdown lines (the session-start context), within `max_chars`: where
    it does not fit, the lowest items of the longest of the runs, best candidates and learnings go
    first, the dead ends last (cut at the end, a colleague's dead end was the first thing lost;
    model-play 2026-12-04)."""
    if not prior.runs:
        return ""
    what = f"kit {prior.kit}" if prior.kit else "this project"
    runs = []
    for r in prior.runs:
        best = "no ranked score yet" if r.best_score is None else \
            f"best {describe_listed(r.best_score, r.best_interval, r.best_runs, exact_runs=r.best_exact_runs)}" + \
            (f" ({r.best_candidate_id})" if r.best_candidate_id else "") + \
            (f", but its compares find `{r.paired_best}` better than it" if r.paired_best else
             f", one result with `{r.best_within_noise_of}`, the last new best" if r.best_within_noise_of else "")
        why = f" — {_clip(r.status_reason, 120)}" if r.status_reason else ""
        kit = f" ({r.kit})" if r.kit and not prior.kit else ""
        runs.append(f"- `{r.id}`{kit} by {r.owner}, {r.status}{why}: {best}; {r.candidates} candidates, "
                    f"{r.learnings} learnings")
    methods = {c.timing_method for c in prior.best if c.timing_method is not None}
    newest = max(methods, default=None)
    best_lines = [f"- `{c.id}` ({c.owner}, run `{c.run_id}`): "
                  f"{describe_listed(c.score, c.score_interval, c.runs, exact_runs=c.exact_runs)}"
                  + (f" [timed by method {c.timing_method}: not comparable with method {newest}'s scores]"
                     if len(methods) > 1 and c.timing_method != newest else "")
                  + (" [on other kit content than the newest run: not comparable]" if c.other_kit_content else "")
                  + (f" — {c.note}" if c.note else "")
                  + (f" [cited by dead end `{c.cited_by_dead_end}`]" if c.cited_by_dead_end else "")
                  for c in prior.best if c.score is not None]
    learned = [f"- [{item.kind}, {item.owner}] {item.text} (`{item.id}`)" for item in prior.learnings]
    dead = [f"- {item.text} ({item.owner}, `{item.id}`)" for item in prior.dead_ends]

    def text(cut: bool) -> str:
        lines = [f"Earlier runs on {what} (newest first):", *runs]
        if prior.more_runs:
            lines.append(f"- … and {prior.more_runs} older runs (knowledge.list_runs)")
        lines += (["Best candidates:", *best_lines] if best_lines else []) + \
            (["Top learnings:", *learned] if learned else []) + \
            (["Dead ends (do not retry without new evidence):", *dead] if dead else [])
        if cut:
            lines.append("(shortened: `evoteam kb prior` shows it all)")
        if prior.hint:
            lines.append(prior.hint)
        return "\n".join(lines)

    cut = False
    while len(text(cut)) > max_chars:
        droppable = [part for part, least in ((runs, 1), (best_lines, 1), (learned, 0)) if len(part) > least]
        if not droppable:
            break
        max(droppable, key=lambda part: sum(map(len, part))).pop()
        cut = True
    shown = text(cut)
    return shown if len(shown) <= max_chars else shown[: max_chars - 2].rstrip() + " …"
