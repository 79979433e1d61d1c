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
