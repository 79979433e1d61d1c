"""What `evoteam bench list` and `bench describe` showed of the kits, kept so that the next call
answers without building the models.

Loading the kits through the bench costs pydantic and every kit's models (about 0.2 s of a
0.3 s answer); a newcomer's first commands should answer within 0.2 s (issue 24). So after the
normal path has loaded and checked every kit, the command line keeps what it showed — the
listing and each kit's description — in ``<state>/bench/kit-index.json``, together with every
fact that went into them (`facts`):

- the evoteam code, Python, and the packages that read kits (pydantic, yaml): where they are
  and each file's identity — inode, size, modification and change times, mode;
- every raw setting (as a digest: settings hold keys), the kit folders in search order, those
  only a project file names, and every file, folder and link under them;
- the user's list of trusted kit folders;
- the environment the worker environment reads, and whether a GPU driver is present;
- which of the kits' modules are installed (probed again on each call).

The facts are taken before the kits are loaded and again after; the index is kept only when
both agree and no file changed within the file system's timestamp resolution of the first (a
change in that window could leave every recorded fact equal). The next call gathers the same
facts (stat calls, a few milliseconds) and answers from the index only when every one is
unchanged. Otherwise — and for ``--json``, ``--detail``, a kit named by a path, a folder too
large to stat quickly, a kit folder behind a symbolic link, or a machine where a GPU may be
visible (knowing whether a kit runs then takes importing torch) — the command takes the normal
path, which writes the index again. A stale index costs speed, never a wrong answer.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evoteam.configsource import state_root
from evoteam.resources import kits_dir
from evoteam.servers.bench.formats.gpuprobe import gpu_driver_present

FORMAT = 2
# More files than this, the code and every kit folder counted together (a trace set's blobs),
# are not worth stating on each call.
MAX_FILES = 5000
ENV_SWITCH = "EVOTEAM_QUICK_READS"  # =0 turns the index off, as it does the store's quick reads
# What the worker environment (confinement/workerenv.py), the GPU probe and `~` in folder names read.
ENV_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "HOME")
# Third-party code that reads kits on the normal path (manifests; OpenEvolve's config.yaml).
PACKAGES = ("pydantic", "pydantic_core", "yaml")
# A change this close to the first facts may leave its timestamps equal to those recorded:
# Linux stamps files from a coarse clock (a few ms); some file systems keep whole seconds.
RACY_FINE_NS, RACY_COARSE_NS = 50_000_000, 2_000_000_000


def index_path(values: dict) -> Path:
    """The index file beside the bench's other state, for the setting values `values`
    (configsource.setting_values)."""
    return state_root(values["db"]) / "bench" / "kit-index.json"


@dataclass
class _Stamps:
    """The newest change time seen while digesting, and whether any time had sub-second digits."""

    newest_ns: int = 0
    fine: bool = False
    count: int = 0

    def identity(self, st: os.stat_result) -> str:
        self.newest_ns = max(self.newest_ns, st.st_mtime_ns, st.st_ctime_ns)
        self.fine = self.fine or st.st_ctime_ns % 1_000_000_000 != 0
        return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_mode}"


def _tree(root: Path, stamps: _Stamps) -> str | None:
    """A digest of every file's and folder's path and identity under `root`, and of every link's
    target (None: a linked folder — its content is elsewhere —, too many files, or unreadable).
    Bytecode caches do not count: Python rewrites them."""
    h = hashlib.sha256()
    try:
        h.update(f".\0{stamps.identity(os.stat(root))}\n".encode())
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in [*dirs, *sorted(files)]:
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, root)
                if os.path.islink(path):
                    if os.path.isdir(path):
                        return None
                    h.update(f"{rel}\0link\0{os.readlink(path)}\n".encode())
                h.update(f"{rel}\0{stamps.identity(os.stat(path))}\n".encode())
                stamps.count += 1
                if stamps.count > MAX_FILES:
                    return None
    except OSError:
        return None
    return h.hexdigest()


def _stat(path: Path | str | None, stamps: _Stamps) -> str | None:
    try:
        return stamps.identity(os.stat(path)) if path else None
    except OSError:
        return None


def _package(name: str, stamps: _Stamps) -> str | None:
    """Where a package is and its entry file's identity, without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    return f"{spec.origin}\0{_stat(spec.origin, stamps)}"


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


@dataclass
class Snapshot:
    """The facts at one moment (`facts` None: the index cannot serve here), with when they were
    taken and the newest change among the files they cover."""

    facts: dict | None
    taken_ns: int
    newest_ns: int
    fine: bool

    def racy(self) -> bool:
        window = RACY_FINE_NS if self.fine else RACY_COARSE_NS
        return self.taken_ns - self.newest_ns < window


def snapshot(values: dict) -> Snapshot:
    """Everything the listing and the descriptions depend on but the kits' modules, now."""
    taken = time.time_ns()
    stamps = _Stamps()
    if importlib.util.find_spec("torch") is not None and gpu_driver_present():
        return Snapshot(None, taken, 0, False)  # a kit's availability here needs torch's own answer
    import evoteam

    dirs, project = _kit_dirs(values)
    trees = [_tree(Path(d), stamps) if Path(d).is_dir() else "absent" for d in dirs]
    code = _tree(Path(evoteam.__file__).parent, stamps)
    if code is None or None in trees:
        return Snapshot(None, taken, 0, False)
    settings = json.dumps(values, sort_keys=True, default=str)
    found = {
        "code": code,
        "python": [sys.version, sys.executable],
        "packages": {name: _package(name, stamps) for name in PACKAGES},
        "settings": hashlib.sha256(settings.encode()).hexdigest(),  # a digest: settings hold keys
        "dirs": [[d, t] for d, t in zip(dirs, trees)],
        "project_dirs": project,
        "trusted": _stat(index_path(values).parent / "trusted_kits", stamps),
        "env": {var: os.environ.get(var) for var in ENV_VARS},
        "gpu_driver": gpu_driver_present(),
    }
    return Snapshot(found, taken, stamps.newest_ns, stamps.fine)


def _modules(names: list[str]) -> dict[str, bool]:
    return {m: importlib.util.find_spec(m) is not None for m in sorted(set(names))}


def write(values: dict, before: Snapshot, searched: list[Path], project: list[Path], modules: list[str],
          listing: dict, details: dict[str, dict]) -> None:
    """Keep `listing` (a KitList as JSON data) and `details` (kit name -> KitDetail as JSON data),
    made from kits loaded after `before` was taken, with their facts; `searched` and `project`
    are the kit folders the settings model searched (in order) and those only a project file
    names. Nothing is kept when the facts changed while the kits were loaded (or just before),
    or when the folders read from the raw values differ from the model's. Best effort: an index
    that cannot be written (a full disk, a read-only home) only means the next call takes the
    normal path."""
    if os.environ.get(ENV_SWITCH, "1") == "0" or before.facts is None or before.racy():
        return
    after = snapshot(values)
    if after.facts != before.facts or [d for d, _ in after.facts["dirs"]] != [str(d.resolve()) for d in searched] \
            or after.facts["project_dirs"] != [str(d.expanduser().resolve()) for d in project]:
        return
    path = index_path(values)
    doc = {"format": FORMAT, "facts": before.facts, "modules": _modules(modules), "listing": listing,
           "details": details}
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".kit-index.", dir=path.parent)  # mode 0600, a new name
        with os.fdopen(fd, "w") as fh:
            json.dump(doc, fh)
        os.replace(tmp, path)
    except OSError:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def read(values: dict) -> dict | None:
    """The index, when every fact it was made under still holds; else None (also for a file
    that is not one this module wrote)."""
    if os.environ.get(ENV_SWITCH, "1") == "0":
        return None
    try:
        doc = json.loads(index_path(values).read_text())
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or not isinstance(doc.get("modules"), dict) \
            or not isinstance(doc.get("listing"), dict) or not isinstance(doc.get("details"), dict):
        return None
    now = snapshot(values)
    if now.facts is None or now.facts != doc.get("facts") or _modules(list(doc["modules"])) != doc["modules"]:
        return None
    return doc


def describable(name: str) -> bool:
    """Whether `bench describe NAME` would look NAME up among the listed kits: not a path to a
    folder or file here (that is a kit by path), nor a `task_kits/…` name."""
    return "/" not in name and name not in (".", "..") and not Path(name).expanduser().exists()
