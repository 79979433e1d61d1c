"""`evoteam corpus ...`: index and search a clean-room corpus for the `local` backend."""

from __future__ import annotations

import json
import time
from pathlib import Path

import click


@click.group()
def corpus() -> None:
    """Clean-room corpus for the retrieval server's `local` search backend."""


@corpus.command("index")
@click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--index", "index_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Where to write the index (default: DIRECTORY/.evoteam-index.db, or ~/.evoteam/corpus/).")
def index_cmd(directory: Path, index_file: Path | None) -> None:
    """Build or refresh (incrementally) the full-text index of DIRECTORY."""
    from evoteam.progress import Lines
    from evoteam.servers.retrieval.corpus import index_corpus  # not for --help

    started = time.perf_counter()
    with Lines(f"indexing {directory}") as lines:  # a large corpus takes minutes
        report = index_corpus(directory, index_file, progress=lines.step)
    click.echo(f"indexed {report.corpus} -> {report.index}")
    click.echo(f"  added {report.added}, updated {report.updated}, removed {report.removed}, "
               f"unchanged {report.unchanged}, skipped {report.skipped} (too large); "
               f"{report.passages} passages in {time.perf_counter() - started:.2f}s")
    click.echo("  add the directory to corpus_dirs in evoteam.toml (or EVOTEAM_CORPUS) to search it")


@corpus.command("search")
@click.argument("query")
@click.option("--dir", "directories", multiple=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Corpus directory (repeatable; default: corpus_dirs from the settings).")
@click.option("--limit", default=5, show_default=True, type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the passages as JSON.")
@click.pass_obj
def search_cmd(settings, query: str, directories: tuple[Path, ...], limit: int, as_json: bool) -> None:
    """Search indexed corpora for QUERY and print the top passages."""
    from evoteam.servers.retrieval.corpus import Corpus, index_path  # not for --help

    dirs = list(directories) or list(getattr(settings, "corpus_dirs", []) or [])
    if not dirs:
        raise click.UsageError("no corpus: pass --dir DIR or set corpus_dirs / EVOTEAM_CORPUS")
    passages: list[dict] = []
    for d in dirs:
        if not index_path(d).exists():
            raise click.ClickException(f"{d} is not indexed: run `evoteam corpus index {d}`")
        c = Corpus(d)
        try:
            found = c.search(query, limit)
            if as_json:
                passages += [r.model_dump(mode="json") for r in found]
                continue
            for r in found:
                snippet = " ".join(r.content.split())[:200]
                click.echo(f"{r.title}\n  {r.url}\n  {snippet}\n")
        finally:
            c.close()
    if as_json:
        click.echo(json.dumps(passages, indent=2))


COMMANDS = [corpus]
