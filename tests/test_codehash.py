"""The identity of a candidate's code (evoteam/codehash.py): what changes the hash and what does not."""

from __future__ import annotations

import re

import pytest

from evoteam.codehash import code_hash, normalised_code

BODY = '''
import math


class Kernel:
    """Runs the kernel."""

    scale = 2

    def run(self, x):
        """Doubles x."""
        return x * self.scale


def helper(x):
    """Rounds x."""
    return math.floor(x)


async def fetch(x):
    """Awaits nothing."""
    return x
'''
MODULE = '"""A kernel, version 1."""\n' + BODY


@pytest.mark.parametrize("old, new", [
    ('"""A kernel, version 1."""', '"""A better kernel, re-typed by a model."""'),  # the module's
    ('"""Runs the kernel."""', "'The kernel.'"),  # a class's
    ('"""Doubles x."""', '"""Doubles x.\n\n        Said at length now.\n        """'),  # a function's
    ('"""Awaits nothing."""', '"""Awaits."""'),  # an async function's
])
def test_a_changed_docstring_is_the_same_code(old, new):
    assert old in MODULE
    assert code_hash(MODULE.replace(old, new)) == code_hash(MODULE)


def test_docstrings_removed_or_added_are_the_same_code():
    bare = re.sub(r'\n *"""[^"]*"""', "", BODY)
    assert '"""' not in bare and "class Kernel" in bare
    assert code_hash(bare) == code_hash(MODULE)


@pytest.mark.parametrize("old, new", [
    ("return x * self.scale", 'return x * self.scale\n        "a later string is code"'),  # not first
    ("scale = 2", 'scale = 2\n    "another later string"'),
    ("return x\n", 'return "x"\n'),  # a string used as a value
    ("import math", "import math\nNAME = 'v1'"),
])
def test_strings_that_are_not_docstrings_still_count(old, new):
    assert old in MODULE
    assert code_hash(MODULE.replace(old, new)) != code_hash(MODULE)


def test_a_later_strings_text_counts():
    one = 'def f():\n    """doc"""\n    "first"\n    return 1\n'
    assert code_hash(one) != code_hash(one.replace('"first"', '"second"'))


def test_an_f_string_first_statement_is_not_a_docstring():
    one = 'def f(x):\n    f"x is {x}"\n    return x\n'
    assert code_hash(one) != code_hash(one.replace("x is", "x was"))
    assert code_hash('f"{1}"\nX = 1\n') != code_hash('f"{2}"\nX = 1\n')


def test_a_bytes_first_statement_is_not_a_docstring():
    assert code_hash('b"one"\nX = 1\n') != code_hash('b"two"\nX = 1\n')


def test_comments_and_formatting_still_do_not_count():
    messy = "# a comment\r\n" + MODULE.replace("x * self.scale", "x*self.scale  # doubled").replace("\n", "\r\n")
    assert code_hash(messy + "\n\n\n") == code_hash(MODULE)


def test_code_still_counts():
    assert code_hash(MODULE.replace("x * self.scale", "x + self.scale")) != code_hash(MODULE)


def test_the_json_and_text_fallbacks_are_unchanged():
    # The normalised forms as they were before docstrings were dropped (the hashes stored for them stay).
    assert normalised_code('{ "b": 1,\n "a": "\\"\\"\\"doc\\"\\"\\"" }') == 'json:{"a":"\\"\\"\\"doc\\"\\"\\"","b":1}'
    cuda = '"""not Python"""\n__global__ void k(float* x) {   \r\n  x[0] = 1;\n}\n'
    assert normalised_code(cuda) == 'text:"""not Python"""\n__global__ void k(float* x) {\n  x[0] = 1;\n}'
    assert code_hash('{"a": 1}') == code_hash('{ "a" : 1 }\n') == "sha256:0ce2517115fd11c9"
    assert code_hash("__global__ void k() {}\n") == "sha256:7dc8b683275c777e"
    assert code_hash(cuda) != code_hash(cuda.replace("not Python", "other"))


def test_python_without_docstrings_keeps_its_hash():
    # As stored before docstrings were dropped: the migration rewrites only rows whose hash moves.
    assert code_hash("def run(x):\n    return x * 2\n") == "sha256:cfa11c73586a93fa"


def test_the_hash_format_is_kept():
    assert re.fullmatch(r"sha256:[0-9a-f]{16}", code_hash(MODULE))


KERNEL = '''import numpy as np


def run(hidden_states, weight, eps):
    x = hidden_states
    ss = np.einsum("ij,ij->i", x, x)
    for j, row in enumerate(x):
        pass
    try:
        import numpy.linalg as la
    except ImportError as err:
        raise RuntimeError("no linalg") from err
    out = np.empty_like(x)
    np.multiply(x, (1 / np.sqrt(ss / x.shape[-1] + eps))[:, None], out=out)
    out *= weight
    return out
'''
RENAMED = KERNEL.replace("    x = hidden_states", "    hs = hidden_states").replace(
    "ss = np.einsum(\"ij,ij->i\", x, x)", "sumsq = np.einsum(\"ij,ij->i\", hs, hs)").replace(
    "for j, row in enumerate(x)", "for k, r in enumerate(hs)").replace("as la", "as lin").replace(
    "as err:", "as exc:").replace("from err", "from exc").replace("out = np.empty_like(x)", "res = np.empty_like(hs)").replace(
    "np.multiply(x, (1 / np.sqrt(ss / x.shape", "np.multiply(hs, (1 / np.sqrt(sumsq / hs.shape").replace(
    "out=out)", "out=res)").replace("out *= weight\n    return out", "res *= weight\n    return res")


def test_a_functions_locals_renamed_are_the_same_code():
    """A copy of a run's best with its local names changed was a second candidate whose draw became
    the run's best (mp56): the names a function's locals are given do not count."""
    import re as _re

    assert not _re.search(r"\b(x|ss|out|row|la|err)\b(?!=)", RENAMED.split("def run")[1].replace("out=res", "")), RENAMED
    assert code_hash(RENAMED) == code_hash(KERNEL)


@pytest.mark.parametrize("old, new", [
    ("def run(hidden_states, weight, eps):\n    x = hidden_states", "def run(h, weight, eps):\n    x = h"),  # a parameter
    ("ss = np.einsum", "np = np.einsum"),  # a local that takes a global's name: another function
    ("out *= weight", "out *= x"),  # one local read for another
    ("import numpy.linalg as la", "import numpy.linalg"),  # binds the package, not the module
    ("out = np.empty_like(x)", "out = np.empty_like(x)\n    ss = [v for v in ss]"),  # a comprehension's scope
    ("out *= weight", "out *= weight\n    locals()"),  # reads its names
    ("x = hidden_states", "global x\n    x = hidden_states"),  # a module's name, not a local
])
def test_what_the_names_change_still_counts(old, new):
    """Parameters may be passed by name (a program kit's evaluator), so their names count; and
    where the compiler resolves a name through another scope, the names stay as written, so each
    of these is a change of code."""
    assert old in KERNEL
    changed = KERNEL.replace(old, new)
    assert code_hash(changed) != code_hash(KERNEL)
    if "locals()" in new or "global x" in new or "for v in" in new:  # names kept: a rename now counts too
        assert code_hash(changed.replace("sumsq", "ss").replace("ss =", "sq =").replace("(ss", "(sq")) != \
            code_hash(changed)


@pytest.mark.parametrize("code", [
    # A string that spells a local's name (numexpr.evaluate, a DataFrame query read names from text).
    'import numexpr\n\ndef run(x, w):\n    y = x\n    return numexpr.evaluate("y * w")\n',
    # Frames, code objects and getattr on the builtins read names at run time (review 2026-12-06).
    "import sys\n\ndef run(x, w):\n    y = x\n    return sys._getframe().f_locals['y'] * w\n",
    "import builtins\n\ndef run(x, w):\n    y = x\n    return getattr(builtins, 'ev' + 'al')('y') * w\n",
    "L = locals\n\ndef run(x, w):\n    y = x\n    return L()['y'] * w\n",
    "from builtins import locals as L\n\ndef run(x, w):\n    y = x\n    return max(L())\n",  # no string to see
    "from sys import _getframe as here\n\ndef run(x, w):\n    y = x\n    return here().f_locals['y'] * w\n",
])
def test_code_that_reads_its_local_names_keeps_them(code):
    """Its copy with the local renamed and the text that names it left as it was fails where the
    first passed: two codes, never one candidate, or the failing copy's measurement would fail the
    passing best it pooled into."""
    renamed = code.replace("    y = x", "    z = x")
    assert renamed != code and code_hash(renamed) != code_hash(code)
    # The same module with a plain kernel: renamed alike, one code (the rule still applies elsewhere).
    plain = "def run(x, w):\n    y = x\n    return y * w\n"
    assert code_hash(plain.replace("y", "z")) == code_hash(plain)


def test_common_library_calls_do_not_keep_the_names():
    """np.stack, re.compile or model.eval() read no local names: a kernel using them still has its
    locals' names read as their places (an attribute list once matched them; review 2026-12-06)."""
    code = ("import re\nimport numpy as np\n\nPATTERN = re.compile('a')\n\n\ndef run(x, model):\n"
            "    parts = np.stack((x, x))\n    model.eval()\n    return parts\n")
    assert code_hash(code.replace("parts", "both")) == code_hash(code)
