"""`evoteam bench ...`: the bench on the command line.

The bench core, rich and pydantic are imported inside the commands: `evoteam bench --help`
answers without them."""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import TYPE_CHECKING

import click

from evoteam.clisettings import LazySettings
from evoteam.errors import DomainError
from evoteam.exitcodes import CANDIDATE_FAILED, cli_error, one_line
from evoteam.servers.bench import kitview
from evoteam.servers.bench.lazyrich import Console, Table, escape
from evoteam.servers.knowledge.errors import StoreError

if TYPE_CHECKING:
    from evoteam.servers.bench.models import Evaluation


class _Lazy:
    """A module imported on first use: `evoteam bench --help` must not wait for the bench core."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)


core = _Lazy("evoteam.servers.bench.evaluation.core")
catalog = _Lazy("evoteam.servers.bench.evaluation.catalog")


def _settings(ctx: click.Context):
    obj = ctx.find_root().obj
    if obj is None:
        from evoteam.config import load_settings

        obj = load_settings()
    return obj


@click.group()
def bench() -> None:
    """Task kits and honest candidate evaluation."""


@bench.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def list_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the task kits."""
    if not as_json and (index := _kit_index(ctx)) is not None \
            and (view := kitview.listing_from_index(index["listing"])) is not None:
        kitview.print_listing(view)
        return
    settings = _settings(ctx)
    before = _facts(settings)
    result = catalog.list_kits(settings, limit=100)
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    kitview.print_listing(result)
    _remember_kits(settings, before, result)


def _kit_index(ctx: click.Context) -> dict | None:
    """The kit index (formats/kitindex.py) when it still holds here: the listing and the kits'
    descriptions without loading the kits (pydantic and every kit's models cost ~0.2 s)."""
    settings = _settings(ctx)
    if not isinstance(settings, LazySettings):
        return None
    from evoteam.servers.bench.formats import kitindex

    return kitindex.read(settings.values())


def _facts(settings):
    """The kit index's facts before any kit is loaded (None: no index for this call)."""
    from evoteam.servers.bench.formats import kitindex

    if not isinstance(settings, LazySettings) or os.environ.get(kitindex.ENV_SWITCH, "1") == "0":
        return None
    return kitindex.snapshot(settings.values())


def _remember_kits(settings, before, listing=None) -> None:
    if before is not None:
        catalog.remember(settings, settings.values(), before, listing)


@bench.command("describe")
@click.argument("kit")
@click.option("--detail", is_flag=True, help="Include the reference and the definition.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def describe_cmd(ctx: click.Context, kit: str, detail: bool, as_json: bool) -> None:
    """Describe one kit: goal, signature, tolerances, workloads."""
    if not (as_json or detail) and (index := _kit_index(ctx)) is not None and kit in index["details"]:
        from evoteam.servers.bench.formats.kitindex import describable

        if describable(kit) and (view := kitview.detail_from_index(index["details"][kit])) is not None:
            kitview.print_detail(view, detail)
            return
    settings = _settings(ctx)
    before = _facts(settings) if not (as_json or detail) else None
    try:
        d = catalog.describe_kit(settings, kit, detail=detail)
    except DomainError as exc:
        raise cli_error(exc) from exc
    if as_json:
        click.echo(d.model_dump_json(indent=2, exclude_none=True))
        return
    kitview.print_detail(d, detail)
    _remember_kits(settings, before)


def _fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _with_interval(value, interval, unit: str = "", runs=None) -> str:
    """'4.4× (3.9–5.0)': three significant digits and the interval, as every human text shows."""
    from evoteam.stats import describe_score

    return "-" if value is None else describe_score(value, interval, unit, runs)


_HEADERS = ("workload", "status", "speedup\n(95% interval)", "candidate\nms", "baseline\nms", "max abs\nerror")


def _workload_cells(e: Evaluation) -> list[tuple[list[str], str]]:
    """Per workload: its cells (name, status, speedup, times, error) and its note."""
    return [([w.workload, w.status, _with_interval(w.speedup, w.speedup_interval), _fmt(w.candidate_ms, ".4f"),
              _fmt(w.baseline_ms, ".4f"), _fmt(w.max_abs_error, ".2e")],
             ("⚑ " if w.flagged else "") + (w.message or "")[:300]) for w in e.workloads]


def print_workloads(e: Evaluation, console: Console) -> None:
    """The per-workload results as a table when it fits the width, else one block per workload:
    names, statuses and numbers are never cut (at 80 columns, piped, the table cut "PASSED" to
    "PAS…" and dropped the error column: issue 24)."""
    rows = _workload_cells(e)
    notes = any(note for _, note in rows)
    table = Table(title=f"{e.kit} · {e.split} · {e.status}")
    for header in _HEADERS:
        table.add_column(header, no_wrap=True)
    if notes:  # the only column that may wrap, and only when a workload has something to say
        table.add_column("note", overflow="fold", min_width=20)
    for cells, note in rows:
        colour = "green" if cells[1] == "PASSED" else "red"
        styled = [escape(cells[0]), f"[{colour}]{cells[1]}[/{colour}]", *cells[2:]]
        table.add_row(*styled, *([escape(note)] if notes else []))
    # Each column is as wide as its widest cell or header line, plus a border and two spaces;
    # the note column needs room for a few words.
    widths = [max(len(line) for line in header.split("\n")) for header in _HEADERS]
    for cells, _ in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, cells)]
    if sum(widths) + (20 if notes else 0) + 3 * (len(widths) + notes) + 1 <= console.width:
        console.print(table)
        return
    from rich.padding import Padding
    from rich.text import Text

    what = "speedups" if e.kind == "kernel" else "scores"
    console.print(f"[bold]{escape(e.kit)} · {e.split} · {e.status}[/bold] ({what} with their 95% interval)")
    for (name, status, speedup, cand, base, err), note in rows:
        colour = "green" if status == "PASSED" else "red"
        console.print(f"{escape(name)}  [{colour}]{status}[/{colour}]" + ("" if speedup == "-" else f"  speedup {speedup}"))
        said = [f"{label} {value}{unit}" for label, value, unit in (
            ("candidate", cand, " ms"), ("baseline", base, " ms"), ("max abs error", err, "")) if value != "-"]
        for line in ("  ".join(said), note):
            if line:  # indented and wrapped at spaces: a number is never split
                console.print(Padding(Text(line), (0, 0, 0, 2)))


def print_evaluation(e: Evaluation, console: Console) -> None:
    print_workloads(e, console)
    if e.score is not None:
        kind = "geomean speedup" if e.kind == "kernel" else "score"
        runs = (e.samples or 1) if e.kind == "program" else None  # its runs: one, or repeats
        line = (f"[bold]{kind}: {_with_interval(e.score, e.score_interval, '×' if e.kind == 'kernel' else '', runs)}"
                f"[/bold] ({e.direction})")
        if e.ndg is not None:
            line += f"   NDG {e.ndg:.1f}"
        console.print(line)
        if e.n_measurements and e.n_measurements > 1 and e.candidate_score is not None:
            console.print(f"pooled with earlier measurements of the same code: {e.candidate_id} "
                          f"{_with_interval(e.candidate_score, e.candidate_interval)} over "
                          f"{e.n_measurements} measurements")
        if e.standing:
            console.print(f"in run {e.run_id}: {escape(e.standing)}")
    elif e.message:
        console.print(f"[red]{escape(e.message[:1500])}[/red]")
    from evoteam.servers.bench.measurement.machine import contention_line

    line = contention_line(e.metrics.get("contention") or {}, e.split)
    if line:
        console.print(f"[yellow]{escape(line)}[/yellow]")
    if e.metrics.get("timing_note"):
        console.print(f"[yellow]timings not representative: {escape(str(e.metrics['timing_note']))}[/yellow]")
    for st in e.stages:
        console.print(f"stage {st.get('stage')}: " + escape(", ".join(f"{k}={v}" for k, v in st.items() if k != "stage")))
    if e.artifacts and e.status != "PASSED":
        for key, text in list(e.artifacts.items())[:4]:
            console.print(f"[bold]{escape(key)}:[/bold] " + escape(text[:600]))
    if e.flagged:
        console.print("[yellow]flagged for review:[/yellow] " + escape("; ".join(e.flags)[:1000]))
    if e.recorded:
        # Said on the line itself: a shared store's plain token records a claim that never ranks.
        claim = (" as an unverified claim: listed, never ranked (evaluations that rank go through the "
                 "team's evaluation service, EVOTEAM_BENCH_URL)") if e.unverified else ""
        console.print(f"recorded as {e.candidate_id} in {e.run_id}{claim}")


async def _run(settings, kit: str, candidate: str, split: str, run_id: str | None, record: bool,
               quiet: bool, repeats: int = 1, parent_id: str | None = None, notes: str = "") -> list[Evaluation]:
    splits = ["dev", "heldout"] if split == "all" else [split]
    if split == "all":
        the_kit = core.find_kit(settings, kit)
        if not (the_kit.manifest.heldout if the_kit.manifest.kind == "kernel" else the_kit.manifest.program_heldout):
            splits = ["dev"]
    code = None
    results = []

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from evoteam.progress import Lines

    err = Console(stderr=True)

    async def go(store) -> None:
        # A terminal gets a live bar; a pipe or log gets plain lines (evoteam/progress.py): both
        # say how long it has run and, once a workload is done, about how long is left.
        with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.1f}/{task.total:.0f}"),
                      TimeElapsedColumn(), TimeRemainingColumn(), console=err, disable=quiet or not err.is_terminal,
                      transient=True) as bar:
            for sp in splits:
                task = bar.add_task(f"{kit} {sp}", total=1)
                lines = Lines(f"{kit} {sp}") if not quiet and not err.is_terminal else None

                async def progress(done, total, message, _task=task, _lines=lines):
                    bar.update(_task, completed=done, total=total, description=f"{kit} {sp}: {message}"[:80])
                    if _lines:
                        _lines.step(done, total, message)

                if settings.bench_url and record:  # the team's evaluation service measures and records
                    from evoteam.servers.bench.scheduling.route import evaluate_remote

                    results.append(await evaluate_remote(settings, kit, candidate_path=candidate, code=code,
                                                         split=sp, run_id=run_id, parent_id=parent_id,
                                                         documents_used=[], notes=notes, role=None,
                                                         team_version=None, progress=progress))
                    continue
                if settings.bench_backend != "local":  # the device pool or a Ray cluster (scheduling/)
                    from evoteam.servers.bench.scheduling.dispatch import evaluate_scheduled

                    results.append(await evaluate_scheduled(settings, kit, candidate_path=candidate, split=sp,
                                                            store=store, run_id=run_id, progress=progress,
                                                            repeats=repeats, parent_id=parent_id, notes=notes))
                    continue
                results.append(await core.evaluate_candidate(settings, kit, candidate_path=candidate, code=code,
                                                             split=sp, store=store, run_id=run_id,
                                                             progress=progress, repeats=repeats,
                                                             parent_id=parent_id, notes=notes))

    if record and not settings.bench_url:
        try:
            from evoteam.servers.common import session_actor
            from evoteam.servers.knowledge.connect import open_store
        except ImportError as exc:  # pragma: no cover - the store is part of the package
            raise click.ClickException(f"the knowledge store is unavailable ({exc}); use --no-record") from exc
        async with open_store(settings, session_actor(settings, "cli")) as store:
            await go(store)
    else:
        await go(None)
    return results


@bench.command("queue")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def queue_cmd(ctx: click.Context, as_json: bool) -> None:
    """Show the evaluations that run or wait on this host's pool and Ray queues, by run."""
    from evoteam.clisettings import setting_values
    from evoteam.configsource import state_root

    # kits.state_dir's folder, found without the Settings model: with no queue file there the
    # answer needs neither pydantic nor the bench (tests/test_cli_quick.py holds them equal).
    status_dir = state_root(setting_values(_settings(ctx))["db"]) / "bench" / "queue"
    if not as_json and not any(status_dir.glob("queue-*.json")):
        click.echo("no pool or Ray queue is active on this host (EVOTEAM_BENCH_BACKEND=pool or ray starts one)")
        return
    from evoteam.evalqueue import read_queues

    queues = read_queues(status_dir)
    if as_json:
        click.echo(json.dumps([q.model_dump(mode="json") for q in queues], indent=2))
        return
    if not queues:
        click.echo("no pool or Ray queue is active on this host (EVOTEAM_BENCH_BACKEND=pool or ray starts one)")
        return
    for q in queues:
        running = [e for e in q.entries if e.state == "running"]
        waiting = [e for e in q.entries if e.state == "waiting"]
        click.echo(f"{q.backend} (process {q.pid}): {len(running)}/{len(q.slots)} slots busy, {len(waiting)} waiting")
        for e in running:
            click.echo(f"  running  {e.slot:<10} {e.run_key}  {e.kit}")
        by_run: dict[str, int] = {}
        for e in waiting:
            by_run[e.run_key] = by_run.get(e.run_key, 0) + 1
        for key, n in by_run.items():
            click.echo(f"  waiting  {n:>3}        {key}")


@bench.command("trust")
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@click.pass_context
def trust_cmd(ctx: click.Context, folder: str) -> None:
    """Trust the kit in FOLDER (outside the configured kit folders): its reference, baseline and
    evaluator run unconfined, so only kits you trust may be used. Tools cannot do this."""
    from evoteam.servers.bench.formats.kits import trust_kit

    try:
        path = trust_kit(_settings(ctx), folder)
    except DomainError as exc:
        raise cli_error(exc) from exc
    click.echo(f"trusted {path}")


@bench.command("run")
@click.argument("kit")
@click.argument("candidate")
@click.option("--split", type=click.Choice(["dev", "heldout", "all"]), default="dev", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the evaluation(s) as JSON.")
@click.option("--run", "run_id", default=None, help="Record in this run (default: your newest active run of the kit that ranks and is timed its way, "
                   "else a new one).")
@click.option("--no-record", is_flag=True, help="Do not record the candidate in the knowledge store.")
@click.option("--parent", "parent_id", default=None, help="The recorded candidate it derives from (its lineage).")
@click.option("--notes", default="", help="What it tries, kept with the candidate (listings and prior work show it).")
@click.option("--trust-kit", is_flag=True, help="KIT is a folder outside the kit folders that you trust.")
@click.option("--repeats", type=click.IntRange(1, 20), default=1, show_default=True,
              help="Kernel kits: 2 or more time the candidate and the baseline in three processes each (a steadier "
                   "score; N/3 times the kit's rounds, at least the kit's); program kits: evaluator runs (score: the median).")
@click.option("--backend", type=click.Choice(["local", "pool", "ray"]), default=None,
              help="Where to evaluate (default: EVOTEAM_BENCH_BACKEND or evoteam.toml, else local).")
@click.option("--devices", default=None, help="The pool's devices, e.g. 0,1,2,3 (default: all visible).")
@click.pass_context
def run_cmd(ctx: click.Context, kit: str, candidate: str, split: str, as_json: bool, run_id: str | None,
            no_record: bool, parent_id: str | None, notes: str, trust_kit: bool, repeats: int, backend: str | None,
            devices: str | None) -> None:
    """Evaluate CANDIDATE (a .py file, a FlashInfer-Bench solution .json, or the name of a solution in
    KIT's trace set) on KIT (a kit name, a kit folder, or a FlashInfer-Bench trace-set root)."""
    settings = _settings(ctx)
    if backend or devices:
        settings = settings.model_copy(update={k: v for k, v in (
            ("bench_backend", backend), ("bench_devices", [d.strip() for d in (devices or "").split(",") if d.strip()]
                                         if devices else None)) if v is not None})
    if trust_kit:
        from evoteam.servers.bench.formats.kits import trust_kit as trust

        try:
            trust(settings, kit)
        except DomainError as exc:
            raise cli_error(exc) from exc
    try:
        import asyncio  # here: the listings start no event loop

        if no_record and (parent_id or notes):
            raise click.UsageError("--parent and --notes are kept with a recorded candidate: drop --no-record")
        results = asyncio.run(_run(settings, kit, candidate, split, run_id, not no_record, quiet=as_json,
                                   repeats=repeats, parent_id=parent_id, notes=notes))
    except (DomainError, StoreError) as exc:  # a refused path or a failing store: one line
        raise cli_error(exc) from exc
    if as_json:
        payload = [r.model_dump(mode="json") for r in results]
        click.echo(json.dumps(payload[0] if len(payload) == 1 else payload, indent=2))
    else:
        console = Console()
        for r in results:
            print_evaluation(r, console)
    failed = [r for r in results if r.status != "PASSED"]
    if failed:  # the policy's one line on stderr, also for someone who sent stdout elsewhere
        r = failed[0]
        bad = [w for w in r.workloads if w.status != "PASSED"]
        where = f" on {len(bad)} of {len(r.workloads)} workloads" if bad else ""
        click.echo("Error: " + one_line(f"{candidate} failed on {r.kit} ({r.split}): {r.status}{where}; the "
                                        "evaluation above says why"), err=True)
        sys.exit(CANDIDATE_FAILED)


@bench.command("export-traces")
@click.argument("ident", metavar="RUN|CANDIDATE")
@click.option("-o", "--output", "output", required=True, type=click.Path(file_okay=False),
              help="Folder to write the FlashInfer-Bench trace set into.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def export_traces_cmd(ctx: click.Context, ident: str, output: str, as_json: bool) -> None:
    """Write a run's (or one candidate's) evaluations as FlashInfer-Bench Trace records, with each
    candidate as a FIB Solution and the kit's definition and workloads beside them."""
    from pathlib import Path

    from evoteam.servers.bench.formats.fib_export import export_traces
    from evoteam.servers.common import session_actor
    from evoteam.servers.knowledge.connect import open_store

    settings = _settings(ctx)

    async def go():
        async with open_store(settings, session_actor(settings, "cli")) as store:
            return await export_traces(settings, store, ident, Path(output))

    try:
        import asyncio  # here: the listings start no event loop

        result = asyncio.run(go())
    except (DomainError, StoreError) as exc:
        raise cli_error(exc) from exc
    if as_json:
        click.echo(result.model_dump_json(indent=2))
        return
    click.echo(f"wrote {result.traces} traces and {len(result.solutions)} solutions to {result.folder}")
    for line in result.skipped:
        click.echo(f"skipped: {line}")


@bench.command("serve")
@click.option("--http", "use_http", is_flag=True, required=True,
              help="Serve over streamable HTTP (the only way the service runs).")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8766, show_default=True, type=int)
@click.option("--knowledge-url", default=None, help="The shared knowledge server (default: EVOTEAM_KNOWLEDGE_URL).")
@click.option("--allowed-host", "allowed_hosts", multiple=True, help="Extra Host header values to accept.")
@click.option("--allowed-origin", "allowed_origins", multiple=True, help="Extra Origin values to accept.")
@click.pass_context
def serve_cmd(ctx: click.Context, use_http: bool, host: str, port: int, knowledge_url: str | None,
              allowed_hosts: tuple[str, ...], allowed_origins: tuple[str, ...]) -> None:
    """Run the team's evaluation service: agents' bench.evaluate (with EVOTEAM_BENCH_URL set to
    http://HOST:PORT/mcp) sends candidates here with their own tokens; results are recorded in
    the shared knowledge server, verified, with one held-out set. Needs a verifier token of its
    own in EVOTEAM_TOKEN (docs/sharing.md)."""
    from evoteam.servers.bench.service import serve_async

    settings = _settings(ctx)
    if knowledge_url:
        settings = settings.model_copy(update={"knowledge_url": knowledge_url})
    import asyncio  # here: the listings start no event loop

    asyncio.run(serve_async(settings, host, port, list(allowed_hosts), list(allowed_origins)))


COMMANDS = [bench]


def _add_remeasure() -> None:
    # `evoteam bench remeasure` lives with the report it feeds.
    from evoteam.report.cli import remeasure

    bench.add_command(remeasure)


_add_remeasure()
