"""Hostile candidates against confinement: secrets, leftovers, daemons, a wedged harness, the
device lock, the trusted worker's scheduling, and kit trust."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import textwrap
from pathlib import Path

import pytest

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.measurement import harness
from evoteam.servers.bench.confinement import jail, sandbox
from evoteam.servers.bench.evaluation.core import evaluate_candidate
from evoteam.servers.bench.formats.kits import find_kit, state_dir
from tests.bench.conftest import kernel_session, lock_is_held

GOOD = """
import numpy as np

def run(hidden_states, weight, eps):
    x = hidden_states.astype(np.float64)
    return (x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight).astype(np.float32)
"""

# A daemon: double fork, a new session (refused), a name the test can find, stdout kept open,
# a file written now and then in every place it can reach.
DAEMON = """
import ctypes, os, time
_libc = ctypes.CDLL(None, use_errno=True)

def _daemon(tag):
    if os.fork() != 0:
        return
    try:
        os.setsid()
    except OSError:
        pass
    if os.fork() != 0:
        os._exit(0)
    _libc.prctl(15, tag.encode(), 0, 0, 0)  # PR_SET_NAME
    for _ in range(600):
        for d in ("/tmp", "/dev/shm", os.getcwd()):
            fd = _libc.open(f"{d}/{tag}".encode(), 0o101, 0o644)  # O_WRONLY|O_CREAT, natively
            if fd >= 0:
                _libc.close(fd)
        print("still here", flush=True)
        time.sleep(0.1)
    os._exit(0)
"""


# Where neither Landlock nor root is available, nothing stops native code from writing /tmp or
# /dev/shm: the protection is missing (and results say so), so the leftover checks cannot hold.
_NO_FILE_GUARD = sandbox.landlock_abi() < 1 and not jail.can_drop_privileges()


def _tag() -> str:
    return "evt" + secrets.token_hex(5)  # fits a 15-character process name


def _survivors(tag: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if Path(f"/proc/{entry}/comm").read_text().strip() != tag:
                    continue
                state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state not in ("Z", "X"):  # a zombie is dead, waiting for init to collect it
                found.append(entry)
    return found


def _files(tag: str) -> list[Path]:
    # os.walk, not glob: other processes create and delete temporary folders meanwhile, and a
    # folder that vanishes mid-walk must not fail the search.
    out = []
    for d in ("/tmp", "/dev/shm"):
        for folder, dirs, names in os.walk(d):
            out += [Path(folder) / n for n in [*dirs, *names] if n.startswith(tag) and "pytest-of" not in folder]
    return out


def _lock_is_free(settings: Settings) -> bool:
    return not lock_is_held(state_dir(settings) / "locks" / "cpu.lock")


def _limit(kit: Path) -> float:
    """What the harness may take on the fast kit, from its own limits: start-up, then per request
    the workload timeout, with room for the trusted side and process clean-up."""
    m = json.loads((kit / "kit.json").read_text())
    return m["timeouts"]["startup_s"] + 10 * m["timeouts"]["workload_s"] + 30


async def test_daemon_does_not_survive_and_leaves_no_file(fast_kit, fast_settings):
    tag = _tag()
    code = DAEMON + GOOD + f"\n_daemon({tag!r})\n"
    result = await asyncio.wait_for(evaluate_candidate(fast_settings, str(fast_kit), code=textwrap.dedent(code)),
                                    _limit(fast_kit))
    assert result.status == "PASSED", result.message
    assert _survivors(tag) == []
    assert _NO_FILE_GUARD or _files(tag) == []
    assert not list(Path("/tmp").glob("evoteam-cand-*/" + tag))


async def test_harness_returns_in_time_and_frees_the_lock_whatever_the_candidate_does(fast_kit, fast_settings):
    """A grandchild holds the worker's stdout, the candidate hangs: the harness stops at the
    workload timeout, kills everything, releases the device lock and returns."""
    tag = _tag()
    code = DAEMON + f"""
_daemon({tag!r})

def run(hidden_states, weight, eps):
    while True:
        pass
"""
    result = await asyncio.wait_for(evaluate_candidate(fast_settings, str(fast_kit), code=textwrap.dedent(code)),
                                    _limit(fast_kit))
    assert result.status == "TIMEOUT", result.message
    assert _lock_is_free(fast_settings)
    assert _survivors(tag) == []
    assert _NO_FILE_GUARD or _files(tag) == []


async def test_program_candidate_daemon_does_not_survive(tmp_path):
    tag = _tag()
    kits = tmp_path / "kits"
    shutil.copytree(Path(__file__).parents[2] / "task_kits" / "circle_packing_26", kits / "circle_packing_26")
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[kits])
    program = (kits / "circle_packing_26" / "initial_program.py").read_text()
    code = DAEMON + program + f"\n_daemon({tag!r})\n"
    result = await asyncio.wait_for(evaluate_candidate(settings, "circle_packing_26", code=code), 120)
    assert result.status == "PASSED", result.message
    assert _survivors(tag) == []
    assert _NO_FILE_GUARD or _files(tag) == []


async def test_harness_environment_and_secrets_stay_out_of_reach(fast_kit, fast_settings, monkeypatch):
    """The harness's environment (where API keys live) through /proc of the parent, and the copy
    to /dev/shm that would carry it out: refused, flagged, and nothing written."""
    secret = secrets.token_hex(16)
    monkeypatch.setenv("EVOTEAM_TEST_SECRET", secret)
    tag = _tag()
    code = GOOD.replace("def run(", "def _run(") + f"""
import os, ctypes
_libc = ctypes.CDLL(None, use_errno=True)

def _grab():
    found = b""
    for pid in [os.getppid(), 1] + list(range(max(2, os.getpid() - 40), os.getpid() + 40)):
        buf = ctypes.create_string_buffer(1 << 16)
        fd = _libc.open(f"/proc/{{pid}}/environ".encode(), 0)
        if fd >= 0:
            n = _libc.read(fd, buf, 1 << 16)
            _libc.close(fd)
            if n > 0:
                found += buf.raw[:n]
    for d in ("/dev/shm", "/tmp"):
        fd = _libc.open(f"{{d}}/{tag}".encode(), 0o101, 0o644)
        if fd >= 0:
            _libc.write(fd, found, len(found))
            _libc.close(fd)
    return found

def run(hidden_states, weight, eps):
    _grab()
    open(f"/proc/{{os.getppid()}}/environ").read()
    return _run(hidden_states, weight, eps)
"""
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=textwrap.dedent(code))
    assert result.status == "RUNTIME_ERROR", result.message
    assert result.flagged
    assert "not allowed" in result.message
    assert secret not in json.dumps(result.model_dump())
    for path in _files(tag):
        assert secret not in path.read_text(errors="replace")
    assert _NO_FILE_GUARD or _files(tag) == []


async def test_changed_baseline_scheduling_flags_the_evaluation(fast_kit, fast_settings):
    """Whoever re-nices the trusted worker, the timings are not comparable: the evaluation fails,
    flagged."""
    from evoteam.servers.bench.evaluation.core import _workload_specs

    kit, cand, session = kernel_session(fast_settings, fast_kit, GOOD)
    try:
        await asyncio.to_thread(session.start)
        spec = _workload_specs(kit, "dev", fast_settings)[0][0]
        v = await asyncio.to_thread(session.check_correctness, spec)
        assert v.status == "PASSED", v.message
        os.setpriority(os.PRIO_PROCESS, session.trusted.proc.pid, 15)
        with pytest.raises(harness.WorkerFailure) as info:
            await asyncio.to_thread(session.measure, spec, v)
        assert info.value.status == "RUNTIME_ERROR" and info.value.flagged
        assert "scheduling" in info.value.message
    finally:
        await asyncio.to_thread(session.close)
        shutil.rmtree(cand.folder, ignore_errors=True)


# ---------------------------------------------------------------- kit trust


async def test_kit_outside_the_kit_folders_is_refused_until_the_user_trusts_it(fast_kit, tmp_path):
    elsewhere = tmp_path / "elsewhere" / "rmsnorm_fast"
    shutil.copytree(fast_kit, elsewhere)
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[fast_kit.parent])
    with pytest.raises(DomainError, match="not trusted"):
        await evaluate_candidate(settings, str(elsewhere), code=GOOD)
    from click.testing import CliRunner

    from evoteam.servers.bench.cli import bench

    out = CliRunner().invoke(bench, ["trust", str(elsewhere)], obj=settings)
    assert out.exit_code == 0, out.output
    assert find_kit(settings, str(elsewhere)).root == elsewhere.resolve()


async def test_the_mcp_evaluate_tool_cannot_trust_a_kit(fast_settings):
    from evoteam.servers.bench.server import build_server

    from mcp import Client

    async with Client(build_server(fast_settings)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    params = set(tools["evaluate"].input_schema["properties"])
    assert not any("trust" in p for p in params), params


async def test_run_bound_to_kit_content_refuses_a_lookalike(fast_kit, tmp_path):
    """A caller-made kit with the same name but other content cannot record into the real kit's
    run (it would have shown its forged score as that run's best)."""
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor

    lookalike_dir = tmp_path / "other"
    shutil.copytree(fast_kit, lookalike_dir / "rmsnorm_fast")
    manifest = json.loads((lookalike_dir / "rmsnorm_fast" / "kit.json").read_text())
    manifest["tolerance"] = {"atol": 10.0, "rtol": 10.0}  # anything passes
    (lookalike_dir / "rmsnorm_fast" / "kit.json").write_text(json.dumps(manifest))
    settings = Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[fast_kit.parent, lookalike_dir])
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="t", client="pytest")) as store:
        real = await evaluate_candidate(settings, str(fast_kit), code=GOOD, store=store)
        assert real.recorded and real.metrics["kit_hash"].startswith("sha256:")
        with pytest.raises(DomainError, match="bound to kit content"):
            await evaluate_candidate(settings, str(lookalike_dir / "rmsnorm_fast"), code=GOOD, store=store,
                                     run_id=real.run_id)
        # Without a run id it goes to a run of its own, never the real kit's.
        other = await evaluate_candidate(settings, str(lookalike_dir / "rmsnorm_fast"), code=GOOD, store=store)
        assert other.run_id != real.run_id


async def test_without_root_layers_the_process_group_still_holds(fast_kit, fast_settings, monkeypatch):
    """As on a machine where the harness is not root (no cgroup, no own uid, no private /tmp): the
    missing layers are named, and seccomp plus the process group still end every process."""
    monkeypatch.setattr(jail, "_CG_ROOT", None)
    monkeypatch.setenv("EVOTEAM_BENCH_NO_UID", "1")
    tag = _tag()
    code = DAEMON + GOOD + f"\n_daemon({tag!r})\n"
    result = await asyncio.wait_for(evaluate_candidate(fast_settings, str(fast_kit), code=textwrap.dedent(code)),
                                    _limit(fast_kit))
    assert result.status == "PASSED", result.message
    assert "process-group" in result.sandbox and "uid" not in result.sandbox, result.sandbox
    if os.geteuid() == 0:
        assert any("OWN-UID" in m for m in result.metrics.get("protections_missing", [])), result.metrics
    assert _survivors(tag) == []
    assert _NO_FILE_GUARD or _files(tag) == []
