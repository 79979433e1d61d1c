"""What long and wide commands show: names never cut at 80 columns, and progress with an
estimate of the time left whether stderr is a terminal or a pipe."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

from evoteam.progress import Lines, estimate

ROOT = Path(__file__).resolve().parents[1]
KITS = sorted(p.name for p in (ROOT / "task_kits").iterdir() if (p / "kit.json").is_file())


def _evoteam(tmp_path: Path, *args: str, columns: int = 80) -> subprocess.CompletedProcess:
    env = {"HOME": str(tmp_path), "EVOTEAM_DB": str(tmp_path / "state" / "kb.db"), "PATH": "/usr/bin:/bin",
           "COLUMNS": str(columns), "LANG": "C.UTF-8", "EVOTEAM_HOME": str(tmp_path / ".evoteam")}
    return subprocess.run([sys.executable, "-m", "evoteam", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


def test_bench_list_never_cuts_a_kit_name(tmp_path):
    assert "mla_paged_decode_h16_ckv512_kpe64_ps1" in KITS  # the longest name, 37 characters
    for columns in (80, 200):
        done = _evoteam(tmp_path, "bench", "list", columns=columns)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert max(len(line) for line in lines) <= columns
        for kit in KITS:
            assert any(kit in line for line in lines), (columns, kit)


def test_bench_run_piped_shows_progress_and_whole_workload_names(tmp_path):
    candidate = tmp_path / "mine.py"
    candidate.write_text((ROOT / "task_kits" / "rmsnorm_cpu" / "examples" / "better.py").read_text())
    done = _evoteam(tmp_path, "bench", "run", "rmsnorm_cpu", "mine.py", "--no-record")
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith("rmsnorm_cpu dev: ")]
    assert progress[-1].startswith("rmsnorm_cpu dev: 3/3 ")  # piped, yet every workload reported
    assert any("left)" in line for line in progress), progress  # with an estimate once one was done
    for workload in ("t256_h4096", "t1024_h2048", "t64_h8192"):
        # a table's cell, or a block's first line when the table would not fit (a note under load)
        assert re.search(rf"(^|│ ){workload} ", done.stdout, re.M), done.stdout
    assert "…" not in done.stdout and done.stdout.count("PASSED") >= 4, done.stdout  # title and rows, uncut


def test_a_failed_evaluation_shows_statuses_and_numbers_whole_at_any_width(tmp_path):
    """At 80 columns, piped, the table cut "INCORRECT_NUMERICAL" to "INCORRECT_NUME…" and the
    error column to "1.75e" (issue 24): a table that does not fit becomes one block per workload."""
    from evoteam.servers.bench.cli import print_evaluation
    from evoteam.servers.bench.kitview import Console
    from evoteam.servers.bench.models import Evaluation

    (tmp_path / "wrong.py").write_text((ROOT / "task_kits" / "rmsnorm_cpu" / "examples" / "wrong.py").read_text())
    piped = _evoteam(tmp_path, "bench", "run", "rmsnorm_cpu", "wrong.py", "--no-record")
    assert piped.returncode == 4, piped.stderr
    assert "…" not in piped.stdout and piped.stdout.count("INCORRECT_NUMERICAL") >= 4, piped.stdout
    assert max(len(line) for line in piped.stdout.splitlines()) <= 80
    evaluation = Evaluation.model_validate_json(_evoteam(tmp_path, "bench", "run", "rmsnorm_cpu", "wrong.py",
                                                         "--no-record", "--json").stdout)
    errors = [f"{w.max_abs_error:.2e}" for w in evaluation.workloads]
    for width, table in ((60, False), (80, False), (100, False), (160, True)):
        out = io.StringIO()
        print_evaluation(evaluation, Console(file=out, width=width))
        text = out.getvalue()
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= width, (width, text)
        assert ("│ INCORRECT_NUMERICAL │" in text) == table, (width, text)
        for w, error in zip(evaluation.workloads, errors):
            line = next(line for line in text.splitlines() if w.workload in line)
            assert "INCORRECT_NUMERICAL" in line, (width, text)
            assert error in text, (width, error)
        assert text.count("atol=1e-05") >= 3  # each workload's note, wrapped, not dropped


def test_estimates_come_from_the_steps_done():
    assert estimate(0, 10, 5.0) == ""  # nothing done yet: no guess
    assert estimate(2, 10, 20.0) == "about 80 s left"
    assert estimate(1, 4, 100.0) == "about 5 min 00 s left"
    assert estimate(4, 4, 100.0) == ""


def test_piped_lines_show_every_step_and_pace_messages_within_one():
    now = [0.0]
    out = io.StringIO()
    lines = Lines("remeasure run_x", stream=out, every_s=2.0, clock=lambda: now[0])
    lines.step(0, 4, "starting")
    for i in range(8):  # eight messages in four seconds within step 1: paced to one per 2 s
        now[0] = 1.0 + i * 0.5
        lines.step(1, 4, f"timing call {i}")
    now[0] = 6.0
    lines.step(2, 4, "evaluation 2")
    now[0] = 8.0
    lines.step(4, 4, "measured")
    shown = out.getvalue().splitlines()
    assert shown[0] == "remeasure run_x: 0/4 starting (0 s)"
    assert shown[1] == "remeasure run_x: 1/4 timing call 0 (1 s, about 3 s left)"
    assert [line.split(" (")[0] for line in shown[2:]] == [
        "remeasure run_x: 1/4 timing call 4", "remeasure run_x: 2/4 evaluation 2", "remeasure run_x: 4/4 measured"]
    assert shown[-1] == "remeasure run_x: 4/4 measured (8 s)"
    assert "\r" not in out.getvalue()  # a pipe gets plain lines, never terminal control


def test_bench_describe_keeps_workload_names_whole_when_narrow(tmp_path):
    done = _evoteam(tmp_path, "bench", "describe", "rmsnorm_cpu", columns=40)
    assert done.returncode == 0, done.stderr
    for workload in ("t256_h4096", "t1024_h2048", "t64_h8192"):
        assert f"│ {workload} " in done.stdout, done.stdout


def test_many_steps_are_paced_by_time(tmp_path):
    """A corpus of 300 files: a pipe gets a line every few seconds and the last, not 300."""
    now = [0.0]
    out = io.StringIO()
    lines = Lines("indexing corpus", stream=out, every_s=2.0, clock=lambda: now[0])
    for n in range(300):
        now[0] = n * 0.02  # six seconds in all
        lines.step(n, 300, f"file{n}.md")
    lines.step(300, 300, "files read")
    shown = out.getvalue().splitlines()
    assert 3 <= len(shown) <= 6 and shown[-1].startswith("indexing corpus: 300/300 files read")


def test_corpus_index_reports_progress_piped(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"note{i}.md").write_text(f"# Note {i}\n\nWarp occupancy and register pressure, part {i}.\n")
    done = _evoteam(tmp_path, "corpus", "index", str(corpus))
    assert done.returncode == 0, done.stderr
    progress = [line for line in done.stderr.splitlines() if line.startswith(f"indexing {corpus}: ")]
    assert progress[0].startswith(f"indexing {corpus}: 0/3 ") and progress[-1].startswith(f"indexing {corpus}: 3/3 files read")


def test_doctor_says_up_front_what_its_checks_cost_and_reports_each(tmp_path):
    """`doctor` took 18-42 s with nothing shown (issue 24): piped, it first says what each check
    usually takes, then prints every check, the warm hooks' included (doctor is where a user
    learns they are off), and the count."""
    done = _evoteam(tmp_path, "doctor", "--server", "knowledge")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr.startswith("checking side by side; each usually takes: server 1–4 s each"), done.stderr
    checks = [line.split()[1:3] for line in done.stdout.splitlines()[:-1]]
    assert {" ".join(c) for c in checks} >= {"server knowledge", "store round", "your store", "warm hooks"}, checks
    assert done.stdout.splitlines()[-1].startswith("all 4 checks passed"), done.stdout
