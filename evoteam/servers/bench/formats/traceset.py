"""FlashInfer-Bench trace sets as a kit source: every definition of a trace set is a kernel kit.

The trace set's layout and FIB's defaults are ``fib.py``'s; here a definition becomes a
``TraceSetKit`` whose manifest a ``kit.json`` override may change, whose dev workloads are the
trace set's workload traces, and whose solutions can be run by name.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from evoteam.errors import DomainError
from evoteam.servers.bench.formats.fib import (
    FIB_STARTUP_S,
    TraceSet,
    _load_json,
    default_device,
    fib_tolerance,
    is_trace_set,
)
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.models import KitManifest, Solution, Workload


def trace_set_kits(root: Path):
    """Every definition of the trace set at ``root`` as a kit (definition name -> kit)."""
    ts = TraceSet(root)
    kits = {}
    for name in ts.definitions:
        try:
            kits[name] = TraceSetKit(ts, name)
        except DomainError as exc:  # a bad override: that kit is left out, the others load
            ts.problems.append(str(exc))
    return kits


def find_in_trace_set(path: Path, name: str | None = None):
    """The kit for ``path``: a trace-set root with one definition (or ``name``), or a definition
    JSON file inside a trace set."""
    path = path.resolve()
    if path.is_file():
        root = next((p for p in path.parents if is_trace_set(p)), None)
        if root is None:
            return None
        ts = TraceSet(root)
        for def_name, (def_path, _) in ts.definitions.items():
            if def_path == path:
                return TraceSetKit(ts, def_name)
        raise DomainError(f"{path} is not a valid definition of the trace set {root}")
    kits = trace_set_kits(path)
    if name and name in kits:
        return kits[name]
    if len(kits) == 1:
        return next(iter(kits.values()))
    names = ", ".join(sorted(kits)) or "none"
    raise DomainError(f"the trace set {path} holds several definitions ({names}); name one (add the trace set to "
                      "kits_dirs and pass the definition's name, or pass the definition's JSON file)")


class TraceSetKit(Kit):
    """One definition of a trace set as a kernel kit."""

    def __init__(self, ts: TraceSet, name: str):
        path, definition = ts.definitions[name]
        device, framework, note = default_device(definition.reference)
        base = dict(name=name, kind="kernel", goal=definition.description or definition.name, device=device,
                    framework=framework, requires=["torch", "safetensors"] if framework == "torch" else [],
                    definition=str(path.relative_to(ts.root)), x0=1.0, tolerance=fib_tolerance().model_dump(),
                    timeouts={"startup_s": FIB_STARTUP_S, "workload_s": 120.0}, timing_note=note)
        override = {k: v for k, v in ts.override(name).items()
                    if k not in ("name", "kind", "definition", "workloads", "inputs", "examples")}
        try:
            manifest = KitManifest(**{**base, **override})
        except ValidationError as exc:
            raise DomainError(f"kit {name}: bad kit.json override: {exc}") from exc
        super().__init__(ts.root, manifest)
        self.trace_set, self.def_name = ts, name

    def dev_workloads(self) -> list[Workload]:
        out = []
        for path in self.trace_set.workload_files.get(self.def_name, []):
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    if row.get("definition", self.def_name) != self.def_name:
                        continue
                    out.append(Workload(**row.get("workload", row)))
                except (ValueError, ValidationError, AttributeError, TypeError) as exc:
                    raise DomainError(f"kit {self.name}: {path.relative_to(self.root)} line {n} is not a "
                                      f"workload: {exc}") from exc
        return out

    def solutions(self) -> dict[str, Path]:
        """This definition's solutions in the trace set, by name."""
        out = {}
        for path in self.trace_set.solution_files.get(self.def_name, []):
            out.setdefault(Solution(**_load_json(path)).name, path)
        return out
