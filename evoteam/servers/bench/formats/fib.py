"""FlashInfer-Bench's formats and rules: trace sets, defaults, workload inputs, environment.

A trace-set root holds ``definitions/<op_type>/<name>.json``, ``workloads/<op_type>/<name>.jsonl``
(one workload trace per line), ``solutions/<author>/<op_type>/<name>/<solution>.json`` and the
``blob/`` files that ``safetensors`` workload inputs name (paths relative to the root). Every
definition becomes a kernel kit named after it; its solutions can be run by name. A ``kit.json``
in the root whose ``name`` is a definition's name, or ``kits/<definition>.json``, overrides that
kit's manifest fields (goal, timeouts, baseline, tolerance, ...).

Defaults follow FIB's: atol = rtol = 1e-2, a destination-passing Solution unless it says
otherwise, and the device the reference needs where it exists (a torch reference runs on the CPU
when no GPU is visible, and its timings are then marked as not representative).
"""

from __future__ import annotations

import json
import platform
import struct
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evoteam.errors import DomainError
from evoteam.servers.bench.formats.gpuprobe import cuda_available
from evoteam.servers.bench.models import Definition, Solution, Tolerance, Workload

FIB_ATOL = 1e-2
FIB_RTOL = 1e-2
FIB_STARTUP_S = 300.0  # FIB's per-solution timeout; compiling a C++/CUDA solution needs it
WORKLOAD_AXIS = "__fib_workload__"  # which dev workload an input request is for (an index)
CPU_TIMING_NOTE = ("FlashInfer-Bench runs torch definitions on a CUDA GPU; none is visible, so this runs on the "
                   "CPU: correctness holds, timings are not representative of the GPU")
SAFETENSORS_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
                      "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8", "BOOL": "bool",
                      "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


# ---------------------------------------------------------------- devices and defaults


def default_device(reference: str) -> tuple[str, str, str | None]:
    """(device, framework, timing note) for a definition's reference: a torch reference runs on
    CUDA where a GPU is visible, else on the CPU with a note that timings are not representative."""
    if "torch" not in reference:
        return "cpu", "numpy", None
    ok, _ = cuda_available()
    return ("cuda", "torch", None) if ok else ("cpu", "torch", CPU_TIMING_NOTE)


def fib_tolerance() -> Tolerance:
    return Tolerance(atol=FIB_ATOL, rtol=FIB_RTOL)


# ---------------------------------------------------------------- trace sets


def is_trace_set(path: Path) -> bool:
    return (path / "definitions").is_dir()


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise DomainError(f"{path}: not readable JSON ({exc})") from exc


class TraceSet:
    """The definitions, workloads and solutions of one trace-set root (files are read once)."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.definitions: dict[str, tuple[Path, Definition]] = {}
        self.problems: list[str] = []
        for path in sorted((self.root / "definitions").rglob("*.json")):
            try:
                d = Definition(**_load_json(path))
            except (DomainError, ValidationError, TypeError) as exc:
                self.problems.append(f"{path.relative_to(self.root)}: {exc}")
                continue
            self.definitions.setdefault(d.name, (path, d))
        self.workload_files: dict[str, list[Path]] = {}
        for path in sorted((self.root / "workloads").rglob("*.jsonl")):
            for name in self._definitions_in(path):
                self.workload_files.setdefault(name, []).append(path)
        self.solution_files: dict[str, list[Path]] = {}
        for path in sorted((self.root / "solutions").rglob("*.json")):
            try:
                sol = Solution(**_load_json(path))
            except (DomainError, ValidationError, TypeError) as exc:
                self.problems.append(f"{path.relative_to(self.root)}: {exc}")
                continue
            self.solution_files.setdefault(sol.definition or "", []).append(path)

    def _definitions_in(self, path: Path) -> set[str]:
        names = set()
        try:
            for line in path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    names.add(str(row.get("definition") or path.stem) if isinstance(row, dict) else path.stem)
        except (OSError, ValueError):
            names.add(path.stem)  # reported as a kit problem when the workloads are read
        return names

    def override(self, name: str) -> dict:
        for path in (self.root / "kits" / f"{name}.json", self.root / "kit.json"):
            if path.is_file():
                data = _load_json(path)
                if path.name != "kit.json" or data.get("name") == name:
                    return data
        return {}


# ---------------------------------------------------------------- workload inputs


def safetensors_header(path: Path) -> dict:
    """The header of a safetensors file (tensor name -> dtype, shape), read without torch."""
    with open(path, "rb") as fh:
        raw = fh.read(8)
        if len(raw) < 8:
            raise ValueError("the file is too short to be safetensors")
        (n,) = struct.unpack("<Q", raw)
        if n > 100 * 1024 * 1024:
            raise ValueError("the safetensors header is implausibly large")
        header = json.loads(fh.read(n))
    header.pop("__metadata__", None)
    return header


def resolve_blob(root: Path, rel: str) -> Path:
    """A blob path from a workload, resolved against the trace-set root; never outside it."""
    path = (root / rel).resolve()
    if root.resolve() not in path.parents:
        raise ValueError(f"{rel!r} points outside the trace set root")
    return path


def workload_problem(kit, w: Workload, axes: dict[str, int]) -> str | None:
    """Why this workload's inputs cannot be built (naming the workload and input), or None."""
    d = kit.definition
    for name, spec in w.inputs.items():
        if name not in d.inputs:
            return f"workload {w.uuid}: input {name!r} is not an input of the definition"
        tensor = d.inputs[name]
        if spec.type == "scalar" and tensor.shape is not None:
            return f"workload {w.uuid}: input {name!r} is a scalar but the definition expects a tensor"
        if spec.type != "safetensors":
            continue
        if tensor.shape is None:
            return f"workload {w.uuid}: input {name!r} is safetensors but the definition expects a scalar"
        if not spec.path or not spec.tensor_key:
            return f"workload {w.uuid}: input {name!r} needs both path and tensor_key"
        try:
            path = resolve_blob(kit.root, spec.path)
            entry = safetensors_header(path).get(spec.tensor_key)
        except (OSError, ValueError) as exc:
            return f"workload {w.uuid}: input {name!r}: cannot read {spec.path} ({exc})"
        if entry is None:
            return f"workload {w.uuid}: input {name!r}: {spec.path} has no tensor {spec.tensor_key!r}"
        try:
            shape = d.shape_of(tensor, axes)
        except KeyError as exc:
            return f"workload {w.uuid}: input {name!r}: the workload does not bind the axis {exc}"
        if list(entry.get("shape", [])) != list(shape):
            return (f"workload {w.uuid}: input {name!r}: {spec.path}:{spec.tensor_key} has shape "
                    f"{entry.get('shape')}, the definition expects {list(shape)}")
        dtype = SAFETENSORS_DTYPES.get(str(entry.get("dtype")), str(entry.get("dtype")))
        if dtype != tensor.dtype:
            return (f"workload {w.uuid}: input {name!r}: {spec.path}:{spec.tensor_key} has dtype {dtype}, the "
                    f"definition expects {tensor.dtype}")
    for name, tensor in d.inputs.items():
        if tensor.shape is None:
            continue
        try:
            d.shape_of(tensor, axes)
        except KeyError as exc:
            return f"workload {w.uuid}: input {name!r} needs the variable axis {exc}, which the workload does not bind"
    return None


def inputs_source(kit, workloads: list[Workload]) -> str:
    """The Python source of a ``make_inputs`` that builds FIB workload inputs in a worker.

    Blobs are read when the source runs, i.e. before a candidate worker is confined (the
    candidate may not read the kit's folder afterwards); each call hands out fresh copies."""
    d = kit.definition
    plan: dict[str, Any] = {"inputs": {n: {"shape": s.shape, "dtype": s.dtype} for n, s in d.inputs.items()},
                            "workloads": []}
    for w in workloads:
        if workload_problem(kit, w, d.resolve_axes(w.axes)):
            plan["workloads"].append({})  # never run: the evaluation reports it as a kit problem
            continue
        plan["workloads"].append(
            {n: ({"type": "safetensors", "path": str(resolve_blob(kit.root, s.path)), "key": s.tensor_key}
                 if s.type == "safetensors" else {"type": s.type, "value": s.value})
             for n, s in w.inputs.items()})
    return ("from evoteam.servers.bench.formats.fib_inputs import WorkloadInputs as _WorkloadInputs\n"
            f"_plan = _WorkloadInputs({json.dumps(plan)!r}, {WORKLOAD_AXIS!r})\n"
            "def make_inputs(axes, seed, device):\n"
            "    return _plan.make(axes, seed, device)\n")


# ---------------------------------------------------------------- environment and export


def environment(device: str) -> dict:
    """FIB's Environment for this machine: hardware name and library versions."""
    libs: dict[str, str] = {}
    hardware = platform.processor() or platform.machine() or "cpu"
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    hardware = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import torch

        libs["torch"] = torch.__version__
        if torch.version.cuda:
            libs["cuda"] = str(torch.version.cuda)
        if device.startswith("cuda") and torch.cuda.is_available():
            hardware = torch.cuda.get_device_name()
    except Exception:  # noqa: BLE001 - torch is optional for the environment record
        pass
    try:
        import triton

        libs["triton"] = str(triton.__version__)
    except Exception:  # noqa: BLE001
        pass
    return {"hardware": hardware, "libs": libs}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()
