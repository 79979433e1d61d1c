"""Turning a role into something an agent can run: its brief (the role's system prompt), a
Claude Code subagent file under `.claude/agents/`, an SDK `AgentDefinition`, and the
marker line by which hooks recognise which role a subagent played."""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import BaseModel

from evoteam.safepath import inside
from evoteam import stats
from evoteam.stats import describe_score

from evoteam.servers.knowledge.measurements import candidate_estimate, kind_of
from evoteam.servers.knowledge.models import Candidate, Run
from evoteam.servers.knowledge.pairedbest import tie_clause
from evoteam.servers.team.models import RoleSpec, TeamVersion
from evoteam.servers.team.toolnaming import ToolNaming
from evoteam.servers.team.validate import stage_of

GENERIC_AGENT = "team-member"
# Claude Code 2.1.x offers no Glob/Grep/TodoWrite tools (search goes through Bash).
BASE_TOOLS = ["Read", "Write", "Edit", "Bash"]

_MARKER = re.compile(r"\[evoteam role=(?P<slug>[a-z0-9-]+) version=(?P<version>\d+) run=(?P<run>[A-Za-z0-9_-]+)\]")


def role_marker(run_id: str, version: int, slug: str) -> str:
    """The first line of every role prompt; hooks read it back with `parse_role_marker`."""
    return f"[evoteam role={slug} version={version} run={run_id}]"


class RoleMarker(BaseModel):
    run_id: str
    version: int
    slug: str


def parse_role_marker(text: str) -> RoleMarker | None:
    """Find the role marker in a prompt or transcript text (None if absent)."""
    match = _MARKER.search(text or "")
    if not match:
        return None
    return RoleMarker(run_id=match["run"], version=int(match["version"]), slug=match["slug"])


def role_from_transcript(path: str | Path, max_lines: int = 50) -> RoleMarker | None:
    """The role a subagent played, from the first user entries of its transcript."""
    try:
        with Path(path).open(encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh):
                if number >= max_lines:
                    break
                marker = parse_role_marker(line)
                if marker:
                    return marker
    except OSError:
        return None
    return None


def role_tools(role: RoleSpec, naming: ToolNaming) -> list[str]:
    tools = list(BASE_TOOLS)
    for server in role.mcp_servers:
        tools += naming.server_tools(server)
    for extra in role.tools:
        if extra not in tools:
            tools.append(extra)
    return tools


def _bullets(items: list[str], empty: str) -> str:
    return "\n".join(f"- {item}" for item in items) if items else f"- {empty}"


def role_brief(team: TeamVersion, role: RoleSpec, run: Run, naming: ToolNaming | None = None,
               worktree_note: str | None = None, best: Candidate | None = None) -> str:
    """The full brief of a role: the system prompt of its subagent file, the body of its
    spawn prompt, and the prompt of its headless session. `worktree_note` says where the role
    works (briefing.py makes the worktree it names); `best` is the run's best candidate."""
    naming = naming or ToolNaming()
    stages = stage_of(team)
    my_stage = stages[role.slug]
    n_stages = max(stages.values()) + 1
    teammates = [f"{r.name} (stage {stages[r.slug] + 1})" if n_stages > 1 else r.name
                 for r in team.roles if r.slug != role.slug]
    k = naming.tool
    incoming = [h for h in team.coordination.handoffs if _same(h.to_role, role)]
    outgoing = [h for h in team.coordination.handoffs if _same(h.from_role, role)]
    bench = "bench" in role.mcp_servers
    # Reads of what cannot exist yet are left out: a first-stage role of a run with nothing
    # recorded would spend three calls on empty answers. Later stages read everything.
    first = my_stage == 0
    # The history has an entry per reflected version, so none while v1 works, in any stage (mp63).
    no_learnings, no_candidates, no_history = (first and run.learnings == 0, first and run.candidates == 0,
                                               team.version == 1)
    built_reads = [
        *([] if no_learnings else [
            f"The learnings document of run `{run.id}` (`{k('knowledge', 'learnings')}`): what earlier teams "
            f"established, what failed, what is still open."]),
        *([] if no_history else [
            f"The evolution history (`{k('knowledge', 'history')}`): why this team exists and what the previous "
            f"versions did."]),
        *([] if no_candidates else [
            f"The best candidates so far (`{k('knowledge', 'best_candidates')}`) and, before building on one, "
            f"its code (`{k('knowledge', 'get_candidate')}` with include_code=true)."]),
        *([f"Run `{run.id}` has no learnings, candidates or earlier team versions yet, so there is nothing to read "
           f"in the store before you start: a read of its learnings, candidates or history below comes back empty "
           f"now (skip it until a teammate has recorded something); later, `{k('knowledge', 'learnings')}` "
           f"shows what your teammates recorded."] if no_learnings and no_candidates and no_history else []),
        *([f"The kit (`{k('bench', 'describe_kit')}` with kit=\"{run.kit}\"): what a candidate must define, how it "
           f"is scored, and the starting-point file to copy."] if bench and run.kit else []),
    ]
    reads = built_reads + _not_repeating([*team.knowledge_plan.shared_reads, *role.reads_first], built_reads)
    reads = list(dict.fromkeys(r.strip() for r in reads if r.strip()))  # the plan and the role may name one read twice
    built_writes = [
        f"Every empirical finding, with the ids of the candidates or artifacts that back it: "
        f"`{k('knowledge', 'add_learning')}` with role=\"{role.name}\" and team_version={team.version}. "
        f"Record dead ends (kind=dead_end) as carefully as successes.",
        f"Files worth keeping (kernels, profiles, reports): `{k('knowledge', 'put_artifact')}`.",
        f"Every candidate you want scored: `{k('bench', 'evaluate')}` with "
        + (f"kit=\"{run.kit}\", " if run.kit else "")
        + f"run_id=\"{run.id}\", role=\"{role.name}\", team_version={team.version}, parent_id (the candidate it "
        f"derives from) and notes (what it tries); it measures honestly and records the candidate. When "
        f"an evaluation would keep you idle (a long one, or a queue of them), pass wait=false and collect it "
        f"later with `{k('bench', 'evaluation_result')}` (ticket, wait_s).",
    ]
    if not bench:
        built_writes.pop(2)
    writes = built_writes + _not_repeating([*team.knowledge_plan.shared_writes, *role.writes_to], built_writes)
    writes = list(dict.fromkeys(w.strip() for w in writes if w.strip()))
    # Never a worktree that was not made: without a note, the role is told it shares the tree.
    place = worktree_note or shared_place(role)
    coordination = [place]
    if n_stages > 1:
        coordination.append(f"You are in stage {my_stage + 1} of {n_stages}; stages run in order and the roles "
                            f"of one stage run in parallel.")
    coordination += [f"You receive from {h.from_role}: {h.what}" for h in incoming]
    coordination += [f"You hand to {h.to_role}: {h.what}" for h in outgoing]
    if team.coordination.notes:
        coordination.append(team.coordination.notes)
    if team.knowledge_plan.notes:
        coordination.append(f"Knowledge plan: {team.knowledge_plan.notes}")
    never = [f"Do not touch: {', '.join(role.must_not_touch)}."] if role.must_not_touch else []
    kit = f"\nTask kit: `{run.kit}`." if run.kit else ""
    score = "\n" + score_line(run, best)
    # Models read a busy machine's score as any other (model-play 2026-12-04): one line says how not to.
    busy = (f"- A score marked `contended` (taken on a busy machine) can be off by more than its interval: call "
            f"it better than another candidate only once `{k('bench', 'compare')}` of the two by id says so "
            "(its `verdict` says where B stands in the run).\n"
            if bench else "")
    # A kernel kit's brief carried the program kits' line too, read for nothing (mp38): said unless
    # the run's best shows a kernel kit's rounds (nothing measured yet: the kind is not known here).
    kernel = best is not None and bool(best.samples) and kind_of(best.samples) == "kernel"
    if bench and not kernel:
        # A role reported a lucky single run of a program as its win (model-play 2026-12-04).
        # Only what is built on or reported needs them: a role re-ran a control far below x0 (mp29).
        busy += ("- A program kit's score from under 5 runs (`runs` in listings) ranks after measured ones and is "
                 "no result yet: before you build on it or report it as a result, evaluate it again by its "
                 "`candidate_id` (its message says how many `repeats` make 5 runs); one you set aside needs no "
                 "more runs.\n")
    return f"""You are the **{role.name}** in version {team.version} of an evolving agent team working on \
evoteam run `{run.id}`. The supervisor invented this role for this version; nobody else holds it.

## The task
{run.goal.strip()}{kit}{score}

## Your mandate
{role.mandate.strip()}

## Why this team looks the way it does
{_clip(team.diagnosis, 1500)}

{_clip(team.rationale, 1500)}

## Read before you act (mandatory)
{_bullets(reads, "nothing beyond the above")}

## Deliver
{_bullets(role.deliverables, "a short written account of what you tried, what you measured and what it means")}

## Record as you go (not only at the end)
{_bullets(writes, "")}

## Coordination
{_bullets(coordination + never, "")}
Your teammates in this version: {', '.join(teammates) if teammates else 'none (you work alone)'}.

## Working rules
- Measure, do not guess: claim a gain or a cause only with a measurement you recorded.
{busy}- Never game the evaluator (no special-casing its inputs, no skipping correctness, no caching results).
- When you are stuck on one thing for long, write down what you know as a learning and change approach.
- Stay inside your mandate; if something outside it blocks you, record it for the supervisor.
- Finish with a short report: what you did, the ids of the candidates, learnings and artifacts you \
recorded, and what the next team should try.
"""


# A bare reference: a tool's name with at most one argument (no "="), or, named with its server
# (`knowledge.learnings`), followed only by filler ("of the run"); never with an id or an option
# ("split heldout", "kind dead_end", "repeats=5"): those say what the brief's own line does not.
_TOOL_REF = re.compile(r"^`?(?:mcp__\w+?__|\w+[.:])?(\w+)`?(?:\s+[^\s=]+)?$")
_SERVER_TOOL_REF = re.compile(r"^`?(?:mcp__\w+?__|\w+[.:])(\w+)`?((?:\s+[\w'-]+){0,6})\s*$")
_FILLER = frozenset("""a an the this its our my of for to on in and from with all run runs kit task team
signature wins dead ends findings notes what""".split())
_ID = re.compile(r"\b[a-z]{2,6}_[0-9a-f]{8,}\b")
# Words of a free-text read ("run learnings", "kit description") and the tool whose built line
# covers them: a brief listed "The learnings document …", then "- run learnings", then
# "- learnings of this run" (mp48, 2026-12-06).
_TOPICS = {"learnings": "learnings", "learning": "learnings", "history": "history", "description": "describe_kit",
           "best": "best_candidates", "candidates": "best_candidates"}
_READ_FILLER = _FILLER | {"document"}  # "the learnings document" names the learnings read
_REF_FILLER = _READ_FILLER - {"dead", "ends", "wins", "findings", "notes"}  # "(dead ends of the kit)" is news
_ANY_TOOL_REF = re.compile(r"`?(?:mcp__\w+?__|\b(?:knowledge|bench|team|retrieval)[.:])(\w+)`?")


def _not_repeating(extra: list[str], built: list[str]) -> list[str]:
    """A plan's reads or writes, less the bare tool references (`knowledge.learnings`,
    `bench.describe_kit rmsnorm_cpu`, `knowledge.learnings of the run`) whose tool a line of the
    brief already names: a model-play found a brief listing describe_kit three times and
    add_learning twice, another the learnings read three times (mp31; 2026-12-04)."""
    named = {quoted.rsplit("__", 1)[-1] for line in built for quoted in re.findall(r"`([^`]+)`", line)}

    def repeats(line: str) -> bool:
        if _ID.search(line):
            return False
        # "the kit description (bench.describe_kit)": tools the brief names, in words that add nothing (mp64).
        refs = _ANY_TOOL_REF.findall(line)
        rest = [w.removesuffix("'s") for w in re.findall(r"[a-z_']+", _ANY_TOOL_REF.sub(" ", line).lower())]
        if refs and set(refs) <= named and len(rest) <= 6 and all(w in _REF_FILLER or w in _TOPICS for w in rest) \
                and {_TOPICS[w] for w in rest if w in _TOPICS} <= named:  # "and the history": a read of its own
            return True
        words = [w.removesuffix("'s") for w in re.findall(r"[a-z_.']+", line.lower())]  # "the run's learnings"
        if "`" not in line and "." not in line and 0 < len(words) <= 5:  # free text, not a tool's name
            topics = {_TOPICS.get(w, "") for w in words if w not in _READ_FILLER}  # "": a word no tool covers
            return bool(topics) and topics <= named
        if (m := _TOOL_REF.match(line)) or ((m := _SERVER_TOOL_REF.match(line))
                                            and set(m.group(2).lower().split()) <= _FILLER):
            return m.group(1) in named
        return False

    return [e for e in extra if not repeats(e.strip())]


def shared_place(role: RoleSpec) -> str:
    if role.isolation == "shared":
        return "You work in the shared project tree; keep your changes small and coordinated."
    return (f"You work in the project folder, shared with the other roles: keep your files in a folder of your "
            f"own (`{role.slug}/`) and do not commit; every candidate you evaluate is recorded in the store.")


def score_line(run: Run, best: Candidate | None) -> str:
    """Where the run stands, as a role needs it: the best score with its candidate and what it
    tried, or that nothing is measured yet."""
    start = f"the starting score x0 is {run.x0:.6g}" if run.x0 is not None else "no starting score is recorded"
    if best is not None and best.score is not None:
        note = " ".join((best.notes or "").split())
        tried = f" ({_clip(note, 200)})" if note else ""
        leads = run.leads_from_too_few_runs
        if best.id == run.best_candidate_id:  # one result with the last new best (mp82: two targets)
            tried += tie_clause(run.best_within_noise_of)
        elif run.best_candidate_id:  # briefing.best_candidate
            leads = [x for x in leads if x.candidate_id != best.id]  # said here: no lead over itself (review)
            # Not "its interval is wider": measured apart, a narrower interval placed lower ranks it below too.
            why = "its runs are too few for a 95% interval" if best.runs is not None else \
                "measured apart, their intervals rank this one lower"
            tried += (f", which the run's compares (bench.compare, bench.remeasure) find better than "
                      f"`{run.best_candidate_id}`, the first by intervals ({why})")
        shown = candidate_estimate(best)
        if shown is not None and stats.spread_unknown(shown):  # a program run once: nothing can clear it yet
            noise = ("; from too few runs to know its spread: a new candidate is established as better only "
                     "once both have run 5 times (bench.remeasure, or bench.evaluate with repeats 5)")
        else:
            # "Clears" read on bare intervals, where a busy one counts widened: a role would have claimed a
            # win its standing denied (mp83). The standing is the one reading of it.
            noise = ("; a new candidate beats it only when its interval clears that one as its evaluation's "
                     "`standing` counts it (it says new best; a busy kernel's interval counts widened), or when the "
                     "paired rounds of the two say so (bench.compare by id: one significant verdict is enough, the "
                     "`pooled` one where the reply has it; the run pools every compare of the same two, so "
                     "comparing again adds rounds to that verdict rather than a second chance)") if shown else ""
        return (f"Best so far: {describe_score(best.score, best.score_interval, runs=best.samples or best.n_measurements)}, candidate `{best.id}`{tried}"
                f"{noise}{stats.describe_leads(leads)}; {start}; the score is to be {run.direction}d.")
    if run.best_score is not None:
        which = f", candidate `{run.best_candidate_id}`" if run.best_candidate_id else ""
        return (f"Best so far: {describe_score(run.best_score, run.best_interval, runs=run.best_runs, exact=run.best_exact)}{which}"
                f"{stats.describe_leads(run.leads_from_too_few_runs)}; {start}; the score is to be {run.direction}d.")
    return f"Nothing has been measured in this run yet; {start}; the score is to be {run.direction}d."


def _same(name: str, role: RoleSpec) -> bool:
    from evoteam.servers.team.models import slugify

    return slugify(name) == role.slug


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " …"


def role_description(team: TeamVersion, role: RoleSpec) -> str:
    first = " ".join(role.mandate.strip().split("\n", 1)[0].split())
    if len(first) > 200:
        first = first[:200].rstrip() + "…"
    return f"{role.name} (evoteam team v{team.version}, run {team.run_id}): {first}"


_CONTROL = re.compile(r"[\x00-\x1f\x7f\u2028\u2029\x85]")


def frontmatter(fields: dict[str, str]) -> str:
    """Serialise flat string fields as YAML front matter (``---`` lines included). Values are
    written by the YAML serialiser, never pasted into the text, and the result is read back
    and compared, so no value can add a key (``permissionMode``, ``hooks``) or a line."""
    for key, value in fields.items():
        if _CONTROL.search(value):
            raise ValueError(f"front matter value of {key!r} must be one line without control characters")
    import yaml  # here: `evoteam team status` and the team server's start need no YAML

    text = yaml.safe_dump(fields, sort_keys=False, allow_unicode=False, default_flow_style=False,
                          width=1_000_000)
    # One line per field (some readers of agent files go line by line), and exactly these fields.
    if yaml.safe_load(text) != fields or text.count("\n") != len(fields):
        raise ValueError("front matter did not serialise to exactly its fields")
    return f"---\n{text}---\n"


def agent_file_text(team: TeamVersion, role: RoleSpec, run: Run, naming: ToolNaming | None = None,
                    worktree_note: str | None = None, best: Candidate | None = None) -> str:
    """A Claude Code subagent definition: YAML frontmatter (name, description, tools, model)
    and the role's brief as its system prompt."""
    naming = naming or ToolNaming()
    front = frontmatter({"name": role.slug, "description": role_description(team, role),
                         "tools": ", ".join(role_tools(role, naming)), "model": role.model})
    return front + "\n" + role_brief(team, role, run, naming, worktree_note, best)


OWN_FILE_MARK = "(evoteam team v"


def materialise(team: TeamVersion, run: Run, project_dir: Path, naming: ToolNaming | None = None,
                skipped: list[Path] | None = None, notes: dict[str, str] | None = None,
                best: Candidate | None = None) -> list[Path]:
    """Write every role of the version to `<project>/.claude/agents/<slug>.md`; returns the paths.
    A later version's role of the same name replaces the file (the store keeps every version);
    an agent file evoteam did not write is left alone (and listed in `skipped`)."""
    folder = Path(project_dir) / ".claude" / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    from evoteam.plugin.gitexclude import keep_out_of_git

    keep_out_of_git(Path(project_dir), [f".claude/agents/{role.slug}.md" for role in team.roles] + [".evoteam/"])
    written = []
    for role in team.roles:
        path = inside(folder, f"{role.slug}.md", what="role file")
        if path.exists() and OWN_FILE_MARK not in path.read_text(encoding="utf-8", errors="replace")[:2000]:
            if skipped is not None:
                skipped.append(path)
            continue
        tmp = path.with_suffix(".md.tmp")
        tmp.write_text(agent_file_text(team, role, run, naming, (notes or {}).get(role.slug), best),
                       encoding="utf-8")
        tmp.replace(path)
        written.append(path)
    return written


def agent_definition(team: TeamVersion, role: RoleSpec, run: Run, naming: ToolNaming | None = None,
                     worktree_note: str | None = None, best: Candidate | None = None):
    """The role as a `claude_agent_sdk.AgentDefinition` (for the SDK's `agents` option)."""
    from claude_agent_sdk import AgentDefinition

    naming = naming or ToolNaming()
    return AgentDefinition(description=role_description(team, role),
                           prompt=role_brief(team, role, run, naming, worktree_note, best),
                           tools=role_tools(role, naming), model=role.model)


def parse_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """Read back the frontmatter of an agent file (YAML between ``---`` lines). Raises
    ValueError when the text has no frontmatter or it is not a flat mapping."""
    if not text.startswith("---\n"):
        raise ValueError("no frontmatter: the file must start with '---'")
    end = text.find("\n---\n", 3)
    if end < 0:
        raise ValueError("frontmatter is not closed by '---'")
    import yaml

    try:
        fields = yaml.safe_load(text[4:end + 1]) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"bad frontmatter: {str(exc).splitlines()[0]}") from None
    if not isinstance(fields, dict):
        raise ValueError("frontmatter is not a mapping")
    return {str(k): v if isinstance(v, str) else str(v) for k, v in fields.items()}, text[end + 5:]
