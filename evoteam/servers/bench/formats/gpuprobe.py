"""Whether a CUDA GPU can run a kit here, learnt as cheaply as possible.

Importing torch takes a second (numpy with it), so "no GPU here" is first read from the driver's
traces on the machine; only where a GPU may be visible is torch asked. No pydantic here: kit
listings that answer from the kit index (kitindex.py) check the same facts.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import sys
from pathlib import Path


def gpu_driver_present() -> bool:
    """False only where no GPU can be visible to torch, known without importing it: on Linux, no
    NVIDIA driver's GPU list or device node, no ROCm device and no WSL GPU device (/dev/dxg), or
    CUDA_VISIBLE_DEVICES empty."""
    if os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
        return False
    if sys.platform != "linux":
        return True  # no cheap way to know: ask torch
    gpus = Path("/proc/driver/nvidia/gpus")
    return (gpus.is_dir() and any(gpus.iterdir())) or bool(glob.glob("/dev/nvidia[0-9]*")) or \
        os.path.exists("/dev/kfd") or os.path.exists("/dev/dxg")


def cuda_available() -> tuple[bool, str | None]:
    """(whether torch sees a CUDA GPU here, why not): FIB's defaults and kernel kits' requirements
    both depend on it."""
    if importlib.util.find_spec("torch") is None:
        return False, "needs torch with CUDA; torch is not installed"
    if not gpu_driver_present():  # importing torch takes a second (numpy with it): not to learn "no"
        return False, "needs a CUDA GPU; none is visible on this machine"
    try:
        import torch
    except Exception as exc:  # pragma: no cover - broken installs
        return False, f"torch fails to import: {exc}"
    if not torch.cuda.is_available():
        return False, "needs a CUDA GPU; none is visible on this machine"
    return True, None
