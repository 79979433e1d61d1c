"""A timed side's steps in its worker: calls on the inputs the harness placed in the shared area,
outputs left where the harness reads them from the stopped process. Nothing here is trusted by
the harness beyond the addresses and sizes it reports, which the harness checks."""

from __future__ import annotations

import gc

from evoteam.servers.bench.measurement.workerbase import Failure, _exc_message

# Bound when the worker starts, before any candidate code runs.
_GC_DISABLE = gc.disable
_GC_ENABLE = gc.enable


class TimedCalls:
    """The shared area and the timed call, for the Worker (worker.py) in ``candidate`` mode."""

    def _normalise(self, result, who: str) -> list:
        names = self.out_names
        if isinstance(result, dict):
            missing = [n for n in names if n not in result]
            if missing:
                raise Failure("INCORRECT_SHAPE", f"{who} returned a dict without {missing}")
            return [result[n] for n in names]
        if isinstance(result, (tuple, list)) and len(names) != 1:
            if len(result) != len(names):
                raise Failure("INCORRECT_SHAPE", f"{who} returned {len(result)} outputs; expected "
                              f"{len(names)} ({', '.join(names)})")
            return list(result)
        if isinstance(result, (tuple, list)) and len(names) == 1 and len(result) == 1 \
                and (self._is_tensor(result[0]) or isinstance(result[0], self.np.ndarray)):
            return [result[0]]
        return [result]

    def _check_aliasing(self, outs: list, inputs: list) -> None:
        for oi, o in enumerate(outs):
            for ii, x in enumerate(inputs):
                if self._is_tensor(o) and self._is_tensor(x):
                    if o.numel() and x.numel():
                        so, sx = o.untyped_storage(), x.untyped_storage()
                        a0, a1 = so.data_ptr(), so.data_ptr() + so.nbytes()
                        b0, b1 = sx.data_ptr(), sx.data_ptr() + sx.nbytes()
                        if a0 < b1 and b0 < a1:
                            self._alias_fail(oi, ii)
                elif isinstance(o, self.np.ndarray) and isinstance(x, self.np.ndarray):
                    if self._shares(o, x):
                        self._alias_fail(oi, ii)

    def _alias_fail(self, oi: int, ii: int) -> None:
        raise Failure("RUNTIME_ERROR", f"output {self.out_names[oi]!r} shares memory with input "
                      f"{self.in_names[ii]!r}; return newly allocated outputs (inputs must stay unchanged)",
                      flagged=True)

    def _sync(self) -> None:
        if self.torch is not None and self.device.startswith("cuda"):
            self.torch.cuda.synchronize()

    def _fn(self, who: str):
        if self.mode == "candidate":
            # A confined worker runs one solution: a candidate's, or the kit's baseline timed under
            # the same confinement as the candidates it is compared with.
            return self.fns["candidate"], self.dps, self.init.get("label", "the candidate")
        if who == "baseline":
            return self.fns["baseline"], self.baseline_dps, "the baseline"
        return self.fns["reference"], False, "the reference"

    def _raw(self, x):
        """(dtype label, shape, contiguous host array of the raw bytes) of an array or tensor."""
        np = self.np
        if self._is_tensor(x):
            t = x.detach().contiguous()
            if t.device.type != "cpu":
                t = t.cpu()
            label = str(t.dtype).replace("torch.", "")
            if label == "bfloat16":
                return label, list(t.shape), t.view(self.torch.int16).numpy()
            return label, list(t.shape), t.numpy()
        a = np.ascontiguousarray(x)
        return a.dtype.name, list(a.shape), a

    def cmd_arena(self, msg: dict):
        """Map the shared input (and output) area the harness fills before each timed call. The
        harness writes each call's inputs there while this process is stopped."""
        import mmap

        np = self.np
        size = int(msg["size"])
        self.arena = mmap.mmap(int(self.init["arena_fd"]), size) if size else None
        self.who = msg.get("who", "candidate")

        def view(spec):
            label = spec["dtype"]
            raw = np.frombuffer(self.arena, dtype=np.uint8, count=int(spec["nbytes"]), offset=int(spec["offset"]))
            if self.torch is not None:
                t = self.torch.frombuffer(self.arena, dtype=self.torch.uint8, count=int(spec["nbytes"]),
                                          offset=int(spec["offset"])) if spec["nbytes"] else self.torch.empty(0, dtype=self.torch.uint8)
                return t.view(getattr(self.torch, label)).reshape(spec["shape"])
            return raw.view(np.dtype(label)).reshape(spec["shape"])

        self.arena_inputs = [(spec, view(spec) if "offset" in spec else spec.get("scalar"))
                             for spec in msg["inputs"]]
        self.arena_outputs = [view(spec) for spec in msg.get("outputs") or []]
        return {"ok": True}, None

    def cmd_tcall(self, msg: dict):
        """One call the harness times from outside: inputs from the arena, outputs left in this
        process's memory (the harness reads them after stopping it). Nothing here is trusted by
        the harness beyond the addresses and sizes, which it checks."""
        fn, dps, who = self._fn(self.who)
        # The harness read the last call's outputs while this process was stopped: let them go
        # before this call allocates, so that its outputs land where the last ones did (as in a
        # plain loop of calls) instead of alternating between two blocks of memory.
        self.held = None
        gpu = self.torch is not None and self.device.startswith("cuda")
        inputs = []
        for spec, value in self.arena_inputs:
            if gpu and self._is_tensor(value):
                value = value.to(self.device, non_blocking=False)
            inputs.append(value)
        outs_dev = self.arena_outputs
        if gpu:
            self.flush_buf.zero_()
            outs_dev = [o.to(self.device) for o in self.arena_outputs]
        _GC_DISABLE()
        try:
            if msg.get("calibrate"):
                outs = outs_dev
            elif dps:
                outs = outs_dev
                self._call_dps(fn, inputs, outs)
            elif self.torch is not None:
                with self.torch.no_grad():
                    outs = self._normalise(fn(*inputs), who)
            else:
                outs = self._normalise(fn(*inputs), who)
            self._sync()
        except Failure:
            raise
        except BaseException as exc:  # noqa: BLE001
            raise Failure("RUNTIME_ERROR", f"{who} raised " + _exc_message(exc, self.memory_mb)) from None
        finally:
            _GC_ENABLE()
        meta, held = [], []
        for i, o in enumerate(outs):
            if self._is_tensor(o) or isinstance(o, self.np.ndarray):
                label, shape, data = self._raw(o)
                held.append(data)
                meta.append({"dtype": label, "shape": shape, "addr": int(data.ctypes.data),
                             "nbytes": int(data.nbytes)})
            elif isinstance(o, (int, float)) and not isinstance(o, bool):
                meta.append({"dtype": "python_scalar", "shape": [], "value": float(o)})
            else:
                raise Failure("INCORRECT_DTYPE", f"{who} output {i} is a {type(o).__name__}, not an array")
        self.held = held  # keeps the memory the harness is about to read alive
        arrays = {f"o{i}": d.reshape(-1).view(self.np.uint8) for i, d in enumerate(held)} if msg.get("send") else None
        if self.mode == "candidate":
            self.check_clock()
            if not dps:
                arena_in = [v for _, v in self.arena_inputs if isinstance(v, self.np.ndarray)]
                self._check_aliasing([o for o in outs if isinstance(o, self.np.ndarray)], arena_in)
        return {"ok": True, "outputs": meta}, arrays

    def _call_dps(self, fn, inputs, outs) -> None:
        if self.torch is not None:
            with self.torch.no_grad():
                fn(*inputs, *outs)
        else:
            fn(*inputs, *outs)
