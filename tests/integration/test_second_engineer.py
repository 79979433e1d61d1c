"""Two engineers of one project on one shared server (issue #27, "done when").

Everything is real: a `evoteam serve knowledge --http` process on 127.0.0.1, the evaluation
service (`evoteam bench serve --http`) started as docs/sharing.md says, with a verifier token
in its own environment only, and each engineer's bench as the stdio server their agent session
starts, with only their own token. Alice evaluates the kit's better example; Bob's first read
names her run and her best; her best ranks as verified; both held-out results name the one
held-out set; Bob builds on her candidate in one evaluation.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from mcp import Client, StdioServerParameters

from evoteam.config import SOURCE_ROOT
from evoteam.report.remeasure import BUSY_NOTE
from tests.knowledge.conftest import KnowledgeServer, free_port, held, make_token
from tests.knowledge.test_server import http_client

KIT = "pairwise_distance_cpu"
BETTER = SOURCE_ROOT / "task_kits" / KIT / "examples" / "better.py"
PROJECT = "kernels"


def clean_env(**extra: str) -> dict[str, str]:
    """This test process's environment without any evoteam or provider settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVOTEAM_", "ANTHROPIC_", "TAVILY_"))}
    return {**env, **extra}


@dataclass
class Team:
    knowledge: KnowledgeServer
    service_url: str
    service_home: Path
    tokens: dict[str, str]
    processes: list[subprocess.Popen] = field(default_factory=list)

    def agent_env(self, who: str, home: Path) -> dict[str, str]:
        """What an engineer's agent session holds: the two URLs and their own token."""
        return clean_env(HOME=str(home), EVOTEAM_HOME=str(home / ".evoteam"), EVOTEAM_DB=str(home / "kb.db"),
                         EVOTEAM_KNOWLEDGE_URL=self.knowledge.url, EVOTEAM_BENCH_URL=self.service_url,
                         EVOTEAM_TOKEN=self.tokens[who])


def start_service(knowledge_url: str, token: str, home: Path, port: int) -> subprocess.Popen:
    """`evoteam bench serve --http` under its own home (its state, held-out secret and token)."""
    env = clean_env(HOME=str(home), EVOTEAM_HOME=str(home / ".evoteam"), EVOTEAM_DB=str(home / "state" / "kb.db"),
                    EVOTEAM_TOKEN=token)
    return subprocess.Popen([sys.executable, "-m", "evoteam.cli", "bench", "serve", "--http", "--port", str(port),
                             "--knowledge-url", knowledge_url], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)


def wait_listening(process: subprocess.Popen, url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"service exited: {process.stderr.read().decode()}")
        try:
            httpx.get(url, timeout=0.5)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise RuntimeError("the evaluation service did not start")


@pytest.fixture
def team(tmp_path: Path) -> Iterator[Team]:
    db = tmp_path / "server" / "kb.db"
    db.parent.mkdir()
    tokens = {who: make_token(db, who, PROJECT) for who in ("alice", "bob")}
    tokens["bench"] = make_token(db, "bench", PROJECT, verifier=True)
    knowledge = KnowledgeServer(db=db, port=free_port(), home=db.parent).start()
    port = free_port()
    home = tmp_path / "service"
    home.mkdir()
    service = start_service(knowledge.url, tokens["bench"], home, port)
    t = Team(knowledge, f"http://127.0.0.1:{port}/mcp", home, tokens, [service])
    try:
        wait_listening(service, t.service_url)
        yield t
    finally:
        for p in t.processes:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=10)
        knowledge.kill()


def bench_session(team: Team, who: str, home: Path):
    """The engineer's bench server, as their agent session starts it (stdio, their clone)."""
    home.mkdir(exist_ok=True)
    env = team.agent_env(who, home)
    assert team.tokens["bench"] not in env.values()  # no verifier credential in an agent's environment
    return held(Client(StdioServerParameters(command=sys.executable, args=["-m", "evoteam.cli", "serve", "bench"],
                                             env=env, cwd=str(home))))


async def call(client: Client, tool: str, args: dict) -> dict:
    result = await client.call_tool(tool, args)
    assert not result.is_error, (tool, result.content)
    return result.structured_content


async def test_the_second_engineer_starts_from_the_first(team: Team, tmp_path: Path):
    alice_home, bob_home = tmp_path / "alice", tmp_path / "bob"
    async with bench_session(team, "alice", alice_home) as alice_bench:
        dev = await call(alice_bench, "evaluate", {"kit": KIT, "candidate_path": str(BETTER),
                                                   "notes": "one BLAS matmul: |a|^2 + |b|^2 - 2 a.b"})
        assert dev["status"] == "PASSED" and dev["recorded"], dev["message"]
        assert "heldout_set" not in dev["metrics"]  # measured on dev workloads only
        assert "unverified" not in (dev["message"] or "")
        alice_run, alice_best = dev["run_id"], dev["candidate_id"]
        alice_held = await call(alice_bench, "evaluate", {"kit": KIT, "candidate_path": str(BETTER), "split": "heldout",
                                                          "run_id": alice_run, "parent_id": alice_best})
    assert alice_held["status"] == "PASSED"
    # The held-out secret lives with the service; Alice's clone never made one.
    assert not list(alice_home.rglob("heldout.secret"))
    assert list(team.service_home.rglob("heldout.secret"))

    async with http_client(team.knowledge.url, team.tokens["alice"]) as alice_kb:
        await call(alice_kb, "add_learning", {"run_id": alice_run, "kind": "technique", "confidence": 0.9,
                                              "text": "One BLAS matmul for the cross term beats the loop by 10x",
                                              "evidence": [alice_best]})
        await call(alice_kb, "add_learning", {"run_id": alice_run, "kind": "dead_end", "confidence": 0.8,
                                              "text": "Python loops over rows never beat the baseline"})
        stored = await call(alice_kb, "get_candidate", {"candidate_id": alice_best})
        assert stored["provenance"]["user"] == "alice" and stored["verified"]

    async with http_client(team.knowledge.url, team.tokens["bob"]) as bob_kb:
        started = await call(bob_kb, "start_run", {"goal": "pairwise distances, faster", "kit": KIT})
        prior = started["prior_work"]
        assert len(json.dumps(prior)) <= 4000
        assert [(r["id"], r["owner"]) for r in prior["runs"]] == [(alice_run, "alice")]
        assert prior["runs"][0]["best_candidate_id"] == alice_best
        assert prior["best"][0]["id"] == alice_best and prior["best"][0]["score"] == pytest.approx(dev["score"])
        assert prior["best"][0]["note"].startswith("one BLAS matmul")
        assert [x["text"] for x in prior["learnings"]] == ["One BLAS matmul for the cross term beats the loop by 10x"]
        assert [x["owner"] for x in prior["dead_ends"]] == ["alice"]
        ranked = await call(bob_kb, "best_candidates", {"run_id": alice_run, "split": "dev"})
        assert [(c["id"], c["verified"]) for c in ranked["items"]] == [(alice_best, True)]
        code = (await call(bob_kb, "get_candidate", {"candidate_id": alice_best, "include_code": True}))["code"]
        assert code == BETTER.read_text()
        # A candidate recorded by hand may descend from Alice's too (it is listed, never ranked).
        claim = await call(bob_kb, "record_candidate", {"run_id": started["id"], "code": code + "\n# same",
                                                        "parent_id": alice_best, "notes": "copied"})
        assert claim["parent_id"] == alice_best and not claim["verified"]

    # Alice continues her work as a new run, seeded from her first: now the kit's newest active run.
    async with http_client(team.knowledge.url, team.tokens["alice"]) as alice_kb:
        again = await call(alice_kb, "start_run", {"seed_from": alice_run})
        assert (again["kit"], again["seeded_from"]) == (KIT, alice_run)
        assert again["prior_work"]["runs"][0]["id"] == alice_run  # the seed first, before bob's newer run

    async with bench_session(team, "bob", bob_home) as bob_bench:
        # Bob reaches Alice's best in one evaluation: her code, with her candidate as parent. Without
        # run_id it lands in his own active run of the kit, never in Alice's (still active).
        mine = await call(bob_bench, "evaluate", {"kit": KIT, "code": code, "parent_id": alice_best,
                                                  "notes": "alice's best, re-measured"})
        assert mine["status"] == "PASSED" and mine["run_id"] == started["id"]
        bob_held = await call(bob_bench, "evaluate", {"kit": KIT, "code": code, "split": "heldout",
                                                      "run_id": started["id"], "parent_id": mine["candidate_id"]})
        # remeasure and compare measure on the service too: there the new rounds pool, verified,
        # into Bob's candidates (in his own bench they made unverified copies and said "pooled"),
        # and a held-out batch uses the one held-out set.
        again = await call(bob_bench, "remeasure", {"run_id": started["id"], "candidate_ids": [mine["candidate_id"]],
                                                    "rounds": 4})
        # Nothing went wrong: a note there may only be what the batch says of its own conditions (a
        # busy machine, a leaning copy of the baseline), which a loaded test machine can bring.
        note = re.sub(r"the baseline's copy read .*? to settle it\)", "", (again.get("note") or "").replace(BUSY_NOTE, ""))
        assert again["pooled"] and not note.strip(), again["note"]
        assert [e["n_measurements"] for e in again["entries"] if e["candidate_id"] == mine["candidate_id"]] == [2]
        held_again = await call(bob_bench, "remeasure", {"run_id": started["id"], "split": "heldout", "rounds": 2,
                                                         "candidate_ids": [mine["candidate_id"]]})
        assert held_again["heldout_set"] == alice_held["metrics"]["heldout_set"]
        assert held_again["changed"] == []  # a held-out batch has no order after to move in
        (bob_home / "mine.py").write_text(code)
        both = await call(bob_bench, "compare", {"kit": KIT, "a_candidate_id": alice_best,
                                                 "b_path": str(bob_home / "mine.py")})
        assert both["a"]["status"] == both["b"]["status"] == "PASSED"
        other = await bob_bench.call_tool("remeasure", {"run_id": started["id"], "candidate_ids": [alice_best]})
        assert other.is_error and "bench.compare" in other.content[0].text
    assert bob_held["metrics"]["heldout_set"] == alice_held["metrics"]["heldout_set"]
    assert bob_held["metrics"]["heldout_set"].startswith("hs_")
    assert not list(bob_home.rglob("heldout.secret"))

    async with http_client(team.knowledge.url, team.tokens["bob"]) as bob_kb:
        child = await call(bob_kb, "get_candidate", {"candidate_id": mine["candidate_id"]})
        assert (child["parent_id"], child["verified"], child["provenance"]["user"]) == (alice_best, True, "bob")
        assert child["n_measurements"] == 2
        points = (await call(bob_kb, "trajectory", {"run_id": started["id"]}))["points"]  # dev candidates
        assert {p["candidate_id"] for p in points} == {claim["id"], mine["candidate_id"]}  # no copies
        assert (await call(bob_kb, "get_candidate", {"candidate_id": bob_held["candidate_id"]}))["n_measurements"] == 2
        assert (await call(bob_kb, "get_run", {"run_id": started["id"]}))["best_candidate_id"] == mine["candidate_id"]


def test_the_service_will_not_start_without_a_verifier_token(tmp_path: Path):
    db = tmp_path / "server" / "kb.db"
    db.parent.mkdir()
    plain = make_token(db, "alice", PROJECT)
    knowledge = KnowledgeServer(db=db, port=free_port(), home=db.parent).start()
    try:
        service = start_service(knowledge.url, plain, tmp_path, free_port())
        assert service.wait(timeout=60) == 1
        err = service.stderr.read().decode()
    finally:
        knowledge.kill()
    assert "verifier token" in err and "Traceback" not in err


async def test_the_service_knows_callers_by_their_own_tokens(team: Team):
    answer = httpx.post(team.service_url, headers={"Authorization": "Bearer evt_" + "x" * 43,
                                                   "Accept": "application/json, text/event-stream"},
                        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert answer.status_code == 401
    mallory = make_token(team.knowledge.db, "mallory", "elsewhere")
    async with http_client(team.knowledge.url, mallory) as kb:
        run = await call(kb, "start_run", {"goal": "another project's run", "kit": KIT})
        theirs = await call(kb, "record_candidate", {"run_id": run["id"], "code": "x"})
    async with http_client(team.service_url, team.tokens["alice"]) as service:
        # A path names a file on the service's host, never the caller's: refused.
        refused = await service.call_tool("evaluate", {"kit": KIT, "candidate_path": "/etc/hostname"})
        assert refused.is_error and "source" in refused.content[0].text
        refused = await service.call_tool("compare", {"kit": KIT, "a_path": str(BETTER), "b_code": "x = 1\n"})
        assert refused.is_error and "not a_path" in refused.content[0].text
        # Another project's parent is refused before anything is measured: broken code would
        # otherwise come back as a COMPILE_ERROR evaluation.
        refused = await service.call_tool("evaluate", {"kit": KIT, "code": "def broken(:\n",
                                                       "parent_id": theirs["id"]})
        assert refused.is_error and theirs["id"] in refused.content[0].text
    async with http_client(team.knowledge.url, team.tokens["alice"]) as kb:
        assert (await call(kb, "list_runs", {}))["total"] == 0
    # `evoteam bench run` in Alice's shell goes through the service too.
    home = team.service_home.parent / "alice-shell"
    home.mkdir()
    cli = subprocess.run([sys.executable, "-m", "evoteam.cli", "bench", "run", KIT, str(BETTER), "--json"],
                         env=team.agent_env("alice", home), cwd=home, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    out = json.loads(cli.stdout)
    assert out["recorded"] and "unverified" not in (out["message"] or "")
    async with http_client(team.knowledge.url, team.tokens["alice"]) as kb:
        stored = await call(kb, "get_candidate", {"candidate_id": out["candidate_id"]})
    assert (stored["verified"], stored["provenance"]["user"]) == (True, "alice")
    assert not list(home.rglob("heldout.secret"))


async def test_a_ticket_on_the_service_is_its_callers_alone(team: Team):
    """A ticket outlives the session that asked for it (tickets live with the service's process),
    and another caller's token gets the answer of a ticket that does not exist."""
    async with http_client(team.service_url, team.tokens["alice"]) as service:
        pending = await call(service, "evaluate", {"kit": KIT, "code": BETTER.read_text(), "wait": False})
    assert pending["status"] == "PENDING" and pending["ticket"].startswith("tkt_")
    ticket = pending["ticket"]
    async with http_client(team.service_url, team.tokens["bob"]) as service:
        theirs = await service.call_tool("evaluation_result", {"ticket": ticket})
    assert theirs.is_error and "no ticket" in theirs.content[0].text
    async with http_client(team.service_url, team.tokens["alice"]) as service:
        for _ in range(120):  # each call waits up to 2 s (under the client's read timeout)
            done = await call(service, "evaluation_result", {"ticket": ticket, "wait_s": 2})
            if done["status"] != "PENDING":
                break
    assert done["status"] == "PASSED" and done["recorded"]
    async with http_client(team.knowledge.url, team.tokens["alice"]) as kb:
        stored = await call(kb, "get_candidate", {"candidate_id": done["candidate_id"]})
    assert (stored["verified"], stored["provenance"]["user"]) == (True, "alice")
