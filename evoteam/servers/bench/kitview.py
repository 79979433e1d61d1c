"""What the command line prints of the kits: the listing and one kit's description, from the
catalog's models or from the kit index's copy of them (formats/kitindex.py) — one printer for
both, so the quick answer and the normal one cannot drift apart."""

from __future__ import annotations

import contextlib
import io
from types import SimpleNamespace

import click

from evoteam.servers.bench.lazyrich import Console, Table, escape


_MAPPINGS = ("axes", "worker_env", "definition")  # fields that are dicts in the models too


def from_index(data):
    """JSON data from the kit index with the attributes of the models it was dumped from."""
    if isinstance(data, list):
        return [from_index(x) for x in data]
    if isinstance(data, dict):
        return SimpleNamespace(**{k: v if k in _MAPPINGS else from_index(v) for k, v in data.items()})
    return data


def listing_from_index(data):
    """The kit index's listing ready to print, or None where it cannot be printed (a file not
    written by this evoteam): the caller then loads the kits."""
    view = from_index(data)
    return view if _prints(print_listing, view) else None


def detail_from_index(data):
    """One kit's description from the kit index ready to print, or None (as above)."""
    view = from_index(data)
    return view if _prints(print_detail, view, False) else None


def _prints(printer, *args) -> bool:
    # A trial print into a buffer: whatever the index holds, the command prints all or nothing
    # from it, never half a table and then a traceback.
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            printer(*args)
    except Exception:  # noqa: BLE001 - any failure means "not from the index"
        return False
    return True


def print_listing(result) -> None:
    console = Console()
    # Kit names are what people type next: never cut or wrapped. Where a table would squeeze
    # them (80 columns, a pipe), each kit gets a heading line and its goal wraps below it.
    name_width = max((len(k.name) for k in result.items), default=3)
    if console.width >= name_width + 75:
        table = Table(title=f"{result.total} task kits")
        table.add_column("kit", no_wrap=True, min_width=name_width)
        for col in ("kind", "device", "direction"):
            table.add_column(col, no_wrap=True)
        table.add_column("runs here", overflow="fold", ratio=1)
        table.add_column("goal", overflow="fold", ratio=2)
        for k in result.items:
            table.add_row(k.name, k.kind, k.device, k.direction,
                          "yes" if k.available else f"no: {k.unavailable_reason}", first_sentence(k.goal))
        console.print(table)
    else:
        console.print(f"[bold]{result.total} task kits[/bold]")
        for k in result.items:
            console.print(f"[bold]{escape(k.name)}[/bold]  ({k.kind}, {k.device}, {k.direction})", soft_wrap=True)
            from rich.padding import Padding

            console.print(Padding(escape(first_sentence(k.goal)), (0, 0, 0, 4)))
            if not k.available:
                console.print(Padding(f"[yellow]cannot run here: {escape(k.unavailable_reason or '')}[/yellow]",
                                      (0, 0, 0, 4)))
    click.echo("`evoteam bench describe KIT` shows a kit's whole goal, signature and workloads")


def first_sentence(text: str, limit: int = 160) -> str:
    """A goal's first sentence: the listing stays a listing; `bench describe` has the rest."""
    head = text.strip().split(". ", 1)[0].rstrip(".") + "."
    return head if len(head) <= limit else head[: limit - 1].rstrip() + "…"


def print_detail(d, detail: bool) -> None:
    console = Console()
    console.print(f"[bold]{d.name}[/bold] ({d.kind}, {d.device}, {d.direction})")
    console.print(escape(d.goal))
    if not d.available:
        console.print(f"[yellow]cannot run here: {d.unavailable_reason}[/yellow]")
    for label, value in (("x0", d.x0), ("best known", d.best_known), ("entry", d.entry),
                         ("signature", d.signature), ("baseline", d.baseline), ("start from", d.starting_point)):
        if value is not None:
            console.print(f"[bold]{label}:[/bold] {escape(str(value))}")
    if d.timing_note:
        console.print(f"[yellow]timing: {escape(d.timing_note)}[/yellow]")
    if d.inputs:
        console.print(f"[bold]inputs:[/bold] {escape(d.inputs)}")
    if d.timing_method:
        console.print(f"[bold]timing method:[/bold] {escape(d.timing_method)}")
    if d.solutions:
        console.print(f"[bold]solutions:[/bold] {escape(', '.join(d.solutions))}")
    if d.packages:
        console.print(f"[bold]packages:[/bold] {escape(d.packages)}")
    if d.worker_env:  # the same for the baseline's worker and the candidate's
        console.print(f"[bold]worker env:[/bold] {escape(' '.join(f'{k}={v}' for k, v in d.worker_env.items()))}")
    if d.tolerance:
        console.print(f"[bold]tolerance:[/bold] atol={d.tolerance.atol:g} rtol={d.tolerance.rtol:g} "
                      f"matched ratio={d.tolerance.required_matched_ratio:g}")
    if d.dev_workloads:
        table = Table(title=f"dev workloads (+{d.heldout_count} held-out, secret)")
        table.add_column("workload", no_wrap=True, min_width=max(len(w.name) for w in d.dev_workloads))
        table.add_column("axes", overflow="fold")
        for w in d.dev_workloads:
            table.add_row(w.name, ", ".join(f"{k}={v}" for k, v in w.axes.items()))
        console.print(table)
    if detail and d.reference:
        console.print("[bold]reference:[/bold]")
        console.print(d.reference, markup=False, highlight=False)
