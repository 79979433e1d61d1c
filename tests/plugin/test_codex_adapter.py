"""evoteam/plugin/codex.py: Codex's config entries, hooks.json and hook payloads."""

from __future__ import annotations

import json
import tomllib

from evoteam.plugin import codex, hooks
from evoteam.plugin import state as st


def test_server_entries_replace_ours_and_keep_the_rest(tmp_path):
    config = tmp_path / "config.toml"
    config.write_text('model = "o3"\n\n[mcp_servers.other]\ncommand = "x"\n\n[mcp_servers.bench]\ncommand = "old"\n'
                      '[mcp_servers.bench.env]\nA = "1"\n\n[profiles.p]\nmodel = "m"\n')
    for _ in range(2):  # idempotent
        codex.write_servers(config, "/opt/plugin/hooks/evoteam-launch")
    data = tomllib.loads(config.read_text())
    assert data["model"] == "o3" and data["mcp_servers"]["other"] == {"command": "x"}
    assert data["profiles"]["p"] == {"model": "m"}
    for name in codex.SERVERS:
        entry = data["mcp_servers"][name]
        assert entry["command"] == "/opt/plugin/hooks/evoteam-launch" and entry["args"] == ["serve", name]
        assert entry["required"] is True and entry["default_tools_approval_mode"] == "approve"
        assert "EVOTEAM_DB" in entry["env_vars"] and "env" not in entry
    codex.remove_servers(config)
    data = tomllib.loads(config.read_text())
    assert set(data["mcp_servers"]) == {"other"} and data["profiles"]["p"] == {"model": "m"}


def test_exec_overrides_are_valid_toml_values():
    flags = codex.exec_overrides("team", "/usr/bin/python3", ["-m", "evoteam.cli", "serve", "team"],
                                 {"EVOTEAM_DB": "/tmp/a \"b\".db"})
    pairs = dict(flag.split("=", 1) for flag in flags[1::2])
    parsed = {k: tomllib.loads(f"v = {v}")["v"] for k, v in pairs.items()}
    assert parsed["mcp_servers.team.env"] == {"EVOTEAM_DB": '/tmp/a "b".db'}
    assert parsed["mcp_servers.team.required"] is True and parsed["mcp_servers.team.args"][-1] == "team"


def test_hooks_json_merges_with_other_handlers(tmp_path):
    path = tmp_path / "hooks.json"
    other = {"type": "command", "command": "notify-me"}
    path.write_text(json.dumps({"hooks": {"Stop": [{"hooks": [other]}]}}))
    for _ in range(2):
        codex.write_hooks(path, "/p/hooks/evoteam-launch")
    data = json.loads(path.read_text())["hooks"]
    assert data["Stop"][0]["hooks"] == [other]
    ours = [h["command"] for groups in data.values() for g in groups for h in g["hooks"] if h != other]
    assert sorted(ours) == sorted(f'"/p/hooks/evoteam-launch" hook {n}' for n in codex.EVENTS.values())
    assert set(codex.EVENTS.values()) <= set(hooks.HOOKS)
    codex.remove_hooks(path)
    assert json.loads(path.read_text())["hooks"] == {"Stop": [{"hooks": [other]}]}


def test_post_tool_use_reads_codex_tool_responses(tmp_path, monkeypatch):
    monkeypatch.delenv("CLAUDE_PROJECT_DIR", raising=False)
    monkeypatch.delenv("EVOTEAM_PROJECT_DIR", raising=False)
    monkeypatch.delenv("EVOTEAM_RUN", raising=False)
    text = json.dumps({"id": "run_abc123", "goal": "g"}, indent=2)
    # the payload shape codex-cli 0.171.0 sends for an MCP tool
    hooks.post_tool_use({"cwd": str(tmp_path), "session_id": "s1", "hook_event_name": "PostToolUse",
                         "tool_name": "mcp__knowledge__start_run", "tool_input": {},
                         "tool_response": {"content": [{"type": "text", "text": text}]}})
    assert st.read_state(tmp_path, env={})["run_id"] == "run_abc123"
