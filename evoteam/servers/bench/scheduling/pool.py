"""The local pool: up to one evaluation per device of this host at once, fairly queued.

Each evaluation waits in the FairQueue for a slot, claims a device no other process's pool is
using (devices.claim_slot), then runs in the slot's runner (slot.py, kept warm between
evaluations) pinned to that slot's cores and holding that slot's device lock, so baseline and candidate of one
evaluation share a device, and evaluations outside the pool still wait for the same lock.
"""

from __future__ import annotations

import subprocess

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.formats.kits import state_dir
from evoteam.servers.bench.models import Evaluation
from evoteam.servers.bench.scheduling.devices import Slot, claim_slot, local_slots, physical_gpu
from evoteam.servers.bench.scheduling.fairqueue import FairQueue
from evoteam.servers.bench.scheduling.jobs import EvalJob, SlotSettings
from evoteam.servers.bench.scheduling.slot import reusable, run_slot, start_runner, stop_runner


class LocalPool:
    """This host's devices as slots; one queue per device kind."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._queues: dict[str, tuple[FairQueue, dict[str, Slot]]] = {}
        # One warm slot runner per slot, started when the slots are first made (a bench server
        # makes them when it starts) and kept from one evaluation to the next: an evaluation
        # skips the runner's start (a fresh Python importing the harness), most of what a slot
        # added. A replacement is started only when the slot is idle, so its start-up never
        # competes with a measurement on the same cores.
        self._standby: dict[str, subprocess.Popen] = {}

    def queue(self, kind: str) -> tuple[FairQueue, dict[str, Slot]]:
        kind = "cuda" if kind.startswith("cuda") else "cpu"
        if kind not in self._queues:
            slots = {s.name: s for s in local_slots(self.settings, kind)}
            self._queues[kind] = (FairQueue(list(slots), f"pool/{kind}", state_dir(self.settings) / "queue"), slots)
            for slot in slots.values():
                self._standby[slot.name] = self._runner(slot)
        return self._queues[kind]

    def warm(self, kind: str) -> None:
        """Make ``kind``'s slots and start their standby runners now, before any evaluation."""
        self.queue(kind)

    @staticmethod
    def _runner(slot: Slot):
        gpu = physical_gpu(int(slot.name.split(":", 1)[1])) if slot.name.startswith("cuda") else None
        return start_runner(list(slot.cores) or None, gpu_id=gpu, warm=True)

    async def evaluate(self, job: EvalJob, kind: str, progress=None) -> Evaluation:
        queue, slots = self.queue(kind)
        given = SlotSettings(db=str(self.settings.db), kits_dirs=[str(p) for p in self.settings.kits_dirs],
                             project_kits_dirs=[str(p) for p in self.settings.project_kits_dirs])
        async with queue.slot(job.run_key, job.kit, progress) as granted:
            # The queue bounds this process; the claim picks a device no other process is using.
            order = [granted] + [n for n in slots if n != granted]
            with claim_slot(state_dir(self.settings) / "locks", order) as name:
                slot = slots[name]
                gpu = physical_gpu(int(name.split(":", 1)[1])) if name.startswith("cuda") else None
                runner = self._standby.pop(name, None)
                if runner is None or runner.poll() is not None:
                    runner = self._runner(slot)
                reply = await run_slot(job.model_copy(update={"device": name, "cores": list(slot.cores),
                                                              "gpu_id": gpu}), given, runner=runner, keep=True)
                # The runner that answered serves the slot's next evaluation; one that died, was
                # killed (a wedged device) or has served its share is replaced now that the slot is idle.
                if not reusable(runner):
                    stop_runner(runner)
                    runner = self._runner(slot)
                self._standby[name] = runner
        result = reply.result()
        if not reply.ok or result is None:
            raise DomainError(reply.error or "the evaluation failed on its slot")
        result.metrics.setdefault("placement", {}).update(backend="pool", slot=name)
        return result

    def close(self) -> None:
        for queue, _ in self._queues.values():
            queue.close()
        for runner in self._standby.values():
            stop_runner(runner)
        self._standby.clear()
