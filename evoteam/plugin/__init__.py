"""evoteam inside Claude Code and Codex: the hooks (SessionStart, PreToolUse, SubagentStop, Stop,
PreCompact, PostToolUse) as plain functions, the active-run state file they share, and the
`evoteam hook ...` command group. See docs/plugin.md."""
