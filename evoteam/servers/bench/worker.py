"""The worker process the harness starts: ``python -I -m evoteam.servers.bench.worker RFD WFD``.

Modes (from the first frame the harness sends):

- ``candidate``: confined (see sandbox.py); imports the candidate from its scratch folder and
  calls it on inputs the harness places in its shared area just before each call (``arena``,
  ``tcall``). It never makes inputs itself, and nothing it reports is trusted beyond where its
  outputs lie in memory: the harness times each call and reads the outputs itself.
- ``trusted``: not confined; runs the kit's input generator, reference and baseline. It is a
  different process from the candidate, and it is stopped while the candidate runs.
- ``program``: confined; imports a program kit's candidate and calls one function.
- ``evaluator``: confined like a candidate (it may run the program inside itself); calls a
  program kit's ``evaluate(program_path)``, and tells the harness at once if the program is
  compiled or executed in its own process (``watch_program``).

After each candidate call the worker also checks that ``time.perf_counter``/``perf_counter_ns``
are the originals: a tripwire that flags the crude attempts, not what keeps the score honest.
"""

from __future__ import annotations

import faulthandler
import gc
import importlib.util
import math
import os
import sys
import time
import traceback

# Bound before any candidate code runs.
_PC_NS = time.perf_counter_ns
_PC = time.perf_counter
_GC_DISABLE = gc.disable
_GC_ENABLE = gc.enable


class Failure(Exception):
    def __init__(self, status: str, message: str, flagged: bool = False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.flagged = flagged


def _tail(text: str, limit: int = 1500) -> str:
    return text if len(text) <= limit else "..." + text[-limit:]


def _exc_message(exc: BaseException, memory_mb: int | None) -> str:
    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    head = f"{type(exc).__name__}: {exc}"
    if isinstance(exc, MemoryError) or "out of memory" in str(exc).lower():
        head = (f"the candidate ran out of memory (cap {memory_mb} MiB): {type(exc).__name__}: {exc}. "
                "Allocate less; large temporaries are the usual cause")
    return head + "\n" + _tail(tb)


def _check_clock() -> None:
    if time.perf_counter_ns is not _PC_NS or time.perf_counter is not _PC:
        raise Failure("RUNTIME_ERROR", "the candidate replaced time.perf_counter/perf_counter_ns; timing "
                      "functions must not be patched (this evaluation is flagged)", flagged=True)


# What a pickle loaded in the evaluator may name: data types only (numpy arrays and scalars,
# builtin containers, a few stdlib value types). Any other global (a function, a class with a
# __reduce__ of its own, a dotted name resolved by getattr) could run code of the program's choice.
_PICKLE_DATA = {
    "builtins": {"list", "dict", "set", "frozenset", "tuple", "bytearray", "bytes", "str", "int", "float",
                 "complex", "bool", "slice", "range", "object"},
    "copyreg": {"_reconstructor"},
    "_codecs": {"encode"},
    "collections": {"OrderedDict", "deque", "Counter"},
    "datetime": {"datetime", "date", "time", "timedelta", "timezone"},
    "decimal": {"Decimal"},
    "fractions": {"Fraction"},
    "numpy": {"ndarray", "dtype"},
    "numpy.core.multiarray": {"_reconstruct", "scalar"},
    "numpy._core.multiarray": {"_reconstruct", "scalar"},
    "numpy.core.numeric": {"_frombuffer"},
    "numpy._core.numeric": {"_frombuffer"},
}


def watch_program(program: str, notice_fd: int | None, folders: list[str] | None = None) -> None:
    """Report (one byte on ``notice_fd``) the moment the program at ``program`` is compiled or
    executed in this process: by file, or by its source (a copy, or its text inside other code),
    or any code file from ``folders`` (the program's folder and the evaluator's working folder:
    whatever the program could have written there), or a pickle loaded here names anything but
    data types (what a program in a process of its own may hand back). An audit hook cannot be
    removed, and it fires before the program's first line runs."""
    if notice_fd is None:
        return
    target = os.path.realpath(program)
    with open(target, "rb") as fh:
        source = fh.read()
    source = source.strip()
    text = source.decode("utf-8", "replace")
    # Only a program of some length is looked for inside other code (a one-liner is everywhere).
    look_inside = len(source) >= 40
    name = os.path.basename(target)
    fired: list[bool] = []

    watched = [os.path.realpath(f).rstrip("/") + "/" for f in folders or []]

    def same_file(filename) -> bool:
        if not isinstance(filename, (str, bytes)):
            return False
        filename = os.fsdecode(filename)
        if filename == target or (os.path.basename(filename) == name and os.path.realpath(filename) == target):
            return True
        # only real paths: "<string>", "<frozen ...>" and the like name no file
        return os.path.isabs(filename) and any(os.path.realpath(filename).startswith(f) for f in watched)

    def contains_program(src) -> bool:
        if isinstance(src, (bytes, bytearray)):
            return src.strip() == source or (look_inside and source in src)
        return isinstance(src, str) and (src.strip() == text or (look_inside and text in src))

    def hook(event: str, args: tuple) -> None:
        if fired or event not in ("compile", "exec", "pickle.find_class"):
            return
        if event == "pickle.find_class":
            # Unpickling what the program wrote (OpenEvolve's runners pass results as pickles)
            # runs the program's choice of callables here: one that runs code is the program in
            # this process.
            module, qualname = str(args[0]), str(args[1]) if len(args) > 1 else ""
            hit = qualname not in _PICKLE_DATA.get(module, ())
        elif event == "compile":
            hit = same_file(args[1] if len(args) > 1 else None) or contains_program(args[0])
        else:
            hit = same_file(getattr(args[0], "co_filename", None))
        if hit:
            fired.append(True)
            try:
                os.write(notice_fd, b"P")
            except OSError:
                pass

    sys.addaudithook(hook)


class Worker:
    def __init__(self, init: dict):
        self.init = init
        self.mode = init["mode"]
        self.framework = init.get("framework", "numpy")
        self.device = init.get("device", "cpu")
        self.definition = init.get("definition") or {}
        self.in_names = list((self.definition.get("inputs") or {}).keys())
        self.out_names = list((self.definition.get("outputs") or {}).keys())
        self.memory_mb = (init.get("sandbox") or {}).get("memory_mb")
        self.fns: dict = {}
        self.dps = False
        self.violations_seen = 0
        self.sandbox_desc = "none"
        self.np = None
        self.torch = None
        self.flush_buf = None

    # ------------------------------------------------------------ set-up

    def setup(self) -> dict:
        import numpy as np

        self.np = np
        self._shares = np.shares_memory
        if self.framework == "torch":
            import torch

            self.torch = torch
            if self.device.startswith("cuda"):
                torch.cuda.init()
                self.flush_buf = torch.empty(64 * 1024 * 1024, dtype=torch.int32, device=self.device)
        self.gen_ns: dict = {}
        if self.init.get("inputs_source") and self.mode == "trusted":
            # Only the trusted worker makes inputs; candidates receive them from the harness.
            exec(compile(self.init["inputs_source"], "<kit inputs>", "exec"), self.gen_ns)
        if self.mode == "trusted":
            ref_ns: dict = {}
            exec(compile(self.definition_reference(), "<reference>", "exec"), ref_ns)
            self.fns["reference"] = ref_ns[self.init.get("reference_entry", "run")]
            base = self.init.get("baseline")
            if base:
                fn, dps = self._import_solution(base)
                self.fns["baseline"] = fn
                self.baseline_dps = dps
            else:
                self.fns["baseline"] = self.fns["reference"]
                self.baseline_dps = False
            return {"ok": True}
        if self.mode in ("candidate", "program"):
            # Import what loading a solution needs before the jail: its private /tmp hides an
            # installation that lives there (a venv under /tmp), and Landlock forbids new reads.
            from evoteam.servers.bench import sandbox, solutions  # noqa: F401

            self.sandbox_mod = sandbox
            sb = self.init["sandbox"]
            ident, private_tmp = sandbox.isolate(sb["scratch"], sb.get("uid"), bool(sb.get("private_tmp")))
            self.sandbox_desc = sandbox.confine(sb["scratch"], sb.get("deny", []), sb.get("memory_mb"),
                                                use_landlock=sb.get("landlock", True), private_tmp=private_tmp)
            if ident:
                self.sandbox_desc = ident + "+" + self.sandbox_desc
        if self.mode == "candidate":
            try:
                fn, dps = self._import_solution(self.init["solution"])
            except Failure:
                raise
            except BaseException as exc:  # noqa: BLE001 - anything the import raises is the candidate's
                raise Failure("COMPILE_ERROR", "the candidate failed to import: "
                              + _exc_message(exc, self.memory_mb)) from None
            _check_clock()
            self.fns["candidate"] = fn
            self.dps = dps
            return {"ok": True, "dps": dps, "sandbox": self.sandbox_desc}
        if self.mode == "program":
            try:
                fn, _ = self._import_solution(self.init["solution"])
            except Failure:
                raise
            except BaseException as exc:  # noqa: BLE001
                raise Failure("COMPILE_ERROR", "the program failed to import: "
                              + _exc_message(exc, self.memory_mb)) from None
            self.fns["program"] = fn
            return {"ok": True, "sandbox": self.sandbox_desc}
        if self.mode == "evaluator":
            # Before anything can run the program: from here on, its being compiled or executed
            # in this process is reported to the harness at once (the program cannot take it back).
            watch_program(self.init["program"], self.init.get("notice_fd"), self.init.get("watch"))
            from evoteam.servers.bench import codewatch

            codewatch.watch_loading(self.init.get("notice_fd"), self.init.get("watch") or [],
                                    (self.init.get("sandbox") or {}).get("read") or [])
            for key, value in (self.init.get("env") or {}).items():
                os.environ[key] = value
            path = self.init["evaluator"]
            from evoteam.servers.bench import harness, openevolve, protocol, sandbox  # noqa: F401 - before the jail

            openevolve.install_evaluation_result_shim()  # evaluators may import openevolve.evaluation_result
            sb = self.init.get("sandbox")
            if sb:
                ident, private_tmp = sandbox.isolate(sb["scratch"], sb.get("uid"), bool(sb.get("private_tmp")),
                                                     keep_visible=sb.get("read"))
                self.sandbox_desc = sandbox.confine(sb["scratch"], sb.get("deny", []), sb.get("memory_mb"),
                                                    extra_read=sb.get("read"), use_landlock=sb.get("landlock", True),
                                                    private_tmp=private_tmp, executables=set(sb.get("executables") or ()),
                                                    allow_setsid=bool(sb.get("allow_setsid")), own_uid=sb.get("uid"))
                if ident:
                    self.sandbox_desc = ident + "+" + self.sandbox_desc
                # What it starts (the program, in a process of its own) must not read its memory.
                self.sandbox_desc += "+" + sandbox.undumpable()
            sys.path.insert(0, os.path.dirname(path))
            try:
                spec = importlib.util.spec_from_file_location("kit_evaluator", path)
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
            except BaseException as exc:  # noqa: BLE001 - the kit's evaluator does not load (here)
                raise Failure("RUNTIME_ERROR", "the kit's evaluator failed to load in the bench's sandbox: "
                              + _exc_message(exc, None)) from None
            self.fns["evaluate"] = module.evaluate
            self.evaluator_module = module
            return {"ok": True, "sandbox": self.sandbox_desc}
        raise Failure("RUNTIME_ERROR", f"unknown worker mode {self.mode}")

    def definition_reference(self) -> str:
        return self.init["reference_source"]

    def _import_solution(self, sol: dict):
        from evoteam.servers.bench import solutions  # FlashInfer-Bench solutions: C++/CUDA builds

        try:
            native = solutions.load_native(sol)
        except solutions.BuildFailure as exc:
            raise Failure(exc.status, str(exc)) from None
        if native is not None:
            return native
        folder, rel, function = sol["dir"], sol["file"], sol["function"]
        if folder not in sys.path:
            sys.path.insert(0, folder)
        path = os.path.join(folder, rel)
        if not os.path.isfile(path):
            raise Failure("COMPILE_ERROR", f"the solution file {rel!r} does not exist")
        modname = "candidate_" + os.path.splitext(os.path.basename(rel))[0].replace("-", "_")
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
        fn = getattr(module, function, None)
        if not callable(fn):
            raise Failure("COMPILE_ERROR", f"{rel} does not define a function {function}(); the kit calls "
                          f"{function}(*inputs) with the inputs in the definition's order")
        dps = sol.get("dps")
        if dps is None:
            dps = bool(getattr(module, "DESTINATION_PASSING_STYLE", False))
        return fn, bool(dps)

    # ------------------------------------------------------------ inputs

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

    def _is_tensor(self, x) -> bool:
        return self.torch is not None and isinstance(x, self.torch.Tensor)

    # ------------------------------------------------------------ calling

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

    def _call(self, fn, dps: bool, inputs: list, axes: dict, who: str) -> list:
        if dps:
            outs = self._alloc_outputs(axes)
            fn(*inputs, *outs)
            return outs
        return self._normalise(fn(*inputs), who)

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

    # ------------------------------------------------------------ commands

    # ------------------------------------------------------------ harness-timed calls

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
            _check_clock()
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

    def cmd_program(self, msg: dict):
        try:
            result = self.fns["program"](**(msg.get("kwargs") or {}))
        except BaseException as exc:  # noqa: BLE001
            raise Failure("RUNTIME_ERROR", "the program raised " + _exc_message(exc, self.memory_mb)) from None
        arrays: dict = {}
        encoded = _encode_value(result, arrays, self.np)
        return {"ok": True, "result": encoded}, arrays

    def cmd_evaluate(self, msg: dict):
        from evoteam.servers.bench.openevolve import run_evaluation

        options = self.init.get("options")
        evaluation = run_evaluation(self.evaluator_module, self.init["program"], options or {})
        if options is None:  # the plain contract: the metrics, or the failure
            if evaluation["failure"]:
                return {"ok": False, **evaluation["failure"]}, None
            return {"ok": True, "metrics": evaluation["metrics"]}, None
        return {"ok": True, "evaluation": evaluation}, None


def _encode_value(value, arrays: dict, np):
    if isinstance(value, np.ndarray):
        key = f"a{len(arrays)}"
        if value.dtype.kind not in "fiub":
            raise Failure("INCORRECT_DTYPE", f"the program returned an array of dtype {value.dtype}")
        arrays[key] = value
        return {"__array__": key}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (bool, int, str)) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, (list, tuple)):
        return [_encode_value(v, arrays, np) for v in value]
    if isinstance(value, dict):
        return {str(k): _encode_value(v, arrays, np) for k, v in value.items()}
    raise Failure("INCORRECT_DTYPE", f"the program returned a {type(value).__name__}; return numbers, lists, "
                  "dicts or numpy arrays")


def main() -> None:
    from evoteam.servers.bench import protocol

    rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
    faulthandler.enable()
    from evoteam.servers.bench.sandbox import die_with_parent

    die_with_parent()
    reader = protocol.FrameReader(rfd)
    init, _ = reader.read()
    worker = Worker(init)

    def reply(header: dict, arrays=None) -> None:
        viol = []
        if worker.mode in ("candidate", "program", "evaluator"):
            from evoteam.servers.bench import sandbox

            viol = sandbox.violations[worker.violations_seen:]
            worker.violations_seen = len(sandbox.violations)
        if viol:
            header = dict(header, violations=viol[:5])
        protocol.write_frame(wfd, header, arrays)

    try:
        reply(worker.setup())
    except Failure as f:
        reply({"ok": False, "status": f.status, "message": f.message, "flagged": f.flagged})
        return
    except BaseException as exc:  # noqa: BLE001
        reply({"ok": False, "status": "RUNTIME_ERROR", "message": "worker set-up failed: " + _exc_message(exc, None)})
        return
    handlers = {"check": worker.cmd_check, "stage": worker.cmd_stage, "arena": worker.cmd_arena,
                "tcall": worker.cmd_tcall, "program": worker.cmd_program, "evaluate": worker.cmd_evaluate}
    if worker.mode == "candidate":  # a candidate only ever gets inputs from the harness
        handlers = {"arena": worker.cmd_arena, "tcall": worker.cmd_tcall}
    while True:
        try:
            msg, _ = reader.read()
        except protocol.PeerClosed:
            return
        cmd = msg.get("cmd")
        try:
            header, arrays = handlers[cmd](msg)
            reply(header, arrays)
        except Failure as f:
            reply({"ok": False, "status": f.status, "message": f.message, "flagged": f.flagged})
        except BaseException as exc:  # noqa: BLE001
            reply({"ok": False, "status": "RUNTIME_ERROR", "message": _exc_message(exc, worker.memory_mb)})
        sys.stdout.flush()


if __name__ == "__main__":
    main()
