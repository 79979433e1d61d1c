"""A task kit: its manifest, files, workloads, baselines and content hash.

A kit is a folder with ``kit.json`` (a KitManifest) and the files it names; a folder holding only
a FlashInfer-Bench ``definition.json`` (plus, optionally, ``workloads.jsonl``) is a kernel kit
with FIB's defaults (``fib.py``), and an OpenEvolve or SkyDiscover task folder a program kit
(``openevolve.py``). Finding kits and trusting their folders is ``kits.py``'s.
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import os
import random
from functools import cached_property
from pathlib import Path

from pydantic import ValidationError

from evoteam.errors import DomainError
from evoteam.servers.bench.formats import fib, openevolve
from evoteam.servers.bench.formats.gpuprobe import cuda_available
from evoteam.servers.bench.models import Definition, HeldoutChoice, KitManifest, Workload


class Kit:
    def __init__(self, root: Path, manifest: KitManifest):
        self.root = root
        self.manifest = manifest
        # The held-out inputs a caller chose with its key (a job on a Ray node or a pool slot):
        # used instead of drawing them from this host's key (kits.heldout_choice).
        self.heldout_given: HeldoutChoice | None = None

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
                if not isinstance(data, dict):
                    raise ValueError(f"kit.json holds a {type(data).__name__}, not an object")
                manifest = KitManifest(**data)
            elif (root / "definition.json").is_file():
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

    def probed_modules(self) -> list[str]:
        """The modules whose presence `availability` and `baseline_solutions` ask about: what
        this kit's listing and description depend on besides its files."""
        found = list(self.manifest.requires)
        for entry in self.manifest.baseline:
            if entry == "reference":
                break
            try:
                found += _declared_requirements(self.file(entry.partition("::")[0]))
            except DomainError:
                continue
        return found

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
