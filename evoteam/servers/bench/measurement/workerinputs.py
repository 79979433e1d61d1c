"""The trusted worker's steps: the kit's inputs for a seed, written into the staging area the
harness maps, and the reference's outputs on them (never timed, never confined: kit code)."""

from __future__ import annotations

import os

from evoteam.servers.bench.measurement.workerbase import Failure, _exc_message


class TrustedSteps:
    """Inputs and reference outputs, for the Worker (worker.py) in ``trusted`` mode."""

    def make_inputs(self, axes: dict, scalars: dict, seed: int) -> list:
        gen = self.gen_ns.get("make_inputs")
        if gen is not None:
            values = gen(dict(axes), int(seed), self.device)
        else:
            values = self._default_inputs(axes, seed)
        for name, value in scalars.items():
            values[name] = value
        missing = [n for n in self.in_names if n not in values]
        if missing:
            raise Failure("RUNTIME_ERROR", f"the kit's input generator did not produce {missing}")
        return [values[n] for n in self.in_names]

    def _default_inputs(self, axes: dict, seed: int) -> dict:
        out = {}
        specs = self.definition["inputs"]
        if self.framework == "torch":
            torch = self.torch
            g = torch.Generator(device=self.device).manual_seed(int(seed) & ((1 << 63) - 1))
            for name, spec in specs.items():
                shape = [axes[a] for a in spec["shape"]] if spec.get("shape") is not None else []
                dtype = getattr(torch, spec["dtype"])
                if dtype.is_floating_point:
                    out[name] = torch.randn(shape, generator=g, device=self.device, dtype=torch.float32).to(dtype)
                elif dtype == torch.bool:
                    out[name] = torch.randint(0, 2, shape, generator=g, device=self.device).bool()
                else:
                    out[name] = torch.randint(0, 100, shape, generator=g, device=self.device, dtype=dtype)
            return out
        np = self.np
        rng = np.random.default_rng(int(seed))
        for name, spec in specs.items():
            shape = tuple(axes[a] for a in spec["shape"]) if spec.get("shape") is not None else ()
            dtype = np.dtype(spec["dtype"])
            if dtype.kind == "f":
                out[name] = rng.standard_normal(shape, dtype=np.float64).astype(dtype)
            elif dtype.kind == "b":
                out[name] = rng.random(shape) < 0.5
            else:
                out[name] = rng.integers(0, 100, size=shape).astype(dtype)
        return out

    def _alloc_outputs(self, axes: dict) -> list:
        outs = []
        for name in self.out_names:
            spec = self.definition["outputs"][name]
            shape = [axes[a] for a in spec["shape"]] if spec.get("shape") is not None else []
            if self.framework == "torch":
                dtype = getattr(self.torch, spec["dtype"])
                t = self.torch.empty(shape, dtype=dtype, device=self.device)
                if dtype.is_floating_point:
                    t.fill_(float("nan"))
                outs.append(t)
            else:
                dtype = self.np.dtype(spec["dtype"])
                a = self.np.empty(shape, dtype=dtype)
                if dtype.kind == "f":
                    a.fill(self.np.nan)
                outs.append(a)
        return outs

    def _call(self, fn, dps: bool, inputs: list, axes: dict, who: str) -> list:
        if dps:
            outs = self._alloc_outputs(axes)
            fn(*inputs, *outs)
            return outs
        return self._normalise(fn(*inputs), who)

    def _array_spec(self, v, offsets: list, off: int) -> tuple[dict, int]:
        """Where an input or output array goes in the staging area: (its spec, the next free offset).
        Each array starts on a 64-byte boundary."""
        label, shape, data = self._raw(v)
        flat = data.reshape(-1).view(self.np.uint8)
        offsets.append((off, flat))
        return {"dtype": label, "shape": shape, "offset": off, "nbytes": int(flat.nbytes)}, \
            (off + int(flat.nbytes) + 63) // 64 * 64

    def _write_staging(self, placed: list, end: int) -> int:
        """Copy the placed arrays into the staging area the harness maps (grown when needed)."""
        import mmap

        fd = int(self.init["staging_fd"])
        size = max(end, 64)
        if size > getattr(self, "staging_size", 0):
            os.ftruncate(fd, size)
            self.staging = mmap.mmap(fd, size)
            self.staging_size = size
        view = self.np.frombuffer(self.staging, dtype=self.np.uint8)
        for start, flat in placed:
            view[start:start + flat.nbytes] = flat
        del view
        return size

    def _stage_inputs(self, values: list, placed: list, off: int) -> tuple[list, int]:
        specs = []
        for name, v in zip(self.in_names, values):
            if self._is_tensor(v) or isinstance(v, self.np.ndarray):
                spec, off = self._array_spec(v, placed, off)
                specs.append(dict(spec, name=name))
            else:
                specs.append({"name": name, "scalar": v})
        return specs, off

    def cmd_stage(self, msg: dict):
        """Trusted worker: the inputs of several seeds at once, written into the staging area the
        harness maps (one request per round, and no input byte goes through a pipe). The reply
        says where each array lies."""
        batches, placed, off = [], [], 0
        for seed in msg["seeds"]:
            specs, off = self._stage_inputs(self.make_inputs(msg["axes"], msg.get("scalars") or {}, seed), placed, off)
            batches.append(specs)
        return {"ok": True, "batches": batches, "size": self._write_staging(placed, off)}, None

    # Output dtypes the harness decodes as they are; the reference's others go as float64.
    _PLAIN = {"float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"}

    def cmd_check(self, msg: dict):
        """Trusted worker: the inputs of one seed and the reference's outputs on them, both
        written into the staging area (one request; nothing goes through a pipe). The inputs are
        copied there before the reference runs, so a reference that writes into its inputs cannot
        change what the candidate gets."""
        values = self.make_inputs(msg["axes"], msg.get("scalars") or {}, msg["seed"])
        placed: list = []
        specs, off = self._stage_inputs(values, placed, 0)
        self._write_staging(placed, off)  # copied now: the reference may write into its arrays
        placed = []
        fn, dps, who = self._fn("reference")
        self._sync()
        try:
            if self.torch is not None:
                with self.torch.no_grad():
                    outs = self._call(fn, dps, values, msg["axes"], who)
            else:
                outs = self._call(fn, dps, values, msg["axes"], who)
            self._sync()
        except Failure:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise Failure("RUNTIME_ERROR", f"{who} raised " + _exc_message(exc, self.memory_mb)) from None
        out_specs = []
        for i, o in enumerate(outs):
            name = self.out_names[i] if i < len(self.out_names) else f"out{i}"
            if isinstance(o, (int, float)) and not isinstance(o, bool):
                out_specs.append({"name": name, "dtype": "python_scalar", "shape": [], "value": float(o)})
                continue
            if self._is_tensor(o):
                if str(o.dtype).replace("torch.", "") not in self._PLAIN:
                    o = o.detach().to(self.torch.float64)
            elif isinstance(o, self.np.ndarray):
                if o.dtype.kind not in "fiub":
                    raise Failure("INCORRECT_DTYPE", f"{who} output {name!r} has dtype {o.dtype}")
                if o.dtype.name not in self._PLAIN:
                    o = o.astype(self.np.float64)
            else:
                raise Failure("INCORRECT_DTYPE", f"{who} output {name!r} is a {type(o).__name__}, not an array")
            spec, off = self._array_spec(o, placed, off)
            out_specs.append(dict(spec, name=name))
        size = self._write_staging(placed, off)
        return {"ok": True, "inputs": specs, "outputs": out_specs, "size": size}, None
