"""The SQLite-to-PostgreSQL rewrite (dialect.py) touches only what it must, never quoted text."""

from __future__ import annotations

import pytest

from evoteam.servers.knowledge.dialect import to_postgres


def test_placeholders_outside_quotes_only_and_every_percent_sign_doubled():
    # psycopg reads a `%` inside a literal too: left single there, PostgreSQL alone refused the
    # trajectory's LIKE '%DESTINATION_PASSING_STYLE%' ("only '%s', '%b', '%t' are allowed"; 2026-12-06).
    assert to_postgres("SELECT * FROM t WHERE a = ? AND b LIKE 'x?%' AND c = ?") == \
        "SELECT * FROM t WHERE a = %s AND b LIKE 'x?%%' AND c = %s"
    assert to_postgres("SELECT a % 2 FROM t WHERE b = ?") == "SELECT a %% 2 FROM t WHERE b = %s"
    # Without parameters the text goes as it is (psycopg does not read placeholders then).
    assert to_postgres("SELECT 50 % 7", params=False) == "SELECT 50 % 7"


def test_the_user_column_is_quoted_but_not_in_literals_comments_or_longer_names():
    assert to_postgres("SELECT t.user, user_id, username FROM t WHERE user = ? -- the user's row\n") == \
        "SELECT t.\"user\", user_id, username FROM t WHERE \"user\" = %s -- the user's row\n"
    assert to_postgres("SELECT 'user' AS \"user\"") == "SELECT 'user' AS \"user\""


def test_named_parameters_including_one_called_user():
    assert to_postgres("INSERT INTO t (id, user) VALUES (:id, :user)", named=True) == \
        'INSERT INTO t (id, "user") VALUES (%(id)s, %(user)s)'


def test_insert_or_ignore_becomes_on_conflict_do_nothing():
    assert to_postgres("INSERT OR IGNORE INTO blobs (sha256, data) VALUES (?, ?)") == \
        "INSERT INTO blobs (sha256, data) VALUES (%s, %s) ON CONFLICT DO NOTHING"
    with pytest.raises(ValueError, match="statement of its own"):
        to_postgres("INSERT OR IGNORE INTO a VALUES (1); SELECT 1", params=False)


def test_schema_types_are_widened_only_in_schema_text():
    ddl = to_postgres("CREATE TABLE t (seq INTEGER PRIMARY KEY AUTOINCREMENT, x REAL, b BLOB, note TEXT "
                      "DEFAULT 'REAL BLOB')", params=False, ddl=True)
    assert ddl == ("CREATE TABLE t (seq BIGSERIAL PRIMARY KEY, x DOUBLE PRECISION, b BYTEA, note TEXT "
                   "DEFAULT 'REAL BLOB')")
    assert to_postgres("SELECT REAL FROM t", params=False) == "SELECT REAL FROM t"
