"""The plans PostgreSQL really ran, read back from its log: what the row-count bounds of search
are checked on (no clock involved).

`log_plans(conn, database)` makes every later connection to `database` log each executed
statement's plan (auto_explain, EXPLAIN ANALYZE, as JSON); `logged_plans` reads the plans out of
a stretch of the server's log; `rows_read` adds up the rows a plan read from one table (rows
returned plus rows a filter or a recheck threw away)."""

from __future__ import annotations

import json

import psycopg
import pytest


def log_plans(conn: psycopg.Connection, database: str) -> None:
    """Every new connection to `database` logs its executed plans; skips without auto_explain."""
    try:  # part of PostgreSQL's contrib modules, in Debian's postgresql package
        conn.execute("LOAD 'auto_explain'")
    except psycopg.Error as exc:
        pytest.skip(f"PostgreSQL's auto_explain module is not installed here: {exc}")
    for setting in ("session_preload_libraries = 'auto_explain'", "auto_explain.log_min_duration = 0",
                    "auto_explain.log_analyze = on", "auto_explain.log_format = 'json'"):
        conn.execute(f"ALTER DATABASE {database} SET {setting}")


def rows_read(plan: dict, table: str = "search_index") -> int:
    """Rows a plan (and its children) fetched from `table`: kept plus filtered out."""
    own = 0
    if plan.get("Relation Name") == table:
        own = (plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
               + plan.get("Rows Removed by Index Recheck", 0)) * plan.get("Actual Loops", 1)
    return own + sum(rows_read(child, table) for child in plan.get("Plans", []))


def nodes(plan: dict) -> list[dict]:
    return [plan, *(n for child in plan.get("Plans", []) for n in nodes(child))]


def logged_plans(text: str) -> list[dict]:
    """The JSON plans auto_explain wrote into a stretch of the server's log."""
    out, decoder, at = [], json.JSONDecoder(), 0
    while (at := text.find("plan:", at)) >= 0:
        start = text.find("{", at)
        value, end = decoder.raw_decode(text[start:])
        out.append(value)
        at = start + end
    return out
