"""What `evoteam bench list` and `bench describe` showed of the kits, kept so that the next call
answers without building the models.

Loading the kits through the bench costs pydantic and every kit's models (about 0.2 s of a
0.3 s answer); a newcomer's first commands should answer within 0.2 s (issue 24). So after the
normal path has loaded and checked every kit, the command line keeps what it showed — the
listing and each kit's description — in ``<state>/bench/kit-index.json``, together with every
fact that went into them:

- the evoteam code that produced them (each file's size and modification time),
- the kit folders in search order, the ones only a project file names, and every file under them,
- the user's list of trusted kit folders,
- the environment the worker environment reads, which of the kits' modules are installed, and
  whether a GPU driver is present.

The next call gathers the same facts (stat calls, a few milliseconds) and answers from the index
only when every one is unchanged. Otherwise — and for ``--json``, ``--detail``, a kit named by a
path, a folder too large to stat quickly, or a machine where a GPU may be visible (knowing
whether a kit runs then takes importing torch) — it returns None and the command takes the
normal path, which writes the index again. A stale index costs speed, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
from pathlib import Path

from evoteam.configsource import state_root
from evoteam.resources import kits_dir
from evoteam.servers.bench.formats.gpuprobe import gpu_driver_present

FORMAT = 1
MAX_FILES = 5000  # a folder with more files (a trace set's blobs) is not worth stating each call
ENV_SWITCH = "EVOTEAM_QUICK_READS"  # =0 turns the index off, as it does the store's quick reads
# What the worker environment (confinement/workerenv.py) and `~` in folder names read.
ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "HOME")


def index_path(values: dict) -> Path:
    """The index file beside the bench's other state, for the setting values `values`
    (configsource.setting_values)."""
    return state_root(values["db"]) / "bench" / "kit-index.json"


def _tree(root: Path) -> str | None:
    """A digest of every file's path, size and modification time under `root` (None: too many
    files, or unreadable). Bytecode caches do not count: Python rewrites them."""
    h = hashlib.sha256()
    count = 0
    try:
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                st = os.stat(os.path.join(folder, name))
                h.update(f"{os.path.relpath(os.path.join(folder, name), root)}\0{st.st_size}\0{st.st_mtime_ns}\n"
                         .encode())
                count += 1
                if count > MAX_FILES:
                    return None
    except OSError:
        return None
    return h.hexdigest()


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _kit_dirs(values: dict) -> tuple[list[str], list[str]]:
    """The kit folders in search order (the shipped kits first) and those only a project file
    names, resolved as the settings model does; a difference in any case makes the index miss."""
    shipped = kits_dir().resolve()
    dirs = [Path(d).expanduser() for d in values.get("kits_dirs", [])]
    if not any(d == kits_dir() for d in dirs):
        dirs.append(kits_dir())
    ordered = sorted((d.resolve() for d in dirs), key=lambda d: d != shipped)
    project = [str(Path(d).expanduser().resolve()) for d in values.get("project_kits_dirs", [])]
    return [str(d) for d in ordered], project


def facts(values: dict, modules: list[str]) -> dict | None:
    """Everything the listing and the descriptions depend on, as it is now (None: the index
    cannot serve this machine or these folders)."""
    if importlib.util.find_spec("torch") is not None and gpu_driver_present():
        return None  # a kit's availability here needs torch's own answer
    import evoteam

    dirs, project = _kit_dirs(values)
    trees = [_tree(Path(d)) if Path(d).is_dir() else "absent" for d in dirs]
    code = _tree(Path(evoteam.__file__).parent)
    if code is None or None in trees:
        return None
    return {
        "code": code,
        "dirs": [[d, t] for d, t in zip(dirs, trees)],
        "project_dirs": project,
        "trusted": _stat(index_path(values).parent / "trusted_kits"),
        "env": {var: os.environ.get(var) for var in ENV_VARS},
        "modules": {m: importlib.util.find_spec(m) is not None for m in sorted(set(modules))},
        "gpu_driver": gpu_driver_present(),
    }


def write(values: dict, searched: list[Path], project: list[Path], modules: list[str], listing: dict,
          details: dict[str, dict]) -> None:
    """Keep `listing` (a KitList as JSON data) and `details` (kit name -> KitDetail as JSON data)
    with the facts they were made under; `searched` and `project` are the kit folders the
    settings model searched (in order) and those only a project file names. Nothing is kept
    when the folders read from the raw values differ from the model's. Best effort: an index
    that cannot be written (a full disk, a read-only home) only means the next call takes the
    normal path."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return
    now = facts(values, modules)
    if now is None or [d for d, _ in now["dirs"]] != [str(d.resolve()) for d in searched] \
            or now["project_dirs"] != [str(d.expanduser().resolve()) for d in project]:
        return
    path = index_path(values)
    doc = {"format": FORMAT, "facts": now, "modules": sorted(set(modules)), "listing": listing, "details": details}
    tmp = path.with_name(f".{path.name}.{os.getpid()}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(tmp, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass


def read(values: dict) -> dict | None:
    """The index, when every fact it was made under still holds; else None."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return None
    try:
        doc = json.loads(index_path(values).read_text())
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("modules"), list) \
            or not isinstance(doc.get("listing"), dict) or not isinstance(doc.get("details"), dict):
        return None
    now = facts(values, [str(m) for m in doc["modules"]])
    if now is None or now != doc.get("facts"):
        return None
    return doc


def describable(name: str) -> bool:
    """Whether `bench describe NAME` would look NAME up among the listed kits: not a path to a
    folder or file here (that is a kit by path), nor a `task_kits/…` name."""
    return "/" not in name and name not in (".", "..") and not Path(name).expanduser().exists()
