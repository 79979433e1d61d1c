"""The Ray backend: each evaluation a Ray task on some node of a cluster, fairly queued here.

The caller keeps a FairQueue as wide as the cluster's devices (the `ray_resource` every device
node declares: "GPU", or a custom resource such as `evoteam_device` where there is no GPU), so
tasks are released to Ray round-robin across runs. On the node the task claims a free device
slot, starts the slot runner there with the node's own settings (never the caller's tokens), and
returns the SlotReply; the caller records it. A task whose worker or node dies is resubmitted
once (Ray then places it on a node that is alive) and its result is marked retried; a result
that never came back was never recorded, so nothing is lost or recorded twice.

Kits travel by content hash (kitship.py): a node without the caller's kit unpacks the caller's
copy from the object store and checks its hash. The held-out split is the caller's: a job for
split heldout or all carries the held-out inputs the caller drew with its own key (never the
key), so every node measures the same held-out set and names it as the caller does.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from pathlib import Path
from typing import Any

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.formats.kits import state_dir
from evoteam.servers.bench.models import Evaluation
from evoteam.servers.bench.scheduling.devices import claim_slot
from evoteam.servers.bench.scheduling.fairqueue import FairQueue
from evoteam.servers.bench.scheduling.jobs import EvalJob, SlotReply

try:
    import ray
except ImportError:  # an optional extra: `pip install 'evoteam[ray]'`
    ray = None


def _need_ray() -> Any:
    if ray is None:
        raise DomainError("the ray backend needs Ray: pip install 'evoteam[ray]' (or set EVOTEAM_BENCH_BACKEND=pool)")
    return ray


def _evaluate_on_node(job_json: str, resource: str, shipped: list | None = None) -> str:
    """The Ray task body: runs on a worker node. ``shipped``: the caller's kit archive in the
    object store (a reference in a list, so Ray fetches it only when this node needs it)."""
    from evoteam.config import load_settings

    ctx = ray.get_runtime_context()
    node = ctx.get_node_id()
    settings = load_settings()
    job = EvalJob.model_validate_json(job_json).model_copy(update={"kit_dir": None})  # never the caller's
    try:
        job = _with_kit(settings, job, shipped or [])
    except DomainError as exc:
        return SlotReply(ok=False, error=f"node {node[:8]}: {exc}", refused=True).model_dump_json()
    env_gpus = ctx.get_accelerator_ids().get("GPU") or []
    if resource == "GPU" and env_gpus:
        # Ray narrowed CUDA_VISIBLE_DEVICES to this task's GPU, and the runner inherits it (a
        # candidate's plain "cuda" is that GPU); the slot's lock names the physical one, so it is
        # shared with every other evaluation on this host.
        device = f"cuda:{env_gpus[0]}"
        job = job.model_copy(update={"gpu_id": str(env_gpus[0])})
    else:
        total = next((n["Resources"].get(resource, 0) for n in ray.nodes() if n["NodeID"] == node), 1)
        # Nodes of one test machine share a state folder: the node's id keeps their slots apart.
        names = [f"cpu:{node[:8]}-{i}" for i in range(max(1, int(total)))]
        random.shuffle(names)
        with claim_slot(state_dir(settings) / "locks", names) as device:
            reply = _run_kept(job.model_copy(update={"device": device}))
        return _placed(reply, node)
    reply = _run_kept(job.model_copy(update={"device": device}))
    return _placed(reply, node)


# The slot runner this Ray worker process keeps between tasks (per GPU it was given): a worker
# runs one task at a time and Ray reuses it for later ones, so its next evaluation skips the
# runner's start. The runner is started for a task, never beside a running one.
_kept: dict[str | None, Any] = {}


def _run_kept(job: EvalJob) -> SlotReply:
    from evoteam.servers.bench.scheduling.slot import reusable, run_slot, start_runner, stop_runner

    runner = _kept.pop(job.gpu_id, None)
    if runner is None or runner.poll() is not None:
        runner = start_runner(gpu_id=job.gpu_id)
    reply = asyncio.run(run_slot(job, runner=runner, keep=True))
    if reusable(runner):
        _kept[job.gpu_id] = runner
    else:
        stop_runner(runner)
    return reply


def _with_kit(settings, job: EvalJob, shipped: list) -> EvalJob:
    """The job as this node runs it: with its own copy of the kit when it has one (the runner
    checks the hash), else with the caller's shipped copy unpacked into its cache."""
    from evoteam.errors import Missing
    from evoteam.servers.bench.formats.kits import find_kit
    from evoteam.servers.bench.scheduling import kitship

    try:
        find_kit(settings, job.kit)
        return job
    except Missing:
        if not shipped:
            raise
    state = state_dir(settings)
    archive = b"" if kitship.cached(state, job.kit_hash, job.kit).is_dir() else ray.get(shipped[0])
    return job.model_copy(update={"kit_dir": str(kitship.unpack(state, job.kit_hash, job.kit, archive))})


def _placed(reply: SlotReply, node: str) -> str:
    if reply.evaluation is not None:
        reply.evaluation.metrics.setdefault("placement", {}).update(node=node, backend="ray")
    return reply.model_dump_json()


class RayBackend:
    """Sends evaluations to the Ray cluster at `settings.ray_address`."""

    def __init__(self, settings: Settings):
        r = _need_ray()
        if not r.is_initialized():
            try:
                r.init(address=settings.ray_address or "auto", log_to_driver=False)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise DomainError(f"cannot reach the Ray cluster at {settings.ray_address or 'auto'}: "
                                  f"{str(exc).splitlines()[0][:200]}") from None
        self.resource = settings.ray_resource
        width = int(r.cluster_resources().get(self.resource, 0))
        if width < 1:
            raise DomainError(f"the Ray cluster declares no {self.resource!r} resource: start device nodes with "
                              f"--num-gpus, or --resources '{{\"{self.resource}\": N}}'")
        self.queue = FairQueue([f"ray:{i}" for i in range(width)], "ray", state_dir(settings) / "queue")
        self._task = r.remote(_evaluate_on_node)
        self._shipments: dict[str, Any] = {}  # kit hash -> its archive in the object store
        self._packing: dict[str, asyncio.Lock] = {}

    async def _shipment(self, kit_hash: str, root: Path | None) -> list:
        """The kit's archive in Ray's object store, put there once per content hash (none for a
        kit too large to ship). Packed and put off the event loop: a large kit must not stall the
        server's other calls; one packing per hash at a time."""
        if root is None:
            return []
        async with self._packing.setdefault(kit_hash, asyncio.Lock()):
            if kit_hash not in self._shipments:
                from evoteam.servers.bench.scheduling.kitship import pack

                try:
                    archive = await asyncio.to_thread(pack, root)
                except OSError as exc:
                    raise DomainError(f"cannot pack the kit folder {root} to ship it to the Ray nodes: "
                                      f"{exc.strerror or exc}") from None
                if len(self._shipments) >= 16:  # the object store keeps what is still referenced
                    self._shipments.pop(next(iter(self._shipments)))
                self._shipments[kit_hash] = await asyncio.to_thread(ray.put, archive) if archive is not None else None
        ref = self._shipments[kit_hash]
        return [ref] if ref is not None else []

    def _submit(self, job: EvalJob, shipped: list):
        opts: dict[str, Any] = {"max_retries": 0, "num_cpus": 0}
        if self.resource == "GPU":
            opts["num_gpus"] = 1
        else:
            opts["resources"] = {self.resource: 1}
        if job.gpu_model:
            # Ray's own placement by accelerator type: GPU nodes declare theirs when they start
            # (others: --resources '{"accelerator_type:H100": 1}').
            opts["accelerator_type"] = job.gpu_model
        return self._task.options(**opts).remote(job.model_dump_json(), self.resource, shipped)

    async def evaluate(self, job: EvalJob, progress=None, kit_root: Path | None = None) -> Evaluation:
        """Run ``job`` on some node; ``kit_root``: the caller's kit folder, shipped to nodes without it."""
        shipped = await self._shipment(job.kit_hash, kit_root)
        async with self.queue.slot(job.run_key, job.kit, progress):
            retried_after = None
            for attempt in (1, 2):
                ref = self._submit(job, shipped)
                try:
                    reply = SlotReply.model_validate_json(await ref)
                    break
                except asyncio.CancelledError:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref, force=True)
                    raise
                except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                        ray.exceptions.ActorDiedError, ray.exceptions.ObjectLostError,
                        ray.exceptions.LocalRayletDiedError) as exc:
                    if attempt == 2:
                        raise DomainError("the evaluation's node died twice; nothing was recorded: "
                                          f"{str(exc).splitlines()[0][:200]}") from None
                    retried_after = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        result = reply.result()
        if not reply.ok or result is None:
            raise DomainError(reply.error or "the evaluation failed on its node")
        placement = result.metrics.setdefault("placement", {})
        placement["retried"] = retried_after is not None
        if retried_after:
            placement["first_attempt"] = retried_after
        return result

    def close(self) -> None:
        self.queue.close()
