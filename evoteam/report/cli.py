"""`evoteam report RUN` and `evoteam compare RUN RUN...`: a run's report as one HTML file (and
PNGs), served live, or several runs of one kit compared at matched spend."""

from __future__ import annotations

import secrets
from pathlib import Path

from typing import TYPE_CHECKING

import click

from evoteam.errors import DomainError
from evoteam.exitcodes import BadInput, cli_error
from evoteam.servers.knowledge.errors import StoreError

if TYPE_CHECKING:
    from evoteam.config import Settings


def open_store(settings, actor=None):
    # Imported when a command runs: `evoteam report --help` answers without the store.
    from evoteam.servers.knowledge.connect import open_store as open_it

    return open_it(settings, actor)


def _run(coro):
    try:
        import asyncio  # here: `--help` and `bench list` (which imports this group's remeasure) need no loop

        return asyncio.run(coro)
    except (StoreError, DomainError) as exc:
        raise cli_error(exc) from exc


@click.command("report")
@click.argument("run_id", required=False)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the HTML file (default: report-RUN.html).")
@click.option("--png", "png_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write each chart as a PNG into this folder (no browser needed).")
@click.option("--json", "as_json", is_flag=True, help="Print the report's numbers as JSON instead.")
@click.option("--serve", is_flag=True, help="Serve the live run pages from the embedded store on 127.0.0.1.")
@click.option("--port", default=8766, show_default=True, type=int, help="Port for --serve.")
@click.pass_obj
def report(settings: Settings, run_id, output, png_dir, as_json, serve, port) -> None:
    """Draw one run: score vs spend with team redesigns, versions, per-workload speedups, cost,
    retrieval. One self-contained HTML file (no network needed to view it)."""
    from evoteam.report.data import gather
    from evoteam.report.page import render_report, report_charts, write_pngs

    if serve:
        _serve(settings, port)
        return
    if not run_id:
        raise click.UsageError("give the run to report on (see `evoteam kb runs`), or --serve")

    async def go():
        async with open_store(settings) as store:
            return await gather(store, run_id)

    data = _run(go())
    if as_json:
        click.echo(data.model_dump_json(indent=2))
        return
    output = output or Path(f"report-{run_id}.html")
    output.write_text(render_report(data), encoding="utf-8")
    click.echo(f"wrote {output} ({len(data.candidates)} candidates, {len(data.versions)} team versions)")
    if png_dir:
        for path in write_pngs(report_charts(data), png_dir):
            click.echo(f"wrote {path}")


@click.command("compare")
@click.argument("run_ids", nargs=-1, required=True)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path), default=Path("compare.html"),
              show_default=True)
@click.option("--threshold", "thresholds", type=float, multiple=True,
              help="Scores whose first crossing (in USD spent) is tabulated; repeat for several.")
@click.option("--png", "png_dir", type=click.Path(file_okay=False, path_type=Path), default=None)
@click.pass_obj
def compare(settings: Settings, run_ids, output, thresholds, png_dir) -> None:
    """Compare runs of the same kit (e.g. evolving vs solo) at matched spend."""
    from evoteam.report.data import gather
    from evoteam.report.page import render_comparison, write_pngs
    from evoteam.report import charts

    if len(set(run_ids)) < 2:
        raise click.UsageError("give at least two different runs to compare")

    async def go():
        async with open_store(settings) as store:
            return [await gather(store, r) for r in run_ids]

    reports = _run(go())
    check_comparable(reports)
    if not thresholds:
        thresholds = default_thresholds(reports)
    output.write_text(render_comparison(reports, list(thresholds)), encoding="utf-8")
    click.echo(f"wrote {output} ({len(reports)} runs of kit {reports[0].run.kit})")
    if png_dir:
        for path in write_pngs({"compare": charts.compare_progress(reports)}, png_dir):
            click.echo(f"wrote {path}")


def check_comparable(reports) -> None:
    """Runs compare only on one kit, one direction: else the curves mean different things."""
    kits = {r.run.kit for r in reports}
    if None in kits:
        raise BadInput("compare needs runs bound to a kit; "
                                   + ", ".join(r.run.id for r in reports if r.run.kit is None) + " has none")
    if len(kits) > 1:
        raise BadInput(f"these runs are on different kits ({', '.join(sorted(kits))}): "
                                   "compare runs of one kit")
    if len({r.run.direction for r in reports}) > 1:
        raise BadInput("these runs optimise in different directions: compare runs of one kit")


def default_thresholds(reports) -> list[float]:
    """Three thresholds between the runs' common start and the best any of them reached."""
    bests = [c.best_so_far for r in reports for c in r.candidates if c.best_so_far is not None]
    if not bests:
        return []
    lo, hi = min(bests), max(bests)
    if reports[0].direction == "minimize":
        lo, hi = hi, lo
    return [lo + (hi - lo) * f for f in (0.5, 0.8, 1.0)] if hi != lo else [hi]


def _serve(settings: Settings, port: int) -> None:
    import uvicorn
    from starlette.applications import Starlette

    from evoteam.report.live import dashboard_routes

    if settings.knowledge_url:
        raise click.UsageError("a shared knowledge server already serves the live pages at /runs; "
                               "--serve is for the embedded store")
    secret = "evl_" + secrets.token_urlsafe(24)

    async def main():
        async with open_store(settings) as store:
            async def verify(token: str):
                return store.actor if secrets.compare_digest(token.encode(), secret.encode()) else None

            app = Starlette(routes=dashboard_routes(store, verify))
            click.echo(f"live run pages at http://127.0.0.1:{port}/runs — sign in with this one-time key: {secret}")
            await uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")).serve()

    _run(main())


@click.command("remeasure")
@click.argument("run_id")
@click.option("--split", type=click.Choice(["dev", "heldout", "all"]), default="dev", show_default=True)
@click.option("--rounds", type=click.IntRange(2, 100), default=10, show_default=True,
              help="Interleaved rounds: each times every finalist and the baseline on the same fresh inputs.")
@click.option("--candidate", "candidate_ids", multiple=True, help="Re-measure these candidates instead of the "
              "best of each team version (repeatable).")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def remeasure(settings: Settings, run_id, split, rounds, candidate_ids, as_json) -> None:
    """Measure the best candidate of every team version (or --candidate ids), and a copy of the
    baseline, again in one interleaved batch on this machine; record the new rounds as one more
    measurement of each; say which rankings changed; store the measurement set in the run."""
    from evoteam.report.summary import remeasure_with_gains

    async def go():
        async with open_store(settings) as store:
            return await remeasure_with_gains(settings, store, run_id, rounds=rounds, split=split,
                                              candidate_ids=list(candidate_ids) or None,
                                              progress=lambda m: click.echo(m, err=True))

    mset = _run(go())
    if as_json:
        click.echo(mset.model_dump_json(indent=2))
        return
    from evoteam.stats import EXACT_MIN_RUNS, describe_listed, describe_score

    def shown(score, interval, runs: int | None = None) -> str:  # runs: the batch's, where known
        return "—" if score is None else describe_score(score, interval, runs=runs)

    for e in mset.entries:
        moved = f"  rank {e.rank_before} -> {e.rank_after}" if e.candidate_id in mset.changed else ""
        noise = ("  better than the top, side by side" if e.candidate_id in mset.better_than_top else
                 "  within noise of the top" if e.candidate_id in mset.within_noise_of_top else "")
        held = "" if e.heldout_score is None else f"  held-out {shown(e.heldout_score, e.heldout_interval, mset.rounds)}"
        now = shown(e.score, e.score_interval, e.runs or mset.rounds)  # a program side may stop short of `rounds`
        if e.settled:  # a program whose runs settled: what it now is, pooled, and how many more it took
            now = describe_score(e.pooled_score, e.pooled_interval, runs=EXACT_MIN_RUNS, exact=True) + (
                f" pooled after {e.runs} more run{'s' if e.runs != 1 else ''}" if e.runs else ", not run again")
        click.echo(f"{e.candidate_id:<24} v{e.team_version if e.team_version is not None else '-':<3} "
                   f"recorded {describe_listed(e.recorded_score, e.recorded_interval, e.recorded_runs):>22}  now "
                   f"{now:>22}{held}{moved}{noise}")
    click.echo(f"order before: {', '.join(mset.order_before)}")
    click.echo(f"order after:  {', '.join(mset.order_after)}" + ("  (changed)" if mset.changed else "  (unchanged)"))
    for line in mset.version_gains:
        click.echo(line)
    if mset.contended:
        click.echo("contended machine: intervals are wider than on a quiet one")
    if mset.note:
        click.echo(mset.note)
