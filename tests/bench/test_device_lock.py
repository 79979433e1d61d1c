"""The CPU's device locks nest: pool slots share the machine, a whole-machine evaluation has it alone.

A service's compare and remeasure time on the whole machine ("cpu") while its pool's slots
time on their own cores ("cpu:0", "cpu:1"); before the locks nested they took different lock
files and could time side by side on the same cores.
"""

from __future__ import annotations

import threading
import time

from evoteam.servers.bench.measurement.harness import device_lock
from tests.bench.conftest import lock_is_held


class Holder(threading.Thread):
    """Takes ``device``'s lock, notes when, and holds it until released."""

    def __init__(self, lock_dir, device, log):
        super().__init__(daemon=True)
        self.lock_dir, self.device, self.log = lock_dir, device, log
        self.got = threading.Event()
        self.release = threading.Event()

    def run(self):
        with device_lock(self.lock_dir, self.device):
            self.log.append(self.device)
            self.got.set()
            self.release.wait(30)


def _start(lock_dir, device, log) -> Holder:
    holder = Holder(lock_dir, device, log)
    holder.start()
    return holder


def _stop(holder: Holder) -> None:
    holder.release.set()
    holder.join(30)
    assert not holder.is_alive()


def test_slots_time_side_by_side_but_not_beside_the_whole_machine(tmp_path):
    log: list[str] = []
    a, b = _start(tmp_path, "cpu:0", log), _start(tmp_path, "cpu:1", log)
    assert a.got.wait(10) and b.got.wait(10), "two slots of the pool must hold their locks at once"
    whole = _start(tmp_path, "cpu", log)
    assert not whole.got.wait(0.5), "a whole-machine evaluation timed beside a slot's"
    _stop(a)
    assert not whole.got.wait(0.5), "a whole-machine evaluation timed beside the other slot's"
    _stop(b)
    assert whole.got.wait(10)
    slot = _start(tmp_path, "cpu:1", log)
    assert not slot.got.wait(0.5), "a slot timed beside a whole-machine evaluation"
    _stop(whole)
    assert slot.got.wait(10)
    _stop(slot)


def test_a_slot_that_comes_after_a_waiting_whole_machine_evaluation_waits_for_it(tmp_path):
    """Shared holders could otherwise keep the machine's lock from a waiting whole-machine
    evaluation for as long as the pool stays busy."""
    log: list[str] = []
    first = _start(tmp_path, "cpu:0", log)
    assert first.got.wait(10)
    whole = _start(tmp_path, "cpu", log)
    deadline = time.monotonic() + 10
    while not lock_is_held(tmp_path / "cpu-gate.lock"):  # the whole-machine one is waiting
        assert time.monotonic() < deadline, "the whole-machine evaluation never closed the gate"
        time.sleep(0.01)
    later = _start(tmp_path, "cpu:1", log)
    assert not later.got.wait(0.5), "a later slot went ahead of the waiting whole-machine evaluation"
    _stop(first)
    assert whole.got.wait(10)
    assert not later.got.is_set()
    _stop(whole)
    assert later.got.wait(10)
    _stop(later)
    assert log == ["cpu:0", "cpu", "cpu:1"]


def test_one_slot_is_held_once_and_gpus_keep_their_own_locks(tmp_path):
    log: list[str] = []
    one = _start(tmp_path, "cpu:0", log)
    assert one.got.wait(10)
    again = _start(tmp_path, "cpu:0", log)
    assert not again.got.wait(0.5), "one slot timed two evaluations at once"
    gpu = _start(tmp_path, "cuda:0", log)
    assert gpu.got.wait(10), "a GPU's lock waited for the CPU's"
    plain = _start(tmp_path, "cuda", log)
    assert not plain.got.wait(0.5), "a bare cuda is the first GPU"
    for holder in (one, again, gpu, plain):
        _stop(holder)


async def test_an_evaluation_of_the_whole_machine_waits_for_a_pool_slot_on_it(fast_settings, fast_kit):
    """The batch a service's compare and remeasure run (no slot: the kit's bare "cpu") waits while
    a pool slot of the same host is timing."""
    import asyncio

    from evoteam.servers.bench.evaluation.core import evaluate_candidate
    from evoteam.servers.bench.formats.kits import state_dir

    said: list[str] = []

    async def progress(_done, _total, message):
        said.append(message)

    slot = _start(state_dir(fast_settings) / "locks", "cpu:0", [])
    assert slot.got.wait(10)
    try:
        task = asyncio.create_task(evaluate_candidate(
            fast_settings, str(fast_kit), code=(fast_kit / "baseline.py").read_text(), progress=progress))
        for _ in range(200):
            if any("waiting for the cpu" in m for m in said):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)
        assert not task.done(), "the whole-machine evaluation ran beside the slot's"
        assert "waiting for the cpu" in said[-1], f"it went on past the lock: {said}"
    finally:
        slot.release.set()
    result = await asyncio.wait_for(task, 120)
    assert result.status == "PASSED", result.message
