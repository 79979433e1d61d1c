"""Issue 22, "a worktree that does not exist" and "briefs that are not enough": what a role is
told matches what exists, and gives it what it needs to act without guessing."""

from __future__ import annotations

import re

import subprocess
from pathlib import Path

from evoteam.servers.knowledge.models import CandidateCreate, LearningCreate
from evoteam.servers.team.models import SessionUpdate, TeamDesign
from evoteam.servers.team.sentences import sentence_tail
from evoteam.servers.team.store import TeamStore
from tests.team.conftest import design


def brief_of(result, index: int = 0) -> str:
    """What the role reads: the brief file its prompt names, else the prompt itself."""
    prompt = [c for s in result.plan.steps for c in s.calls][index].prompt
    if "is the file `" in prompt:
        return Path(prompt.split("is the file `", 1)[1].split("`", 1)[0]).read_text()
    return prompt


async def test_a_worktree_role_gets_a_real_worktree_named_in_its_brief(kb, run, project, service_factory):
    result = await service_factory().design_team(TeamDesign(**design(run.id, "Builder", isolation="worktree")))
    session = (await TeamStore(kb).latest_sessions(run.id, 1))["builder"]
    assert session.worktree and session.branch
    assert (Path(session.worktree) / "README.md").is_file()
    branches = subprocess.run(["git", "branch", "--list", session.branch], cwd=project, capture_output=True,
                              text=True, check=True).stdout
    assert session.branch in branches
    brief = brief_of(result)
    assert f"`{session.worktree}`" in brief and f"`{session.branch}`" in brief


async def test_without_git_a_role_is_never_told_it_has_a_worktree(kb, run, tmp_path, service_factory):
    from evoteam.servers.team.core import TeamService

    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    svc = TeamService(TeamStore(kb), project_dir=plain)
    result = await svc.design_team(TeamDesign(**design(run.id, "Builder", isolation="worktree")))
    brief = brief_of(result)
    assert "worktree" not in brief.split("## Coordination", 1)[1]
    assert "do not commit" in brief
    assert any("shared tree" in w and "not a git repository" in w for w in result.warnings)
    # Two roles without a worktree for one reason: one warning naming both, not the sentence twice (mp63).
    both = await svc.design_team(TeamDesign(**design(run.id, "Builder", "Tester", isolation="worktree")))
    shared = [w for w in both.warnings if "shared tree" in w]
    assert len(shared) == 1 and shared[0].startswith("Builder and Tester work in the shared tree: "), both.warnings


async def test_the_brief_says_what_to_call_and_with_which_ids(kb, run, service_factory):
    d = design(run.id, "Builder", mcp_servers=["knowledge", "bench"])
    d["knowledge_plan"] = {"shared_reads": ["the kit's README"]}
    d["roles"][0]["reads_first"] = ["the kit's README"]
    brief = brief_of(await service_factory().design_team(TeamDesign(**d)))
    assert "describe_kit` with kit=\"toy\"" in brief
    assert f'run_id="{run.id}"' in brief
    assert "wait=false" in brief and "evaluation_result`" in brief  # when a long evaluation need not hold it
    assert "None" not in brief
    assert brief.count("the kit's README") == 1
    # Nothing is recorded yet: no read of an empty store is asked for.
    reads = brief.split("## Read before you act", 1)[1].split("## Deliver", 1)[0]
    assert "__history`" not in reads and "__best_candidates`" not in reads and "nothing to read" in reads
    # A read the supervisor's plan asks for is kept, and the brief says it comes back empty now
    # (a model read "nothing to read" beside a plan's read of the learnings as a contradiction).
    assert "comes back empty now (skip it until a teammate has recorded something)" in reads
    # How to read a busy machine's score, for a role that evaluates (model-play 2026-12-04), and
    # only for one: a role without the bench has no compare to call.
    rules = brief.split("## Working rules", 1)[1]
    assert "`contended`" in rules and "compare` of the two by id" in rules
    # Five runs for what is built on or reported, not for every program (a role re-ran a control
    # far below x0 because the brief asked it of every score; mp29, 2026-12-04).
    assert "before you build on it or report it" in rules and "one you set aside needs no more runs" in rules
    plain = brief_of(await service_factory().design_team(TeamDesign(**design(run.id, "Reader",
                                                                               mcp_servers=["knowledge"]))))
    assert "contended" not in plain


async def test_the_brief_names_the_best_candidate_and_what_it_tried(kb, run, service_factory):
    bench = kb.with_actor(kb.actor.model_copy(update={"verifier": True}))  # as the bench records
    await bench.record_candidate(CandidateCreate(run_id=run.id, code="x = 1", status="PASSED", score=1.5,
                                                 verified=True, notes="float32 accumulation"))
    await kb.add_learning(LearningCreate(run_id=run.id, text="float32 is enough"))
    current = await kb.get_run(run.id)
    result = await service_factory().design_team(TeamDesign(**design(run.id, "Builder")))
    brief = brief_of(result)
    assert f"Best so far: 1.5, candidate `{current.best_candidate_id}` (float32 accumulation)" in brief
    assert "__learnings`" in brief and "__best_candidates`" in brief


async def test_the_brief_gives_the_best_with_its_interval(kb, run, service_factory):
    # A measured best comes with its 95% interval, and the role is told what "better" has to mean.
    bench = kb.with_actor(kb.actor.model_copy(update={"verifier": True}))
    await bench.record_candidate(CandidateCreate(run_id=run.id, code="x = 2", status="PASSED", score=2.0,
                                                 verified=True, samples={"w": [1.9, 2.0, 2.1, 2.0, 1.95, 2.05]}))
    brief = brief_of(await service_factory().design_team(TeamDesign(**design(run.id, "Builder"))))
    assert re.search(r"Best so far: 2\.00 \(1\.\d+–2\.\d+\), candidate", brief), brief
    assert "only when its interval clears" in brief


async def test_design_output_does_not_repeat_the_rationale_per_role(kb, run, service_factory):
    d = design(run.id, "Scout", "Builder", "Critic")
    result = await service_factory().design_team(TeamDesign(**d))
    assert result.model_dump_json().count(d["rationale"]) <= 1


async def test_team_status_keeps_whole_sentences(kb, run, service_factory):
    svc = service_factory()
    await svc.design_team(TeamDesign(**design(run.id, "Builder")))
    report = " ".join(f"Step {i} measured variant {i} at {i}.5 ms." for i in range(60)) + " Next: try blocking."
    session = (await TeamStore(kb).latest_sessions(run.id, 1))["builder"]
    await TeamStore(kb).update_session(session.id, SessionUpdate(status="finished", last_message=report))
    shown = (await svc.team_status(run.id)).roles[0].last_message
    assert len(shown) <= 500 and shown.endswith("Next: try blocking.")
    assert shown.startswith("… Step ") and shown[2:] in report


def test_sentence_tail_cuts_at_a_word_when_one_sentence_is_too_long():
    assert sentence_tail("short.", 10) == "short."
    cut = sentence_tail("a " * 400 + "end", 50)
    assert cut.startswith("… ") and cut.endswith("end") and len(cut) <= 50


async def test_a_plans_bare_tool_reference_is_not_listed_beside_the_briefs_own_line(kb, run, service_factory):
    """A model's plan named `bench.describe_kit rmsnorm_cpu` and `knowledge.add_learning`, which the
    brief already gives with their arguments: each tool is listed once (model-play 2026-12-04);
    reads the brief does not give are kept."""
    d = design(run.id, "Builder", mcp_servers=["knowledge", "bench"])
    d["knowledge_plan"] = {"shared_reads": ["bench.describe_kit toy", "knowledge.learnings", "the profile notes"],
                           "shared_writes": ["knowledge.add_learning"]}
    body = brief_of(await service_factory().design_team(TeamDesign(**d))).split("## The task", 1)[1]
    assert body.count("describe_kit") == 1 and body.count("add_learning") == 1
    # The learnings tool is named too (in the line that says the run has none yet); other reads stay.
    assert "- knowledge.learnings" not in body and "- the profile notes" in body
    # Nor with a few words after it; a read that names an id, or is not a tool's, stays
    # (the learnings read was listed three times in a brief of a run with learnings; mp31, 2026-12-04).
    await kb.add_learning(LearningCreate(run_id=run.id, text="float32 is enough"))
    d["knowledge_plan"] = {"shared_reads": ["knowledge.learnings of the run", "bench.describe_kit for the signature",
                                            "knowledge.learnings (dead end lrn_0de5362dcc1b: no extra passes)",
                                            "learnings from the last version about tiling",
                                            "knowledge.best_candidates split heldout", "knowledge.history his_0a1b2c3d4e5f"],
                           "shared_writes": ["knowledge.add_learning for wins and dead ends"]}
    d["roles"][0]["reads_first"] = ["knowledge.learnings of the run", "knowledge.get_candidate cand_c6818857bc27 include_code"]
    body = brief_of(await service_factory().design_team(TeamDesign(**d))).split("## The task", 1)[1]
    assert body.count("describe_kit") == 1 and body.count("add_learning") == 1, body
    assert "learnings of the run" not in body, body
    for kept in ("dead end lrn_0de5362dcc1b", "learnings from the last version about tiling", "cand_c6818857bc27",
                 "best_candidates split heldout", "his_0a1b2c3d4e5f"):  # an option or an id is news
        assert kept in body, (kept, body)
    # Free text naming only what a built line reads: "run learnings" and "learnings of this run"
    # after "The learnings document …", "kit description" after the kit line (mp48).
    # ...and "the kit description (bench.describe_kit)", "the run's learnings" (mp64).
    d["knowledge_plan"] = {"shared_reads": ["run learnings", "kit description", "the kit's README",
                                            "the kit description (bench.describe_kit)"]}
    d["roles"][0]["reads_first"] = ["learnings of this run", "the last profile artifact", "the run's learnings"]
    body = brief_of(await service_factory().design_team(TeamDesign(**d))).split("## The task", 1)[1]
    for dropped in ("- run learnings", "- kit description", "- learnings of this run", "- the kit description (",
                    "- the run's learnings"):
        assert dropped not in body, (dropped, body)
    for kept in ("- the kit's README", "- the last profile artifact"):
        assert kept in body, (kept, body)


async def test_a_kernel_kits_brief_leaves_out_the_program_kits_rule(kb, run, service_factory):
    """A kernel kit's role brief carried "A program kit's score from under 5 runs ...", read for
    nothing (mp38): once the run's best shows a kernel kit's rounds, the line is left out; a
    program's best keeps it, and so does a run with nothing measured (its kit's kind unknown here)."""
    rule = "A program kit's score from under 5 runs"
    d = design(run.id, "Builder", mcp_servers=["knowledge", "bench"])
    assert rule in brief_of(await service_factory().design_team(TeamDesign(**d)))
    bench = kb.with_actor(kb.actor.model_copy(update={"verifier": True}))
    await bench.record_candidate(CandidateCreate(run_id=run.id, code="x = 2", status="PASSED", score=2.0, verified=True,
                                                 samples={"n512": [1.9, 2.0, 2.1], "n1024": [2.0, 1.95, 2.05]}))
    kernel = brief_of(await service_factory().design_team(TeamDesign(**d)))
    assert rule not in kernel and "`contended`" in kernel
    from evoteam.servers.knowledge.models import RunCreate

    programs = await kb.start_run(RunCreate(goal="pack circles", kit="toy"))
    await bench.record_candidate(CandidateCreate(run_id=programs.id, code="x = 3", status="PASSED", score=9.0,
                                                 verified=True, samples={"program": [9.0]}))
    d = design(programs.id, "Builder", mcp_servers=["knowledge", "bench"])
    assert rule in brief_of(await service_factory().design_team(TeamDesign(**d)))


async def test_a_later_stage_of_the_first_version_reads_no_history(kb, run, service_factory):
    """The history has an entry per reflected version: none while v1 works, in any stage. A
    second-stage role of v1 was sent to read it and got "_No history yet._" (mp63); its teammates'
    learnings and candidates may exist by then, so those reads stay. Its working rules name the
    compare's `verdict`, which a compare's reply has (a brief named a `standing` it lacks; mp63)."""
    d = design(run.id, "Scout", "Builder", stages=[["Scout"], ["Builder"]], mcp_servers=["knowledge", "bench"])
    result = await service_factory().design_team(TeamDesign(**d))
    later = brief_of(result, 1)
    assert "You are in stage 2 of 2" in later
    reads = later.split("## Read before you act", 1)[1].split("## Deliver", 1)[0]
    assert "__history`" not in reads and "__learnings`" in reads and "__best_candidates`" in reads, reads
    rules = later.split("## Working rules", 1)[1]
    assert "its `verdict` says where B stands in the run" in rules and "`standing`" not in rules, rules


async def test_a_read_that_is_no_file_in_the_project_is_named_to_the_supervisor(kb, run, project, service_factory):
    """A brief listed `baseline.py` and `task_kits/<kit>/baseline.py` as reads, neither a file where
    the role starts (mp70): design_team names them once; tools, files that are there and prose pass."""
    (project / "notes").mkdir()
    (project / "notes" / "profile.md").write_text("where the time goes\n")
    d = design(run.id, "Builder", "Tester", mcp_servers=["knowledge", "bench"])
    d["knowledge_plan"] = {"shared_reads": ["baseline.py", "team.budget", "the kit's README"]}
    d["roles"][0]["reads_first"] = ["task_kits/toy/baseline.py", "notes/profile.md", "knowledge.search",
                                    f"`{project / 'README.md'}`", "np.einsum", "docs.nvidia.com", "cuda.h"]
    # A file an earlier stage writes is not there yet, and is no mistake (review).
    d["roles"][0]["writes_to"] = ["notes/plan.md"]
    d["roles"][1]["reads_first"] = ["baseline.py", "bench.describe_kit toy", "notes/plan.md", "`profile.txt`"]
    d["roles"][1]["deliverables"] = ["profile.txt"]
    result = await service_factory().design_team(TeamDesign(**d))
    named = [w for w in result.warnings if "no file" in w]
    assert named == [f"the reads `baseline.py`, `task_kits/toy/baseline.py` are no files under the project folder "
                     f"{project}: the briefs say so beside them (no new version is needed); where a role must read a "
                     "kit's file, bench.describe_kit gives its absolute path"], result.warnings
    # ...and each brief says it beside the read, where the role reads it (a new version only to fix a read: mp71).
    note = ("(no such file under the project folder when the team was designed: bench.describe_kit gives a kit's "
            "files)")
    first, second = brief_of(result, 0), brief_of(result, 1)
    assert f"- task_kits/toy/baseline.py {note}" in first and f"- baseline.py {note}" in first, first
    assert "- notes/profile.md\n" in first and "- notes/plan.md\n" in second and "- `profile.txt`\n" in second
    d["knowledge_plan"] = {}
    d["roles"][0]["reads_first"] = d["roles"][1]["reads_first"] = ["notes/profile.md"]
    assert not [w for w in (await service_factory().design_team(TeamDesign(**d))).warnings if "no file" in w]
