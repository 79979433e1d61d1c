"""A worker dropped to a uid of its own must not keep the capability to read any file
(CAP_DAC_READ_SEARCH, which drop_identity keeps so that a Python installed where only root may
read still loads): it is dropped where the uid reads what the worker needs without it (a closed
/root holding the Python is covered for it), and named as a missing protection where it does
not. With Landlock too: its allow-list (/etc, /opt, /usr) holds root-only files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from evoteam.servers.bench.confinement.jail import can_drop_privileges, pick_uid
from evoteam.servers.bench.evaluation.core import evaluate_candidate

pytestmark = pytest.mark.skipif(not can_drop_privileges(), reason="needs root, to drop to a uid of its own")

# Everything imported before the identity drops: afterwards this interpreter may not read its own
# installation (it may sit below /root).
DROP = r"""
import json, sys
from evoteam.servers.bench.confinement import identity
uid, roots, secret, release = int(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
identity.drop_identity(uid)
desc = identity.release_read_override(roots, landlocked=False) if release else None
try:
    with open(secret) as fh:
        readable = fh.read() == "s3cret"
except PermissionError:
    readable = False
print(json.dumps({"desc": desc, "readable": readable}))
"""


def _secret(tmp_path: Path) -> Path:
    """A file only root may read, in a folder only root may enter."""
    folder = tmp_path / "root-only"
    folder.mkdir(mode=0o700)
    secret = folder / "key"
    secret.write_text("s3cret")
    secret.chmod(0o600)
    return secret


def _dropped(roots: list[str], secret: Path, release: bool = True) -> dict:
    out = subprocess.run([sys.executable, "-c", DROP, str(pick_uid()), json.dumps(roots), str(secret),
                          "1" if release else "0"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_the_kept_capability_reads_a_root_only_file(tmp_path):
    """The hole itself: after drop_identity alone, a uid of its own reads a file only root may."""
    assert _dropped([], _secret(tmp_path), release=False) == {"desc": None, "readable": True}


@pytest.fixture
def shared_folder():
    """A folder every user may enter (pytest's own tmp_path sits below a folder only root may)."""
    base = "/var/tmp" if os.path.isdir("/var/tmp") else None
    if base is None:
        pytest.skip("no /var/tmp for a folder every user may enter")
    with tempfile.TemporaryDirectory(dir=base) as folder:
        os.chmod(folder, 0o755)
        yield Path(folder)


def test_it_is_dropped_where_the_uid_reads_what_the_worker_needs(shared_folder, tmp_path):
    open_dir = shared_folder / "open"
    open_dir.mkdir()
    open_dir.chmod(0o755)
    got = _dropped([str(open_dir)], _secret(tmp_path))
    assert got == {"desc": "no-read-override", "readable": False}


def test_it_is_named_a_missing_protection_where_the_worker_needs_it(tmp_path):
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    got = _dropped([str(closed)], _secret(tmp_path))
    assert got["desc"].startswith("NO-READ-LIMIT(") and str(closed) in got["desc"]
    assert got["readable"] is True  # kept, and said: the worker could not load Python without it


READER = """
import numpy as np
SECRET = {path!r}
try:
    with open(SECRET) as fh:
        LEAK = fh.read()
except OSError:
    LEAK = None

def run(hidden_states, weight, eps):
    if LEAK is not None:
        raise RuntimeError("read it: " + LEAK)
    x = hidden_states.astype(np.float64)
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight
    return y.astype(np.float32)
"""


async def test_without_landlock_a_candidate_never_reads_a_root_only_file_unsaid(fast_kit, fast_settings,
                                                                               shared_folder):
    """End to end, Landlock off: a candidate that reads a root-only file either cannot, or the
    evaluation lists the missing read limit (here it depends on where Python is installed). The
    file is not below /tmp: workers get a private one."""
    secret = _secret(shared_folder)
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=READER.format(path=str(secret)),
                                      use_landlock=False)
    missing = result.metrics.get("protections_missing") or []
    assert any(m.startswith("NO-LANDLOCK") for m in missing), missing
    if "s3cret" in (result.message or ""):
        assert any(m.startswith("NO-READ-LIMIT(") for m in missing), (result.message, missing)
    else:
        assert result.status == "PASSED", result.message
        assert "no-read-override" in result.sandbox, result.sandbox


@pytest.fixture
def allowed_folder():
    """A folder inside Landlock's read allow-list (/opt, else /usr/local), removed afterwards."""
    base = next((b for b in ("/opt", "/usr/local") if os.path.isdir(b) and os.access(b, os.W_OK)), None)
    if base is None:
        pytest.skip("no writable folder inside the read allow-list")
    with tempfile.TemporaryDirectory(dir=base, prefix="evoteam-test-") as folder:
        yield Path(folder)


async def test_with_landlock_a_candidate_reads_no_root_only_file_of_its_allow_list(fast_kit, fast_settings,
                                                                                   allowed_folder):
    """Landlock lets a worker read /etc, /opt, /usr and the Python prefixes; with the read
    capability kept, a root-only file there (an operator's key under /etc or /opt) was readable.
    Here Python sits under /root, only root may enter: covered for the worker, it loads without the
    capability, and the file stays closed (or, where that cannot be, the evaluation says so)."""
    secret = _secret(allowed_folder)
    result = await evaluate_candidate(fast_settings, str(fast_kit), code=READER.format(path=str(secret)))
    missing = result.metrics.get("protections_missing") or []
    if "s3cret" in (result.message or ""):
        assert any(m.startswith("NO-READ-LIMIT(") for m in missing), (result.message, missing)
    else:
        assert result.status == "PASSED", result.message
        assert "no-read-override" in result.sandbox and not missing, (result.sandbox, missing)
