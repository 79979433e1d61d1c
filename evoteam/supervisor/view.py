"""The live terminal view of `evoteam supervise`: current version, roles and their state,
best score, spend, and the latest events. Plain log lines when the output is not a terminal."""

from __future__ import annotations

from collections import deque

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from evoteam.servers.team.models import TeamStatus
from evoteam.servers.team.sentences import describe_spend, describe_team_best
from evoteam.supervisor.driver import DriverEvent

STATUS_STYLE = {
    "running": "bold cyan", "queued": "cyan", "planned": "dim", "finished": "green", "failed": "bold red",
    "over_budget": "bold magenta", "stopped": "yellow", "interrupted": "yellow", "skipped": "dim yellow",
}


def render_status(status: TeamStatus | None, events: list[DriverEvent], title: str = "evoteam supervise"):
    """A rich renderable of the run's state (pure: used by the live view and by tests)."""
    if status is None:
        return Panel(Text("starting…"), title=title)
    head = Text.assemble(
        ("run ", "dim"), (status.run_id, "bold"), ("  status ", "dim"), (status.run_status, "bold"),
        ("  team ", "dim"), (f"v{status.version}" if status.version else "none yet", "bold"),
        ("  best ", "dim"), (describe_team_best(status), "bold green"),
        ("  NDG ", "dim"), (f"{status.ndg:.1f}" if status.ndg is not None else "-", ""),
        ("  spent ", "dim"), (describe_spend(status), "bold"),
        ("  candidates ", "dim"), (str(status.candidates), ""), ("  learnings ", "dim"), (str(status.learnings), ""),
    )
    table = Table(expand=True, show_edge=False, pad_edge=False)
    for column in ("role", "stage", "state", "runner", "turns", "cost", "cap", "last message / error"):
        table.add_column(column, overflow="ellipsis", no_wrap=column != "last message / error")
    for r in status.roles:
        note = r.error or r.last_message.replace("\n", " ")
        table.add_row(r.role, str(r.stage + 1), Text(r.status, STATUS_STYLE.get(r.status, "")), r.runner,
                      str(r.turns), f"${r.cost_usd:.2f}", "-" if r.cap_usd is None else f"${r.cap_usd:.2f}",
                      note[:160])
    log = Text("\n".join(f"{e.at:%H:%M:%S} {e.kind:>7} {e.text}" for e in events[-8:]), style="dim")
    return Panel(Group(head, table, log), title=title)


class LiveView:
    """Call `event(...)` from the driver; it redraws (or prints a line when not a terminal)."""

    def __init__(self, console: Console | None = None, live: bool | None = None):
        self.console = console or Console(stderr=True)
        self.use_live = self.console.is_terminal if live is None else live
        self.events: deque[DriverEvent] = deque(maxlen=50)
        self.status: TeamStatus | None = None
        self._live: Live | None = None

    def __enter__(self) -> LiveView:
        if self.use_live:
            self._live = Live(render_status(None, []), console=self.console, refresh_per_second=2, transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.update(render_status(self.status, list(self.events)))
            self._live.__exit__(*exc)
            self._live = None

    def event(self, event: DriverEvent, status: TeamStatus | None) -> None:
        self.events.append(event)
        if status is not None:
            self.status = status
        if self._live is not None:
            self._live.update(render_status(self.status, list(self.events)))
        else:
            extra = ""
            if self.status is not None:
                extra = (f" [v{self.status.version} best={describe_team_best(self.status)} "
                         f"spent=${self.status.spent_usd:.2f}]")
            self.console.print(f"{event.at:%H:%M:%S} {event.kind}: {event.text}{extra}", highlight=False, markup=False)
