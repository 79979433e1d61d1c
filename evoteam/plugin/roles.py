"""Which evoteam role an in-session subagent plays, read from the harness's own context (the
hook input's agent id and the subagent's transcript), never from what the model remembers.

Claude Code keeps a subagent's transcript at `<session transcript without .jsonl>/subagents/
agent-<agent_id>.jsonl`; its first user entry is the spawn prompt, which opens with the role
marker `[evoteam role=<slug> version=<v> run=<run>]` followed by the role's brief ("You are the
**<name>** in version <v> ..."). Standard library only: it runs in PreToolUse hooks.
"""

from __future__ import annotations

import glob
import json
import re
import time
from pathlib import Path
from typing import Any

MARKER = re.compile(r"\[evoteam role=(?P<slug>[a-z0-9-]+) version=(?P<version>\d+) run=(?P<run>[A-Za-z0-9_-]+)\]")
NAME = re.compile(r"You are the \*\*(?P<name>[^*\n]{1,80})\*\* in version (?P<version>\d+)")


def agent_transcript(hook_input: dict[str, Any]) -> Path | None:
    """The transcript of the subagent that made this hook call, or None (main session)."""
    agent_id = hook_input.get("agent_id")
    if not agent_id or not re.fullmatch(r"[A-Za-z0-9_-]+", str(agent_id)):
        return None
    for key in ("agent_transcript_path", "transcript_path"):
        path = hook_input.get(key)
        if path and Path(path).name == f"agent-{agent_id}.jsonl" and Path(path).is_file():
            return Path(path)
    main = hook_input.get("transcript_path")
    if main and str(main).endswith(".jsonl"):
        candidate = Path(str(main)[: -len(".jsonl")]) / "subagents" / f"agent-{agent_id}.jsonl"
        if candidate.is_file():
            return candidate
        found = glob.glob(str(Path(main).parent / "*" / "subagents" / f"agent-{agent_id}.jsonl"))
        if found:
            return Path(found[0])
    return None


def role_in_text(text: str) -> dict[str, Any] | None:
    """{run_id, version, slug, name} from a spawn prompt (name None when the brief is absent)."""
    marker = MARKER.search(text or "")
    if not marker:
        return None
    name = NAME.search(text[marker.end():])
    return {"run_id": marker["run"], "version": int(marker["version"]), "slug": marker["slug"],
            "name": name["name"].strip() if name and int(name["version"]) == int(marker["version"]) else None}


def _entries(path: str | Path, max_lines: int | None = None, needle: str | None = None):
    """The JSON object entries of a JSONL transcript (lines without `needle` skipped unparsed)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for number, line in enumerate(fh):
                if max_lines is not None and number >= max_lines:
                    return
                if needle is not None and needle not in line:
                    continue
                try:
                    entry = json.loads(line)
                except ValueError:
                    continue
                if isinstance(entry, dict):
                    yield entry
    except OSError:
        return


def spawn_prompt(path: Path, max_lines: int = 20) -> str | None:
    """The text of a subagent transcript's first user entry (its spawn prompt), or None while
    the transcript holds no user entry yet."""
    for entry in _entries(path, max_lines):
        if entry.get("type") != "user":
            continue
        content = (entry.get("message") or {}).get("content")
        if isinstance(content, list):
            content = "\n".join(b.get("text", "") for b in content if isinstance(b, dict))
        return str(content or "")
    return None


def role_of_call(hook_input: dict[str, Any], wait_s: float = 3.0) -> dict[str, Any] | None:
    """The role of the subagent that made this hook call, or None (main session, or a subagent
    that plays no role). Claude Code queues transcript writes and flushes them every ~100 ms, so
    a hook that starts quickly can run before the subagent's transcript (or its first entry) is
    on disk: a subagent call waits up to `wait_s` for it."""
    if not hook_input.get("agent_id"):
        return None
    deadline = time.monotonic() + wait_s
    while True:
        path = agent_transcript(hook_input)
        prompt = spawn_prompt(path) if path is not None else None
        if prompt is not None:
            return role_in_text(prompt)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def assistant_turns(path: str | Path) -> int:
    """Assistant messages in a transcript (a message streamed as several entries counts once)."""
    ids: set[str] = set()
    count = 0
    for entry in _entries(path, needle='"assistant"'):
        message = entry.get("message") or {}
        if entry.get("type") != "assistant" or message.get("model") == "<synthetic>":
            continue
        key = message.get("id")
        if key is None or key not in ids:
            count += 1
            if key is not None:
                ids.add(key)
    return count


def wait_for_last_message(path: str | Path, text: str, wait_s: float = 2.0) -> bool:
    """Wait (bounded) until the transcript's last assistant entry holds `text`, the final
    message the SubagentStop hook was given: Claude Code flushes transcripts every ~100 ms, and
    the turns and cost read from the file must include that last message. False on timeout."""
    want = " ".join((text or "").split())[:200]
    if not want:
        return True
    deadline = time.monotonic() + wait_s
    while True:
        last = ""
        for entry in _entries(path, needle='"assistant"'):
            content = (entry.get("message") or {}).get("content") if entry.get("type") == "assistant" else None
            if isinstance(content, list):
                last = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
            elif isinstance(content, str):
                last = content
        if want in " ".join(last.split()):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


_COMMAND = re.compile(r"<command-name>/?(?:evoteam:)?(kernel-loop|evolve-team)</command-name>"
                      r"|\"skill\"\s*:\s*\"(?:evoteam:)?(kernel-loop|evolve-team)\"")


def session_mode(transcript: str | None) -> str | None:
    """"solo" when the session's latest evoteam skill is /kernel-loop, "team" for /evolve-team,
    None when neither was used (read from the main session's transcript)."""
    if not transcript:
        return None
    mode = None
    try:
        with open(transcript, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if "kernel-loop" not in line and "evolve-team" not in line:
                    continue
                for match in _COMMAND.finditer(line.replace('\\"', '"')):
                    mode = "solo" if (match[1] or match[2]) == "kernel-loop" else "team"
    except OSError:
        return None
    return mode
