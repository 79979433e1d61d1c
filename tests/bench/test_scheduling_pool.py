"""The local device pool: one evaluation per slot at once, each recorded once; a queue fair
across runs; the queue visible from `evoteam bench queue`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest
from mcp import Client

from evoteam.servers.bench.confinement.jail import can_drop_privileges
from evoteam.servers.bench.scheduling.dispatch import close_backends
from evoteam.servers.bench.scheduling.fairqueue import FairQueue
from evoteam.servers.bench.server import build_server
from tests.bench.conftest import RMSNORM, slow_rmsnorm
from tests.support.polling import wait_until

GOOD = RMSNORM
# Seconds per evaluation rather than a fraction of one, so two that start together overlap
# whatever the runners' start-up costs on a busy machine.
SLOW = slow_rmsnorm(0.3)


@pytest.fixture
def pool_settings(fast_settings):
    yield fast_settings.model_copy(update={"bench_backend": "pool", "bench_devices": ["cpu:0", "cpu:1"]})
    close_backends()


async def test_pool_runs_two_at_once_through_the_tool_and_records_each_once(pool_settings, store):
    async with Client(build_server(pool_settings, store)) as client:
        calls = [client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": SLOW + f"\nVARIANT = {i}\n"})
                 for i in range(2)]
        results = await asyncio.gather(*calls)
    evals = []
    for r in results:
        assert not r.is_error, r.content[0].text
        evals.append(r.structured_content)
    assert all(e["status"] == "PASSED" and e["recorded"] for e in evals)
    placements = [e["metrics"]["placement"] for e in evals]
    assert sorted(p["slot"] for p in placements) == ["cpu:0", "cpu:1"]
    assert all(p["backend"] == "pool" and p["fingerprint"]["cores"] for p in placements)
    a, b = placements
    assert a["started_at"] < b["finished_at"] and b["started_at"] < a["finished_at"], "the two did not overlap"
    run_id = evals[0]["run_id"]
    page = await store.list_candidates(run_id, limit=10)
    assert sorted(c.id for c in page.items) == sorted(e["candidate_id"] for e in evals)


async def test_identical_code_from_two_slots_pools_its_rounds_into_one_candidate(pool_settings, store):
    """A slot's rounds travel back with its result (Evaluation keeps them out of its JSON), so two
    measurements of one code made on two slots are one candidate whose interval uses both."""
    from evoteam.servers.bench.scheduling.dispatch import evaluate_scheduled

    first, second = await asyncio.gather(*[evaluate_scheduled(pool_settings, "rmsnorm_fast", code=GOOD + comment,
                                                              store=store) for comment in ("", "# again\n")])
    assert first.status == second.status == "PASSED"
    assert {first.metrics["placement"]["slot"], second.metrics["placement"]["slot"]} == {"cpu:0", "cpu:1"}
    assert first.candidate_id == second.candidate_id
    assert first.samples and second.samples  # each slot's own rounds came back
    stored = await store.get_candidate(first.candidate_id)
    assert stored.n_measurements == 2 and stored.score_interval is not None
    rounds = {w: len(v) for w, v in stored.samples.items()}
    assert rounds == {w: len(first.samples[w]) + len(second.samples[w]) for w in first.samples}


async def test_queue_hands_slots_round_robin_across_runs():
    queue = FairQueue(["cpu:0"], "test")
    release = asyncio.Event()
    order: list[str] = []

    async def one(run: str, i: int) -> None:
        async with queue.slot(run, "k"):
            order.append(f"{run}{i}")
            await release.wait() if not order[1:] else None

    first = asyncio.create_task(one("A", 0))
    await asyncio.sleep(0)
    tasks = [asyncio.create_task(one("A", i)) for i in range(1, 5)]
    await asyncio.sleep(0)
    tasks += [asyncio.create_task(one("B", i)) for i in range(2)]
    await asyncio.sleep(0)
    snap = queue.snapshot()
    assert [e.state for e in snap.entries].count("waiting") == 6
    release.set()
    await asyncio.gather(first, *tasks)
    # A's backlog arrived first, yet B is served every other turn.
    assert order == ["A0", "A1", "B0", "A2", "B1", "A3", "A4"]


async def test_a_cancelled_waiter_gives_its_turn_away():
    queue = FairQueue(["s"], "test")
    async with queue.slot("A"):
        waiting = asyncio.create_task(queue.slot("B").__aenter__())
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
    async with queue.slot("C") as name:  # the slot came back, not to the cancelled waiter
        assert name == "s"
    assert queue.snapshot().entries == []


def test_bench_queue_shows_a_live_queue(tmp_path):
    state = tmp_path / "state"
    code = textwrap.dedent(f"""
        import asyncio, sys
        from pathlib import Path
        from evoteam.servers.bench.scheduling.fairqueue import FairQueue

        async def main():
            q = FairQueue(["cpu:0"], "pool/cpu", Path({str(state / 'bench' / 'queue')!r}))
            async with q.slot("run-A", "rmsnorm_cpu"):
                w = [asyncio.create_task(q.slot("run-B", "rmsnorm_cpu").__aenter__()) for _ in range(3)]
                await asyncio.sleep(0)
                print("ready", flush=True)
                sys.stdin.readline()
        asyncio.run(main())
    """)
    holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "ready"
        env = dict(os.environ, EVOTEAM_DB=str(state / "kb.db"))
        evoteam = os.path.join(os.path.dirname(sys.executable), "evoteam")
        out = subprocess.run([evoteam, "bench", "queue", "--json"], env=env, capture_output=True, text=True,
                             timeout=120)
        assert out.returncode == 0, out.stderr
        [snap] = json.loads(out.stdout)
        assert snap["pid"] == holder.pid and snap["slots"] == ["cpu:0"]
        states = sorted((e["state"], e["run_key"]) for e in snap["entries"])
        assert states == [("running", "run-A")] + [("waiting", "run-B")] * 3
        text = subprocess.run([evoteam, "bench", "queue"], env=env, capture_output=True, text=True, timeout=120)
        assert "1/1 slots busy, 3 waiting" in text.stdout
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    out = subprocess.run([evoteam, "bench", "queue", "--json"], env=env, capture_output=True, text=True, timeout=120)
    assert json.loads(out.stdout) == []  # a process that is gone shows no queue


def test_devices_and_backend_come_from_the_environment(tmp_path):
    from evoteam.config import ConfigError, load_settings
    from evoteam.servers.bench.scheduling.devices import local_slots

    env = {"HOME": str(tmp_path), "EVOTEAM_BENCH_BACKEND": "pool", "EVOTEAM_DEVICES": "0, 2",
           "EVOTEAM_CORES_PER_EVAL": "1"}
    settings = load_settings(tmp_path, env)
    assert settings.bench_backend == "pool" and settings.bench_devices == ["0", "2"]
    assert [s.name for s in local_slots(settings, "cuda")] == ["cuda:0", "cuda:2"]
    cores = sorted(os.sched_getaffinity(0))
    cpu = local_slots(settings, "cpu")
    assert [s.name for s in cpu] == ["cpu:0", "cpu:2"]
    assert cpu[0].cores == (cores[0],) and cpu[1].cores == (cores[2 % len(cores)],)
    with pytest.raises(ConfigError):
        load_settings(tmp_path, dict(env, EVOTEAM_BENCH_BACKEND="slurm"))


def test_default_cpu_slots_split_the_cores_without_sharing(fast_settings):
    from evoteam.servers.bench.scheduling.devices import local_slots

    slots = local_slots(fast_settings, "cpu")
    used = [c for s in slots for c in s.cores]
    assert len(used) == len(set(used)) == len(slots) * fast_settings.cores_per_eval


def test_a_project_file_cannot_send_evaluations_to_a_cluster(tmp_path):
    """A project's evoteam.toml may be an agent's work: where scores are measured is the user's."""
    from evoteam.config import load_settings

    project = tmp_path / "project"
    project.mkdir()
    (project / "evoteam.toml").write_text('bench_backend = "ray"\nray_address = "10.0.0.9:6379"\n'
                                          'bench_devices = ["cpu:0"]\n')
    settings = load_settings(project, {"HOME": str(tmp_path)})
    assert settings.bench_backend == "local" and settings.ray_address is None
    assert settings.bench_devices == ["cpu:0"]
    user = tmp_path / ".config" / "evoteam"
    user.mkdir(parents=True)
    (user / "evoteam.toml").write_text('bench_backend = "ray"\nray_address = "10.0.0.9:6379"\n')
    settings = load_settings(project, {"HOME": str(tmp_path)})
    assert settings.bench_backend == "ray" and settings.ray_address == "10.0.0.9:6379"


async def test_one_slot_runs_one_at_a_time_and_progress_says_where_it_waits(fast_settings, store):
    settings = fast_settings.model_copy(update={"bench_backend": "pool", "bench_devices": ["cpu:0"]})
    heard: list[list[str]] = [[], []]

    def hear(i):
        async def cb(progress, total, message):
            heard[i].append(message or "")
        return cb

    try:
        async with Client(build_server(settings, store)) as client:
            results = await asyncio.gather(*[
                client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": GOOD + f"\nVARIANT = {i}\n"},
                                 progress_callback=hear(i)) for i in range(2)])
    finally:
        close_backends()
    evals = [r.structured_content for r in results]
    assert all(e["status"] == "PASSED" for e in evals), [r.content[0].text for r in results]
    a, b = sorted((e["metrics"]["placement"] for e in evals), key=lambda p: p["started_at"])
    assert a["slot"] == b["slot"] == "cpu:0"
    assert a["finished_at"] <= b["started_at"], "two evaluations held one device at once"
    # the first found the runner the server started with it, warm; the second the same runner,
    # kept for the slot's next evaluation (no start at all)
    assert (a["runner"], b["runner"]) == ("standby", "reused")
    assert a["fingerprint"]["cores"] == b["fingerprint"]["cores"]
    for messages in heard:
        assert "evaluating on cpu:0" in messages and messages[-1] == "PASSED on cpu:0", messages
    # the one that came second heard why it waited; the first went straight to the device
    queued = sorted([m for m in messages if m.startswith("queued: ")] for messages in heard)
    assert queued == [[], ["queued: 1/1 pool/cpu slots busy, 0 other evaluation(s) waiting"]], heard


async def test_two_pools_on_one_host_spread_over_its_devices(fast_settings):
    """Two bench servers (one per role) each keep a pool of the same devices: each one's first
    choice is cpu:0, yet they claim different devices and run at once."""
    from evoteam.servers.bench.scheduling.pool import LocalPool
    from evoteam.servers.bench.scheduling.jobs import EvalJob
    from evoteam.servers.bench.formats.kits import find_kit

    settings = fast_settings.model_copy(update={"bench_devices": ["cpu:0", "cpu:1"]})
    kit = find_kit(settings, "rmsnorm_fast")
    pools = [LocalPool(settings), LocalPool(settings)]
    try:
        results = await asyncio.gather(*[
            pool.evaluate(EvalJob(kit=kit.name, kit_hash=kit.content_hash, code=GOOD + f"ROLE = {i}\n",
                                  run_key=f"role-{i}"), "cpu") for i, pool in enumerate(pools)])
    finally:
        for pool in pools:
            pool.close()
    a, b = (r.metrics["placement"] for r in results)
    assert {a["slot"], b["slot"]} == {"cpu:0", "cpu:1"}


def test_bench_run_on_the_pool_from_the_command_line(fast_kit, tmp_path):
    cand = tmp_path / "cand.py"
    cand.write_text(GOOD)
    env = dict(os.environ, EVOTEAM_DB=str(tmp_path / "state" / "kb.db"), EVOTEAM_KITS=str(fast_kit.parent),
               HOME=str(tmp_path / "home"))
    evoteam = os.path.join(os.path.dirname(sys.executable), "evoteam")
    out = subprocess.run([evoteam, "bench", "run", "rmsnorm_fast", str(cand), "--backend", "pool", "--devices", "1",
                          "--json"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout)
    assert result["status"] == "PASSED" and result["recorded"]
    assert result["metrics"]["placement"]["slot"] == "cpu:1"


async def test_team_status_shows_the_runs_evaluations_on_the_pool(fast_settings, store):
    """A role's supervisor sees, in team_status, how many of the run's evaluations run and wait
    on this host's pool (the queue files the pool keeps beside the bench's state)."""
    from evoteam.servers.knowledge.models import RunCreate
    from evoteam.servers.team.server import build_server as build_team_server

    run = await store.start_run(RunCreate(goal="rmsnorm", kit="rmsnorm_fast"))
    queue = FairQueue(["cpu:0", "cpu:1"], "pool/cpu", fast_settings.state_root / "bench" / "queue")
    async with Client(build_team_server(fast_settings, store)) as client:
        idle = (await client.call_tool("team_status", {"run_id": run.id})).structured_content
        assert idle["evaluations"] is None  # no live queue on this host
        async with queue.slot(run.id, "rmsnorm_fast"), queue.slot("another-run", "rmsnorm_fast"):
            waiting = [asyncio.create_task(queue.slot(key, "rmsnorm_fast").__aenter__())
                       for key in (run.id, run.id, "another-run")]
            await asyncio.sleep(0)
            status = (await client.call_tool("team_status", {"run_id": run.id})).structured_content
            for task in waiting:
                task.cancel()
            await asyncio.gather(*waiting, return_exceptions=True)
    queue.close()
    assert status["evaluations"] == {"running": 1, "waiting": 2, "slots": 2, "busy": 2, "others_waiting": 1,
                                     "running_on": ["cpu:0"]}


def test_a_gpu_slots_runner_sees_only_its_gpu(monkeypatch):
    """The pool's cuda:1 is the second GPU this process may use; its runner (and every worker the
    harness starts from it, which inherit CUDA_VISIBLE_DEVICES) sees that GPU alone, so a
    candidate's plain "cuda" lands on its slot. No GPU is needed to check what the runner sees."""
    from evoteam.servers.bench.scheduling.devices import physical_gpu
    from evoteam.servers.bench.scheduling.slot import start_runner, stop_runner

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6")
    assert [physical_gpu(0), physical_gpu(1)] == ["4", "6"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert physical_gpu(1) == "1"
    monkeypatch.setenv("EVOTEAM_TOKEN", "secret-token")
    runner = start_runner(gpu_id="6")
    try:
        # Just after the exec the kernel may still show an empty environment: wait until it has one.
        raw = lambda: open(f"/proc/{runner.pid}/environ", "rb").read()  # noqa: E731
        assert wait_until(raw), "the runner never showed an environment"
        environ = dict(item.split("=", 1) for item in raw().decode().split("\0") if "=" in item)
    finally:
        stop_runner(runner)
    assert environ["CUDA_VISIBLE_DEVICES"] == "6"
    assert "EVOTEAM_TOKEN" not in environ  # a slot records nothing: it gets no token


async def test_a_kept_runner_is_replaced_after_its_share_of_evaluations(fast_settings, monkeypatch):
    from evoteam.servers.bench.scheduling import slot
    from evoteam.servers.bench.scheduling.dispatch import evaluate_scheduled

    monkeypatch.setattr(slot, "RUNNER_JOBS", 2)
    settings = fast_settings.model_copy(update={"bench_backend": "pool", "bench_devices": ["cpu:0"]})
    try:
        runners = [(await evaluate_scheduled(settings, "rmsnorm_fast", code=GOOD + f"\n# {i}\n"))
                   .metrics["placement"]["runner"] for i in range(3)]
    finally:
        close_backends()
    # the first runner served two (standby, then reused); the third found its replacement, warm
    assert runners == ["standby", "reused", "standby"]


def _spare_workers() -> set[int]:
    """Spare workers anywhere on the machine (sparepool.py): worker processes still in the folder
    a spare waits in."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if "/evoteam-spares-" in os.readlink(f"/proc/{entry}/cwd") and \
                    b"measurement.worker" in open(f"/proc/{entry}/cmdline", "rb").read():
                found.add(int(entry))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not can_drop_privileges(), reason="no spares are kept where workers get no uids of their own")
async def test_a_kept_runner_leaves_spare_workers_for_its_next_job(fast_settings, store):
    settings = fast_settings.model_copy(update={"bench_backend": "pool", "bench_devices": ["cpu:0"]})
    assert wait_until(lambda: not _spare_workers()), "spares of an earlier test are still there"
    try:
        async with Client(build_server(settings, store)) as client:
            first = await client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": GOOD})
            assert first.structured_content["status"] == "PASSED", first.content[0].text
            assert wait_until(lambda: len(_spare_workers()) >= 3), _spare_workers()
            waiting = _spare_workers()
            second = await client.call_tool("evaluate", {"kit": "rmsnorm_fast", "code": GOOD + "\nVARIANT = 1\n"})
            assert second.structured_content["status"] == "PASSED", second.content[0].text
            # the second job took the first one's spares (used once, gone) and left its own
            assert wait_until(lambda: len(_spare_workers()) >= 3 and not _spare_workers() & waiting)
    finally:
        close_backends()
    assert wait_until(lambda: not _spare_workers()), "spares outlived their runner"


async def test_a_runner_that_serves_one_job_leaves_no_spares(fast_settings):
    from evoteam.servers.bench.formats.kits import find_kit
    from evoteam.servers.bench.scheduling.jobs import EvalJob, SlotSettings
    from evoteam.servers.bench.scheduling.slot import run_slot

    kit = find_kit(fast_settings, "rmsnorm_fast")
    given = SlotSettings(db=str(fast_settings.db), kits_dirs=[str(p) for p in fast_settings.kits_dirs])
    reply = await run_slot(EvalJob(kit=kit.name, kit_hash=kit.content_hash, code=GOOD), given)  # not kept
    assert reply.ok and reply.evaluation.status == "PASSED", reply.error
    time.sleep(0.5)  # a spare would have been started at the evaluation's close, before the reply
    assert not _spare_workers()
