"""FlashInfer-Bench Solutions as candidates: materialise, build, resolve the entry point.

The harness side (``materialise``) writes a Solution's sources into the candidate's scratch folder
with the Solution's spec beside them (``.fib_solution.json``). The worker side (``load_native``)
runs inside the confined candidate process: it compiles C++/CUDA sources there (torch
``cpp_extension`` for ``binding: torch``; tvm-ffi, FIB's default binding, where ``tvm_ffi`` is
installed), returns the entry point and whether it is destination-passing (FIB's default: yes).
Python and Triton solutions are imported like any candidate file. A build failure is a
``BuildFailure`` carrying the compiler's own message; a CUDA or Triton solution on a machine
without a CUDA GPU fails with a plain "needs CUDA".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

SPEC_FILE = ".fib_solution.json"
NATIVE_SUFFIXES = {".cu", ".cpp", ".cc", ".cxx", ".c"}
MESSAGE_LIMIT = 4000


class BuildFailure(Exception):
    """The solution cannot be built or loaded here; ``str()`` says why, in one message."""

    status = "COMPILE_ERROR"


# ---------------------------------------------------------------- harness side


def parse(text: str, origin: str):
    """A Solution from its JSON text, or a DomainError naming ``origin``."""
    from pydantic import ValidationError  # here, not at the top: workers import this module

    from evoteam.errors import DomainError
    from evoteam.servers.bench.models import Solution

    try:
        return Solution(**json.loads(text))
    except (ValueError, ValidationError, TypeError) as exc:
        raise DomainError(f"{origin} is not a FlashInfer-Bench solution: {exc}") from exc


def materialise(sol, folder: Path, default_function: str) -> tuple[str, str, bool]:
    """Write the solution's sources and spec into ``folder``; returns (entry file, function, dps)."""
    from evoteam.errors import DomainError

    rel, _, function = sol.spec.entry_point.partition("::")
    if rel not in {s.path for s in sol.sources}:
        raise DomainError(f"solution {sol.name}: the entry file {rel!r} of {sol.spec.entry_point!r} is not among "
                          "its sources")
    for src in sol.sources:
        dest = folder / src.path
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(src.content)
        except (OSError, ValueError) as exc:  # clashing paths ("a" and "a/b"), a NUL in a name
            raise DomainError(f"solution {sol.name}: source {src.path!r} cannot be written: "
                              f"{exc.strerror if isinstance(exc, OSError) else exc}; give each source "
                              "its own plain relative path") from None
    (folder / SPEC_FILE).write_text(json.dumps({"name": sol.name, **sol.spec.model_dump(mode="json")}))
    return rel, function or default_function, sol.spec.destination_passing_style


def from_candidate(code: str, *, definition: str, name: str, author: str, entry: str, device: str):
    """A FIB Solution for a recorded candidate: the Solution itself when the candidate was one,
    else a Python solution with the candidate's file as ``main.py``."""
    from pydantic import ValidationError

    from evoteam.passingstyle import declares_dps
    from evoteam.servers.bench.models import Solution

    text = code.lstrip()
    if text.startswith("{"):
        try:
            sol = Solution(**json.loads(text))
            return sol.model_copy(update={"definition": definition, "author": sol.author or author})
        except (ValueError, ValidationError, TypeError):
            pass
    return Solution(name=name, definition=definition, author=author, spec={
        "language": "python", "target_hardware": ["cuda" if device.startswith("cuda") else "cpu"],
        "entry_point": f"main.py::{entry}", "destination_passing_style": declares_dps(code)},
        sources=[{"path": "main.py", "content": code}])


# ---------------------------------------------------------------- worker side


def _spec(folder: str) -> dict | None:
    path = os.path.join(folder, SPEC_FILE)
    if not os.path.isfile(path):
        return None
    with open(path) as fh:
        return json.load(fh)


def _cuda_visible() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def _tail(text: str) -> str:
    # The compiler's diagnostics, without the (long) command lines the build tool echoes.
    text = re.sub(r"\[\d+/\d+\][^\n]*", "", text)
    lines = [ln for ln in text.strip().splitlines()
             if not ln.lstrip().startswith(("c++ ", "g++ ", "gcc ", "nvcc ", "/usr/bin/", "[", "FAILED:"))]
    text = "\n".join(lines).strip()
    return text if len(text) <= MESSAGE_LIMIT else "..." + text[-MESSAGE_LIMIT:]


def load_native(sol: dict):
    """(callable, dps) for a compiled solution, None for a Python one (imported as usual).
    Raises BuildFailure for a build that fails or cannot happen here."""
    spec = _spec(sol["dir"])
    if spec is None:
        return None
    language = spec.get("language", "python")
    if language in ("triton", "cuda", "tilelang") and not _cuda_visible():
        raise BuildFailure(f"needs CUDA: this is a {language} solution and no CUDA GPU is visible on this machine; "
                           "evaluate it where one is (a python or cpp solution runs on the CPU)")
    if language not in ("cpp", "cuda"):
        if language not in ("python", "triton"):
            raise BuildFailure(f"solutions in {language!r} are not supported (python, triton, cpp and cuda are)")
        return None
    folder = sol["dir"]
    sources = sorted(str(p) for p in Path(folder).rglob("*") if p.suffix in NATIVE_SUFFIXES and p.is_file())
    if not sources:
        raise BuildFailure("the solution has no C/C++/CUDA source (.cu, .cpp, .cc, .cxx, .c)")
    digest = hashlib.sha1("\0".join(Path(s).read_text() for s in sources).encode()).hexdigest()[:12]
    name = f"fib_{digest}"
    build_dir = os.path.join(folder, ".build", name)
    os.makedirs(build_dir, exist_ok=True)
    binding = spec.get("binding") or "tvm-ffi"
    if binding == "torch":
        module = _build_torch(name, sources, folder, build_dir, with_cuda=language == "cuda")
    else:
        module = _build_tvm_ffi(name, sources, folder, build_dir)
    fn = getattr(module, sol["function"], None)
    if fn is None or not callable(fn):
        raise BuildFailure(f"the built module exports no function {sol['function']!r} (entry point "
                           f"{spec.get('entry_point')!r}); export it (PYBIND11_MODULE for binding torch, "
                           "TVM_FFI_DLL_EXPORT_TYPED_FUNC for tvm-ffi)")
    return fn, bool(spec.get("destination_passing_style", True))


def _build_torch(name: str, sources: list[str], folder: str, build_dir: str, with_cuda: bool):
    try:
        from torch.utils import cpp_extension
    except ImportError:
        raise BuildFailure("needs torch to build a solution with binding 'torch'; torch is not installed") from None
    try:
        return cpp_extension.load(name=name, sources=sources, extra_include_paths=[folder], with_cuda=with_cuda,
                                  build_directory=build_dir, verbose=False)
    except Exception as exc:  # noqa: BLE001 - the compiler's message is the result
        raise BuildFailure("the build failed (torch cpp_extension):\n" + _tail(str(exc))) from None


def _build_tvm_ffi(name: str, sources: list[str], folder: str, build_dir: str):
    try:
        import tvm_ffi
        import tvm_ffi.cpp
    except ImportError:
        raise BuildFailure("needs apache-tvm-ffi to build a solution with binding 'tvm-ffi' (FIB's default); "
                           "install it (pip install apache-tvm-ffi) or set spec.binding to 'torch'") from None
    cpp = [s for s in sources if not s.endswith(".cu")]
    cuda = [s for s in sources if s.endswith(".cu")]
    try:
        lib = tvm_ffi.cpp.build(name=name, cpp_files=cpp, cuda_files=cuda, extra_include_paths=[folder],
                                build_directory=build_dir)
    except Exception as exc:  # noqa: BLE001
        raise BuildFailure("the build failed (tvm-ffi):\n" + _tail(str(exc))) from None
    try:
        return tvm_ffi.load_module(lib)
    except Exception as exc:  # noqa: BLE001
        raise BuildFailure(f"the built library does not load: {_tail(str(exc))}") from None
