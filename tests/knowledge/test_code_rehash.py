"""Stores written while `code_hash` still counted docstrings get the new hashes when opened
(knowledge/measurements.py, rehash_candidates), on SQLite and on PostgreSQL alike."""

from __future__ import annotations

import ast
import hashlib

from evoteam.codehash import code_hash
from evoteam.servers.knowledge import measurements
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import ArtifactCreate, CandidateCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import BEFORE_SPREAD_UNKNOWN, query_rows

BENCH = Actor(user="bench", client="pytest", verifier=True)
CODE = "def run(x):\n    return x * 2\n"
DOCUMENTED = '"""Doubles x."""\n' + CODE
RETYPED = '"""Doubles x, re-typed."""\n' + CODE


def old_hash(code: str) -> str:
    """The hash an evoteam from before stored for Python code: its syntax tree, docstrings kept."""
    tree = ast.dump(ast.parse(code), annotate_fields=True, include_attributes=False)
    return "sha256:" + hashlib.sha256(("python:" + tree).encode()).hexdigest()[:16]


def measured(run_id: str, code: str, score: float) -> CandidateCreate:
    """A bench measurement carrying the hash an older evoteam computed."""
    return CandidateCreate(run_id=run_id, code=code, status="PASSED", score=score, samples={"w": [score] * 5},
                           verified=True, code_hash=old_hash(code))


def hashes(where) -> dict[str, str | None]:
    return dict(query_rows(where, "SELECT id, code_hash FROM candidates"))


def rewind(where, stored: dict[str, str]) -> None:
    """Back to the schema before the rehash step (knowledge.measurements 4), the candidates ``stored``
    (id -> code) holding that code with the hash an older evoteam wrote for it (this one hashes
    every code it stores by its own rule, and pools code alike as it is recorded)."""
    steps = [("UPDATE schema_versions SET version = 4 WHERE component = 'knowledge.measurements'", ()),
             *((sql, ()) for sql in BEFORE_SPREAD_UNKNOWN)]  # a later step's column
    steps += [("UPDATE candidates SET code = ?, code_hash = ? WHERE id = ?", (c, old_hash(c), i))
              for i, c in stored.items()]
    if isinstance(where, str):
        import psycopg

        from evoteam.servers.knowledge.dialect import to_postgres

        with psycopg.connect(where, autocommit=True) as conn:
            for sql, params in steps:
                conn.execute(to_postgres(sql), params)
    else:
        import sqlite3

        with sqlite3.connect(where) as conn:
            for sql, params in steps:
                conn.execute(sql, params)
        conn.close()


def rehash_again(where) -> int:
    """The step run once more, straight on the database, as the migrations run it."""
    if isinstance(where, str):
        import psycopg

        from evoteam.servers.knowledge.pg import _SyncConnection

        with psycopg.connect(where) as conn:
            return measurements.rehash_candidates(_SyncConnection(conn))
    import sqlite3

    conn = sqlite3.connect(where)
    try:
        with conn:
            return measurements.rehash_candidates(conn)
    finally:
        conn.close()


async def test_opening_an_older_store_rehashes_its_candidates(new_location, monkeypatch):
    monkeypatch.setattr(measurements, "REHASH_PAGE", 2)  # several pages from a few rows
    where = new_location("kb.db")
    async with LocalKnowledgeStore.open(where, BENCH) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        first = await kb.record_candidate(measured(run.id, DOCUMENTED, 3.0))
        second = await kb.record_candidate(measured(run.id, RETYPED + "pending = 1\n", 3.5))  # RETYPED, below
        plain = await kb.record_candidate(measured(run.id, "y = 1\n", 2.0))
        others = [await kb.record_candidate(measured(run.id, f'"""v{i}"""\nz = {i}\n', 1.0)) for i in range(3)]
        art = await kb.put_artifact(ArtifactCreate(run_id=run.id, name="k.py", kind="file", text=DOCUMENTED))
        codeless = await kb.record_candidate(CandidateCreate(run_id=run.id, artifact_id=art.id, status="PASSED",
                                                             score=1.0, code_hash="sha256:from-its-artifact"))
    assert first.id != second.id and hashes(where)[first.id] == code_hash(CODE)  # hashed by the store's rule
    # As an older evoteam left them: the old hash told the re-typed code apart.
    rewind(where, {first.id: DOCUMENTED, second.id: RETYPED, plain.id: "y = 1\n",
                   **{c.id: f'"""v{i}"""\nz = {i}\n' for i, c in enumerate(others)}})
    assert hashes(where)[first.id] == old_hash(DOCUMENTED) != old_hash(RETYPED)
    async with LocalKnowledgeStore.open(where, BENCH) as kb:
        got = hashes(where)
        assert got[first.id] == got[second.id] == code_hash(CODE)
        assert got[plain.id] == old_hash("y = 1\n") == code_hash("y = 1\n")  # no docstring: the same hash
        assert all(got[c.id] == code_hash(f"z = {i}\n") for i, c in enumerate(others))
        assert got[codeless.id] == "sha256:from-its-artifact"  # no code to hash: kept
        # Not merged: both stay, and the next measurement of that code pools into the twin that
        # ranks highest (3.5 over 3.0): its lucky draw is what more rounds correct (into the
        # earliest, a re-measurement of the best never reached it).
        assert (await kb.list_candidates(run.id)).total == 7
        again = CandidateCreate(run_id=run.id, code=CODE, status="PASSED", score=3.2, samples={"w": [3.2] * 5},
                                verified=True)
        assert (await kb.record_candidate(again)).id == second.id
        assert (await kb.get_candidate(second.id)).n_measurements == 2
        assert (await kb.get_candidate(first.id)).n_measurements == 1
        # A failing measurement turns that twin into a failure; the next measurement goes to the
        # twin that still ranks, not to the failed one whose point score sits higher (review).
        failed = CandidateCreate(run_id=run.id, code=CODE, status="RUNTIME_ERROR", samples={}, verified=True)
        assert (await kb.record_candidate(failed)).id == second.id
        assert (await kb.get_candidate(second.id)).status == "RUNTIME_ERROR"
        assert (await kb.record_candidate(again)).id == first.id
    assert rehash_again(where) == 0
    assert hashes(where) == got



async def test_the_store_hashes_code_by_its_own_rule_whatever_it_is_sent(tmp_path):
    """A caller's hash (an older bench, a script) or a bundle's (exported by an older evoteam) does
    not decide: code kept in the store is hashed by the store's rule, so the next measurement of
    that code pools into it."""
    from evoteam.servers.knowledge.bundleimport import import_bundle
    from evoteam.servers.knowledge.export import collect_bundle

    async with LocalKnowledgeStore.open(tmp_path / "a.db", BENCH) as a, \
            LocalKnowledgeStore.open(tmp_path / "b.db", BENCH) as b:
        run = await a.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        sent = await a.record_candidate(measured(run.id, DOCUMENTED, 3.0))  # carries the old hash
        assert sent.code_hash == code_hash(CODE) != old_hash(DOCUMENTED)
        bundle = await collect_bundle(a, run.id)
        bundle.candidates[0].code_hash = old_hash(DOCUMENTED)  # as an older evoteam exported it
        await import_bundle(b, bundle, trust_scores=True)
        assert (await b.get_candidate(sent.id)).code_hash == code_hash(CODE)
        again = await b.record_candidate(measured(run.id, RETYPED, 3.2))
        assert again.id == sent.id and again.n_measurements == 2


async def test_stores_hashed_before_locals_stopped_counting_are_rehashed(new_location):
    """The names of a function's locals stopped counting (codehash.py; mp56): a store written
    before gets the new hashes when opened, so a renamed copy of its code pools into it."""
    from evoteam.codehash import _without_docstrings

    def before_hash(code: str) -> str:  # the rule before: the syntax tree without docstrings, names as written
        tree = ast.dump(_without_docstrings(ast.parse(code)), annotate_fields=True, include_attributes=False)
        return "sha256:" + hashlib.sha256(("python:" + tree).encode()).hexdigest()[:16]

    code = "def run(x):\n    y = x * 2\n    return y\n"
    renamed = code.replace("y", "doubled")
    where = new_location("kb.db")
    async with LocalKnowledgeStore.open(where, BENCH) as kb:
        run = await kb.start_run(RunCreate(goal="g", kit="k", direction="maximize", x0=1.0))
        stored = await kb.record_candidate(measured(run.id, code, 3.0))
    version = [("UPDATE schema_versions SET version = version - 1 WHERE component = 'knowledge.measurements'", ()),
               ("UPDATE candidates SET code_hash = ? WHERE id = ?", (before_hash(code), stored.id))]
    _run_sql(where, version)
    assert hashes(where)[stored.id] == before_hash(code) != before_hash(renamed)
    async with LocalKnowledgeStore.open(where, BENCH) as kb:
        assert hashes(where)[stored.id] == code_hash(renamed) == code_hash(code)
        again = CandidateCreate(run_id=run.id, code=renamed, status="PASSED", score=3.1, samples={"w": [3.1] * 5},
                                verified=True)
        assert (await kb.record_candidate(again)).id == stored.id
        assert (await kb.get_candidate(stored.id)).n_measurements == 2


def _run_sql(where, steps) -> None:
    if isinstance(where, str):
        import psycopg

        from evoteam.servers.knowledge.dialect import to_postgres

        with psycopg.connect(where, autocommit=True) as conn:
            for sql, params in steps:
                conn.execute(to_postgres(sql), params)
        return
    import sqlite3

    conn = sqlite3.connect(where)
    try:
        with conn:
            for sql, params in steps:
                conn.execute(sql, params)
    finally:
        conn.close()
