"""Finding task kits, trusting their folders, and the held-out workloads' secret.

A kit (``kit.py``) is a folder with ``kit.json`` (a KitManifest) and the files it names. A folder
holding only a FlashInfer-Bench ``definition.json`` (plus, optionally, ``workloads.jsonl``) loads
as a kernel kit too, with the reference as its baseline; every definition of a FIB trace set is a
kit (``traceset.py``). An OpenEvolve or SkyDiscover task folder (``evaluator.py`` and
``initial_program.*``, usually ``config.yaml``) loads as a program kit (see ``openevolve.py``).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from evoteam.config import Settings
from evoteam.resources import kits_dir
from evoteam.servers.bench.formats import fib, openevolve, traceset
from evoteam.servers.bench.formats.heldout_key import external_heldout_key, heldout_set_id
from evoteam.servers.bench.formats.kit import Kit
from evoteam.servers.bench.models import HeldoutChoice
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


def heldout_choice(settings: Settings, kit: Kit) -> HeldoutChoice:
    """The held-out inputs of ``kit`` and the set's name: the ones a caller sent with the job
    (``kit.heldout_given``), else drawn from this host's held-out key. Only what the kit's kind
    uses is drawn."""
    if kit.heldout_given is not None:
        return kit.heldout_given
    secret = heldout_secret(settings)
    choice = HeldoutChoice(set_id=heldout_set_id(secret))
    if kit.manifest.kind == "kernel":
        choice.workloads = kit.heldout_workloads(secret)
    elif kit.manifest.program_heldout is not None:
        choice.instances = openevolve.heldout_instances(secret, kit.name, kit.manifest.program_heldout)
    return choice


def kit_dirs(settings: Settings) -> list[Path]:
    return [Path(d).expanduser() for d in settings.kits_dirs]


def search_order(settings: Settings) -> list[Path]:
    """The shipped kits first: a kit elsewhere with a shipped kit's name never shadows it (it
    is still reachable by its path)."""
    shipped = kits_dir().resolve()
    dirs = kit_dirs(settings)
    return sorted(dirs, key=lambda d: d.resolve() != shipped)


def discover(settings: Settings) -> dict[str, Kit]:
    kits: dict[str, Kit] = {}
    for base in search_order(settings):
        if not base.is_dir():
            continue
        if fib.is_trace_set(base):
            for name, kit in traceset.trace_set_kits(base).items():
                kits.setdefault(name, kit)
            continue
        for child in sorted(base.iterdir()):
            if child.is_dir() and fib.is_trace_set(child):
                for name, kit in traceset.trace_set_kits(child).items():
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


def confinable(settings: Settings, kit: Kit) -> Kit:
    """A kit from a folder only a project file names: a program kit runs (its evaluator is
    confined like a candidate); a kernel kit's reference and baseline would run unconfined, so it
    needs the user's trust first."""
    if kit.manifest.kind == "kernel" and not is_trusted(settings, kit.root):
        raise DomainError(f"kit {kit.name} comes from {kit.root.parent}, which only the project's evoteam.toml "
                          "names; a project file cannot make a kit trusted (its reference would run unconfined). "
                          f"The user can trust it with `evoteam bench trust {kit.root}`")
    return kit


def find_kit(settings: Settings, name_or_path: str) -> Kit:
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
        return traceset.find_in_trace_set(path)
    if path.is_file() and path.suffix == ".json" and "definitions" in path.resolve().parts:
        root = next((p for p in path.resolve().parents if fib.is_trace_set(p)), None)
        if root is not None:
            _require_trust(settings, root)
        kit = traceset.find_in_trace_set(path)
        if kit is not None:
            return kit
    if path.is_dir():
        _require_trust(settings, path)
        return Kit.load(path)
    kits = discover(settings)
    if name_or_path in kits:
        return confinable(settings, kits[name_or_path])
    if "/" in name_or_path and Path(name_or_path.rstrip("/")).name in kits:
        return confinable(settings, kits[Path(name_or_path.rstrip("/")).name])  # `task_kits/<kit>` elsewhere
    if "/" not in name_or_path and name_or_path not in (".", ".."):
        # A folder of that name whose manifest is refused is left out of the list: say why.
        for base in kit_dirs(settings):
            if (base / name_or_path / "kit.json").is_file():
                Kit.load(base / name_or_path)
    names = ", ".join(sorted(kits)) or "none"
    raise Missing(f"no kit named {name_or_path!r}; available kits: {names} (list_kits shows them; a kit "
                      "folder's path also works)")
