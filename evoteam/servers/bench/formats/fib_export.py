"""Recorded candidates back out as FlashInfer-Bench data: Trace records and Solution JSON.

``export_traces`` writes a trace-set folder FIB's own tools read: the kit's definition
(``definitions/<op_type>/<name>.json``), its workloads as workload traces
(``workloads/<op_type>/<name>.jsonl``) with the blobs they name, each candidate as a Solution
(``solutions/<author>/<op_type>/<name>/<solution>.json``) and one Trace per evaluated workload
(``traces/<author>/<op_type>/<name>.jsonl``). Held-out workloads are secret and not exported.
FIB's ``reference_latency_ms`` holds our baseline's time (the kit's baseline, which is the
reference unless the kit names a faster one).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from pydantic import BaseModel, Field

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.safepath import FIB_NAME, checked_name, inside, write_atomic
from evoteam.servers.bench.formats import fib, solutions, traceset
from evoteam.servers.bench.formats.kits import find_kit
from evoteam.servers.knowledge.models import Candidate
from evoteam.servers.knowledge.store import KnowledgeStore

AUTHOR = "evoteam"
WITH_CORRECTNESS = {"PASSED", "INCORRECT_NUMERICAL"}


class ExportResult(BaseModel):
    folder: str
    traces: int = Field(description="Trace records written")
    solutions: list[str] = Field(default_factory=list, description="Solution names written")
    skipped: list[str] = Field(default_factory=list, description="what was left out, and why")


async def _candidates(store: KnowledgeStore, ident: str) -> list[Candidate]:
    if ident.startswith("run"):
        await store.get_run(ident)
        out, cursor = [], None
        while True:
            page = await store.list_candidates(ident, limit=100, cursor=cursor)
            out += [await store.get_candidate(c.id) for c in page.items]
            cursor = page.next_cursor
            if not cursor:
                return out
    return [await store.get_candidate(ident)]


def _evaluation(w, env: dict, timestamp: str) -> dict:
    body: dict = {"status": w.status, "environment": env, "timestamp": timestamp, "log": w.message or ""}
    if w.status in WITH_CORRECTNESS:
        body["correctness"] = {"max_relative_error": w.max_rel_error or 0.0, "max_absolute_error": w.max_abs_error or 0.0}
    if w.status == "PASSED":
        body["performance"] = {"latency_ms": w.candidate_ms or 0.0, "reference_latency_ms": w.baseline_ms or 0.0,
                               "speedup_factor": w.speedup or 0.0}
    return body


def _place(folder: Path, *parts: str) -> Path:
    """``folder/parts…`` checked by the one safe-path rule, its parent made."""
    path = inside(folder, *parts, what="export path")
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _write_definition(kit, folder: Path, op_type: str, name: str) -> None:
    d = kit.definition
    body = d.model_dump(mode="json")  # scalars keep their "shape": null
    body["op_type"] = op_type
    write_atomic(_place(folder, "definitions", op_type, f"{name}.json"), json.dumps(body, indent=2))
    lines = []
    for w in kit.dev_workloads():
        for spec in w.inputs.values():
            if spec.type == "safetensors" and spec.path:
                target = _place(folder, spec.path)
                shutil.copyfile(fib.resolve_blob(kit.root, spec.path), target)
        workload = w.model_dump(mode="json", exclude_none=True)
        lines.append(json.dumps({"definition": d.name, "workload": workload, "solution": None, "evaluation": None}))
    write_atomic(_place(folder, "workloads", op_type, f"{name}.jsonl"), "\n".join(lines) + ("\n" if lines else ""))


def _kit(settings: Settings, name: str, source: str | None):
    """The kit a candidate was evaluated on: by name, else from the folder it was loaded from."""
    try:
        return find_kit(settings, name)
    except DomainError:
        if not source or not Path(source).is_dir():
            raise
    if fib.is_trace_set(Path(source)):
        return traceset.find_in_trace_set(Path(source), name)
    return find_kit(settings, source)


async def export_traces(settings: Settings, store: KnowledgeStore, ident: str, folder: Path) -> ExportResult:
    """Write the candidates of run ``ident`` (or the one candidate ``ident``) as FIB traces."""
    folder = folder.expanduser().resolve()
    result = ExportResult(folder=str(folder), traces=0)
    written_defs: set[str] = set()
    for cand in await _candidates(store, ident):
        kit_name = cand.metrics.get("kit")
        if not kit_name or not cand.code:
            result.skipped.append(f"{cand.id}: no kit or no code recorded")
            continue
        try:
            kit = _kit(settings, kit_name, cand.metrics.get("kit_source"))
        except DomainError as exc:
            result.skipped.append(f"{cand.id}: kit {kit_name} is not available here ({exc})")
            continue
        if kit.manifest.kind != "kernel":
            result.skipped.append(f"{cand.id}: kit {kit_name} is a program kit; FIB traces are for kernels")
            continue
        d = kit.definition
        sol = solutions.from_candidate(cand.code, definition=d.name, name=f"evoteam_{cand.id}", author=AUTHOR,
                                       entry=kit.manifest.entry, device=kit.manifest.device)
        body = sol.model_dump(mode="json", exclude_none=True)
        body["author"] = sol.author or AUTHOR
        body["spec"]["target_hardware"] = body["spec"].get("target_hardware") or [kit.manifest.device]
        # The Solution's name and author come from the candidate's own code (an adversary's text,
        # possibly from an imported bundle); they become path components only by FIB's naming rule.
        try:
            op_type = checked_name(d.op_type or "unknown", FIB_NAME, "definition op_type")
            def_name = checked_name(d.name, FIB_NAME, "definition name")
            author = checked_name(body["author"], FIB_NAME, "solution author")
            sol_name = checked_name(sol.name, FIB_NAME, "solution name")
            sol_path = _place(folder, "solutions", author, op_type, def_name, f"{sol_name}.json")
            if d.name not in written_defs:
                _write_definition(kit, folder, op_type, def_name)
                written_defs.add(d.name)
        except DomainError as exc:
            result.skipped.append(f"{cand.id}: {exc}")
            continue
        write_atomic(sol_path, json.dumps(body, indent=2))
        result.solutions.append(sol.name)
        workloads = {w.uuid: w for w in kit.dev_workloads()}
        env = cand.metrics.get("environment") or fib.environment(kit.manifest.device)
        # FIB's Environment is hardware and libs; evoteam's record says more (cores, caches, clocks).
        env = {"hardware": str(env.get("hardware") or ""), "libs": {k: str(v) for k, v in (env.get("libs") or {}).items()}}
        timestamp = cand.provenance.created_at.isoformat()
        lines = []
        for w in cand.workloads:
            if w.workload not in workloads:
                result.skipped.append(f"{cand.id}: workload {w.workload} is held out or unknown; not exported")
                continue
            trace = {"definition": d.name, "workload": workloads[w.workload].model_dump(mode="json", exclude_none=True),
                     "solution": sol.name, "evaluation": _evaluation(w, env, timestamp)}
            lines.append(json.dumps(trace))
        path = inside(folder, "traces", author, op_type, f"{def_name}.jsonl", what="export path")
        # Exporting again (or another run into the same folder) adds only what is not there:
        # one trace per solution and workload.
        have = _exported(path)
        lines = [line for line in lines if _trace_key(json.loads(line)) not in have]
        if lines:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a") as fh:
                fh.write("\n".join(lines) + "\n")
            result.traces += len(lines)
    return result


def _trace_key(trace: dict) -> tuple[str, str]:
    return str(trace.get("solution")), str((trace.get("workload") or {}).get("uuid"))


def _exported(path: Path) -> set[tuple[str, str]]:
    """The (solution, workload) pairs a trace file already holds."""
    keys: set[tuple[str, str]] = set()
    if not path.is_file():
        return keys
    for line in path.read_text(errors="replace").splitlines():
        try:
            trace = json.loads(line)
        except ValueError:
            continue
        if isinstance(trace, dict):
            keys.add(_trace_key(trace))
    return keys
