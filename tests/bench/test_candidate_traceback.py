"""What a failing candidate's message shows of the traceback: its own frames and the libraries it
called, every exception of a chain, never the harness's frames around them (a syntax error read
~800 characters of worker.py and importlib; mp53), and all of it where only the harness failed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from evoteam.servers.bench.measurement import workerbase
from evoteam.servers.bench.measurement.workerbase import _exc_message


def _load(path: Path):
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # from a harness module's frame, as the worker imports one
    return module


def test_a_chained_error_keeps_the_candidates_frames_and_its_cause(tmp_path: Path):
    path = tmp_path / "candidate.py"
    path.write_text("def helper(x):\n    return x['missing']\n\ndef run(x):\n    try:\n        return helper(x)\n"
                    "    except KeyError as e:\n        raise RuntimeError('fast path failed') from e\n")
    with pytest.raises(RuntimeError) as caught:
        _load(path).run({})
    said = _exc_message(caught.value, None)
    assert said.startswith("RuntimeError: fast path failed\n"), said
    assert "KeyError: 'missing'" in said and "direct cause" in said, said  # the cause stays said
    assert f'"{path}", line 2, in helper' in said and f'"{path}", line 8, in run' in said, said
    assert "workerbase.py" not in said, said


def test_a_syntax_error_shows_its_line_alone(tmp_path: Path):
    path = tmp_path / "candidate.py"
    path.write_text("def run(x, y)\n    return x\n")
    with pytest.raises(SyntaxError) as caught:
        _load(path)
    said = _exc_message(caught.value, None)
    # (the worker's frames around it are the harness's: test_bench_server checks them through a real worker)
    assert f'"{path}", line 1' in said and "^" in said and "<frozen" not in said, said


def test_the_harness_failing_alone_keeps_every_frame():
    """An exception caught in the harness's own code with only its frames on the way (a bug of ours)."""
    space: dict = {}
    exec(compile("def catch(f, *a):\n    try:\n        f(*a)\n    except BaseException as e:\n        return e\n",
                 workerbase.__file__, "exec"), space)  # a frame of the harness's file, as worker.py's loop is
    exc = space["catch"](workerbase._tail, None)
    said = _exc_message(exc, None)
    assert isinstance(exc, TypeError) and 'workerbase.py", line' in said and "in _tail" in said, said
