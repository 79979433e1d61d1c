"""One evaluation as it travels to a slot: the job, its answer, and where it ran.

The job names its kit by name *and* content hash: a worker evaluates only a kit of its own trusted
folders whose hash is the caller's, so a node with an edited or stale copy refuses instead of
scoring a different task.
"""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from typing import Any

from pydantic import BaseModel, Field

from evoteam.errors import DomainError
from evoteam.servers.bench.models import Evaluation, HeldoutChoice, Split


class EvalJob(BaseModel):
    """What a slot needs to evaluate one candidate without the store."""

    kit: str
    kit_hash: str
    code: str
    split: Split = "dev"
    # Kernel kits: 2 or more in copies (copies.evaluation_rounds); program kits: evaluator runs (core.evaluate_candidate).
    repeats: int = Field(default=1, ge=1, le=20)
    # The slot this evaluation holds ("cuda:1", "cpu:0"): its lock, and for a GPU its device.
    device: str | None = None
    cores: list[int] = Field(default_factory=list)
    # A GPU slot's physical GPU (what nvidia-smi and CUDA_VISIBLE_DEVICES call it): the runner
    # sees only that GPU, so a candidate's plain "cuda" is its slot's device.
    gpu_id: str | None = None
    # The kit's GPU model (Ray's accelerator type): a Ray task asks for a node of that type.
    gpu_model: str | None = None
    # Fairness key: evaluations are handed out round-robin across these (a run, or a caller).
    run_key: str = ""
    # The held-out inputs the caller drew with its key (split heldout or all): a node measures
    # the caller's held-out set, never holding the key itself.
    heldout: HeldoutChoice | None = None
    # Set by a Ray node's own task, never taken from the caller: the node's cache folder where it
    # unpacked the caller's shipped kit (kitship.py).
    kit_dir: str | None = None


class SlotSettings(BaseModel):
    """The part of the caller's settings a local slot needs: where kits and bench state live.
    Never tokens, keys or the knowledge server's address (a slot records nothing)."""

    db: str
    kits_dirs: list[str]
    project_kits_dirs: list[str] = Field(default_factory=list)


class SlotReply(BaseModel):
    """A slot runner's one line on stdout."""

    ok: bool
    evaluation: Evaluation | None = None
    # The rounds' per-workload samples: Evaluation leaves them out of its JSON (they are the
    # store's business, not an agent's), yet the caller records them so measurements pool.
    samples: dict[str, list[float]] = Field(default_factory=dict)
    # Likewise each unresolved round's possible ratios: without them the store's interval for a
    # slot's or a node's measurement was narrower than the measurement's own.
    sample_ranges: dict[str, tuple[list[float], list[float]]] = Field(default_factory=dict)
    error: str = ""
    refused: bool = False  # the job was refused (kit hash, unknown kit): retrying elsewhere is pointless


    def result(self) -> Evaluation | None:
        """The evaluation with its samples (and their ranges) back in place."""
        if self.evaluation is not None and self.samples:
            self.evaluation.samples = self.samples
            self.evaluation.sample_ranges = self.sample_ranges
        return self.evaluation


class KitMismatch(DomainError):
    """The worker's copy of a kit is not the caller's."""


def device_fingerprint(device: str | None, gpu_id: str | None = None) -> dict[str, Any]:
    """What the result was measured on: host, CPU model, pinned cores, and for a GPU its model,
    driver and clocks (from nvidia-smi, where there is one)."""
    fp: dict[str, Any] = {"host": socket.gethostname(), "machine": platform.machine()}
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    fp["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        fp["cores"] = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    if device and device.startswith("cuda"):
        index = gpu_id or (device.split(":", 1)[1] if ":" in device else "0")
        try:
            out = subprocess.run(
                ["nvidia-smi", f"--id={index}", "--query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,uuid",
                 "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10, check=True).stdout
            name, driver, sm, mem, uuid = [p.strip() for p in out.strip().split(",")[:5]]
            fp.update(gpu=name, driver=driver, sm_clock_mhz=sm, mem_clock_mhz=mem, gpu_uuid=uuid)
        except (OSError, subprocess.SubprocessError, ValueError):
            fp["gpu"] = "unknown (nvidia-smi unavailable)"
    return fp
