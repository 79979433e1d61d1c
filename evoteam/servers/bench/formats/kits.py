"""Finding and loading task kits, and the held-out workloads' secret.

A kit is a folder with ``kit.json`` (a KitManifest) and the files it names. A folder holding only
a FlashInfer-Bench ``definition.json`` (plus, optionally, ``workloads.jsonl``) loads as a kernel
kit too, with the reference as its baseline. An OpenEvolve or SkyDiscover task folder
(``evaluator.py`` and ``initial_program.*``, usually ``config.yaml``) loads as a program kit (see
``openevolve.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import random
import secrets
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from evoteam.config import Settings
from evoteam.resources import kits_dir
from evoteam.servers.bench.formats import openevolve
from evoteam.servers.bench.formats.heldout_key import external_heldout_key
from evoteam.servers.bench.models import Definition, KitManifest, Workload
from evoteam.errors import DomainError, Missing


def state_dir(settings: Settings) -> Path:
    """The bench's private state (held-out secret, device locks), beside the store's file."""
    return settings.state_root / "bench"


def heldout_secret(settings: Settings) -> bytes:
    if (key := external_heldout_key()) is not None:  # kept out of the agents' reach (heldout_key.py)
        return key
    folder = state_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "heldout.secret"
    if not path.exists():
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(secrets.token_hex(32))
    return bytes.fromhex(path.read_text().strip())


def cuda_available() -> tuple[bool, str | None]:
    if importlib.util.find_spec("torch") is None:
        return False, "needs torch with CUDA; torch is not installed"
    try:
        import torch
    except Exception as exc:  # pragma: no cover - broken installs
        return False, f"torch fails to import: {exc}"
    if not torch.cuda.is_available():
        return False, "needs a CUDA GPU; none is visible on this machine"
    return True, None


class Kit:
    def __init__(self, root: Path, manifest: KitManifest):
        self.root = root
        self.manifest = manifest

    @property
    def name(self) -> str:
        return self.manifest.name

    @classmethod
    def load(cls, root: Path) -> Kit:
        root = root.resolve()
        path = root / "kit.json"
        try:
            if path.is_file():
                data = json.loads(path.read_text())
                manifest = KitManifest(**data)
            elif (root / "definition.json").is_file():
                from evoteam.servers.bench.formats import fib

                definition = Definition(**json.loads((root / "definition.json").read_text()))
                device, framework, note = fib.default_device(definition.reference)
                manifest = KitManifest(
                    name=root.name, kind="kernel", goal=definition.description or definition.name,
                    device=device, framework=framework, definition="definition.json",
                    workloads="workloads.jsonl" if (root / "workloads.jsonl").is_file() else None,
                    x0=1.0, tolerance=fib.fib_tolerance(), timing_note=note)
            elif openevolve.is_scaffold_folder(root):
                manifest = KitManifest(**openevolve.manifest_fields(root))
            else:
                raise DomainError(f"{root} is not a kit: it has neither kit.json nor definition.json, nor an "
                                  "OpenEvolve-style evaluator.py with an initial_program")
        except (ValueError, ValidationError) as exc:
            raise DomainError(f"kit {root.name}: bad manifest: {exc}") from exc
        kit = cls(root, manifest)
        if manifest.kind == "kernel":
            kit.definition  # noqa: B018 - validate now
        return kit

    def file(self, rel: str) -> Path:
        path = (self.root / rel).resolve()
        if self.root not in path.parents and path != self.root:
            raise DomainError(f"kit {self.name}: {rel} points outside the kit")
        return path

    @cached_property
    def content_hash(self) -> str:
        """sha256 over every file of the kit (relative path and bytes): the kit's identity as
        recorded with each candidate. Two folders with the same name but different content differ."""
        entries = []
        for path in sorted(self.root.rglob("*")):
            rel = path.relative_to(self.root)
            if "__pycache__" in rel.parts:
                continue
            if path.is_symlink():  # a link is its target's name: never a read of what it points at
                entries.append((rel.as_posix(), "link", os.readlink(path)))
            elif path.is_file():
                st = path.stat()
                entries.append((rel.as_posix(), "file", (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)))
        # Unchanged files (same inode, size and modification time) are not read again: a kit's
        # large data files are hashed once per process, not on every evaluation.
        key = (str(self.root), tuple(entries))
        if _HASHES.get(str(self.root), (None,))[0] == key:
            return _HASHES[str(self.root)][1]
        h = hashlib.sha256()
        for rel, kind, what in entries:
            if kind == "link":
                h.update(f"{rel}\0link\0{what}\0".encode())
                continue
            h.update(f"{rel}\0{what[2]}\0".encode())
            with open(self.root / rel, "rb") as fh:
                while block := fh.read(1 << 20):
                    h.update(block)
        digest = "sha256:" + h.hexdigest()
        _HASHES[str(self.root)] = (key, digest)
        return digest

    @cached_property
    def definition(self) -> Definition:
        if not self.manifest.definition:
            raise DomainError(f"kit {self.name} is a kernel kit without a definition file")
        try:
            return Definition(**json.loads(self.file(self.manifest.definition).read_text()))
        except (OSError, ValueError, ValidationError) as exc:
            raise DomainError(f"kit {self.name}: bad definition: {exc}") from exc

    def availability(self) -> tuple[bool, str | None]:
        for module in self.manifest.requires:
            if importlib.util.find_spec(module) is None:
                return False, f"needs the Python module {module!r}, which is not installed"
        if self.manifest.device == "cuda":
            return cuda_available()
        if self.manifest.framework == "torch" and importlib.util.find_spec("torch") is None:
            return False, "needs torch, which is not installed"
        return True, None

    # -------------------------------------------------------- workloads

    def dev_workloads(self) -> list[Workload]:
        if not self.manifest.workloads:
            return []
        out = []
        text = self.file(self.manifest.workloads).read_text()
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                row = row.get("workload", row) if isinstance(row, dict) else row
                out.append(Workload(**row))
            except (ValueError, ValidationError) as exc:
                raise DomainError(f"kit {self.name}: workloads line {n} is not a workload: {exc}") from exc
        return out

    def heldout_workloads(self, secret: bytes) -> list[Workload]:
        plan = self.manifest.heldout
        if plan is None or plan.count == 0:
            return []
        digest = hmac.new(secret, f"heldout:{self.name}".encode(), hashlib.sha256).digest()
        rng = random.Random(int.from_bytes(digest, "big"))
        dev = self.dev_workloads()
        scalars = {k: v for k, v in (dev[0].inputs.items() if dev else []) if v.type == "scalar"}
        out = []
        for i in range(plan.count):
            axes = {}
            for name, spec in plan.axes.items():
                if spec.choices:
                    axes[name] = rng.choice(spec.choices)
                else:
                    lo, hi, m = spec.min or 1, spec.max or spec.min or 1, max(1, spec.multiple_of)
                    value = rng.randint(lo, hi)
                    axes[name] = max(m, (value // m) * m)
            out.append(Workload(uuid=f"heldout-{i + 1}", axes=axes, inputs=scalars))
        return out

    def fib_inputs(self) -> bool:
        """Inputs follow FlashInfer-Bench's workload rules (random / scalar / safetensors) unless the
        kit brings its own generator."""
        m = self.manifest
        return m.kind == "kernel" and not m.inputs and m.framework == "torch"

    def inputs_source(self) -> str | None:
        if self.fib_inputs():
            from evoteam.servers.bench.formats import fib

            return fib.inputs_source(self, self.dev_workloads())
        return self.file(self.manifest.inputs).read_text() if self.manifest.inputs else None

    def baseline_solutions(self) -> list[tuple[dict | None, str]]:
        """The usable baselines in the manifest's order: (solution dict for the trusted worker, or
        None for the reference itself; a label). The reference always closes the list."""
        out: list[tuple[dict | None, str]] = []
        for entry in self.manifest.baseline:
            if entry == "reference":
                break
            rel, _, function = entry.partition("::")
            path = self.file(rel)
            requires = _declared_requirements(path)
            if any(importlib.util.find_spec(m) is None for m in requires):
                continue
            out.append(({"dir": str(path.parent), "file": path.name, "function": function or "run", "dps": None},
                        entry))
        out.append((None, "reference"))
        return out

    def baseline_solution(self) -> tuple[dict | None, str]:
        return self.baseline_solutions()[0]

    def starting_point(self) -> Path | None:
        m = self.manifest
        if m.initial_program:
            return self.file(m.initial_program)
        for entry in m.baseline:
            if entry != "reference":
                return self.file(entry.partition("::")[0])
        return None


def _declared_requirements(path: Path) -> list[str]:
    """A baseline file may declare the modules it needs on a line ``# requires: a, b``."""
    try:
        for line in path.read_text().splitlines()[:20]:
            if line.startswith("# requires:"):
                return [m.strip() for m in line.split(":", 1)[1].split(",") if m.strip()]
    except OSError:
        pass
    return []


_HASHES: dict[str, tuple[tuple, str]] = {}  # kit folder -> (what its files were, content hash)


def kit_dirs(settings: Settings) -> list[Path]:
    return [Path(d).expanduser() for d in settings.kits_dirs]


def _search_order(settings: Settings) -> list[Path]:
    """The shipped kits first: a kit elsewhere with a shipped kit's name never shadows it (it
    is still reachable by its path)."""
    shipped = kits_dir().resolve()
    dirs = kit_dirs(settings)
    return sorted(dirs, key=lambda d: d.resolve() != shipped)


def discover(settings: Settings) -> dict[str, Kit]:
    kits: dict[str, Kit] = {}
    from evoteam.servers.bench.formats import fib

    for base in _search_order(settings):
        if not base.is_dir():
            continue
        if fib.is_trace_set(base):
            for name, kit in fib.trace_set_kits(base).items():
                kits.setdefault(name, kit)
            continue
        for child in sorted(base.iterdir()):
            if child.is_dir() and fib.is_trace_set(child):
                for name, kit in fib.trace_set_kits(child).items():
                    kits.setdefault(name, kit)
            elif child.is_dir() and ((child / "kit.json").is_file() or (child / "definition.json").is_file()
                                     or openevolve.is_scaffold_folder(child)):
                try:
                    kit = Kit.load(child)
                except DomainError:
                    continue
                kits.setdefault(kit.name, kit)
    return kits


def _trust_file(settings: Settings) -> Path:
    return state_dir(settings) / "trusted_kits"


def trusted_kit_paths(settings: Settings) -> list[Path]:
    """Kit folders the user trusted outside the configured kit folders (``evoteam bench trust``)."""
    try:
        lines = _trust_file(settings).read_text().splitlines()
    except OSError:
        return []
    return [Path(line) for line in lines if line.strip()]


def trust_kit(settings: Settings, folder: str | Path) -> Path:
    """Record the user's trust in a kit folder outside the configured kit folders. Only the user
    does this (the CLI), never a tool call: a kit's evaluator and reference run unconfined."""
    from evoteam.servers.bench.formats import fib

    path = Path(folder).expanduser().resolve()
    if path.is_file():  # a trace set's definition file: trust the trace set it belongs to
        path = next((p for p in path.parents if fib.is_trace_set(p)), path)
    if not fib.is_trace_set(path):
        Kit.load(path)
    known = trusted_kit_paths(settings)
    if path not in known:
        _trust_file(settings).parent.mkdir(parents=True, exist_ok=True)
        with open(_trust_file(settings), "a") as fh:
            fh.write(f"{path}\n")
    return path


def is_trusted(settings: Settings, path: Path) -> bool:
    """A kit folder is trusted when it lies in a configured kit folder (the shipped task_kits/ is
    one) or the user trusted it explicitly."""
    path = path.resolve()
    named_by_project = {Path(d).expanduser().resolve() for d in settings.project_kits_dirs}
    roots = [r for r in (d.expanduser().resolve() for d in kit_dirs(settings)) if r not in named_by_project]
    roots += trusted_kit_paths(settings)
    return any(path == r or r in path.parents for r in roots)


def _require_trust(settings: Settings, path: Path) -> None:
    if not is_trusted(settings, path):
        raise DomainError(f"kit folder {path} is not in the configured kit folders, so it is not trusted (its "
                          "reference and evaluator would run unconfined); the user can trust it with `evoteam "
                          "bench trust FOLDER` or add its parent to EVOTEAM_KITS / kits_dirs")


def _confinable(settings: Settings, kit: Kit) -> Kit:
    """A kit from a folder only a project file names: a program kit runs (its evaluator is
    confined like a candidate); a kernel kit's reference and baseline would run unconfined, so it
    needs the user's trust first."""
    if kit.manifest.kind == "kernel" and not is_trusted(settings, kit.root):
        raise DomainError(f"kit {kit.name} comes from {kit.root.parent}, which only the project's evoteam.toml "
                          "names; a project file cannot make a kit trusted (its reference would run unconfined). "
                          f"The user can trust it with `evoteam bench trust {kit.root}`")
    return kit


def find_kit(settings: Settings, name_or_path: str) -> Kit:
    from evoteam.servers.bench.formats import fib

    path = Path(name_or_path).expanduser()
    # `task_kits/<kit>` names a kit, the same from every folder: a working folder holding its
    # own copy of task_kits/ (a clone of evoteam, a project that vendors kits) must not turn the
    # name into an untrusted path. An absolute path, or any other relative one, is a folder.
    parts = Path(name_or_path).parts
    if len(parts) == 2 and parts[0] == "task_kits" and not path.is_absolute():
        kits = discover(settings)
        if parts[1] in kits:
            return kits[parts[1]]
    if path.is_dir() and fib.is_trace_set(path):
        _require_trust(settings, path)  # a trace set's reference runs unconfined, like any kit's
        return fib.find_in_trace_set(path)
    if path.is_file() and path.suffix == ".json" and "definitions" in path.resolve().parts:
        root = next((p for p in path.resolve().parents if fib.is_trace_set(p)), None)
        if root is not None:
            _require_trust(settings, root)
        kit = fib.find_in_trace_set(path)
        if kit is not None:
            return kit
    if path.is_dir():
        _require_trust(settings, path)
        return Kit.load(path)
    kits = discover(settings)
    if name_or_path in kits:
        return _confinable(settings, kits[name_or_path])
    if "/" in name_or_path and Path(name_or_path.rstrip("/")).name in kits:
        return _confinable(settings, kits[Path(name_or_path.rstrip("/")).name])  # `task_kits/<kit>` elsewhere
    if "/" not in name_or_path and name_or_path not in (".", ".."):
        # A folder of that name whose manifest is refused is left out of the list: say why.
        for base in kit_dirs(settings):
            if (base / name_or_path / "kit.json").is_file():
                Kit.load(base / name_or_path)
    names = ", ".join(sorted(kits)) or "none"
    raise Missing(f"no kit named {name_or_path!r}; available kits: {names} (list_kits shows them; a kit "
                      "folder's path also works)")
