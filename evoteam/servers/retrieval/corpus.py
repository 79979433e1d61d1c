"""A clean-room corpus: a directory of Markdown, text, HTML and source files, indexed with
SQLite FTS5 for machines without web access.

The index lives in the corpus directory as `.evoteam-index.db` (or, where the directory is
not writable, under `~/.evoteam/corpus/<hash>.db`). Files are split into passages of a few
thousand characters; each passage is one searchable document whose URL is the file's
`file://` URL (plus `#part-N` after the first passage). Re-indexing is incremental: a file
whose size and modification time are unchanged is skipped, one whose content hash is
unchanged is only re-stamped, deleted files are dropped.
"""

from __future__ import annotations

import hashlib
import html.parser
import os
import re
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel

from evoteam.servers.retrieval.models import RawResult
from evoteam.servers.retrieval.rank import STOPWORDS

INDEX_NAME = ".evoteam-index.db"
TEXT_SUFFIXES = {
    ".md", ".markdown", ".txt", ".rst", ".html", ".htm", ".tex", ".py", ".cu", ".cuh", ".c", ".cc",
    ".cpp", ".cxx", ".h", ".hpp", ".rs", ".go", ".java", ".js", ".ts", ".jl", ".f90", ".toml", ".yaml",
    ".yml", ".json", ".sh", ".triton", ".mlir", ".ptx", ".ipynb",
}
SKIP_DIRS = {".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache"}
MAX_FILE_BYTES = 4 * 1024 * 1024
PASSAGE_CHARS = 4_000
_WORD = re.compile(r"\w+", re.UNICODE)

SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    sha256 TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS passages (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL,
    part INTEGER NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS passages_path ON passages(path);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_fts USING fts5(
    title, body, content='passages', content_rowid='id', tokenize='porter unicode61'
);
CREATE VIRTUAL TABLE IF NOT EXISTS passages_vocab USING fts5vocab(passages_fts, 'row');
CREATE TRIGGER IF NOT EXISTS passages_ai AFTER INSERT ON passages BEGIN
    INSERT INTO passages_fts(rowid, title, body) VALUES (new.id, new.title, new.body);
END;
CREATE TRIGGER IF NOT EXISTS passages_ad AFTER DELETE ON passages BEGIN
    INSERT INTO passages_fts(passages_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
END;
"""


class IndexReport(BaseModel):
    corpus: str
    index: str
    added: int = 0
    updated: int = 0
    removed: int = 0
    unchanged: int = 0
    skipped: int = 0
    passages: int = 0


def index_path(corpus_dir: Path) -> Path:
    """Where the index of `corpus_dir` lives (see the module docstring)."""
    corpus_dir = Path(corpus_dir).resolve()
    local = corpus_dir / INDEX_NAME
    if local.exists() or os.access(corpus_dir, os.W_OK):
        return local
    digest = hashlib.sha256(str(corpus_dir).encode()).hexdigest()[:16]
    return Path.home() / ".evoteam" / "corpus" / f"{digest}.db"


def _connect(path: Path, create: bool = True) -> sqlite3.Connection:
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)
    conn.execute("PRAGMA busy_timeout = 30000")
    if create:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.executescript(SCHEMA)
        # Titles weigh more than bodies.
        conn.execute("INSERT INTO passages_fts(passages_fts, rank) VALUES ('rank', 'bm25(4.0, 1.0)')")
    return conn


class _HTMLText(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skip = 0
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style", "noscript"):
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in ("p", "div", "br", "li", "h1", "h2", "h3", "h4", "pre", "tr", "section"):
            self.parts.append("\n")

    def handle_endtag(self, tag):
        if tag in ("script", "style", "noscript") and self._skip:
            self._skip -= 1
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif not self._skip:
            self.parts.append(data)


def extract_text(path: Path, raw: str) -> tuple[str, str]:
    """(title, plain text) of one file."""
    suffix = path.suffix.lower()
    if suffix in (".html", ".htm"):
        parser = _HTMLText()
        try:
            parser.feed(raw)
        except Exception:  # malformed HTML: index what was parsed
            pass
        text = re.sub(r"\n\s*\n+", "\n\n", "".join(parser.parts)).strip()
        return (parser.title.strip() or path.stem), text
    title = path.stem
    if suffix in (".md", ".markdown", ".rst", ".txt"):
        for line in raw.splitlines()[:40]:
            stripped = line.strip()
            if stripped.startswith("#"):
                title = stripped.lstrip("#").strip() or title
                break
            if stripped and suffix == ".txt":
                title = stripped[:120]
                break
    else:
        title = path.name
    return title, raw


def passages(text: str, size: int = PASSAGE_CHARS) -> list[str]:
    """Split text at paragraph boundaries into pieces of at most about `size` characters."""
    if len(text) <= size:
        return [text]
    out, buf = [], ""
    for para in re.split(r"(\n\s*\n)", text):
        if len(buf) + len(para) > size and buf.strip():
            out.append(buf.strip())
            buf = ""
        while len(para) > size:
            out.append(para[:size])
            para = para[size:]
        buf += para
    if buf.strip():
        out.append(buf.strip())
    return out


def _files(root: Path):
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        for name in names:
            if name.startswith(".") or Path(name).suffix.lower() not in TEXT_SUFFIXES:
                continue
            yield Path(folder) / name


def index_corpus(corpus_dir: Path, index: Path | None = None,
                 progress: Callable[[int, int, str], None] | None = None) -> IndexReport:
    """Build or refresh the FTS5 index of a corpus directory (incremental); `progress` hears
    (files looked at, files in all, the file) as it goes."""
    root = Path(corpus_dir).resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"corpus directory {root} does not exist")
    index = index or index_path(root)
    report = IndexReport(corpus=str(root), index=str(index))
    conn = _connect(index)
    try:
        known = {r[0]: (r[1], r[2], r[3]) for r in conn.execute("SELECT path, mtime_ns, size, sha256 FROM files")}
        seen: set[str] = set()
        conn.execute("BEGIN IMMEDIATE")
        files = list(_files(root))
        for n, path in enumerate(files):
            if progress:
                progress(n, len(files), path.name)
            try:
                st = path.stat()
            except OSError:
                continue
            rel = str(path.relative_to(root))
            if st.st_size > MAX_FILE_BYTES:
                report.skipped += 1
                continue
            seen.add(rel)
            old = known.get(rel)
            if old and old[0] == st.st_mtime_ns and old[1] == st.st_size:
                report.unchanged += 1
                continue
            data = path.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            if old and old[2] == digest:
                conn.execute("UPDATE files SET mtime_ns = ?, size = ? WHERE path = ?", (st.st_mtime_ns, st.st_size, rel))
                report.unchanged += 1
                continue
            raw = data.decode("utf-8", errors="replace")
            title, text = extract_text(path, raw)
            conn.execute("DELETE FROM passages WHERE path = ?", (rel,))
            parts = [p for p in passages(text) if p.strip()]
            for i, body in enumerate(parts):
                conn.execute("INSERT INTO passages (path, part, title, body) VALUES (?, ?, ?, ?)",
                             (rel, i, title if len(parts) == 1 else f"{title} (part {i + 1})", body))
            conn.execute("INSERT INTO files (path, mtime_ns, size, sha256) VALUES (?, ?, ?, ?) ON CONFLICT(path) "
                         "DO UPDATE SET mtime_ns = excluded.mtime_ns, size = excluded.size, sha256 = excluded.sha256",
                         (rel, st.st_mtime_ns, st.st_size, digest))
            if old:
                report.updated += 1
            else:
                report.added += 1
        if progress:
            progress(len(files), len(files), "files read")
        for rel in set(known) - seen:
            conn.execute("DELETE FROM passages WHERE path = ?", (rel,))
            conn.execute("DELETE FROM files WHERE path = ?", (rel,))
            report.removed += 1
        conn.execute("COMMIT")
        report.passages = conn.execute("SELECT count(*) FROM passages").fetchone()[0]
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.close()
    return report


def query_words(query: str, max_terms: int = 16) -> list[str]:
    """The distinct content words of free text, in order."""
    out, seen = [], set()
    for w in _WORD.findall(query.lower()):
        if w in STOPWORDS or w in seen or len(w) < 2:
            continue
        seen.add(w)
        out.append(w)
        if len(out) >= max_terms:
            break
    return out


def match_expression(query: str | list[str], max_terms: int = 12) -> str | None:
    """An FTS5 query for free text: content words OR-ed, each quoted (no FTS syntax from
    the input gets through); bm25 ranks passages matching more, rarer words first."""
    words = query_words(query, max_terms) if isinstance(query, str) else query[:max_terms]
    terms = ['"' + w.replace('"', '""') + '"' for w in words]
    return " OR ".join(terms) if terms else None


# Query pruning: bm25 is computed for every passage a query matches, so a common word in an
# OR query costs a scan of most of the corpus. Words are taken rarest first (document
# frequency from the index's vocabulary) while the passages they match stay within this budget;
# the rarest word is always kept. Dropped words are the low-IDF ones bm25 would barely weigh.
ROW_BUDGET = 6_000


class _Stemmer:
    """Maps words to the index's terms using FTS5's own porter tokenizer (in memory)."""

    def __init__(self):
        self.conn = sqlite3.connect(":memory:", check_same_thread=False)
        self.conn.execute("CREATE VIRTUAL TABLE q USING fts5(w, tokenize='porter unicode61')")
        self.conn.execute("CREATE VIRTUAL TABLE qv USING fts5vocab(q, 'instance')")

    def stems(self, words: list[str]) -> dict[str, str]:
        self.conn.execute("DELETE FROM q")
        self.conn.executemany("INSERT INTO q(rowid, w) VALUES (?, ?)", list(enumerate(words, 1)))
        rows = self.conn.execute("SELECT doc, term FROM qv WHERE offset = 0").fetchall()
        return {words[doc - 1]: term for doc, term in rows}


class Corpus:
    """A read connection to one indexed corpus directory (thread-safe via a lock)."""

    def __init__(self, corpus_dir: Path, index: Path | None = None):
        self.root = Path(corpus_dir).resolve()
        self.index = index or index_path(self.root)
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._stemmer: _Stemmer | None = None
        self._df: dict[str, int] = {}
        self._data_version: int | None = None

    @property
    def indexed(self) -> bool:
        return self.index.exists()

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            if not self.index.exists():
                raise FileNotFoundError(f"{self.root} is not indexed: run `evoteam corpus index {self.root}`")
            self._conn = _connect(self.index, create=False)
            self._conn.execute("PRAGMA query_only = ON")
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._stemmer is not None:
            self._stemmer.conn.close()
            self._stemmer = None

    def url(self, rel: str, part: int) -> str:
        uri = (self.root / rel).as_uri()
        return uri if part == 0 else f"{uri}#part-{part + 1}"

    def _pruned(self, conn: sqlite3.Connection, words: list[str]) -> list[str]:
        if self._stemmer is None:
            self._stemmer = _Stemmer()
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version:  # re-indexed by another process: frequencies changed
            self._df.clear()
            self._data_version = version
        stems = self._stemmer.stems(words)
        dfs = []
        for w in words:
            term = stems.get(w)
            if term is None:
                continue
            if term not in self._df:
                if len(self._df) > 100_000:
                    self._df.clear()
                row = conn.execute("SELECT doc FROM passages_vocab WHERE term = ?", (term,)).fetchone()
                self._df[term] = row[0] if row else 0
            if self._df[term]:
                dfs.append((self._df[term], w))
        dfs.sort()
        chosen, total = [], 0
        for df, w in dfs:
            if chosen and total + df > ROW_BUDGET:
                break
            chosen.append(w)
            total += df
        return chosen

    def search(self, query: str, limit: int = 5) -> list[RawResult]:
        words = query_words(query)
        if not words:
            return []
        with self._lock:
            conn = self._connection()
            try:
                words = self._pruned(conn, words)
            except sqlite3.OperationalError:  # an index built before the vocabulary table
                pass
            match = match_expression(words)
            if match is None:
                return []
            rows = conn.execute(
                "SELECT p.path, p.part, p.title, p.body FROM passages_fts f JOIN passages p ON p.id = f.rowid "
                "WHERE passages_fts MATCH ? ORDER BY f.rank LIMIT ?", (match, limit)).fetchall()
        return [RawResult(url=self.url(path, part), title=title, content=body, backend="local")
                for path, part, title, body in rows]

    def count(self) -> int:
        with self._lock:
            return self._connection().execute("SELECT count(*) FROM passages").fetchone()[0]
