"""Issue 22: the friction an agent playing the model met when following the texts literally
(/kernel-loop on pairwise_distance_cpu through stdio servers, /evolve-team's briefs on
rmsnorm_cpu), kept as assertions on the texts it needed."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def text(path: str) -> str:
    return (ROOT / path).read_text()


def test_kernel_loop_does_not_send_the_agent_to_the_finished_solution():
    skill = text("skills/kernel-loop/SKILL.md")
    assert "example files" not in skill and "better.py" not in skill
    assert "Leave the kit's `examples/` folder alone" in skill


def test_kernel_loop_and_briefs_say_to_pass_the_run_id_to_evaluate():
    assert "Pass the run id to every evaluate" in text("skills/kernel-loop/SKILL.md")
    assert "passing the run id" in text("agents/team-member.md")


def test_no_text_asks_for_record_outcome_after_documents_used_credited_it():
    for path in ("skills/kernel-loop/SKILL.md", "skills/research/SKILL.md", "skills/evolve-team/SKILL.md",
                 "agents/team-member.md"):
        body = text(path)
        if "documents_used" in body:
            after = body.split("documents_used", 1)[1][:400]
            assert "call `retrieval.record_outcome`" not in after and "then call" not in after, path


def test_a_role_knows_its_brief_may_be_a_file_and_the_supervisor_copies_prompts_unchanged():
    assert "names the file that holds it" in text("agents/team-member.md")
    assert "copy it unchanged" in text("evoteam/supervisor/prompts/in_session.md")


def test_no_text_tells_a_role_it_has_a_worktree_unconditionally():
    for path in ("agents/team-member.md", "evoteam/servers/team/materialise.py", "evoteam/supervisor/prompts/in_session.md"):
        assert "You work in your own git worktree and branch" not in text(path), path


def test_the_texts_that_say_how_to_evaluate_say_when_to_take_a_ticket():
    for path in ("skills/kernel-loop/SKILL.md", "agents/team-member.md", "evoteam/servers/team/materialise.py"):
        body = text(path)
        assert "wait=false" in body.replace("`wait: false`", "wait=false"), path
        assert "evaluation_result" in body, path


async def test_kernel_loop_names_evaluates_arguments_as_the_tool_spells_them(tmp_path):
    """"score it with bench.evaluate (kit, candidate path, run id, ...)" cost a model a failed call
    on `candidate` (mp43, 2026-12-05): the skill names the arguments the tool takes."""
    from mcp import Client

    from evoteam.config import Settings
    from evoteam.servers.bench.server import build_server
    from evoteam.servers.knowledge.local import LocalKnowledgeStore

    step = text("skills/kernel-loop/SKILL.md").split("3. **Iterate.**", 1)[1].split("4. **Record", 1)[0]
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        async with Client(build_server(Settings(db=tmp_path / "kb.db"), store)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
    takes = tools["evaluate"].input_schema["properties"]
    for name in ("kit", "candidate_path", "run_id", "parent_id", "notes"):
        assert f"`{name}`" in step and name in takes, name
    # A file in /tmp was refused on the first evaluate (mp60): the step says where the file goes.
    flat = " ".join(step.split())
    assert "inside your project" in flat and "`code`" in flat and "code" in takes
    # Asked to measure against one of the kit's examples, a model had no way but reading it (mp60).
    compares = tools["compare"].input_schema["properties"]
    assert "`a_path`), unread" in flat and "a_path" in compares


async def test_kernel_loop_names_add_learnings_arguments_as_the_tool_takes_them(tmp_path):
    """Step 4 named `text`, evidence, kind and confidence but not `run_id`, which the tool requires:
    three failed calls (mp73). Every argument the tool requires is named, as the tool spells it."""
    from mcp import Client

    from evoteam.config import Settings
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.server import build_server

    step = " ".join(text("skills/kernel-loop/SKILL.md").split("4. **Record", 1)[1].split("5. **", 1)[0].split())
    async with LocalKnowledgeStore.open(tmp_path / "kb.db") as store:
        async with Client(build_server(Settings(db=tmp_path / "kb.db"), store)) as client:
            schema = {t.name: t for t in (await client.list_tools()).tools}["add_learning"].input_schema
    assert set(schema["required"]) == {"run_id", "text"}, schema["required"]
    for name in schema["required"]:
        assert f"`{name}`" in step, name
    assert "`kind`" in step and "kind" in schema["properties"]


def test_kernel_loop_quotes_the_compare_a_standing_names_and_when_none_is_needed():
    """mp76 and mp77 followed "compare the parent" while the standing named another pair, and ran
    compares whose answer the replies already gave (a pair already compared; against the baseline,
    after an evaluation already paired with it). The skill quotes
    the standing's own words for the compare, which sides they are, and when none is needed."""
    from evoteam.servers.bench.evaluation.pairwords import compare_two

    flat = " ".join(text("skills/kernel-loop/SKILL.md").split())
    step = flat[flat.index("**Did it help?**"):flat.index("**Its cost and reach.**")]
    assert f"`{compare_two('X', 'Y')}`, X the child: B is X, A is Y" in step, step
    assert "what the two's paired rounds found" in step and "needs no compare with the baseline" in step
    # Not a style-share verdict by intervals: side by side, a compare can still show a faster kernel (rev77).
    assert "style's share alone" not in step.split("Otherwise")[0], step
    assert "A is its parent instead" in step  # what the change alone gained, asked apart from progress
    # A decision list in the order a model takes it: mp78 read the paragraph three times to order two
    # compares, and ran a twins' compare that could only measure the style's share.
    marks = ["1. *No compare*", "2. Otherwise *the compare the standing names*, that one alone", "3. *Only for a question of "
             "your own:*", "4. *Read it.*"]
    assert all(m in step for m in marks) and [step.index(m) for m in marks] == sorted(step.index(m) for m in marks)
    third = step[step.index(marks[2]):step.index(marks[3])]
    assert "A is its parent instead" in third, third
    # A twin of the one named is a no-compare case, not an afterthought: mp79 ran two twins' compares by rule 2.
    first = step[step.index(marks[0]):step.index(marks[1])]
    assert "twin of the one the standing names" in first and "measures that style's share only" in first, first
    # ...skipped, not "run it only to ..." (mp80 read that as maybe required); step 6 says twins are one result,
    # and a machine that stays busy has a rule of its own (mp80 could follow no "when it is quieter").
    assert "skip it" in first, first
    six = flat[flat.index("6. **Re-measure"):flat.index("7. **End the run**")]
    assert "Two twins (one arithmetic in both styles) are always one result" in six, six
    assert "the machine stays busy, go on with paired rounds" in flat


def test_evolve_team_says_whom_to_crown_after_the_held_out_check_and_what_to_do_on_a_busy_machine():
    """mp82 ended its held-out check with a compare that found the runner-up faster on held-out, and
    no text said whom to crown; its first held-out compare was with a runner-up of the other output
    style, which could only say "no faster kernel shown"; and "measure again on a quiet machine" had
    no rule where the machine stays busy. The skill says all three, and says a busy interval's
    widening as its two ends move (mp82 read "3x each way" as its half-width tripled)."""
    flat = " ".join(text("skills/evolve-team/SKILL.md").split())
    held = flat[flat.index("3. The held-out check"):flat.index("Stop when the budget is spent")]
    assert "the runner-up of its own output style" in held, held
    assert "Where it finds the runner-up faster: if on dev the two are one result" in held and \
        "crown the runner-up" in held and "report both, a trade-off between shapes" in held, held
    assert "the machine stays busy, go on with paired rounds" in flat
    assert "counts as its low end ÷3 to its high end ×3" in flat and "3× each way" not in flat
    # mp83 read "report them as one result" only in run_report's best_dev_note, after finishing; and
    # when to re-measure only from remeasure_missing: the loop and the crowning steps say both.
    crown = flat[flat.index("**Before you crown a best"):flat.index("3. The held-out check")]
    assert "`within_noise_of_top` names finalists, the top and those are one result" in crown, crown
    loop = flat[flat.index("## Step 2: the loop"):flat.index("4. **Design**")]
    assert "`remeasure_missing` names the version's best, `bench.remeasure`" in loop, loop
