"""Code the program may have written, loaded into a kit's evaluator, counts as the program running
there.

A program kit's evaluator often runs the program in a process of its own and reads what it left
behind: printed text, files in the working folder. Whatever the program writes is the
adversary's; it must never become code in the evaluator's process, where it could rewrite the
metrics. ``watch_program`` (programwatch.py) reports the program's own source being compiled or
executed there. This module reports the rest, from an audit hook installed before the evaluator
loads (an audit hook cannot be removed):

- **code loaded from a place the program can write**: the import system opening a module file
  (source, sourceless ``.pyc``, zip) or loading a native extension, or ``ctypes`` loading a
  library, from anywhere outside the read-only roots (the Python installation, the paths on
  ``sys.path`` when the worker started, evoteam itself, the kit's folder), or from inside the
  watched folders (the program's folder and the evaluator's working folder). The path is the one
  the loader opens, so a forged ``co_filename`` in a ``.pyc`` changes nothing;
- **a string or code object turned into code by the evaluator after the program ran**
  (``eval``/``exec``/``compile`` called from code outside the Python installation and evoteam,
  i.e. the kit's own code): after the program ran, such a string may well be its output. Library
  code compiling its own templates (``namedtuple``, ``dataclasses``, ``ast.literal_eval``) is not
  the evaluator turning data into code, and is not reported.

"The program ran" is any process the evaluator starts (``subprocess``, ``os.system``, ``exec*``,
``posix_spawn``, ``fork``) or a ``run_program`` call (sandbox.py raises ``evoteam.program_ran``).
A report is one byte on ``notice_fd``, the same byte ``watch_program`` sends: the evaluation is
flagged and never ranks until a person has reviewed it.
"""

from __future__ import annotations

import os
import sys

PROGRAM_RAN = "evoteam.program_ran"
_STARTS = {"subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork", "os.forkpty",
           "pty.spawn", PROGRAM_RAN}
_IMPORT_FRAMES = ("<frozen importlib._bootstrap", "<frozen zipimport")


def _dir(path: str) -> str:
    return os.path.realpath(path).rstrip("/") or "/"


def _under(path: str, roots: list[str]) -> bool:
    """``path`` is one of ``roots`` (a file root) or inside one (a folder root)."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _source_of_cache(path: str) -> str:
    """``X/name.py`` for a bytecode cache ``X/__pycache__/name.<tag>.pyc`` (else ``path``): a
    cache is as loadable as its source, since Python reads it in the source's place."""
    folder, name = os.path.split(path)
    if os.path.basename(folder) == "__pycache__" and name.endswith(".pyc"):
        return os.path.join(os.path.dirname(folder), name.split(".", 1)[0] + ".py")
    return path


def library_roots() -> list[str]:
    """Where installed code lives: the Python installation, every ``sys.path`` entry now (``-I``:
    no working folder among them) and evoteam's own package."""
    import evoteam

    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.dirname(os.path.abspath(evoteam.__file__)))}
    places.update(p for p in sys.path if p and os.path.isabs(p))
    return sorted({_dir(p) for p in places})


def watch_loading(notice_fd: int | None, watched: list[str], read_roots: list[str]) -> None:
    """Install the hook. ``watched``: folders the program can write (always reported);
    ``read_roots``: read-only folders the evaluator may import from (the kit's)."""
    if notice_fd is None:
        return
    writable = [_dir(p) for p in watched]
    libraries = [r for r in library_roots() if not _under(r, writable)]
    loadable = libraries + [_dir(p) for p in read_roots if not _under(_dir(p), writable)]
    state = {"ran": False, "fired": False, "busy": False}

    def report() -> None:
        state["fired"] = True
        try:
            os.write(notice_fd, b"P")
        except OSError:
            pass

    def foreign(path: object) -> bool:
        if not isinstance(path, (str, bytes, os.PathLike)):
            return False
        real = os.path.realpath(os.fsdecode(path))
        source = _source_of_cache(real)
        return _under(real, writable) or _under(source, writable) or not (_under(real, loadable) or
                                                                         _under(source, loadable))

    def caller_is_library() -> bool:
        frame = sys._getframe(2)  # 0: this function, 1: the hook, 2: who raised the event
        name = frame.f_code.co_filename
        if name.startswith(_IMPORT_FRAMES):
            return True
        return os.path.isabs(name) and _under(os.path.realpath(name), libraries)

    def hook(event: str, args: tuple) -> None:
        if state["fired"] or state["busy"]:
            return
        if event in _STARTS:
            state["ran"] = True
            return
        state["busy"] = True  # realpath and friends raise no events of interest, but never recurse
        try:
            if event == "open":
                frame = sys._getframe(1).f_code.co_filename
                if frame.startswith(_IMPORT_FRAMES) and foreign(args[0]):
                    report()
            elif event == "import":
                if len(args) > 1 and args[1] is not None and foreign(args[1]):  # a native extension
                    report()
            elif event == "ctypes.dlopen":
                name = args[0] if args else None
                if isinstance(name, (str, bytes)) and os.sep in os.fsdecode(name) and foreign(name):
                    report()
            elif event in ("compile", "exec") and state["ran"]:
                # By the kit's own code; or, by anyone, of a file the program could have written
                # (``runpy.run_path`` of its output: the library compiles it on the kit's behalf).
                named = args[1] if event == "compile" and len(args) > 1 else None
                if not caller_is_library() or (isinstance(named, (str, bytes)) and os.path.isabs(os.fsdecode(named))
                                               and foreign(named)):
                    report()
        except Exception:  # noqa: BLE001 - a hook that raises would break the evaluator's own call
            pass
        finally:
            state["busy"] = False

    sys.addaudithook(hook)
