#!/usr/bin/env bash
# evoteam one-command set-up: virtual environment, package, registration with Claude Code
# and Codex where their CLIs exist, then a self-check on embedded defaults.
#
#   ./install.sh               set up (idempotent: run it again any time)
#   ./install.sh --no-register set up without touching Claude Code / Codex settings
#   ./install.sh --uninstall   remove the registrations and the virtual environment (keeps ~/.evoteam data)
#   ./install.sh --mcp-only    register with `claude mcp add` + skill copies instead of the plugin (no hooks)
#   ./install.sh --register-only   only (re)register an existing environment ($EVOTEAM_VENV or .venv)
#   ./install.sh --unregister      remove the registrations only (keeps the environment and data)
#   ./install.sh --no-self-check   skip `evoteam doctor` at the end
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${EVOTEAM_VENV:-$ROOT/.venv}"
REGISTER=1
MCP_ONLY=0
SELF_CHECK=1
ACTION=install
for arg in "$@"; do
  case "$arg" in
    --uninstall) ACTION=uninstall ;;
    --no-register) REGISTER=0 ;;
    --mcp-only) MCP_ONLY=1 ;;
    --register-only) ACTION=register ;;
    --unregister) ACTION=unregister ;;
    --no-self-check) SELF_CHECK=0 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m==>\033[0m %s\n' "$*"; }
SERVERS=(knowledge team retrieval bench)

find_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      command -v "$candidate"; return 0
    fi
  done
  return 1
}

# Registration. Claude Code gets the evoteam *plugin* (the four MCP servers, the skills, the
# hooks and the team-member agent in one): install.sh stages the plugin's files (no .venv) in
# $EVOTEAM_HOME/plugin, adds that folder as a local marketplace and installs evoteam@evoteam at
# user scope. The plugin's launcher (hooks/evoteam-launch) finds this virtual environment
# through $EVOTEAM_HOME/python. Codex gets the four servers, the hooks and the skills through
# `evoteam install-plugin --codex` (the same command registers an installed wheel).
# `--mcp-only` registers the servers with `claude mcp add` and copies the skills instead.
EVOTEAM_HOME="${EVOTEAM_HOME:-$HOME/.evoteam}"
PLUGIN_FILES=(.claude-plugin .codex-plugin .mcp.json hooks skills agents)
SKILLS=(evolve-team kernel-loop research)

claude_unregister() {
  claude plugin uninstall evoteam@evoteam >/dev/null 2>&1 || true
  claude plugin marketplace remove evoteam >/dev/null 2>&1 || true
  for s in "${SERVERS[@]}"; do claude mcp remove --scope user "$s" >/dev/null 2>&1 || true; done
  for k in "${SKILLS[@]}"; do rm -rf "$HOME/.claude/skills/$k"; done
}

unregister() {
  if command -v claude >/dev/null 2>&1; then
    claude_unregister
    say "removed the evoteam plugin (or servers and skills) from Claude Code"
  fi
  if command -v codex >/dev/null 2>&1; then
    for s in "${SERVERS[@]}"; do codex mcp remove "$s" >/dev/null 2>&1 || true; done
    if [ -x "$VENV/bin/python" ]; then EVOTEAM_HOME="$EVOTEAM_HOME" "$VENV/bin/python" -m evoteam install-plugin --no-claude --codex --uninstall >/dev/null || true; fi
    say "removed the evoteam servers, hooks and skills from Codex"
  fi
  rm -rf "$EVOTEAM_HOME/plugin" "$EVOTEAM_HOME/python"
}

# evoteam's own folder holds the store, tokens' hashes and the held-out key: only its owner
# may read it (0700, files 0600), whatever the umask; tests/e2e/test_install.py checks it.
private_home() {
  (umask 077 && mkdir -p "$EVOTEAM_HOME")
  chmod 700 "$EVOTEAM_HOME"
}

stage_plugin() {
  local stage="$EVOTEAM_HOME/plugin"
  rm -rf "$stage"
  mkdir -p "$stage"
  for f in "${PLUGIN_FILES[@]}"; do
    [ -e "$ROOT/$f" ] && cp -R "$ROOT/$f" "$stage/$f"
  done
  find "$stage" -name __pycache__ -prune -exec rm -rf {} + 2>/dev/null || true
  echo "$stage"
}

register() {
  local launcher="$ROOT/hooks/evoteam-launch"
  private_home
  (umask 077 && echo "$VENV/bin/python" > "$EVOTEAM_HOME/python")
  if command -v claude >/dev/null 2>&1; then
    claude_unregister
    if [ "$MCP_ONLY" = 1 ]; then
      for s in "${SERVERS[@]}"; do
        claude mcp add --scope user "$s" -- "$launcher" serve "$s" >/dev/null
      done
      mkdir -p "$HOME/.claude/skills"
      for k in "${SKILLS[@]}"; do cp -R "$ROOT/skills/$k" "$HOME/.claude/skills/$k"; done
      say "registered ${SERVERS[*]} and the skills /${SKILLS[*]} with Claude Code (user scope, no hooks)"
    else
      local stage
      stage="$(stage_plugin)"
      claude plugin marketplace add "$stage" >/dev/null
      claude plugin install evoteam@evoteam --scope user >/dev/null
      say "installed the evoteam plugin in Claude Code: servers ${SERVERS[*]}, /evolve-team and the hooks (marketplace $stage)"
    fi
  else
    say "Claude Code CLI not found: skipped its registration (see docs/plugin.md for the marketplace route)"
  fi
  if command -v codex >/dev/null 2>&1; then
    # servers (required, tools approved, absolute paths), hooks and skills: see evoteam/plugin/codex.py
    EVOTEAM_HOME="$EVOTEAM_HOME" "$VENV/bin/python" -m evoteam install-plugin --no-claude --codex >/dev/null
    say "registered ${SERVERS[*]} with Codex, with the skills \$${SKILLS[0]} etc. and the hooks (trust them once with /hooks)"
  else
    say "Codex CLI not found: skipped its registration"
  fi
}

if [ "$ACTION" = uninstall ]; then
  unregister
  rm -rf "$VENV"
  say "removed $VENV; your data in ~/.evoteam is kept"
  exit 0
fi

if [ "$ACTION" = unregister ]; then
  unregister
  exit 0
fi

if [ "$ACTION" = register ]; then
  [ -x "$VENV/bin/python" ] || { echo "install.sh: no virtual environment at $VENV; run ./install.sh first" >&2; exit 1; }
  register
  exit 0
fi

PY="$(find_python)" || { echo "install.sh: Python 3.11 or newer is required" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
  say "creating a virtual environment in $VENV ($("$PY" --version))"
  "$PY" -m venv "$VENV"
fi
say "installing evoteam and its test tools into $VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# setuptools prints a boxed "!!" warning on every editable install (a folder named like the
# package may shadow it: here that folder is the package itself); a newcomer read it as a failure.
PYTHONWARNINGS="ignore:Editable installation" "$VENV/bin/python" -m pip install --quiet -e "$ROOT[test]"
private_home

if [ "$REGISTER" = 1 ]; then register; fi

if [ "$SELF_CHECK" = 1 ]; then
  say "self-check: every server starts, the store round-trips, a CPU kit evaluates"
  "$VENV/bin/evoteam" doctor
fi
say "done. Try: $VENV/bin/evoteam bench list   ·   in Claude Code: /evolve-team task_kits/<kit>"
