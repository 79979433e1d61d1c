"""The store's SQL is written once, in the SQLite dialect; this module turns it into PostgreSQL's.

The rewrite is mechanical and only touches text outside quotes:
- `?` placeholders become `%s`, `:name` ones `%(name)s` (and every `%`, in a string literal too,
  becomes `%%`) when the statement has parameters;
- the column name `user`, a reserved word in PostgreSQL (it means `current_user` there), is quoted;
- `INSERT OR IGNORE INTO ...` becomes `INSERT INTO ... ON CONFLICT DO NOTHING`;
- in schema text (`ddl=True`): `REAL` is a double (PostgreSQL's `real` is single precision),
  `BLOB` is `bytea`, and `INTEGER PRIMARY KEY AUTOINCREMENT` is a `bigserial` key.

What cannot be rewritten this way — full-text search, triggers — has a PostgreSQL form of its
own beside the SQLite one (see `register_postgres_form` in migrations.py, pgschema.py and pgsearch.py).
"""

from __future__ import annotations

import re
from functools import lru_cache

_TOKEN = re.compile(r"--[^\n]*|'(?:[^']|'')*'|\"[^\"]*\"|\$\$.*?\$\$|[^'\"$-]+|[$-]", re.S)
_USER = re.compile(r"(?<![\w\"\x00])user(?![\w\"(\x00])", re.I)
_OR_IGNORE = re.compile(r"\bINSERT\s+OR\s+IGNORE\s+INTO\b", re.I)
_DDL = [
    (re.compile(r"\bINTEGER\s+PRIMARY\s+KEY\s+AUTOINCREMENT\b", re.I), "BIGSERIAL PRIMARY KEY"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bBLOB\b"), "BYTEA"),
]


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@lru_cache(maxsize=2048)
def to_postgres(sql: str, params: bool = True, ddl: bool = False, named: bool = False) -> str:
    """The PostgreSQL text of one SQLite-dialect statement (or script, when `params` is False);
    `named`: its parameters are `:name` placeholders, given as a mapping."""
    out = []
    ignore = False
    for piece in _TOKEN.findall(sql):
        if piece[0] in "'\"" or piece.startswith(("$$", "--")):
            # psycopg reads every `%` of a statement with parameters, inside a literal too (a
            # `LIKE '%...%'` failed on PostgreSQL alone).
            out.append(piece.replace("%", "%%") if params and piece[0] == "'" else piece)
            continue
        if _OR_IGNORE.search(piece):
            piece, ignore = _OR_IGNORE.sub("INSERT INTO", piece), True
        if params and named:  # set aside first, so a parameter named `user` is not quoted
            piece = _NAMED.sub("\x00\\1\x00", piece)
        piece = _USER.sub('"user"', piece)
        if ddl:
            for pattern, replacement in _DDL:
                piece = pattern.sub(replacement, piece)
        if params:
            piece = piece.replace("%", "%%")
            piece = re.sub("\x00(\\w+)\x00", r"%(\1)s", piece) if named else piece.replace("?", "%s")
        out.append(piece)
    text = "".join(out)
    if ignore:
        if not params and ";" in text.rstrip().rstrip(";"):
            raise ValueError("INSERT OR IGNORE is rewritten per statement: give it as a statement of its own")
        text = text.rstrip().rstrip(";") + " ON CONFLICT DO NOTHING"
    return text
