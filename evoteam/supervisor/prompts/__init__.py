"""The supervisor prompt, shared by the `/evolve-team` skill (mode "session") and the headless
driver (mode "headless").

    from evoteam.supervisor.prompts import supervisor_prompt
    text = supervisor_prompt("session", run_id="run_x", naming=ToolNaming(prefix="mcp__plugin_evoteam_"))

or from a shell (e.g. a skill's dynamic context):

    python -m evoteam.supervisor.prompts --mode session --run RUN_ID [--plugin | --prefix mcp__]

Tool names in the text are written `{tool:server.name}` and resolved with the naming in use;
`{run_id}` is the run (left as "<run id>" when unknown).
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Literal

from evoteam.servers.team.toolnaming import ToolNaming

Mode = Literal["session", "headless"]
_TOOL = re.compile(r"\{tool:([a-z]+)\.([a-z_]+)\}")


def read_prompt(name: str) -> str:
    """The raw text of `prompts/<name>.md`."""
    return resources.files(__package__).joinpath(f"{name}.md").read_text(encoding="utf-8")


def render(text: str, naming: ToolNaming | None = None, **values: object) -> str:
    naming = naming or ToolNaming()
    text = _TOOL.sub(lambda m: naming.tool(m[1], m[2]), text)
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def supervisor_prompt(mode: Mode = "session", run_id: str | None = None, naming: ToolNaming | None = None) -> str:
    """The full supervisor prompt for one mode."""
    part = "in_session" if mode == "session" else "headless"
    text = read_prompt("supervisor").rstrip() + "\n\n" + read_prompt(part)
    return render(text, naming, run_id=run_id or "<run id>")


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description="print the evoteam supervisor prompt")
    parser.add_argument("--mode", choices=["session", "headless"], default="session")
    parser.add_argument("--run", default=None)
    parser.add_argument("--plugin", action="store_true", help="tool names as installed by the plugin")
    parser.add_argument("--prefix", default=None, help="MCP tool name prefix (default mcp__)")
    args = parser.parse_args(argv)
    naming = ToolNaming(prefix=args.prefix) if args.prefix else (
        ToolNaming(prefix="mcp__plugin_evoteam_") if args.plugin else ToolNaming.from_env())
    print(supervisor_prompt(args.mode, args.run, naming))


if __name__ == "__main__":  # pragma: no cover
    main()
