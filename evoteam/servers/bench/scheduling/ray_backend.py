"""The Ray backend: each evaluation a Ray task on some node of a cluster, fairly queued here.

The caller keeps a FairQueue as wide as the cluster's devices (the `ray_resource` every device
node declares: "GPU", or a custom resource such as `evoteam_device` where there is no GPU), so
tasks are released to Ray round-robin across runs. On the node the task claims a free device
slot, starts the slot runner there with the node's own settings (never the caller's tokens), and
returns the SlotReply; the caller records it. A task whose worker or node dies is resubmitted
once (Ray then places it on a node that is alive) and its result is marked retried; a result
that never came back was never recorded, so nothing is lost or recorded twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
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


def _evaluate_on_node(job_json: str, resource: str) -> str:
    """The Ray task body: runs on a worker node."""
    from evoteam.config import load_settings
    from evoteam.servers.bench.scheduling.slot import run_slot

    ctx = ray.get_runtime_context()
    node = ctx.get_node_id()
    job = EvalJob.model_validate_json(job_json)
    settings = load_settings()
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
            reply = asyncio.run(run_slot(job.model_copy(update={"device": device})))
        return _placed(reply, node)
    reply = asyncio.run(run_slot(job.model_copy(update={"device": device})))
    return _placed(reply, node)


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

    def _submit(self, job: EvalJob):
        opts: dict[str, Any] = {"max_retries": 0, "num_cpus": 0}
        if self.resource == "GPU":
            opts["num_gpus"] = 1
        else:
            opts["resources"] = {self.resource: 1}
        if job.gpu_model:
            # Ray's own placement by accelerator type: GPU nodes declare theirs when they start
            # (others: --resources '{"accelerator_type:H100": 1}').
            opts["accelerator_type"] = job.gpu_model
        return self._task.options(**opts).remote(job.model_dump_json(), self.resource)

    async def evaluate(self, job: EvalJob, progress=None) -> Evaluation:
        async with self.queue.slot(job.run_key, job.kit, progress):
            retried_after = None
            for attempt in (1, 2):
                ref = self._submit(job)
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
