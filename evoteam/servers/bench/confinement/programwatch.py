"""A program kit's evaluator running the program in its own process, reported the moment it
happens: the program's source compiled or executed there, or a pickle naming more than data.
The worker installs this (``watch_program``) before the evaluator loads; codewatch.py reports
the rest of what the program may have left behind."""

from __future__ import annotations

import os
import sys


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
