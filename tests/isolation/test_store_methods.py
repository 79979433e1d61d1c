"""Every method of every store service, called through the shared server's `/store` endpoint
with a token of another project: alice's ids get exactly the answer an id that exists nowhere
gets, nothing of alice's comes back, and nothing of alice's changes.

The methods are enumerated from the endpoint's allow-list, so a new method without sample
arguments here, or without a scope declaration (knowledge/scope.py), fails this file."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from pydantic_core import to_jsonable_python

from evoteam.servers.knowledge.connect import component_store
from evoteam.servers.knowledge.errors import Invalid, StoreError
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.services import COMPONENT_SERVICES, service_methods, undeclared_methods
from tests.isolation.conftest import ALICE, Shared
from tests.isolation.world import SECRET, leaks, missing_like, snapshot, store_calls, substitute

SERVICES = ["knowledge", *COMPONENT_SERVICES]


def test_every_store_method_declares_its_scope():
    for service in SERVICES:
        assert undeclared_methods(service) == [], (
            f"{service} methods without @scoped(...) (knowledge/scope.py): they are not offered remotely "
            f"and their project scope is unchecked")


async def _call(target: Any, method: str, kwargs: dict) -> tuple[str, Any]:
    try:
        return "ok", to_jsonable_python(await getattr(target, method)(**kwargs))
    except StoreError as exc:
        return type(exc).__name__, str(exc)


async def test_another_projects_ids_get_the_answer_of_ids_that_exist_nowhere(shared: Shared):
    alice, mine, bob = shared.alice, shared.mine, shared.bob
    own_calls = store_calls(mine)
    assert set(own_calls) == {(s, m) for s in SERVICES for m in service_methods(s)}, (
        "every store method needs sample arguments in tests/isolation/world.py:store_calls")
    before = snapshot(shared.db, alice, ALICE)
    problems: list[str] = []
    for (service, method), variants in own_calls.items():
        target = bob if service == "knowledge" else component_store(service, bob)
        for n, kwargs in enumerate(variants):
            where = f"{service}.{method}#{n}"
            kind, value = await _call(target, method, kwargs)
            if kind != "ok":
                problems.append(f"{where}: bob's own call failed: {value}")
            elif found := leaks(value, alice):
                problems.append(f"{where}: returned alice's {found}")
            for table, theirs in alice.items():
                probe = store_calls(substitute(mine, table, "SENTINEL"))[(service, method)][n]
                if repr(probe) == repr(kwargs):
                    continue  # this call names no row of `table`
                nowhere = missing_like(theirs)
                a_kind, a_value = await _call(target, method, store_calls(substitute(mine, table, theirs))[(service, method)][n])
                m_kind, m_value = await _call(target, method, store_calls(substitute(mine, table, nowhere))[(service, method)][n])
                if found := leaks(a_value, alice, allowed=theirs):
                    problems.append(f"{where} with alice's {table}: answer carries alice's {found}")
                if a_kind != m_kind:
                    problems.append(f"{where} with alice's {table}: {a_kind} {a_value!r} but for a missing id "
                                    f"{m_kind} {m_value!r}")
                elif a_kind != "ok" and str(a_value).replace(theirs, "<ID>") != str(m_value).replace(nowhere, "<ID>"):
                    problems.append(f"{where} with alice's {table}: {a_value!r} differs from {m_value!r}")
    assert problems == []
    assert snapshot(shared.db, alice, ALICE) == before, "a call as bob changed alice's rows"


@pytest.mark.parametrize("which", ["alice", "bob", "missing"])
async def test_a_scoped_caller_never_chooses_a_run_id(shared: Shared, which: str):
    """Whether the id is alice's, bob's own or nobody's, the answer is the same: the server
    chooses run ids, so a collision cannot tell that another project holds an id."""
    run_id = {"alice": shared.alice["runs"], "bob": shared.mine["runs"], "missing": "run_0000000000000000"}[which]
    with pytest.raises(Invalid) as err:
        await shared.bob.start_run(RunCreate(goal="mine", run_id=run_id))
    assert str(err.value) == "run_id is chosen by the server on a shared knowledge server: omit it"


def _cli(shared: Shared, *args: str) -> subprocess.CompletedProcess:
    env = {**shared.server.env(), "EVOTEAM_KNOWLEDGE_URL": shared.server.url, "EVOTEAM_TOKEN": shared.bob_token,
           "EVOTEAM_DB": str(shared.db.parent / "bob-local.db")}
    return subprocess.run([sys.executable, "-m", "evoteam.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120)


async def test_the_cli_against_a_shared_store_sees_only_its_project(shared: Shared):
    """The CLI (and hooks, which open the store the same way) as bob: alice's run reads as a
    missing one, and listing and searching show nothing of alice's."""
    theirs, nowhere = shared.alice["runs"], missing_like(shared.alice["runs"])
    a, m = _cli(shared, "kb", "learnings", theirs), _cli(shared, "kb", "learnings", nowhere)
    assert a.returncode == m.returncode == 3  # "not found" (evoteam --help lists the exit codes)
    assert a.stderr.replace(theirs, "<ID>") == m.stderr.replace(nowhere, "<ID>") and "Traceback" not in a.stderr
    listed = _cli(shared, "kb", "runs", "--json")
    assert listed.returncode == 0 and shared.mine["runs"] in listed.stdout and not leaks(listed.stdout, shared.alice)
    found = _cli(shared, "kb", "search", SECRET)
    assert found.returncode == 0 and not leaks(found.stdout, shared.alice)
