"""What `bench.evaluate(candidate_path=...)` may read, and how the bench records a verified result.

The bench reads a candidate file with the bench's own rights and stores its text in the shared
knowledge store, so an unchecked path is a way to read any file (`/proc/self/environ`, the
held-out secret, someone's keys) and publish it to the whole project. A candidate path must:

- resolve (links followed) inside one of the allowed folders: the bench's working directory
  (the caller's project or worktree), a configured candidate folder (`candidate_dirs`,
  `EVOTEAM_CANDIDATE_DIRS`), or a kit folder (its baseline and examples are candidates too);
- never be one of evoteam's own files: the store file and its -wal/-shm/-journal, the bench's
  state folder (held-out secret, trusted kits, locks) and an operator's held-out key file. Only
  those files: the folder that holds the store may be the user's home or project
  (`EVOTEAM_DB=~/evoteam.db`), and every project under it stays readable;
- be a regular file (no FIFO, device or directory) ending in .py or .json, of bounded size.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

from pydantic import ValidationError

from evoteam import stats
from evoteam.config import Settings
from evoteam.errors import DomainError, Missing
from evoteam.servers.bench.formats.kits import state_dir
from evoteam.servers.knowledge.errors import Forbidden
from evoteam.servers.knowledge.measurements import DISAGREE
from evoteam.servers.knowledge.models import Candidate, CandidateCreate
from evoteam.servers.knowledge.store import KnowledgeStore

MAX_CANDIDATE_BYTES = 2_000_000
SUFFIXES = (".py", ".json")


def candidate_roots(settings: Settings, cwd: Path | None = None, extra: tuple[Path, ...] = ()) -> list[Path]:
    """The folders a candidate file may live in, resolved."""
    roots = [Path(cwd or Path.cwd()), *settings.candidate_dirs, *settings.kits_dirs, *extra]
    return [r.expanduser().resolve() for r in roots]


def state_paths(settings: Settings, env: dict[str, str] | None = None) -> list[tuple[Path, str]]:
    """evoteam's own files, each with what it is: nothing of the bench or a kit may read them.
    A folder in this list covers everything under it; a file covers only itself."""
    env = os.environ if env is None else env
    files = settings.store_files  # none when the store is a database URL
    paths = [(f, "knowledge store" if i == 0 else "knowledge store's journal") for i, f in enumerate(files)]
    paths.append((state_dir(settings), "bench state folder (held-out secret, trusted kits, locks)"))
    if env.get("EVOTEAM_HELDOUT_KEY_FILE"):
        paths.append((Path(env["EVOTEAM_HELDOUT_KEY_FILE"]).expanduser().resolve(), "held-out key file"))
    return paths


def state_file_of(settings: Settings, path: Path) -> tuple[Path, str] | None:
    """The evoteam file (or folder) `path` is or lies in, or None."""
    for own, what in state_paths(settings):
        if path == own or own in path.parents:
            return own, what
    return None


def check_candidate_path(settings: Settings, candidate_path: str, cwd: Path | None = None,
                         extra_roots: tuple[Path, ...] = ()) -> Path:
    """The resolved candidate file, or a DomainError saying why it may not be read."""
    given = Path(candidate_path).expanduser()
    if not given.is_absolute():
        given = Path(cwd or Path.cwd()) / given
    path = given.resolve()
    if (own := state_file_of(settings, path)) is not None:
        raise DomainError(f"{candidate_path} is evoteam's {own[1]} ({own[0]}), not a candidate: write the candidate "
                          f"as a .py file in your project or worktree, or pass its code as code=")
    roots = candidate_roots(settings, cwd, extra_roots)
    if not any(path == r or r in path.parents for r in roots):
        raise DomainError(f"{candidate_path} is outside your project: put the candidate in your working folder "
                          f"(or a folder listed in EVOTEAM_CANDIDATE_DIRS), or pass its code instead")
    if path.suffix not in SUFFIXES:
        raise DomainError(f"{candidate_path} is not a .py file or a FlashInfer-Bench solution .json")
    try:
        info = os.stat(path)
    except OSError:
        raise Missing(f"candidate file {candidate_path} does not exist; pass an existing .py path or the code "
                          f"itself") from None
    if not stat.S_ISREG(info.st_mode):
        raise DomainError(f"{candidate_path} is not a regular file; pass a .py file or the code itself")
    if info.st_size > MAX_CANDIDATE_BYTES:
        raise DomainError(f"{candidate_path} is {info.st_size} bytes; the limit is {MAX_CANDIDATE_BYTES}")
    return path


UNVERIFIED_NOTE = ("recorded as unverified: the shared knowledge server's token is not a verifier, so this "
                   "score is listed but never ranked (give the bench a token made with `evoteam token add "
                   "--verifier`)")


async def record_measured(store: KnowledgeStore, record: CandidateCreate,
                          claim: bool = True) -> tuple[Candidate, str | None]:
    """Record a result the bench measured, as verified. In process the bench holds the verifier
    capability; over a shared server the token decides (`evoteam token add --verifier`), and a
    plain token's result is kept as an unverified claim, with a note saying so (``claim``; else
    the refusal, Forbidden, is raised)."""
    bench = store.with_actor(store.actor.model_copy(update={"verifier": True}))
    try:
        return await bench.record_candidate(record.model_copy(update={"verified": True})), None
    except Forbidden:
        if not claim:
            raise
        return await store.record_candidate(record.model_copy(update={"verified": False})), UNVERIFIED_NOTE


async def check_parent(store: KnowledgeStore, parent_id: str, run_id: str | None) -> None:
    """Refuse a parent the caller cannot see, or one of another project than the run, before
    anything is measured (the store checks again when it records)."""
    parent = await store.get_candidate(parent_id)
    if run_id is not None:
        run = await store.get_run(run_id)
        if parent.run_id != run_id and (await store.get_run(parent.run_id)).project != run.project:
            raise DomainError(f"parent {parent_id} belongs to another project than run {run_id}; lineage stays "
                              f"within one project")


async def same_as_parent(store: KnowledgeStore, parent_id: str, saved) -> str:
    """Said where a new candidate's code is its parent's, of another run: identical code pools only
    within a run, and a second engineer's copy of a colleague's best became a new candidate
    without a word (model-play mp34, 2026-12-05)."""
    parent = await store.get_candidate(parent_id)
    if parent.run_id == saved.run_id or not parent.code_hash or parent.code_hash != saved.code_hash:
        return ""
    return (f"; the same code as its parent {parent.id} (run {parent.run_id}): measurements pool within a run only, "
            f"so this is a candidate of its own here")


HELDOUT_CHECK = "held-out check of "  # the notes of a held-out check of a recorded candidate, when given none
# Why separate evaluations of one code can differ, and what decides then. "The machine's state" alone
# blamed the machine for a candidate whose speed depended on the minute it was imported in (mp51).
DRIFT_CAUSES = "the machine's state between them, or code whose speed depends on when or where it runs"
DRIFT_ADVICE = "decide on pooled figures or paired rounds (bench.compare by id, bench.remeasure)"


def pooled_lead(saved, message: str, notes: str, kind: str, own: list[float] | None = None,
                parent_id: str | None = None) -> str:
    """This measurement's message behind what the pooled candidate now is: its score, or why it
    does not rank (a failure or a flag of any measurement of the code is the candidate's).
    ``own``: this measurement's interval, taken on a quiet machine; where it leaves out the pooled
    score, the earlier measurements read otherwise, and that is said."""
    runs = stats.runs_of(saved.samples) if kind == "program" else None
    head = f"same code as {saved.id}, now measured {saved.n_measurements} times{f' ({runs} runs)' if runs else ''}: "
    if saved.status != "PASSED" or saved.flagged:
        why = "flagged" if saved.flagged and saved.status == "PASSED" else f"a measurement {saved.status}"
        head += f"it does not rank ({why}: the candidate is every measurement of its code)"
    else:
        pooled = _pooled_text(saved, '×' if kind == 'kernel' else '')
        head += f"it scores {pooled} pooled (its rank and what to report)"
        # Widened where its measurements disagree (knowledge/measurements.py, drift_widened): a
        # wider interval after one more measurement is said, not left to puzzle over.
        widened = kind == "kernel" and bool((saved.metrics or {}).get(DISAGREE))
        if own and saved.score is not None and not own[0] <= saved.score <= own[1]:
            # Identical code read 3.79 (3.50-4.92), then 2.69 (2.53-3.01) on a quiet machine (mp47).
            # The causes only where the measurements differ beyond chance: a narrow interval beside a
            # wide one can leave out a pooled score that both allow (review 2026-12-06).
            own_text = f"{stats.sig3(own[0])}–{stats.sig3(own[1])}{'×' if kind == 'kernel' else ''}"
            head += (f"; this measurement's interval ({own_text}) leaves out the pooled score: separate evaluations "
                     "of this code differ by more than one evaluation's interval shows "
                     f"({DRIFT_CAUSES}; the pooled interval is widened for it), so {DRIFT_ADVICE}" if widened else
                     f"; this measurement's interval ({own_text}) leaves out the pooled score, where its other "
                     f"measurements put it: {DRIFT_ADVICE}")
        elif widened:
            head += (f"; its measurements differ by more than their own intervals allow ({DRIFT_CAUSES}), so the "
                     f"pooled interval is widened for it: {DRIFT_ADVICE}")
        if "(exact:" in pooled:  # "(4 runs alike: too few to know its spread)" of this measurement read as
            # a doubt about the exact pooled score beside it (model-play mp35, 2026-12-05)
            message = re.sub(r" \(\d+ runs alike: too few to know its spread\)", " (alike)", message)
            message = message.replace("; one run, so its spread is unknown", "")
    # Only the caller's notes, and only where they differ from the kept ones, are lost: the bench's own
    # note of a held-out check (route.py) said "your notes were not stored" to a model that had passed
    # none (mp43).
    lost = notes and notes != saved.notes and not notes.startswith(HELDOUT_CHECK)
    kept = (f"; your notes were not stored: {saved.id} keeps its first measurement's (say what this one tried "
            f"with knowledge.add_learning, citing {saved.id})") if lost else ""
    # A parent given again is not stored either: the candidate keeps its first lineage (mp49).
    if parent_id and parent_id != saved.parent_id:
        kept += f"; parent_id {parent_id} was not stored: {saved.id} keeps its first measurement's lineage"
    return f"{head}; this measurement: {message}{kept}"


def _pooled_text(saved, unit: str = "") -> str:
    if saved.score is None:
        return "nothing"
    # Its runs where they say something: the rounds, a point's measurements, or runs too few for an interval.
    point = bool(saved.score_interval) and saved.score_interval[0] == saved.score_interval[1]
    return stats.describe_score(saved.score, saved.score_interval, unit,
                                saved.samples or (saved.n_measurements if point else saved.runs))


def few_runs_note(runs: int, candidate_id: str | None, samples: dict | None = None) -> str:
    """What a score from too few runs for a 95% interval means, said of the candidate as it now
    stands (its code's runs pooled): "until it has run 5 times" beside a pooled "exact: every run
    alike" read as unranked (model-play 2026-12-04). Unrecorded: of these runs, if too few."""
    n = stats.EXACT_MIN_RUNS
    if candidate_id is None:
        if samples and not stats.spread_unknown(stats.score_estimate(samples, "program")):
            return ""
        return f": nothing is established as better or worse than it until it has run {n} times (repeats {n})"
    more = n - runs
    # Worth the runs only for what is built on or reported: a model ran a control that read far
    # below x0 four more times, as the note seemed to ask of every candidate (mp28, 2026-12-04).
    # Shorter: it ended every evaluate of a program kit, 390 characters read for nothing (mp36, 2026-12-05).
    return (f"; {candidate_id} is from {runs} run{'s' if runs != 1 else ''}: it ranks after every candidate with a "
            f"95% interval and nothing is established against it until its code has run {n} times (evaluate its "
            f"candidate_id with repeats {more}, remeasure, or compare it by id: the runs pool; worth it for one you "
            "build on or report)")


def unrecorded(exc: ValidationError) -> DomainError:
    """The store refused what the bench itself measured: not said as "invalid arguments", which sent
    a model to check arguments that were right (mp43); the arguments were checked before measuring."""
    why = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors(include_url=False, include_input=False))
    return DomainError(f"the store refused this measurement's own figures ({why}), so nothing was recorded; the "
                       "arguments were checked before it ran: unless the kit's evaluator returned such values, this "
                       "is a bug in evoteam (report it)")
