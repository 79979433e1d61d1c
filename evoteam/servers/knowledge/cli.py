"""`evoteam kb ...` (the knowledge store) and `evoteam token ...` (shared-server access).

The store, its models and pydantic are imported inside each command, not here: `evoteam kb
--help` must answer without them (tests/test_cli_help.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from evoteam.servers.knowledge import cli_lineage, cli_records
from evoteam.servers.knowledge import quickread
from evoteam.servers.knowledge.cli_support import open_store, quick
from evoteam.servers.knowledge.cli_support import run_store_call as _run

if TYPE_CHECKING:
    from evoteam.config import Settings


def _local_store(path, **kwargs):
    from evoteam.servers.knowledge.local import LocalKnowledgeStore

    return LocalKnowledgeStore.open(path, **kwargs)


@click.group()
def kb() -> None:
    """The knowledge store: runs, learnings, history, artifacts, candidates.

    What you record is yours: on the embedded store under your login name (LOGNAME, USER), on a shared
    server under your token's user."""


@kb.command("runs")
@click.option("--status", type=click.Choice(["active", "paused", "finished", "failed", "budget_spent"]))
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def runs_cmd(settings: Settings, status, as_json) -> None:
    """List runs, newest first."""
    from evoteam.servers.knowledge.bestline import listed_best, run_interval

    # A local file is read without the store's machinery (quickread.py), with the same output.
    items = None if as_json else quick(settings, lambda values: quickread.runs(values, status=status, limit=200))
    if items is None:
        async def go():
            async with open_store(settings) as store:
                return await store.list_runs(status=status, limit=200)

        page = _run(go())
        if as_json:
            click.echo(page.model_dump_json(indent=2))
            return
        items = page.items
    if not items:
        click.echo("no runs yet: start one with `evoteam kb start GOAL` or /evolve-team")
    for run in items:
        best = "-" if run.best_score is None else listed_best(run.best_score, run_interval(run))
        ndg = "" if run.ndg is None else f"  NDG {run.ndg:.1f}"
        click.echo(f"{run.id}  {run.status:<8} {run.provenance.user:<12} best {best}{ndg}  {run.candidates} "
                   f"candidates  {run.learnings} learnings  {run.kit or '-'}  {run.goal[:60]}")


@kb.command("start")
@click.argument("goal")
@click.option("--kit", default=None, help="The kit's name or folder: the run takes its direction, x0 and best-known.")
@click.option("--direction", type=click.Choice(["maximize", "minimize"]), default=None,
              help="How the run ranks scores: a kit found here gives its own (another is refused); else maximize.")
@click.option("--x0", type=float, default=None)
@click.option("--best-known", type=float, default=None)
@click.option("--budget-usd", type=float, default=None)
@click.option("--seed-from", default=None, metavar="RUN_ID", help="The earlier run this one continues from.")
@click.pass_obj
def start_cmd(settings: Settings, goal, kit, direction, x0, best_known, budget_usd, seed_from) -> None:
    """Start a run and print its id (`evoteam kb prior KIT` shows what earlier runs found). A run
    of a kit found here is started as the MCP tool starts one: with the kit's direction."""
    from evoteam.servers.knowledge.prior import beyond_generic, start_run_with_prior
    from evoteam.servers.stdio import local_kit

    async def go():
        async with open_store(settings) as store:
            return await start_run_with_prior(store, goal=goal, kit=kit, direction=direction, x0=x0,
                                              best_known=best_known, budget_usd=budget_usd, project=None,
                                              seed_from=seed_from, local_kit=local_kit(settings))

    started = _run(go())
    own = beyond_generic(started.prior_work.hint)
    if own:  # the caller's other active runs of this kit (a second start by mistake?), a kit not found: on stderr
        click.echo(own, err=True)
    click.echo(started.id)


@kb.command("learnings")
@click.argument("run_id")
@click.option("--json", "as_json", is_flag=True, help="Print the learnings as JSON (every field).")
@click.pass_obj
def learnings_cmd(settings: Settings, run_id, as_json) -> None:
    """Print a run's learnings document."""
    text = None if as_json else quick(settings, lambda values: quickread.learnings_markdown(values, run_id))
    if text is not None:  # a local file, read without the store's machinery (quickread.py)
        click.echo(text)
        return
    if as_json:
        async def every():
            async with open_store(settings) as store:
                return await store.list_learnings(run_id, limit=200)

        click.echo(_run(every()).model_dump_json(indent=2))
        return

    async def go():
        async with open_store(settings) as store:
            return await store.render_learnings(run_id)

    click.echo(_run(go()).markdown)


@kb.command("search")
@click.argument("query")
@click.option("--run", "run_id", default=None)
@click.option("--limit", default=10, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def search_cmd(settings: Settings, query, run_id, limit, as_json) -> None:
    """Full-text search across learnings, history, artifacts and candidate notes."""

    async def go():
        async with open_store(settings) as store:
            return await store.search(query, run_id=run_id, limit=limit)

    page = _run(go())
    if as_json:
        click.echo(page.model_dump_json(indent=2))
        return
    for hit in page.items:
        click.echo(f"{hit.kind:<9} {hit.id}  {hit.title}  ({hit.owner or '?'}, {hit.run_id})\n"
                   f"          {hit.snippet}")
    click.echo(f"{page.total} match(es)")


@kb.command("export")
@click.argument("run_id")
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.pass_obj
def export_cmd(settings: Settings, run_id, folder) -> None:
    """Write a run as a file tree (run.json, LEARNINGS.md, HISTORY.md, artifacts/, candidates/)."""
    from evoteam.servers.knowledge.export import export_run

    async def go():
        async with open_store(settings) as store:
            return await export_run(store, run_id, folder)

    bundle = _run(go())
    click.echo(f"exported {run_id} to {folder}: {len(bundle.learnings)} learnings, {len(bundle.history)} "
               f"history entries, {len(bundle.artifacts)} artifacts, {len(bundle.candidates)} candidates")


@kb.command("import")
@click.argument("folder", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--project", default=None, help="Import into this project instead of the exported one.")
@click.option("--trust-scores", is_flag=True,
              help="Keep the export's verified scores (only for exports from a bench you trust); "
                   "otherwise its scores are imported as unverified claims that never rank.")
@click.option("--without-manifest", is_flag=True,
              help="Accept a folder exported by an older evoteam (no MANIFEST.json): every record is still "
                   "checked, but nothing proves the folder is complete.")
@click.pass_obj
def import_cmd(settings: Settings, folder, project, trust_scores, without_manifest) -> None:
    """Restore a run exported with `evoteam kb export` into the local store file."""
    from evoteam.servers.knowledge.export import import_run
    if settings.remote:
        raise click.ClickException("import writes other users' provenance, so it runs on the store's own host: "
                                   "unset EVOTEAM_KNOWLEDGE_URL and point EVOTEAM_DB at the server's file")

    async def go():
        async with _local_store(settings.db, max_artifact_bytes=settings.max_artifact_bytes) as store:
            return await import_run(store, folder, project=project, trust_scores=trust_scores,
                                    without_manifest=without_manifest)

    from evoteam.servers.knowledge.backend import describe_location

    run = _run(go())
    click.echo(f"imported {run.id} ({run.candidates} candidates, {run.learnings} learnings) "
               f"into {describe_location(settings.db)}")


@kb.command("review")
@click.argument("run_id")
@click.option("--accept", "accept_id", default=None, metavar="CANDIDATE_ID",
              help="Clear this flagged candidate's flag after looking at it: it may rank from now on.")
@click.option("--json", "as_json", is_flag=True, help="Print the flagged candidates as JSON.")
@click.pass_obj
def review_cmd(settings: Settings, run_id, accept_id, as_json) -> None:
    """List a run's flagged candidates (they never rank), or accept one after review."""
    from evoteam.servers.knowledge.verified import accept_flagged

    if settings.remote:
        raise click.ClickException("reviews run on the store's own host: unset EVOTEAM_KNOWLEDGE_URL")

    async def go():
        async with _local_store(settings.db) as store:
            if accept_id:
                if (await store.get_candidate(accept_id)).run_id != run_id:
                    raise click.ClickException(f"{accept_id} is not a candidate of {run_id}")
                await accept_flagged(store.db, accept_id, store.actor.user)
                return []
            found, cursor = [], None
            while True:
                page = await store.list_candidates(run_id, limit=200, cursor=cursor)
                found += [c for c in page.items if c.flagged]
                if not (cursor := page.next_cursor):
                    return found

    flagged = _run(go())
    if accept_id:
        click.echo(json.dumps({"accepted": accept_id}) if as_json else f"accepted {accept_id}: it ranks from now on")
        return
    if as_json:
        from evoteam.servers.knowledge.models import Page

        click.echo(Page(items=flagged, total=len(flagged)).model_dump_json(indent=2))
        return
    for c in flagged:
        click.echo(f"{c.id}  {c.status:<8} score {c.score}  {c.provenance.role or '-'}  "
                   f"{'verified' if c.verified else 'self-reported'}")
    click.echo(f"{len(flagged)} flagged candidate(s); `evoteam kb review {run_id} --accept ID` after checking one")


@kb.command("migrate-store")
@click.argument("source")
@click.argument("destination")
@click.option("--json", "as_json", is_flag=True)
def migrate_store_cmd(source, destination, as_json) -> None:
    """Copy a whole store into an empty one on either backend (a SQLite file or a postgresql://
    URL, either way), then verify every table by row count and content hash."""
    from evoteam.servers.knowledge.migrate_store import migrate_store

    def progress(table: str, rows: int) -> None:
        if not as_json and rows % 10_000 == 0:
            click.echo(f"  {table}: {rows} rows", err=True)

    report = _run(migrate_store(source, destination, progress))
    if as_json:
        click.echo(json.dumps({**report.model_dump(), "total_rows": report.total_rows}, indent=2))
        return
    for t in report.tables:
        click.echo(f"{t.table:<28} {t.rows:>9}  {t.sha256[:16]}")
    click.echo(f"copied and verified {report.total_rows} rows in {len(report.tables)} tables: "
               f"{report.source} -> {report.destination}")


@click.group()
def token() -> None:
    """Bearer tokens for the shared knowledge server (stored as hashes in the store file)."""


def _local(settings: Settings, fn):
    async def go():  # tokens live in the store file itself, never on a shared server's client
        async with _local_store(settings.db) as store:
            return await fn(store.db)

    return _run(go())


@token.command("add")
@click.argument("user")
@click.option("--project", default=None, help="Limit the token to one project.")
@click.option("--verifier", is_flag=True,
              help="Let this token record bench-verified scores (only for a bench service on another host).")
@click.pass_obj
def token_add(settings: Settings, user, project, verifier) -> None:
    """Make a token for USER and print it once (only its hash is kept)."""
    from evoteam.servers.knowledge import auth

    new = _local(settings, lambda db: auth.add_token(db, user, project, verifier))
    scope = (f"project {project}" if project else "all projects") + (", verifier" if verifier else "")
    click.echo(f"token {new.id} for {user} ({scope}); it is shown only now:", err=True)
    click.echo(new.token)


@token.command("list")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def token_list(settings: Settings, as_json) -> None:
    """List tokens (never their values)."""
    tokens = None if as_json else quick(settings, quickread.tokens)
    if tokens is None:
        from evoteam.servers.knowledge import auth

        tokens = _local(settings, auth.list_tokens)
    if as_json:
        click.echo(json.dumps([t.model_dump(mode="json") for t in tokens], indent=2))
        return
    for t in tokens:
        state = f"revoked {t.revoked_at:%Y-%m-%d}" if t.revoked_at else "active"
        click.echo(f"{t.id}  {t.user:<16} {t.project or '*':<12} {state}{'  verifier' if t.verifier else ''}")


@token.command("revoke")
@click.argument("token_id")
@click.pass_obj
def token_revoke(settings: Settings, token_id) -> None:
    """Revoke a token by its id (see `evoteam token list`)."""
    from evoteam.servers.knowledge import auth

    _local(settings, lambda db: auth.revoke_token(db, token_id))
    click.echo(f"revoked {token_id}")


for _command in (*cli_records.COMMANDS, *cli_lineage.COMMANDS):
    kb.add_command(_command)

COMMANDS = [kb, token]
