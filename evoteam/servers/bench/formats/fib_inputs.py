"""Building a FlashInfer-Bench workload's inputs inside a worker.

FIB's rules: ``scalar`` inputs are literal values; ``safetensors`` inputs are tensors from a file
(resolved against the trace-set root by the harness before this runs); every other input is
``random``: floats from the standard normal, 8-bit floats clamped to [-2, 2], booleans 0/1,
integers uniform in [-1024, 1024) ([-128, 128) for int8). Random values come from the seed the
harness chooses, so the trusted and the candidate worker build the same inputs.

Blob tensors are loaded when the plan is created (before a candidate worker is confined); every
request gets fresh copies, so a candidate that writes into its inputs changes nothing later.
"""

from __future__ import annotations

import json

_INT_RANGES = {"int8": (-128, 128), "int16": (-1024, 1024), "int32": (-1024, 1024), "int64": (-1024, 1024)}


class WorkloadInputs:
    def __init__(self, plan_json: str, workload_axis: str):
        import torch

        self.torch = torch
        plan = json.loads(plan_json)
        self.inputs: dict = plan["inputs"]
        self.workloads: list[dict] = plan["workloads"]
        self.axis = workload_axis
        self.blobs: dict[tuple[int, str], object] = {}
        for i, specs in enumerate(self.workloads):
            for name, spec in specs.items():
                if spec["type"] == "safetensors":
                    self.blobs[(i, name)] = self._load(spec["path"], spec["key"])

    def _load(self, path: str, key: str):
        from safetensors import safe_open

        with safe_open(path, framework="pt", device="cpu") as fh:
            return fh.get_tensor(key).contiguous()

    def _dtype(self, name: str):
        if name == "float4_e2m1":
            return self.torch.float4_e2m1fn_x2
        return getattr(self.torch, name)

    def _random(self, shape: list[int], dtype_name: str, g, device: str):
        torch = self.torch
        dtype = self._dtype(dtype_name)
        if dtype in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
            t = torch.randn(shape, generator=g, dtype=torch.float32).to(dtype)
        elif dtype_name.startswith("float8") or dtype_name.startswith("float4"):
            t = torch.randn(shape, generator=g, dtype=torch.float32).clamp_(-2.0, 2.0).to(dtype)
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=g).bool()
        else:
            lo, hi = _INT_RANGES.get(dtype_name, (-1024, 1024))
            t = torch.randint(lo, hi, shape, generator=g, dtype=dtype)
        return t.to(device)

    def make(self, axes: dict, seed: int, device: str) -> dict:
        torch = self.torch
        g = torch.Generator(device="cpu").manual_seed(int(seed) & ((1 << 63) - 1))
        index = axes.get(self.axis)
        specs = self.workloads[index] if isinstance(index, int) and 0 <= index < len(self.workloads) else {}
        out = {}
        for name, tensor in self.inputs.items():
            spec = specs.get(name, {"type": "random"})
            if spec["type"] == "scalar":
                out[name] = spec["value"]
            elif spec["type"] == "safetensors":
                out[name] = self.blobs[(index, name)].clone().to(device)
            elif tensor["shape"] is None:
                out[name] = self._random([], tensor["dtype"], g, "cpu").item()
            else:
                shape = [int(axes[a]) for a in tensor["shape"]]
                out[name] = self._random(shape, tensor["dtype"], g, device)
        return out
