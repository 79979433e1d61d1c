"""What PostgreSQL search knows of the newest entries before it reads any of them, kept per process.

Search treats a word found in more than a third of the newest entries as a stopword, and sizes
the ranges of entries it reads from how densely the query matches there (pgsearch.py,
pgranges.py). Reading the newest 3,000 entries for every query cost most of the rows a search
read. Instead, one pass over them (`STATS`) gives how many hold each lexeme (lexemes held by one
entry only count as none: no stopword or range size hangs on them) and how many fall in each
(project, run, kind), and is kept per process and database:

- for `STATS_TTL_S` seconds, or until a search meets entries more than a tenth of the window
  newer than the pass (`seen`): word frequencies in a window of 3,000 move slowly, so a stopword
  judged on a pass a few hundred entries old is the same one. A pass past that is still used
  while a new one is read in the background (it takes tens of milliseconds on a busy machine:
  no search waits for it but a store's first);
- never for a store of fewer than `SMALL` entries (where every word counts anyway): it is read
  afresh each time, so a small store's searches are exactly those of a fresh pass.

A query word's lexemes (PostgreSQL's parser and English stemmer: `tiles` is `tile`) never change
for a configuration: they are asked once per word (`LEXEMES`) and kept. A word's frequency is
that of its rarest lexeme: the entries `plainto_tsquery(word)` matches, exactly for a word of one
lexeme (any \\w+ word but a few joined by `_`). The density of a query of several words is
estimated as if they occurred independently; each range read corrects it (pgranges.py).

With each pass read again in the background comes the store's knowledge.search version: a server
left running after a newer evoteam upgraded the search index says so once (`_say_if_newer`).
"""

from __future__ import annotations

import asyncio
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from evoteam.servers.knowledge.migrations import _MIGRATIONS

CONFIG = "evoteam"  # the text search configuration made by pgschema.py
SMALL = 1000  # below this newest id every word counts (pgsearch.py) and the pass is not kept
STATS_TTL_S = 30.0
_KEPT_STORES = 64
_KEPT_WORDS = 100_000

# One row: the newest id, the lexemes (with their counts) and the scopes (with theirs) as arrays,
# which the driver decodes far faster than thousands of rows. The three parts read the CTE, so
# PostgreSQL reads the newest entries once.
STATS = (
    "WITH s AS (SELECT id, tsv, project, run_id, kind FROM search_index ORDER BY id DESC LIMIT ?), "
    "w AS (SELECT lexeme, count(*) AS n FROM s, unnest(tsvector_to_array(s.tsv)) AS lexeme GROUP BY lexeme "
    "HAVING count(*) > 1), "
    "g AS (SELECT project, run_id, kind, count(*) AS n FROM s GROUP BY project, run_id, kind) "
    "SELECT t.newest, w.lexemes, w.counts, g.projects, g.runs, g.kinds, g.entries "
    "FROM (SELECT coalesce(max(id), 0) AS newest FROM s) AS t, "
    "(SELECT array_agg(lexeme) AS lexemes, array_agg(n) AS counts FROM w) AS w, "
    "(SELECT array_agg(project) AS projects, array_agg(run_id) AS runs, array_agg(kind) AS kinds, "
    "array_agg(n) AS entries FROM g) AS g")
# Read with each pass read again in the background (every STATS_TTL_S at most): `_say_if_newer`.
SEARCH_VERSION = "SELECT version FROM schema_versions WHERE component = 'knowledge.search'"
LEXEMES = f"SELECT w, tsvector_to_array(to_tsvector('{CONFIG}', w)) AS l FROM unnest(?::text[]) AS w"


@dataclass
class NewestStats:
    """One pass over the newest `entries` entries of the index (the newest id: `newest`)."""

    newest: int
    entries: int
    lexemes: dict[str, int]
    scopes: dict[tuple[str, str, str], int]  # (project, run, kind): entries
    taken: float = field(default_factory=time.monotonic)
    stale: bool = False

    def frequency(self, lexemes: Sequence[str]) -> int:
        """Entries holding every one of `lexemes` (at most those holding the rarest); 0 for none."""
        return min((self.lexemes.get(x, 0) for x in lexemes), default=0)

    def in_scope(self, project: str | None, run_id: str | None, kinds: Sequence[str] | None) -> int:
        return sum(n for (p, r, k), n in self.scopes.items()
                   if (project is None or p == project) and (not run_id or r == run_id) and (not kinds or k in kinds))

    def expected(self, words: Sequence[Sequence[str]], any_word: bool, scoped: int) -> float:
        """Entries of the pass in scope expected to match all (or any) of `words` (each given by
        its lexemes), the words taken as independent of one another and of the scope."""
        if not self.entries:  # an empty index (a new store): nothing expected, nothing to divide by
            return 0.0
        # A word without a lexeme adds nothing to plainto_tsquery's match: it is left out here too.
        shares = [self.frequency(w) / self.entries for w in words if w]
        if not shares:
            return 0.0
        share = 1.0 - math.prod(1.0 - s for s in shares) if any_word else math.prod(shares)
        return scoped * share


_stats: dict[tuple[str, int], NewestStats] = {}
_lexemes: dict[str, tuple[str, ...]] = {}
_reading: dict[tuple[str, int], asyncio.Task] = {}  # stores whose pass is being read in the background
_warned: set[str] = set()  # stores said to have a newer search index than this server knows


def _kept(key: tuple[str, int]) -> NewestStats | None:
    """The kept pass for `key`, or None when the search must read one first."""
    stats = _stats.get(key)
    if stats is None or stats.newest < SMALL:
        return None
    return stats


def _past(stats: NewestStats) -> bool:
    return stats.stale or time.monotonic() - stats.taken > STATS_TTL_S


def _keep(key: tuple[str, int], stats: NewestStats) -> None:
    if key not in _stats and len(_stats) >= _KEPT_STORES:
        del _stats[min(_stats, key=lambda k: _stats[k].taken)]
    _stats[key] = stats


async def known(conn, db, key: tuple[str, int], words: Sequence[str],
                also: Sequence[tuple[str, Sequence]] = ()) -> tuple[NewestStats, dict[str, tuple[str, ...]], list | None]:
    """The pass for store `key` (its URL and window) and each word's lexemes, read only where not
    kept; `also`: statements to send in the same round trip if one is needed (their rows come
    back third; None when nothing was sent). `db`: where a pass past its time is read again."""
    stats = _kept(key)
    if stats is not None and _past(stats) and key not in _reading:
        _reading[key] = task = db.spawn(_read_again(db, key))
        task.add_done_callback(lambda _, key=key: _reading.pop(key, None))  # cancelled unstarted too
    unknown = [w for w in words if w not in _lexemes]
    if stats is not None and not unknown:
        return stats, {w: _lexemes[w] for w in words}, None
    statements = [*also]
    if stats is None:
        statements.append((STATS, [key[1]]))
    if unknown:
        statements.append((LEXEMES, [unknown]))
    rows = await conn.batch(statements)
    if unknown:
        if len(_lexemes) + len(unknown) > _KEPT_WORDS:
            _lexemes.clear()
        _lexemes.update({r["w"]: tuple(r["l"]) for r in rows.pop()})
    if stats is None:
        stats = _from_row(rows.pop()[0])
        _keep(key, stats)
    return stats, {w: _lexemes.get(w, ()) for w in words}, rows if also else None


async def _read_again(db, key: tuple[str, int]) -> None:
    try:
        async with db.read() as conn:
            (row,), version = await conn.batch([(STATS, [key[1]]), (SEARCH_VERSION, [])])
        _keep(key, _from_row(row))
        _say_if_newer(db.path, version)
    except Exception:  # the database gone or closing: the old pass serves, and the next search retries
        pass


def _say_if_newer(where: str, rows: list) -> None:
    """Say once per store, on stderr, when another server has upgraded its search index past the
    version this one knows: opening such a store is refused, but a server left running through
    the upgrade goes on searching, maybe through no index at all, and nothing else would say why
    it slowed down."""
    known = len(_MIGRATIONS.get("knowledge.search", ()))
    version = rows[0][0] if rows else 0
    if version > known and where not in _warned:
        _warned.add(where)
        print(f"evoteam: the PostgreSQL store {where} has knowledge.search schema v{version}, newer than this "
              f"server knows (v{known}): its searches may find no index to read and slow down; restart it "
              f"with the newer evoteam", file=sys.stderr, flush=True)


def _from_row(row) -> NewestStats:
    lexemes = dict(zip(row["lexemes"] or [], map(int, row["counts"] or [])))
    scopes = {(p, r, k): int(n) for p, r, k, n in zip(row["projects"] or [], row["runs"] or [], row["kinds"] or [],
                                                    row["entries"] or [])}
    return NewestStats(newest=int(row["newest"]), entries=sum(scopes.values()), lexemes=lexemes, scopes=scopes)


def seen(key: tuple[str, int], newest_id: int) -> None:
    """A search met entry `newest_id`: a pass that far behind is read again (in the background)."""
    stats = _stats.get(key)
    if stats is not None and newest_id - stats.newest > max(1, key[1] // 10):
        stats.stale = True


async def settled() -> None:
    """Once every pass being read in the background is read (tests wait for it)."""
    await asyncio.gather(*_reading.values(), return_exceptions=True)
