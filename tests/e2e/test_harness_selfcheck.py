"""Self-checks of the e2e harness: the scripted Messages API and the real bundled Claude Code CLI.

If these fail, every other e2e test will too; read docs/testing.md.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anthropic
import pytest

from tests.support.claude_cli import (
    claude_mcp_add,
    claude_mcp_list,
    claude_version,
    parse_mcp_list,
    prepare_home,
    run_print_session,
)
from tests.support.demo_mcp_server import start_http_demo
from tests.support.scripted_api import Rule, ScriptedAPI, text, tool_use

DEMO_SERVER = str(Path(__file__).resolve().parents[1] / "support" / "demo_mcp_server.py")


# ---------------------------------------------------------------------------------------------
# The scripted API alone (no CLI): the official SDK must parse what it serves.
# ---------------------------------------------------------------------------------------------


def test_scripted_api_streaming_and_json_parse_with_anthropic_sdk() -> None:
    rules = [
        Rule(
            first_user="weather",
            needs_tools=False,
            replies=[[text("Let me check."), tool_use("get_weather", {"city": "Paris"})], "Sunny."],
        )
    ]
    with ScriptedAPI(rules) as api:
        client = anthropic.Anthropic(base_url=api.base_url, api_key="anything")
        msgs = [{"role": "user", "content": "weather in Paris?"}]
        with client.messages.stream(model="claude-x", max_tokens=100, messages=msgs) as stream:
            final = stream.get_final_message()
        assert final.stop_reason == "tool_use"
        assert [b.type for b in final.content] == ["text", "tool_use"]
        assert final.content[1].input == {"city": "Paris"}
        assert final.usage.input_tokens > 0 and final.usage.output_tokens > 0

        msgs += [
            {"role": "assistant", "content": [b.model_dump() for b in final.content]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": final.content[1].id, "content": "18C sun"}],
            },
        ]
        second = client.messages.create(model="claude-x", max_tokens=100, messages=msgs)
        assert second.content[0].text == "Sunny." and second.stop_reason == "end_turn"

        unmatched = client.messages.create(model="m", max_tokens=5, messages=[{"role": "user", "content": "?"}])
        assert unmatched.content[0].text == "OK."
        assert client.messages.count_tokens(model="m", messages=msgs).input_tokens > 0

        assert [r.turn for r in api.matched("weather")] == [0, 1]
        assert api.matched("weather")[1].tool_results() == [
            {"tool_use_id": final.content[1].id, "is_error": False, "text": "18C sun"}
        ]
        assert api.requests[-1].path == "/v1/messages/count_tokens"


def test_parse_mcp_list() -> None:
    out = (
        "Checking MCP server health…\n\n"
        "a: /bin/python x.py - ✔ Connected\n"
        "b: http://127.0.0.1:1/mcp (HTTP) - ✘ Failed to connect — Server rejected - 401\n"
    )
    m = parse_mcp_list(out)
    assert m.connected == ["a"]
    assert m.servers["b"].startswith("✘ Failed")
    assert m.targets["b"] == "http://127.0.0.1:1/mcp (HTTP)"


# ---------------------------------------------------------------------------------------------
# The real CLI
# ---------------------------------------------------------------------------------------------


@pytest.mark.claude_cli
def test_cli_version() -> None:
    assert claude_version().startswith("2.")


@pytest.mark.claude_cli
def test_mcp_list_stdio_server_added_at_user_scope(claude_home: Path, claude_cwd: Path) -> None:
    claude_mcp_add(claude_home, "demo", sys.executable, DEMO_SERVER)
    cfg = json.loads((claude_home / ".claude.json").read_text())
    assert cfg["mcpServers"]["demo"]["command"] == sys.executable
    listing = claude_mcp_list(claude_home, cwd=claude_cwd, timeout=30)
    assert listing.connected == ["demo"], listing.raw


@pytest.mark.claude_cli
def test_mcp_list_http_server_with_bearer_header(claude_home: Path, claude_cwd: Path) -> None:
    server, url = start_http_demo(token="s3cret")
    try:
        claude_mcp_add(claude_home, "demohttp", url, transport="http", headers={"Authorization": "Bearer s3cret"})
        claude_mcp_add(claude_home, "wrongtoken", url, transport="http", headers={"Authorization": "Bearer nope"})
        listing = claude_mcp_list(claude_home, cwd=claude_cwd, timeout=30)
    finally:
        server.stop()
    assert listing.is_connected("demohttp"), listing.raw
    assert not listing.is_connected("wrongtoken"), listing.raw
    assert "401" in listing.servers["wrongtoken"]


@pytest.mark.claude_cli
def test_print_session_calls_mcp_tool_and_result_comes_back(
    scripted_api: ScriptedAPI, claude_home: Path, claude_cwd: Path
) -> None:
    target = claude_cwd / "touched.txt"
    scripted_api.add(
        Rule(
            first_user="please touch",
            replies=[tool_use("mcp__demo__touch", {"path": str(target), "text": "abc"}), "All done."],
        )
    )
    s = run_print_session(
        "please touch the file",
        api=scripted_api,
        home=claude_home,
        cwd=claude_cwd,
        mcp_config={"demo": {"command": sys.executable, "args": [DEMO_SERVER]}},
        strict_mcp_config=True,
        allowed_tools=["mcp__demo__touch"],
        timeout=30,
    )
    assert s.returncode == 0, s.describe()
    assert s.mcp_servers == {"demo": "connected"}
    assert "mcp__demo__touch" in s.init["tools"]
    assert target.read_text() == "abc"  # the tool really ran
    turns = scripted_api.matched("please touch")
    assert [r.turn for r in turns] == [0, 1], scripted_api.dump()
    assert "mcp__demo__touch" in turns[0].tool_names  # offered directly (ENABLE_TOOL_SEARCH=false)
    (result,) = turns[1].tool_results()
    assert not result["is_error"] and "wrote 3 chars" in result["text"]
    assert s.result["subtype"] == "success" and s.result_text == "All done."
    assert s.result["total_cost_usd"] > 0


@pytest.mark.claude_cli
def test_agent_tool_foreground_subagent_and_hooks(
    scripted_api: ScriptedAPI, claude_home: Path, claude_cwd: Path, tmp_path: Path
) -> None:
    """The Agent tool (run_in_background=false) runs a subagent whose conversation is matched by
    its own rule; SessionStart context reaches the first request; SubagentStop input fields."""
    dump = tmp_path / "hooks"
    dump.mkdir()
    hook_script = tmp_path / "hook.py"
    hook_script.write_text(
        "import json, os, sys, time\n"
        "data = sys.stdin.read()\n"
        "ev = json.loads(data)['hook_event_name']\n"
        "open(os.path.join(os.environ['HOOK_DUMP'], f'{ev}-{time.time_ns()}.json'), 'w').write(data)\n"
        "if ev == 'SessionStart':\n"
        "    print(json.dumps({'hookSpecificOutput': {'hookEventName': 'SessionStart',"
        " 'additionalContext': 'HOOK-CONTEXT-7f3'}}))\n"
    )
    hook = [{"hooks": [{"type": "command", "command": f"{sys.executable} {hook_script}"}]}]
    prepare_home(claude_home, settings={"hooks": {"SessionStart": hook, "SubagentStop": hook}})

    scripted_api.add(
        Rule(first_user="ROLE-BRIEF", replies=["role report: 42"], name="role"),
        Rule(
            first_user="start the role",
            name="main",
            replies=[
                tool_use(
                    "Agent",
                    {
                        "description": "Run the role",
                        "prompt": "ROLE-BRIEF: compute the answer",
                        "subagent_type": "general-purpose",
                        "run_in_background": False,
                    },
                ),
                "Supervisor saw the report.",
            ],
        ),
    )
    s = run_print_session(
        "start the role", api=scripted_api, home=claude_home, cwd=claude_cwd,
        env_extra={"HOOK_DUMP": str(dump)}, timeout=30,
    )
    assert s.returncode == 0, s.describe()
    main, role = scripted_api.matched("main"), scripted_api.matched("role")
    assert len(main) == 2 and len(role) == 1, scripted_api.dump()

    # Agent tool: name and schema as offered to the model
    agent = main[0].tool("Agent")
    assert agent is not None
    props = agent["input_schema"]["properties"]
    assert {"description", "prompt", "subagent_type", "run_in_background"} <= set(props)
    assert set(agent["input_schema"]["required"]) == {"description", "prompt"}
    assert "Task" in s.init["tools"]  # init lists it under its old name
    assert "general-purpose" in s.init["agents"]

    # the subagent's conversation is separate, without the Agent-spawning parent turn
    assert "ROLE-BRIEF" in role[0].first_user_text and role[0].turn == 0
    (res,) = main[1].tool_results()
    assert "role report: 42" in res["text"]
    task_events = [e.get("subtype") for e in s.of_type("system") if e.get("subtype", "").startswith("task_")]
    assert task_events[0] == "task_started" and "task_notification" in task_events
    assert any(e.get("parent_tool_use_id") for e in s.of_type("user"))  # subagent events are tagged

    # SessionStart context lands in a role:system message of the first main request
    assert "HOOK-CONTEXT-7f3" in main[0].system_messages_text
    assert "HOOK-CONTEXT-7f3" not in role[0].all_text

    (stop_file,) = dump.glob("SubagentStop-*.json")
    stop = json.loads(stop_file.read_text())
    assert stop["agent_type"] == "general-purpose"
    assert stop["last_assistant_message"] == "role report: 42"
    assert Path(stop["agent_transcript_path"]).is_file()
    assert {"session_id", "transcript_path", "cwd", "agent_id", "stop_hook_active"} <= set(stop)


@pytest.mark.claude_cli
def test_agent_tool_background_default_notifies_parent(
    scripted_api: ScriptedAPI, claude_home: Path, claude_cwd: Path
) -> None:
    """Default Agent call runs in the background: the parent gets 'Async agent launched', may end
    its turn, and `-p` then starts a second turn carrying a <task-notification> with the result."""
    scripted_api.add(
        Rule(first_user="BG-BRIEF", replies=["bg report"], name="bg"),
        Rule(
            first_user="spawn in background",
            name="main",
            replies=[
                tool_use("Agent", {"description": "bg role", "prompt": "BG-BRIEF: work", "subagent_type": "general-purpose"}),
                "Waiting for the role.",
                lambda req: "Notified: " + ("yes" if "<task-notification>" in req.last_user_text else "no"),
            ],
        ),
    )
    s = run_print_session("spawn in background", api=scripted_api, home=claude_home, cwd=claude_cwd, timeout=30)
    assert s.returncode == 0, s.describe()
    main = scripted_api.matched("main")
    assert len(main) == 3, scripted_api.dump()
    assert "Async agent launched" in main[1].tool_results()[0]["text"]
    assert "<result>bg report</result>" in main[2].last_user_text
    assert len(s.of_type("result")) == 2  # one per turn of the -p session
    assert s.result_text == "Notified: yes"


@pytest.mark.claude_cli
def test_bypass_permissions_as_root_runs_bash(
    scripted_api: ScriptedAPI, claude_home: Path, claude_cwd: Path
) -> None:
    out = claude_cwd / "bash.txt"
    scripted_api.add(
        Rule(
            first_user="run bash",
            replies=[tool_use("Bash", {"command": f"echo hi > {out}", "description": "write a file"}), "ok"],
        )
    )
    s = run_print_session(
        "run bash", api=scripted_api, home=claude_home, cwd=claude_cwd,
        permission_mode="bypassPermissions", timeout=30,
    )
    assert s.returncode == 0, s.describe()
    assert s.init["permissionMode"] == "bypassPermissions"
    assert out.read_text().strip() == "hi"
