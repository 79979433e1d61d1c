"""Kits shipped to Ray nodes by content hash.

The caller packs a kit folder once per content hash (a tar of its files and links, without
`__pycache__`) and puts it in Ray's object store; each job names the kit by name and hash and
carries the object's reference. A node that has the kit in its own kit folders uses that copy (a
different hash is refused, as before). A node without it fetches the archive, unpacks it into its
cache folder (`<state>/kit-cache/<hash>/`, created 0700 by the node's runner user), loads it and
checks that the unpacked kit has the caller's hash; a mismatch is refused and the folder removed.

Shipping a kit widens no trust: whoever can submit tasks to a Ray cluster already runs code on
its nodes, and the kit's code runs there in the same confinement as a kit installed by hand.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import tarfile
import tempfile
from pathlib import Path

from evoteam.errors import DomainError
from evoteam.servers.bench.formats.kit import Kit

# Larger kits (FlashInfer-Bench trace sets with their tensors) are installed on the nodes by hand.
MAX_SHIPPED_BYTES = 256 << 20


def pack(root: Path) -> bytes | None:
    """``root`` as a gzipped tar (paths relative to it; links kept as links), or None when its
    files pass MAX_SHIPPED_BYTES."""
    total = 0
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            rel = path.relative_to(root)
            if "__pycache__" in rel.parts:
                continue
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
                if total > MAX_SHIPPED_BYTES:
                    return None
            tar.add(path, arcname=rel.as_posix(), recursive=False)
    return buffer.getvalue()


def cache_root(state: Path) -> Path:
    return state / "kit-cache"


def cached(state: Path, kit_hash: str, name: str) -> Path:
    """Where a node keeps the kit of ``kit_hash`` (named ``name``)."""
    digest = kit_hash.split(":", 1)[-1]
    if not digest.isalnum() or len(digest) > 128 or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", name):
        raise DomainError(f"refused a shipped kit named {name[:80]!r} with hash {kit_hash[:80]!r}")
    return cache_root(state) / digest / name


def unpack(state: Path, kit_hash: str, name: str, archive: bytes) -> Path:
    """Unpack ``archive`` as the kit ``name`` of ``kit_hash`` into this node's cache (once: a
    kit already there is reused) and check its hash; a mismatch is refused."""
    target = cached(state, kit_hash, name)
    if not target.is_dir():
        try:
            cache_root(state).mkdir(parents=True, exist_ok=True, mode=0o700)
            scratch = Path(tempfile.mkdtemp(prefix="unpack-", dir=cache_root(state)))
        except OSError as exc:  # a full or unwritable state folder on the node: one line, not a traceback
            raise DomainError(f"the shipped kit {name} has no room in this node's kit cache "
                              f"{cache_root(state)}: {exc.strerror or exc}") from None
        try:
            with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
                # The "data" filter refuses absolute paths, `..`, links out of the folder and
                # device files: an archive cannot write outside the cache.
                tar.extractall(scratch / name, filter="data")
            target.parent.mkdir(exist_ok=True, mode=0o700)
            with contextlib.suppress(OSError):  # another task unpacked the same kit first
                os.rename(scratch / name, target)
        except (tarfile.TarError, OSError) as exc:
            raise DomainError(f"the shipped kit {name} could not be unpacked: {exc}") from None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    try:
        kit = Kit.load(target)
    except DomainError:
        shutil.rmtree(target, ignore_errors=True)
        raise
    if kit.content_hash != kit_hash or kit.name != name:
        shutil.rmtree(target, ignore_errors=True)
        raise DomainError(f"the shipped kit {name} unpacked with content hash {kit.content_hash[:16]}…, not the "
                          f"caller's {kit_hash[:16]}…; refused")
    return target
