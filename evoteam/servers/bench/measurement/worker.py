"""The worker process the harness starts: ``python -I -m evoteam.servers.bench.measurement.worker RFD WFD``.

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
  compiled or executed in its own process (``watch_program``, programwatch.py).

The steps live beside it by concept: workerinputs.py (the trusted worker's inputs and reference
outputs), workercalls.py (the timed call), workerbase.py (the failure every part reports).

After each candidate call the worker also checks that ``time.perf_counter``/``perf_counter_ns``
are the originals: a tripwire that flags the crude attempts, not what keeps the score honest.
"""

from __future__ import annotations

import faulthandler
import importlib.util
import math
import os
import sys
import time

from evoteam.servers.bench.confinement.programwatch import watch_program
from evoteam.servers.bench.measurement.workerbase import Failure, _exc_message
from evoteam.servers.bench.measurement.workercalls import TimedCalls
from evoteam.servers.bench.measurement.workerinputs import TrustedSteps

# Bound before any candidate code runs.
_PC_NS = time.perf_counter_ns
_PC = time.perf_counter


def _check_clock() -> None:
    if time.perf_counter_ns is not _PC_NS or time.perf_counter is not _PC:
        raise Failure("RUNTIME_ERROR", "the candidate replaced time.perf_counter/perf_counter_ns; timing "
                      "functions must not be patched (this evaluation is flagged)", flagged=True)


class Worker(TrustedSteps, TimedCalls):
    """One worker process: its mode's set-up, and the commands the harness sends it."""

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
            from evoteam.servers.bench.confinement import identity, sandbox  # noqa: F401
            from evoteam.servers.bench.formats import solutions  # noqa: F401

            self.sandbox_mod = sandbox
            sb = self.init["sandbox"]
            ident, private_tmp = identity.isolate(sb["scratch"], sb.get("uid"), bool(sb.get("private_tmp")))
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
            from evoteam.servers.bench.confinement import codewatch

            codewatch.watch_loading(self.init.get("notice_fd"), self.init.get("watch") or [],
                                    (self.init.get("sandbox") or {}).get("read") or [])
            for key, value in (self.init.get("env") or {}).items():
                os.environ[key] = value
            path = self.init["evaluator"]
            from evoteam.servers.bench.measurement import cascade, harness, program, protocol  # noqa: F401 - before the jail
            from evoteam.servers.bench.formats import openevolve  # noqa: F401 - before the jail
            from evoteam.servers.bench.confinement import identity, sandbox  # noqa: F401 - before the jail

            openevolve.install_evaluation_result_shim()  # evaluators may import openevolve.evaluation_result
            sb = self.init.get("sandbox")
            if sb:
                ident, private_tmp = identity.isolate(sb["scratch"], sb.get("uid"), bool(sb.get("private_tmp")),
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
        from evoteam.servers.bench.formats import solutions  # FlashInfer-Bench solutions: C++/CUDA builds

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

    def _is_tensor(self, x) -> bool:
        return self.torch is not None and isinstance(x, self.torch.Tensor)

    def check_clock(self) -> None:
        _check_clock()

    # ------------------------------------------------------------ program kits

    def cmd_program(self, msg: dict):
        try:
            result = self.fns["program"](**(msg.get("kwargs") or {}))
        except BaseException as exc:  # noqa: BLE001
            raise Failure("RUNTIME_ERROR", "the program raised " + _exc_message(exc, self.memory_mb)) from None
        arrays: dict = {}
        encoded = _encode_value(result, arrays, self.np)
        return {"ok": True, "result": encoded}, arrays

    def cmd_evaluate(self, msg: dict):
        from evoteam.servers.bench.measurement.cascade import run_evaluation

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


def _preload() -> None:
    """What every worker imports anyway, done before its start-up frame: a spare worker
    (sparepool.py) does it while it waits to be used, off an evaluation's path. Nothing here
    depends on the worker's mode, folder or code, and no candidate code exists in the process."""
    import numpy  # noqa: F401
    from evoteam.servers.bench.confinement import sandbox  # noqa: F401
    from evoteam.servers.bench.formats import solutions  # noqa: F401


def _settle(place: dict) -> None:
    """Into the folder the start-up frame names, with the environment that names it (HOME,
    TMPDIR ...): a spare was started before its folder existed (workerproc.folder_env)."""
    if place.get("cwd"):
        os.chdir(place["cwd"])
    os.environ.update({str(k): str(v) for k, v in (place.get("env") or {}).items()})


def main() -> None:
    from evoteam.servers.bench.measurement import protocol

    rfd, wfd = int(sys.argv[1]), int(sys.argv[2])
    faulthandler.enable()
    from evoteam.servers.bench.confinement.sandbox import die_with_parent

    die_with_parent()
    _preload()
    # Ready: what the harness reads first from every worker (a spare is handed out only after
    # it, so no evaluation is ever timed beside a spare's imports: sparepool.py).
    protocol.write_frame(wfd, {"ready": True})
    reader = protocol.FrameReader(rfd)
    init, _ = reader.read()
    _settle(init.get("place") or {})
    worker = Worker(init)

    def reply(header: dict, arrays=None) -> None:
        viol = []
        if worker.mode in ("candidate", "program", "evaluator"):
            from evoteam.servers.bench.confinement import sandbox

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
        reply({"ok": False, "status": "RUNTIME_ERROR",
               "message": "worker set-up failed: " + _exc_message(exc, None, harness=True)})
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
