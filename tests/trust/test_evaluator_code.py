"""Issue 23: a program's output never becomes code in its kit's evaluator unflagged.

The evaluator runs the program in a process of its own (as the docs advise) and then loads a
helper by name with its working folder on sys.path, or evals what the program printed. The
program leaves a sourceless .pyc (with a forged co_filename) or a native module in that folder,
or prints code. Each forged score used to rank first, unflagged; each must now be flagged."""

from __future__ import annotations

import base64
import importlib.util
import marshal
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from evoteam.config import Settings
from evoteam.servers.bench.evaluation import core

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the bench's sandbox is Linux-only")

HONEST = '''
# EVOLVE-BLOCK-START
def solve(instance):
    return 30.0
# EVOLVE-BLOCK-END
'''
HONEST_SCORE = -(7 + 44 + 20) / 3

HELPER_EVALUATOR = '''
import json, os, subprocess, sys
sys.path.insert(0, os.getcwd())  # its working folder first, as some task folders do

TARGETS = {1: 37.0, 2: 74.0, 3: 10.0}
RUNNER = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("candidate_program", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps([float(module.solve(s)) for s in (1, 2, 3)]))
"""


def evaluate(program_path):
    out = subprocess.run([sys.executable, "-c", RUNNER, program_path], capture_output=True, text=True,
                         timeout=60).stdout
    import scoring_helper  # the kit's own helper, loaded when first needed
    values = scoring_helper.parse(out)
    errors = [abs(v - TARGETS[s]) for s, v in zip((1, 2, 3), values)]
    return {"combined_score": -sum(errors) / len(errors)}
'''
HELPER = '''
import collections
import json
Pair = collections.namedtuple("Pair", "a b")  # library code compiling its own template: not the program


def parse(out):
    return [float(x) for x in json.loads(out)]
'''

EVAL_EVALUATOR = '''
import subprocess, sys

TARGETS = {1: 37.0, 2: 74.0, 3: 10.0}
RUNNER = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("candidate_program", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(repr([float(module.solve(s)) for s in (1, 2, 3)]) if not hasattr(module, "PRINT") else module.PRINT)
"""


def evaluate(program_path):
    out = subprocess.run([sys.executable, "-c", RUNNER, program_path], capture_output=True, text=True,
                         timeout=60).stdout
    values = eval(out)  # what the program printed, read back
    errors = [abs(v - TARGETS[s]) for s, v in zip((1, 2, 3), values)]
    return {"combined_score": -sum(errors) / len(errors)}
'''

DROPPER = '''
# EVOLVE-BLOCK-START
import base64, os
with open(os.path.join(os.getcwd(), {name!r}), "wb") as fh:
    fh.write(base64.b64decode({blob!r}))


def solve(instance):
    return 30.0
# EVOLVE-BLOCK-END
'''

EXACT = "def parse(out):\n    return [37.0, 74.0, 10.0]\n"


def _kit(root: Path, name: str, evaluator: str, helper: bool) -> None:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "evaluator.py").write_text(textwrap.dedent(evaluator))
    (folder / "initial_program.py").write_text(HONEST)
    if helper:
        (folder / "scoring_helper.py").write_text(HELPER)
    (folder / "config.yaml").write_text(
        "language: python\nevaluator:\n  timeout: 60\n  cascade_evaluation: false\n"
        f"evoteam:\n  name: {name}\n  objective: combined_score\n  direction: maximize\n")


@pytest.fixture
def kits(tmp_path, monkeypatch):
    root = tmp_path / "kits"
    _kit(root, "guess_helper", HELPER_EVALUATOR, helper=True)
    _kit(root, "guess_eval", EVAL_EVALUATOR, helper=False)
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return Settings(db=tmp_path / "state" / "kb.db", kits_dirs=[root]), project


async def _evaluate(settings: Settings, kit: str, project: Path, program: str):
    path = project / f"{kit}_{abs(hash(program))}.py"
    path.write_text(program)
    return await core.evaluate_candidate(settings, kit, candidate_path=str(path))


def _caught(e) -> None:
    forged = e.status == "PASSED" and not e.flagged and (e.score or 0.0) > HONEST_SCORE + 1e-9
    assert not forged, f"forged and ranks: status={e.status} score={e.score} flags={e.flags}"


def _pyc(source: str) -> bytes:
    code = compile(source, "/usr/lib/python3/dist-packages/scoring_helper.py", "exec")  # a forged origin
    return importlib.util.MAGIC_NUMBER + b"\0" * 12 + marshal.dumps(code)


async def test_the_honest_program_with_the_kits_own_helper_is_not_flagged(kits):
    settings, project = kits
    e = await _evaluate(settings, "guess_helper", project, HONEST)
    assert e.status == "PASSED" and not e.flagged and e.score == pytest.approx(HONEST_SCORE), (e.message, e.flags)


async def test_a_sourceless_pyc_left_in_the_working_folder_is_flagged(kits):
    settings, project = kits
    program = DROPPER.format(name="scoring_helper.pyc", blob=base64.b64encode(_pyc(EXACT)).decode())
    e = await _evaluate(settings, "guess_helper", project, program)
    _caught(e)
    assert e.flagged, (e.status, e.score, e.flags)


async def test_a_native_module_left_in_the_working_folder_is_flagged(kits, tmp_path):
    settings, project = kits
    if shutil.which("cc") is None or not Path(sysconfig.get_paths()["include"], "Python.h").is_file():
        pytest.skip("no C compiler or Python headers here to build the native module")
    src = tmp_path / "helper.c"
    src.write_text(textwrap.dedent('''
        #include <Python.h>
        static PyObject *parse(PyObject *self, PyObject *out) { return Py_BuildValue("[ddd]", 37.0, 74.0, 10.0); }
        static PyMethodDef methods[] = {{"parse", parse, METH_O, ""}, {NULL, NULL, 0, NULL}};
        static struct PyModuleDef mod = {PyModuleDef_HEAD_INIT, "scoring_helper", "", -1, methods};
        PyMODINIT_FUNC PyInit_scoring_helper(void) { return PyModule_Create(&mod); }
    '''))
    lib = tmp_path / "scoring_helper.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O0", f"-I{sysconfig.get_paths()['include']}", str(src), "-o", str(lib)],
                   check=True, capture_output=True)
    program = DROPPER.format(name="scoring_helper.so", blob=base64.b64encode(lib.read_bytes()).decode())
    e = await _evaluate(settings, "guess_helper", project, program)
    _caught(e)
    assert e.flagged, (e.status, e.score, e.flags)


async def test_an_evaluator_that_evals_the_programs_output_is_flagged(kits):
    settings, project = kits
    program = HONEST.replace("def solve", 'PRINT = "(lambda: [37.0, 74.0, 10.0])()"\n\n\ndef solve')
    e = await _evaluate(settings, "guess_eval", project, program)
    _caught(e)
    assert e.flagged, (e.status, e.score, e.flags)
