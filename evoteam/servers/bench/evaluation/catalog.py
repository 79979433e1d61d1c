"""What an agent sees of the kits before it evaluates: the list of kits and one kit's details
(goal, the signature a candidate implements, tolerances, dev workloads, the worker environment
and how it is timed)."""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import subprocess
import sys

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.bench.confinement.workerenv import tuning_env
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.formats import kitindex
from evoteam.servers.bench.formats.kits import confinable, discover, find_kit, search_order
from evoteam.servers.bench.models import KitDetail, KitList, KitSummary, WorkloadInfo


def _page(items: list, limit: int, cursor: str | None) -> tuple[list, str | None]:
    try:
        start = int(cursor) if cursor else 0
        if not 0 <= start < 2**62:
            raise ValueError
    except ValueError:
        raise DomainError("bad cursor; pass back the next_cursor of the previous page") from None
    limit = max(1, min(limit, 100))
    chunk = items[start:start + limit]
    nxt = str(start + limit) if start + limit < len(items) else None
    return chunk, nxt


def list_kits(settings: Settings, kind: str | None = None, limit: int = 20, cursor: str | None = None) -> KitList:
    rows = []
    for kit in discover(settings).values():
        if kind and kit.manifest.kind != kind:
            continue
        ok, reason = kit.availability()
        rows.append(KitSummary(name=kit.name, kind=kit.manifest.kind, device=kit.manifest.device,
                               direction=kit.manifest.direction, goal=kit.manifest.goal.strip().splitlines()[0][:200],
                               available=ok, unavailable_reason=reason))
    chunk, nxt = _page(rows, limit, cursor)
    return KitList(items=chunk, total=len(rows), next_cursor=nxt)


def _signature(kit: Kit) -> str:
    d = kit.definition
    ins = ", ".join(f"{n}: {s.dtype}[{', '.join(s.shape)}]" if s.shape is not None else f"{n}: {s.dtype}"
                    for n, s in d.inputs.items())
    outs = ", ".join(f"{n}: {s.dtype}[{', '.join(s.shape or [])}]" for n, s in d.outputs.items())
    return (f"{kit.manifest.entry}({ins}) -> ({outs}). Inputs come positionally in this order; return the outputs "
            f"in this order (a tuple, or a dict by name). With DESTINATION_PASSING_STYLE = True at module level the "
            f"outputs are passed as extra arguments after the inputs and must be written in place.")


# Probed by name, never imported: a role assumed scipy and learnt it was missing only by running its
# program (model-play mp35, 2026-12-05). The kit index probes them again on each call (remember()).
NUMERICAL_PACKAGES = ("numpy", "scipy", "numba", "torch", "triton", "jax", "cupy", "pandas", "sklearn")


@functools.lru_cache(maxsize=4)
def _importable_in_workers(executable: str) -> frozenset[str]:
    """Of NUMERICAL_PACKAGES, those a worker finds: workers start as `python -I`, which reads no
    PYTHONPATH, user site-packages or working folder, so this process's own path would list a
    package only PYTHONPATH holds (review 2026-12-05). Asked once per process."""
    probe = ("import importlib.util, json, sys; "
             "print(json.dumps([m for m in sys.argv[1:] if importlib.util.find_spec(m) is not None]))")
    try:
        done = subprocess.run([executable, "-I", "-c", probe, *NUMERICAL_PACKAGES], capture_output=True, text=True,
                              timeout=60, stdin=subprocess.DEVNULL)
        return frozenset(json.loads(done.stdout))
    except (OSError, subprocess.SubprocessError, ValueError):  # best effort: this process's view
        return frozenset(m for m in NUMERICAL_PACKAGES if importlib.util.find_spec(m) is not None)


def importable_packages() -> str:
    """"numpy, torch; not installed: scipy, ...": what the Python that runs every candidate has."""
    found = _importable_in_workers(sys.executable)
    have = [m for m in NUMERICAL_PACKAGES if m in found]
    missing = [m for m in NUMERICAL_PACKAGES if m not in have]
    return ", ".join(have or ["none of the common numerical packages"]) + \
        (f"; not installed: {', '.join(missing)}" if missing else "")


def describe_kit(settings: Settings, name: str, detail: bool = False) -> KitDetail:
    return _describe(find_kit(settings, name), detail)


def _describe(kit: Kit, detail: bool) -> KitDetail:
    m = kit.manifest
    ok, reason = kit.availability()
    start = kit.starting_point()
    out = KitDetail(name=kit.name, kind=m.kind, device=m.device, framework=m.framework, goal=m.goal,
                    direction=m.direction, x0=m.x0, best_known=m.best_known, available=ok,
                    unavailable_reason=reason, starting_point=str(start) if start else None,
                    packages=importable_packages(),
                    # What the harness will pass to every worker (threads apply to CPU kernel kits).
                    worker_env=tuning_env(m.threads if m.kind == "kernel" else None, m.device == "cuda",
                                          m.worker_env))
    if m.kind == "kernel":
        _, label = kit.baseline_solution()
        out.entry = m.entry
        out.signature = _signature(kit)
        out.tolerance = m.tolerance
        out.dev_workloads = [WorkloadInfo(name=w.uuid, axes=w.axes) for w in kit.dev_workloads()]
        out.heldout_count = m.heldout.count if m.heldout else 0
        out.baseline = label
        out.timing_note = m.timing_note
        out.inputs = _inputs_said(kit)
        from evoteam.servers.bench.measurement.method import timing_method  # text only: no numpy

        out.timing_method = timing_method(kit)
        out.solutions = sorted(kit.solutions()) if hasattr(kit, "solutions") else []
        if detail:
            out.reference = kit.definition.reference
            out.definition = kit.definition.model_dump(exclude={"reference"})
    else:
        # Said: a model's program imported a file beside it and failed (mp32, 2026-12-04).
        # Its time limit said: a model kept its programs under 12 s for want of it (mp36, 2026-12-05).
        out.entry = ("one self-contained program file (it runs alone in a folder of its own: files beside it are "
                     f"not importable); the kit's evaluator runs it, up to {m.timeouts.program_s:g} s a run, and "
                     "every compare or remeasure runs it again")
        out.signature = f"score = metric {m.objective!r} from the kit's evaluator ({m.direction})"
        out.heldout_count = m.program_heldout.count if m.program_heldout else 0
    return out


def _inputs_said(kit: Kit) -> str | None:
    """The input generator's own description and its file: whether held-out inputs could hold,
    say, near-duplicate points was to be learned only from a file no text named (mp53). Without a
    generator, where each input of the dev workloads comes from (a trace set's fixed tensors)."""
    if not kit.manifest.inputs:
        kinds: dict[str, list[str]] = {}
        for w in kit.dev_workloads()[:1]:
            for name, spec in w.inputs.items():
                kinds.setdefault(spec.type, []).append(name)
        said = [f"{label}: {', '.join(kinds[t])}" for t, label in
                (("random", "random, drawn afresh each round"), ("safetensors", "fixed tensors from the kit's files"),
                 ("scalar", "literal values")) if kinds.get(t)]
        return "; ".join(said) or "drawn from the normal distribution (floats) or 0..99 (integers), afresh each round"
    try:
        path = kit.file(kit.manifest.inputs)
        doc = ast.get_docstring(ast.parse(path.read_text()))
    except (OSError, SyntaxError, ValueError, DomainError):
        return None  # evaluating says what is wrong with it; a description does not guess
    said = doc.strip().split("\n\n")[0].replace("\n", " ") if doc else "its generator has no description"
    return f"{said} ({path})"


def remember(settings: Settings, values: dict, before: kitindex.Snapshot, listing: KitList | None = None) -> None:
    """Keep the listing and every listed kit's description in the kit index (formats/kitindex.py)
    with the facts they depend on, so that the next `bench list` or `bench describe KIT` on the
    command line answers without loading the kits. `values` are the raw settings the model was
    built from (configsource.setting_values); `before` the facts taken before the command loaded
    any kit; `listing` what it printed, if it printed the listing. Best effort: whatever goes
    wrong here leaves only the index unwritten, never the command's answer changed."""
    if before.facts is None or before.racy():
        return
    try:
        kits = discover(settings)
        listing = listing or list_kits(settings, limit=100)
        details: dict[str, dict] = {}
        modules = ["torch", *NUMERICAL_PACKAGES]
        for kit in kits.values():
            modules += kit.probed_modules()
        for item in listing.items:
            if not kitindex.describable(item.name):
                continue
            try:  # as `describe_kit(settings, name)` finds it: by name among the discovered kits
                details[item.name] = _describe(confinable(settings, kits[item.name]), False).model_dump(mode="json")
            except Exception:  # noqa: BLE001 - the normal path says why, each time it is asked
                continue
        kitindex.write(values, before, search_order(settings), settings.project_kits_dirs, modules,
                       listing.model_dump(mode="json"), details)
    except Exception:  # noqa: BLE001 - a cache: its failure must not become the command's
        return
