"""Evaluate through the configured backend, then record here.

`settings.bench_backend` picks it: "pool" (this host's devices) or "ray" (a cluster). The slot
measures without the store; this process, which holds the store, records the Evaluation once
(core.record_evaluation), so a candidate is recorded exactly when its result came back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from pathlib import Path

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.evaluation import core
from evoteam.servers.bench.evaluation.candidates import check_candidate_path
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.formats.kits import discover, heldout_choice
from evoteam.servers.bench.models import Evaluation, Split
from evoteam.servers.bench.scheduling.jobs import EvalJob
from evoteam.servers.knowledge.store import KnowledgeStore

_backends: dict[tuple, object] = {}
_record_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()


def _recording() -> asyncio.Lock:
    """One record at a time per event loop: evaluations that finish together on several slots
    would otherwise each find no active run of the kit and each start one."""
    return _record_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())


def backend_for(settings: Settings):
    """The process's pool or Ray backend for these settings (made once, then reused)."""
    key = (settings.bench_backend, settings.ray_address, str(settings.db), tuple(settings.bench_devices),
           settings.cores_per_eval, settings.ray_resource)
    if key not in _backends:
        if settings.bench_backend == "ray":
            from evoteam.servers.bench.scheduling.ray_backend import RayBackend

            _backends[key] = RayBackend(settings)
        elif settings.bench_backend == "pool":
            from evoteam.servers.bench.scheduling.pool import LocalPool

            _backends[key] = LocalPool(settings)
        else:
            raise DomainError(f"bench backend {settings.bench_backend!r} does not schedule; use pool or ray")
    return _backends[key]


def warm_backend(settings: Settings) -> None:
    """Start the pool's standby runners now (a bench server does when it starts), so that even
    the first evaluation finds its slot's runner ready: CPU slots, and GPU slots when
    EVOTEAM_DEVICES or CUDA_VISIBLE_DEVICES names GPUs (asking nvidia-smi would slow the start).
    Nothing to do for the other backends."""
    if settings.bench_backend != "pool":
        return
    pool = backend_for(settings)
    pool.warm("cpu")
    if any(d.startswith("cuda") for d in settings.bench_devices) or os.environ.get("CUDA_VISIBLE_DEVICES", "").strip():
        with contextlib.suppress(DomainError):
            pool.warm("cuda")


def close_backends() -> None:
    for backend in _backends.values():
        backend.close()
    _backends.clear()


def _source(settings: Settings, candidate_path: str | None, code: str | None) -> str:
    if bool(candidate_path) == bool(code):
        raise DomainError("pass exactly one of candidate_path (a .py file) or code (its source)")
    if code is not None:
        return code
    path = check_candidate_path(settings, candidate_path)
    if path.suffix != ".py":
        raise DomainError("the pool and Ray backends take Python source: pass a .py file, or its code")
    return Path(path).read_text()


def _kit_ref(settings: Settings, given: str | Kit, kit: Kit) -> str:
    """How the slot finds the kit: a Ray node by name in its own kit folders; a slot of this
    host's pool as the caller named it (a trusted folder outside the kit folders, such as an
    OpenEvolve task folder, by its absolute path; the runner checks its trust again)."""
    if settings.bench_backend == "ray":
        return kit.name
    if isinstance(given, str):
        path = Path(given).expanduser()
        return str(path.resolve()) if path.exists() else given
    return kit.name if kit.name in discover(settings) else str(kit.root)


async def evaluate_scheduled(settings: Settings, kit: str | Kit, *, candidate_path: str | None = None,
                             code: str | None = None, candidate_id: str | None = None, split: Split = "dev",
                             store: KnowledgeStore | None = None, run_id: str | None = None,
                             parent_id: str | None = None, documents_used: list[str] | None = None,
                             notes: str = "", owner: str | None = None, run_key: str | None = None,
                             credit_documents: bool = True, progress: core.Progress | None = None,
                             repeats: int = 1) -> Evaluation:
    """Queue one evaluation on the backend, wait for it, and record it in ``store`` (when given),
    as ``core.evaluate_candidate`` does here: identical code pools into one candidate.
    ``progress`` hears where it waits (slots busy, evaluations ahead) and where it runs."""
    the_kit, code = await core.checked_request(settings, kit, split, repeats, store, candidate_path, code,
                                               candidate_id)
    source = _source(settings, candidate_path, code)
    if len(source) > core.MAX_CODE:
        raise DomainError(f"the code is {len(source)} characters; the limit is {core.MAX_CODE}")
    run_id = await core.run_of(store, candidate_id, run_id, the_kit, owner)
    if store is not None:  # before queueing: a refusal costs no device time
        await core.check_run(store, the_kit, parent_id, run_id, notes, documents_used)
    job = EvalJob(kit=_kit_ref(settings, kit, the_kit), kit_hash=the_kit.content_hash, code=source, split=split,
                  repeats=repeats, gpu_model=the_kit.manifest.gpu_model,
                  # Fairness is per run; team_status counts a run's evaluations by this key. Without
                  # run_id the run is resolved only when recording (two evaluations resolving it at
                  # once before any exists would each start a run), so the key is the caller's kit.
                  run_key=run_key or run_id or f"{owner or 'local'}/{the_kit.name}",
                  # The held-out set is this process's (its key): a slot or node measures the
                  # inputs drawn here and never needs the key.
                  heldout=heldout_choice(settings, the_kit) if split != "dev" else None)
    backend = backend_for(settings)
    if settings.bench_backend == "ray":
        result = await backend.evaluate(job, progress, kit_root=the_kit.root)
    else:
        result = await backend.evaluate(job, the_kit.manifest.device, progress)
    if store is not None:
        async with _recording():
            await core.record_evaluation(settings, store, the_kit, result, source, run_id=run_id,
                                         parent_id=parent_id, documents_used=documents_used, notes=notes,
                                         owner=owner, credit=credit_documents, standing=True)
    if progress is not None:
        await progress(1, 1, f"{result.status} on {result.metrics.get('placement', {}).get('device', '?')}")
    return result


async def evaluate_configured(settings: Settings, kit: str | Kit, *, run_key: str | None = None,
                              **kwargs) -> Evaluation:
    """Evaluate where the settings say: here (``core.evaluate_candidate``, the kit's one device
    lock) when ``bench_backend`` is local, else through the pool or the Ray cluster. For callers
    that evaluate many candidates at once, such as OpenEvolve's parallel workers."""
    if settings.bench_backend == "local":
        return await core.evaluate_candidate(settings, kit, **kwargs)
    return await evaluate_scheduled(settings, kit, run_key=run_key, **kwargs)
