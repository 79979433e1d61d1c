#!/usr/bin/env bash
# evoteam one-command set-up: virtual environment, package, registration with Claude Code
# and Codex where their CLIs exist, then a self-check on embedded defaults.
#
#   ./install.sh               set up (idempotent: run it again any time)
#   ./install.sh --no-register set up without touching Claude Code / Codex settings
#   ./install.sh --uninstall   remove the registrations and the virtual environment (keeps ~/.evoteam data)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${EVOTEAM_VENV:-$ROOT/.venv}"
REGISTER=1
ACTION=install
for arg in "$@"; do
  case "$arg" in
    --uninstall) ACTION=uninstall ;;
    --no-register) REGISTER=0 ;;
    -h|--help) sed -n '2,8p' "$0"; exit 0 ;;
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

unregister() {
  if command -v claude >/dev/null 2>&1; then
    for s in "${SERVERS[@]}"; do claude mcp remove --scope user "$s" >/dev/null 2>&1 || true; done
    rm -rf "$HOME/.claude/skills/evolve-team"
    say "removed the evoteam servers and skill from Claude Code"
  fi
  if command -v codex >/dev/null 2>&1; then
    for s in "${SERVERS[@]}"; do codex mcp remove "$s" >/dev/null 2>&1 || true; done
    say "removed the evoteam servers from Codex"
  fi
}

register() {
  local bin="$VENV/bin/evoteam"
  if command -v claude >/dev/null 2>&1; then
    for s in "${SERVERS[@]}"; do
      claude mcp remove --scope user "$s" >/dev/null 2>&1 || true
      claude mcp add --scope user "$s" -- "$bin" serve "$s" >/dev/null
    done
    mkdir -p "$HOME/.claude/skills"
    rm -rf "$HOME/.claude/skills/evolve-team"
    cp -R "$ROOT/skills/evolve-team" "$HOME/.claude/skills/evolve-team"
    say "registered ${SERVERS[*]} and /evolve-team with Claude Code (user scope)"
  else
    say "Claude Code CLI not found: skipped its registration (the plugin route is in the README)"
  fi
  if command -v codex >/dev/null 2>&1; then
    for s in "${SERVERS[@]}"; do
      codex mcp remove "$s" >/dev/null 2>&1 || true
      codex mcp add "$s" -- "$bin" serve "$s" >/dev/null
    done
    say "registered ${SERVERS[*]} with Codex"
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

PY="$(find_python)" || { echo "install.sh: Python 3.11 or newer is required" >&2; exit 1; }
if [ ! -x "$VENV/bin/python" ]; then
  say "creating a virtual environment in $VENV ($("$PY" --version))"
  "$PY" -m venv "$VENV"
fi
say "installing evoteam and its test tools into $VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -e "$ROOT[test]"

if [ "$REGISTER" = 1 ]; then register; fi

say "self-check: every server starts, the store round-trips, a CPU kit evaluates"
"$VENV/bin/evoteam" doctor
say "done. Try: $VENV/bin/evoteam bench list   ·   in Claude Code: /evolve-team task_kits/<kit>"
