"""Issue 23, red team of the day's changes: attacks on the warm hook process's handshake, the
stdio line limit, the retrieval tools' blank ids, the HTTP answer to a store failure and the
SQLite writer's cancellation. Each test names the attack; all use real parts (a real warm
process, real pipes, a real HTTP server on 127.0.0.1, real SQLite files, a real MCP client)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from mcp import Client

from evoteam.plugin import warm
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import LearningCreate, RunCreate
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.retrieval.predictor import AgentPredictor
from evoteam.servers.stdio_lines import MAX_LINE_BYTES
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token
from tests.plugin.test_hooks import base_input
from tests.plugin.test_warm_hooks import _warm_pids, case, hook, ran_in, sockets  # noqa: F401 - a fixture
from tests.retrieval.conftest import corpus_dir  # noqa: F401 - a fixture
from tests.retrieval.test_loop import make_server
from tests.servers.test_fast_start import Raw
from tests.support.polling import wait_until
from tests.trust.test_stdio_size import _read_all, _send_bytes

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


# ---------------------------------------------------------------- the SQLite writer


async def test_a_write_cancelled_again_and_again_while_it_settles_leaves_the_store_writable(tmp_path):
    """A caller that cancels a write over and over (a task group tearing down, a client
    retrying) while its BEGIN, COMMIT or ROLLBACK settles. Holding back only the first
    cancellation released the write lock with a ROLLBACK still queued, which then closed the
    connection under the next writer: every later write failed ('no active connection')."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", client="test")) as kb:
        run = await kb.start_run(RunCreate(goal="cancel storm"))
        failures = []
        for turns in range(40):
            task = asyncio.create_task(kb.add_learning(LearningCreate(run_id=run.id, text=f"cut {turns}")))
            for _ in range(turns):
                await asyncio.sleep(0)
            while not task.done():  # cancelled on every turn of the loop until it is over
                task.cancel()
                await asyncio.sleep(0)
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception as exc:  # noqa: BLE001 - any failure of the cut write is the finding
                failures.append(f"cut {turns}: {exc!r}")
            try:
                await kb.add_learning(LearningCreate(run_id=run.id, text=f"after {turns}"))
            except Exception as exc:  # noqa: BLE001
                failures.append(f"after {turns}: {exc!r}")
        texts = [learning.text for learning in (await kb.list_learnings(run.id, limit=200)).items]
    assert failures == []
    assert sum(text.startswith("after") for text in texts) == 40


# ---------------------------------------------------------------- the HTTP answer to a store failure


def test_an_unauthenticated_caller_of_a_damaged_store_learns_nothing_about_the_server(tmp_path: Path):
    """The 503 for a store failure is sent before the caller's token is checked (that check is
    what failed), so anyone who can reach the port gets it with any bearer. It used to carry the
    failure's own line: the store's path on the server and the commands its operator should
    run. It now says only that the store is unavailable and to retry."""
    db = tmp_path / "kb.db"
    make_token(db, "alice", None)
    server = KnowledgeServer(db=db, port=free_port(), home=tmp_path).start()
    try:
        for part in tmp_path.glob("kb.db*"):  # the store is damaged under the running server
            with open(part, "r+b") as out:
                out.write(os.urandom(max(part.stat().st_size, 4096)))
        with httpx.Client(timeout=30) as client:
            answer = client.post(server.url, json=INIT, headers={
                "Authorization": "Bearer evt_not_a_token", "Accept": "application/json, text/event-stream"})
    finally:
        server.kill()
    log = server.process.stderr.read().decode()
    assert answer.status_code == 503, answer.text
    # The operator still learns which store failed, and how (the start-up line names the store too).
    assert any("answered 503" in line and str(db) in line for line in log.splitlines()), log
    message = answer.json()["error"]["message"]
    assert "unavailable" in message and "retry" in message, message
    assert str(tmp_path) not in message and "kb.db" not in message and "evoteam " not in message, message


# ---------------------------------------------------------------- the warm hook process


def _started(case) -> tuple[str, str, int]:
    """A real warm process for the case's environment: its socket, its key, its pid."""
    hook(case, "session-start", base_input(case["project"], "SessionStart", source="startup"))
    assert wait_until(lambda: sockets(case)), "the first hook did not start a warm process"
    (pid,) = _warm_pids(case["home"])
    return str(sockets(case)[0]), warm.environment_key(case["env"], str(case["cwd"])), pid


def _connect(path: str) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(30)
    conn.connect(path)
    return conn


def _finish(conn: socket.socket, request: bytes) -> bytes:
    conn.sendall(request)
    conn.shutdown(socket.SHUT_WR)
    answer = b""
    while chunk := conn.recv(65536):
        answer += chunk
    conn.close()
    return answer


def test_a_request_signed_for_one_live_connection_is_refused_on_another(case):
    """Two connections open at once; a request correctly signed (right key) for the first
    connection's nonce is sent on the second: refused there, taken on its own connection."""
    path, key, _ = _started(case)
    first, second = _connect(path), _connect(path)
    nonce_first, nonce_second = warm._read_challenge(first), warm._read_challenge(second)  # noqa: SLF001
    assert nonce_first and nonce_second and nonce_first != nonce_second
    payload = json.dumps(base_input(case["project"], "SessionStart", source="startup"))
    request = warm.sign(key, nonce_first, "session-start", payload)
    before = ran_in(case, "session-start")
    assert warm.TAKEN not in _finish(second, request)
    assert ran_in(case, "session-start") == before
    assert _finish(first, request).startswith(warm.TAKEN)  # the signature itself was good


def test_two_requests_on_one_connection_run_at_most_once(case):
    """One nonce, the same correctly signed request sent twice back to back on one connection
    (a client racing itself): the hook does not run twice."""
    path, key, _ = _started(case)
    conn = _connect(path)
    nonce = warm._read_challenge(conn)  # noqa: SLF001
    payload = json.dumps(base_input(case["project"], "SessionStart", source="startup"))
    request = warm.sign(key, nonce, "session-start", payload)
    before = len(ran_in(case, "session-start"))
    answer = _finish(conn, request + request)
    assert answer.count(warm.TAKEN) <= 1
    assert len(ran_in(case, "session-start")) - before <= 1


def test_the_key_is_not_left_in_the_warm_processs_environment_or_descriptors(case):
    """Another attacker's first look: the warm process's environment and every descriptor it
    holds (the handover pipe on stdin above all) give neither the key nor the socket's path."""
    path, key, pid = _started(case)
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    assert key.encode() not in environ and key[:24].encode() not in environ
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd)
        if not target.startswith("pipe:"):
            continue
        try:
            reader = os.open(fd, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            left = os.read(reader, 65536)
        except BlockingIOError:
            left = b""
        finally:
            os.close(reader)
        assert key.encode() not in left and path.encode() not in left, (fd, target)


def test_connections_that_never_send_do_not_keep_a_hook_waiting(case):
    """A local process opens connections and sends nothing (each holds a thread of the warm
    process until its 10 s timeout): a real hook meanwhile is still answered, by the warm process."""
    path, _, pid = _started(case)
    idle = [_connect(path) for _ in range(20)]
    try:
        _, hook_pid = hook(case, "session-start", base_input(case["project"], "SessionStart", source="startup"))
        assert ran_in(case, "session-start")[-1] == pid  # the warm process, not a fallback
    finally:
        for conn in idle:
            conn.close()


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK),
                    reason="needs root and a system Python to run a client as another user")
def test_another_user_cannot_reach_the_warm_socket(case):
    """Another local user (here `nobody`, by setuid in a real child process) tries to connect to
    the warm process's socket: the 0700 folder refuses the connection before any handshake."""
    path, _, _ = _started(case)
    probe = ("import socket, sys\n"
             "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
             "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n    sys.exit(13)\n"
             "print(s.recv(100))\n")
    done = subprocess.run(["/usr/bin/python3", "-c", probe, path], user=65534, group=65534, capture_output=True,
                          timeout=30, cwd="/")
    assert done.returncode == 13, (done.returncode, done.stdout, done.stderr)


# ---------------------------------------------------------------- the stdio line limit


_BIG = b"z" * 300


@pytest.mark.parametrize("line,expected", [
    # id in the middle of the members, before or after the large one: a client's own order
    (b'{"method":"tools/call","id":"x-1","params":{"a":"' + _BIG + b'"},"jsonrpc":"2.0"}', "x-1"),
    (b'{"jsonrpc":"2.0","method":"tools/call","id":7,"params":{"a":"' + _BIG + b'"}}', 7),
    (b'{"method":"tools/call","params":{"a":"' + _BIG + b'"},"id":8,"jsonrpc":"2.0","x":null}', 8),
    # ids that are not the request's must not be taken for it
    (b'{"id":true,"params":{"a":"' + _BIG + b'"}}', None),
    (b'{"params":{"a":"' + _BIG + b'","id":9,"k":"v"}}', None),
    (b'{"method":"m","params":{"id":4,"a":"' + _BIG + b'"}}', None),
    (b'{"params":{"a":"' + _BIG + b'"},"x":{"id":5}}', None),
    # nesting too deep for a parser in the head: the tail still tells the id
    (b'{"params":' + b"[" * 5000 + b"]" * 5000 + b',"id":3}', 3),
])
def test_an_oversized_request_is_answered_under_its_id_wherever_the_client_put_it(line, expected):
    """A client whose serialiser writes "id" after "method" (neither first nor last) sent a
    request over the limit: the answer carried id null, so the client waited for an answer to
    its request that never came. Every top-level member held whole in the head is read now."""
    (got,) = _read_all(line + b"\n", limit=200, chunk=64)
    assert got == {"id": expected, "evoteam_oversized_bytes": len(line)}


def test_a_real_server_answers_an_oversized_request_whose_id_comes_after_method(tmp_path: Path):
    """The same through a real `evoteam serve knowledge` on stdio: the request is over 16 MiB,
    its id follows "method"; the error comes back under that id and the session goes on."""
    raw = Raw("knowledge", tmp_path, EVOTEAM_FAST_START="0")
    try:
        raw.handshake()
        _send_bytes(raw, b'{"jsonrpc":"2.0","method":"tools/call","id":"mid-1","params":{"name":"start_run",'
                    b'"arguments":{"goal":"' + b"m" * (MAX_LINE_BYTES + 1) + b'"}}}\n')
        answer = raw.receive()
        assert answer["id"] == "mid-1" and "over this server's limit" in answer["error"]["message"], answer
        raw.send({"jsonrpc": "2.0", "id": "after", "method": "tools/call",
                  "params": {"name": "list_runs", "arguments": {}}})
        assert raw.receive()["id"] == "after"
    finally:
        raw.close(30)


# ---------------------------------------------------------------- the retrieval tools' ids


@pytest.mark.parametrize("gate_id,says", [
    ("\u3000\u2003\u00a0", "gate_id is empty: pass "),  # ideographic, em and no-break spaces
    ("\u200b", "no gate '\\u200b'; call gate first"),  # zero-width space: not blank, not a gate
    ("\x00", "no gate '\\x00'; call gate first"),
])
async def test_an_id_of_unicode_spaces_or_invisible_characters_is_refused_in_one_line(
        tmp_path, corpus_dir, gate_id, says):  # noqa: F811 - the fixture
    """A careless agent's id made of Unicode spaces or an invisible character: refused as empty
    or as unknown, in one line that shows the character escaped, never a store failure."""
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", client="test")) as kb:
        run = await kb.start_run(RunCreate(goal="ids", direction="maximize"))
        async with Client(make_server(kb, corpus_dir, AgentPredictor())) as client:
            got = await client.call_tool("record_outcome", {"run_id": run.id, "gate_id": gate_id,
                                                            "realised_score": 1.0})
    text = got.content[0].text
    assert got.is_error and says in text and "\n" not in text and "inside the server" not in text, text


async def test_a_candidate_id_used_in_another_projects_run_does_not_answer_with_its_outcome(
        tmp_path, corpus_dir):  # noqa: F811 - the fixture
    """record_outcome is idempotent per candidate_id, and the key was looked up across the whole
    store: a user of another project who passed the same candidate_id got back the first
    project's outcome (its run id, score and documents) and her own credit was dropped silently.
    Now the repeat in another run is refused in one line that tells nothing of the first."""
    db = tmp_path / "kb.db"
    alice = Actor(user="alice", client="test", project="alpha", default_project="alpha")
    mallory = Actor(user="mallory", client="test", project="beta", default_project="beta")
    async with LocalKnowledgeStore.open(db, alice) as a, LocalKnowledgeStore.open(db, mallory) as b:
        run_a = await a.start_run(RunCreate(goal="alpha", direction="maximize"))
        run_b = await b.start_run(RunCreate(goal="beta", direction="maximize"))
        async with Client(make_server(a, corpus_dir, AgentPredictor())) as client:
            first = await client.call_tool("record_outcome", {"run_id": run_a.id, "realised_score": 3.5,
                                                              "candidate_id": "cand_shared"})
            again = await client.call_tool("record_outcome", {"run_id": run_a.id, "realised_score": 3.5,
                                                              "candidate_id": "cand_shared"})
        async with Client(make_server(b, corpus_dir, AgentPredictor())) as client:
            other = await client.call_tool("record_outcome", {"run_id": run_b.id, "realised_score": 0.1,
                                                              "candidate_id": "cand_shared"})
    assert not first.is_error and again.structured_content == first.structured_content  # idempotent in its run
    text = other.content[0].text
    assert other.is_error and "another run" in text, text
    assert run_a.id not in text and "3.5" not in text and first.structured_content["outcome_id"] not in text


# ---------------------------------------------------------------- the warm socket's owner

_IMPOSTOR = """
import json, socket, sys
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(1)
print("ready", flush=True)
conn, _ = server.accept()
conn.sendall(b"evoteam-warm 1 " + b"0" * 32 + b"\\n")
got = b""
while chunk := conn.recv(65536):
    got += chunk
conn.sendall(b"taken\\n" + json.dumps({"output": {"decision": "approve", "seen": len(got)}}).encode())
conn.close()
"""


@pytest.mark.skipif(os.geteuid() != 0 or not os.access("/usr/bin/python3", os.X_OK),
                    reason="needs root and a system Python to run a server as another user")
def test_a_socket_of_another_user_where_the_warm_one_should_be_gets_nothing(tmp_path, monkeypatch):
    """Another user's process listens where the hook looks for its warm process (a race won on a
    link in /tmp, say): the hook sent it the hook's whole input and printed its answer as the
    hook's own (here an 'approve'). The hook now checks who listens before it sends anything,
    and runs the hook itself."""
    folder = Path(f"/tmp/rt23-impostor-{os.getpid()}")
    folder.mkdir(mode=0o755)
    os.chown(folder, 65534, 65534)
    path = str(folder / "hooks.sock")
    impostor = subprocess.Popen(["/usr/bin/python3", "-c", _IMPOSTOR, path], user=65534, group=65534, cwd="/",
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert impostor.stdout.readline() == b"ready\n", impostor.stderr.read()
        monkeypatch.chdir(tmp_path)
        monkeypatch.setattr(warm, "socket_path", lambda key, env=None: path)
        assert warm.ask("pre-tool-use", json.dumps({"tool_input": {"secret": "s3cret"}})) == (False, None)
    finally:
        impostor.kill()
        impostor.wait(10)
        subprocess.run(["rm", "-rf", str(folder)], check=False)


def test_a_link_in_place_of_the_socket_folder_is_refused(tmp_path):
    """A socket folder in a shared place (`$XDG_RUNTIME_DIR/evoteam`, `/tmp/evoteam-<uid>`) can
    be made by anyone first. As a link to a private folder of ours it passed the owner check
    (stat follows links), and the link's maker could re-point it at will. A link is refused,
    with the reason."""
    import shutil
    import tempfile

    xdg = Path(tempfile.mkdtemp(prefix="rt23-", dir="/tmp"))  # short: a socket path has ~100 bytes
    try:
        real = xdg / "real"
        real.mkdir(mode=0o700)
        (xdg / "evoteam").symlink_to(real)
        env = {"EVOTEAM_HOME": str(tmp_path / ("h" * 120)), "XDG_RUNTIME_DIR": str(xdg)}
        path, why = warm._place("k" * 64, env)  # noqa: SLF001
    finally:
        shutil.rmtree(xdg)
    assert path is None and "is a link" in why, (path, why)
