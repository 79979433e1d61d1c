"""The local corpus: FTS5 index, incremental re-index, search, and the `evoteam corpus` CLI."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from evoteam.cli import main
from evoteam.servers.retrieval.corpus import Corpus, index_corpus, index_path, match_expression, passages


def test_index_and_search(corpus_dir: Path):
    report = index_corpus(corpus_dir)
    assert report.added == 10 and report.updated == report.removed == 0
    assert report.passages > report.added  # the long handbook is split into passages
    assert Path(report.index) == corpus_dir / ".evoteam-index.db"
    c = Corpus(corpus_dir)
    try:
        hits = c.search("single pass running maximum softmax", 3)
        assert hits and hits[0].title == "Online softmax in a single pass"
        assert hits[0].url == (corpus_dir / "online_softmax.md").resolve().as_uri()
        assert "running maximum" in hits[0].content
        html = c.search("tiles shared memory bank conflicts", 1)
        assert html[0].title == "Shared memory tiling for matrix multiply"
        assert "var softmax" not in html[0].content  # scripts are not indexed
        parts = c.search("occupancy register pressure", 20)
        assert any("#part-" in h.url for h in parts)
        assert c.search("the of and", 5) == []  # only stopwords: no query
        # FTS syntax in the input is plain text, never an error
        assert isinstance(c.search('softmax" OR title:* NEAR(', 5), list)
    finally:
        c.close()


def test_reindex_is_incremental(corpus_dir: Path):
    index_corpus(corpus_dir)
    again = index_corpus(corpus_dir)
    assert again.added == again.updated == again.removed == 0 and again.unchanged == 10

    (corpus_dir / "warp_shuffle.md").write_text("# Warp shuffle reductions\nNow about butterfly patterns.\n")
    (corpus_dir / "log_sum_exp.txt").unlink()
    (corpus_dir / "new_note.md").write_text("# Cooperative groups\nGrid-wide sync for reductions.\n")
    touched = corpus_dir / "vectorized_loads.md"
    os.utime(touched, ns=(touched.stat().st_atime_ns, touched.stat().st_mtime_ns + 10_000_000))
    report = index_corpus(corpus_dir)
    assert (report.added, report.updated, report.removed) == (1, 1, 1)
    assert report.unchanged == 8  # includes the touched file: same hash, only re-stamped

    c = Corpus(corpus_dir)
    try:
        assert c.search("butterfly", 3)[0].title == "Warp shuffle reductions"
        assert c.search("cooperative groups grid sync", 3)[0].title == "Cooperative groups"
        assert not any("log_sum_exp" in h.url for h in c.search("overflowing float32 exponentiating", 20))
    finally:
        c.close()
    conn = sqlite3.connect(index_path(corpus_dir))
    try:  # no orphaned passages of the changed or deleted files
        (n,) = conn.execute("SELECT count(*) FROM passages WHERE path = 'log_sum_exp.txt'").fetchone()
        assert n == 0
        (n,) = conn.execute("SELECT count(*) FROM passages WHERE path = 'warp_shuffle.md'").fetchone()
        assert n == 1
    finally:
        conn.close()


def test_helpers():
    assert match_expression('a "quoted" NEAR(x y) title:foo') == '"quoted" OR "near" OR "title" OR "foo"'
    assert match_expression("the and of") is None
    text = "\n\n".join("p" * 1500 for _ in range(5))
    parts = passages(text, size=4000)
    assert len(parts) == 3 and all(len(p) <= 4000 for p in parts)


def test_cli_index_and_search(corpus_dir: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    result = runner.invoke(main, ["corpus", "index", str(corpus_dir)])
    assert result.exit_code == 0, result.output
    assert "added 10" in result.output
    result = runner.invoke(main, ["corpus", "index", str(corpus_dir)])
    assert "added 0" in result.output and "unchanged 10" in result.output
    result = runner.invoke(main, ["corpus", "search", "online softmax running maximum", "--dir", str(corpus_dir),
                                  "--limit", "2"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("Online softmax in a single pass")
    empty = tmp_path / "empty"
    empty.mkdir()
    result = runner.invoke(main, ["corpus", "search", "x", "--dir", str(empty)])
    assert result.exit_code != 0 and "evoteam corpus index" in result.output
