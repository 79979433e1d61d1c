"""A worker's namespaces and identity, applied first (they need root): a mount namespace of its
own (private /tmp and /dev/shm, /proc of its own user, and folders only root may enter covered
with what the worker must read of them) and a uid of its own with no capability left once it
reads what it must without one (release_read_override).
"""

from __future__ import annotations

import ctypes
import os

from evoteam.servers.bench.confinement.host import check as _check
from evoteam.servers.bench.confinement.host import default_read_roots
from evoteam.servers.bench.confinement.host import libc as _libc

_CLONE_NEWNS = 0x00020000
_MS_NOSUID, _MS_NODEV, _MS_BIND, _MS_REC, _MS_PRIVATE = 0x2, 0x4, 0x1000, 0x4000, 0x40000
_PR_SET_SECUREBITS, _SECBIT_KEEP_CAPS = 28, 0x10
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_CAP_DAC_READ_SEARCH = 2
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 2, 4


def _under_tmp(paths: list[str]) -> list[str]:
    """The paths below /tmp that must stay visible, outermost only (a path inside another is
    carried along with it)."""
    inside = sorted({os.path.realpath(p) for p in paths if os.path.realpath(p).startswith("/tmp/")})
    out: list[str] = []
    for path in inside:
        if not any(path == kept or path.startswith(kept + "/") for kept in out):
            out.append(path)
    return out


def _closed_folders(paths: list[str]) -> dict[str, list[str]]:
    """Folders outside /tmp that a uid of its own may not enter (no search right for others) on
    the way to ``paths`` — /root, where a Python was installed by pyenv — each with the paths
    below it (outermost only). /tmp has its own tmpfs and its own binds."""
    found: dict[str, set[str]] = {}
    for path in sorted({os.path.realpath(p) for p in paths}):
        if path == "/tmp" or path.startswith("/tmp/"):
            continue
        folder = ""
        for part in path.strip("/").split("/")[:-1]:  # its ancestors; the path's own rights are its own
            folder += "/" + part
            try:
                closed = not os.stat(folder).st_mode & 0o001
            except OSError:
                break
            if closed:
                found.setdefault(folder, set()).add(path)
                break
    return {top: [p for p in sorted(inside) if not any(p.startswith(q + "/") for q in inside)]
            for top, inside in found.items()}


def _cover(libc, top: str, inside: list[str], options: bytes = b"size=1m,mode=755") -> None:
    """A tmpfs over ``top`` holding only ``inside`` (bound back from the host's folder, reached
    through a descriptor opened before the cover): the worker enters them without a capability
    and sees nothing else of ``top``."""
    host = os.open(top, os.O_PATH | os.O_DIRECTORY)
    try:
        _check(libc.mount(b"tmpfs", top.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, options),
               f"mounting a tmpfs on {top}")
        for path in inside:
            source = f"/proc/self/fd/{host}/{path[len(top) + 1:]}"
            if os.path.isdir(source):
                os.makedirs(path, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                open(path, "a").close()  # noqa: SIM115 - a mount point for one file
            _check(libc.mount(source.encode(), path.encode(), None, _MS_BIND | _MS_REC, None),
                   f"keeping {path} visible")
    finally:
        os.close(host)


def private_mounts(scratch: str, keep_visible: list[str] | None = None) -> str:
    """A mount namespace of this worker's own: fresh tmpfs on /tmp and /dev/shm (gone with the
    worker), /proc showing only processes of this worker's user. Needs CAP_SYS_ADMIN.

    What the worker must still read below /tmp — its scratch folder, and the Python installation
    or evoteam checkout when they live there (a CI clone or a venv in /tmp) — is bound back into
    the fresh /tmp from the host's, reached through a descriptor opened before the swap. Likewise
    a folder others may not enter on the way to what it must read (/root, holding a pyenv Python)
    is covered by a tmpfs holding only that, so the worker needs no capability to read it
    (release_read_override). Landlock still decides what may be read."""
    libc = _libc()
    scratch = os.path.realpath(scratch)
    if scratch.startswith("/dev/shm/"):
        raise OSError(22, "the scratch folder is in /dev/shm")
    roots = [scratch, *default_read_roots(scratch), *(keep_visible or [])]
    keep = _under_tmp(roots)
    closed = _closed_folders(roots)
    _check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Private first: without it the new mounts would propagate back to the host.
    _check(libc.mount(b"none", b"/", None, _MS_REC | _MS_PRIVATE, None), "making / private")
    mounted: list[bytes] = []
    try:
        mounted.append(b"/tmp")
        _cover(libc, "/tmp", keep, b"size=256m,mode=1777")
        for top, inside in closed.items():
            mounted.append(top.encode())
            _cover(libc, top, inside)
        _check(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=256m,mode=1777"),
               "mounting a tmpfs on /dev/shm")
        mounted.append(b"/dev/shm")
        _check(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV, b"hidepid=2"),
               "mounting /proc with hidepid=2")
    except OSError:
        for target in reversed(mounted):
            libc.umount2(target, 2)  # MNT_DETACH: back to the host's view
        raise
    return "private-tmp"


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _capset(keep: int) -> None:
    """This process's capabilities (effective, permitted, inheritable) set to ``keep`` (bits of the first 32)."""
    data = (_CapData * 2)(_CapData(keep, keep, keep), _CapData(0, 0, 0))
    _check(_libc().capset(ctypes.byref(_CapHeader(0x20080522, 0)), data), "capset")


def drop_identity(uid: int) -> str:
    """Run as ``uid`` from now on with no capability but reading files (which Landlock limits to
    its allow-list): the Python installation may sit in a folder only root can read."""
    libc = _libc()
    for cap in range(64):
        if cap != _CAP_DAC_READ_SEARCH:
            libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    _check(libc.prctl(_PR_SET_SECUREBITS, _SECBIT_KEEP_CAPS, 0, 0, 0), "prctl(SECBIT_KEEP_CAPS)")
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _capset(1 << _CAP_DAC_READ_SEARCH)
    # Ambient, so the programs it starts keep it too: a C++ solution's compiler reads the Python
    # headers, which sit wherever Python does. Landlock still decides what any of them reads.
    _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_RAISE, _CAP_DAC_READ_SEARCH, 0, 0), "prctl(CAP_AMBIENT)")
    return f"uid{uid}"


def _holds_read_override() -> bool:
    """Whether CAP_DAC_READ_SEARCH is in this process's permitted set (capget: /proc may be gone)."""
    data = (_CapData * 2)()
    if _libc().capget(ctypes.byref(_CapHeader(0x20080522, 0)), data) != 0:
        return True  # unknown: treated as held, so it is checked and dropped or named
    return bool((data[0].permitted | data[0].effective) >> _CAP_DAC_READ_SEARCH & 1)


def release_read_override(read_roots: list[str], landlocked: bool) -> str | None:
    """CAP_DAC_READ_SEARCH (kept by drop_identity so that a Python installed where only root may
    read still loads) lets a worker read any file: where Landlock is not in force, any on the
    machine (the held-out key, tokens, the store); where it is, the root-only files of its
    allow-list (/etc, /opt, /usr, the Python prefixes). So it is dropped (with no-new-privs, so
    nothing started gets it back) when this uid reads every folder the worker needs without it
    (os.access checks the real uid, capabilities aside; private_mounts covers a closed /root
    for it), and otherwise named in capitals as a missing protection. None where not held."""
    if os.getuid() == 0 or not _holds_read_override():
        return None
    needs = next((root for root in read_roots if os.path.exists(root) and not os.access(
        root, os.R_OK | (os.X_OK if os.path.isdir(root) else 0))), None)
    if needs is not None:
        reach = ("root-only files in Landlock's allow-list (/etc, /opt, /usr, the Python prefixes)" if landlocked
                 else "any file (no Landlock)")
        return (f"NO-READ-LIMIT({needs} is readable only with CAP_DAC_READ_SEARCH, which lets this worker read "
                f"{reach}; install Python where other users can read it)")
    libc = _libc()
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "prctl(CAP_AMBIENT_CLEAR_ALL)")
    _capset(0)
    return "no-read-override"


def isolate(scratch: str, uid: int | None, private: bool, keep_visible: list[str] | None = None) -> tuple[str, bool]:
    """Namespaces and identity, applied first (they need root). Returns the layers in force and
    whether /tmp and /dev/shm are private (``keep_visible``: folders below /tmp that must stay
    readable there, such as a kit's folder). A layer that cannot be applied is named in capitals
    with the reason, so results say what protection is missing."""
    layers = []
    private_tmp = False
    if private:
        try:
            layers.append(private_mounts(scratch, keep_visible))
            private_tmp = True
        except OSError as exc:
            layers.append(f"NO-PRIVATE-TMP({exc})")
    if uid is not None:
        try:
            layers.append(drop_identity(uid))
        except OSError as exc:
            layers.append(f"NO-OWN-UID({exc})")
    return "+".join(layers), private_tmp
