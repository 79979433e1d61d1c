"""Every claim of the README that a script can check: its two commands are CI's, every command
and file it names exists, the install route and the skips' reasons are what it says, its
performance figures come from the benchmark output they cite, and it stays short.

Other claims have their own tests: the install's permissions (tests/e2e/test_install.py), the
wheel route (tests/e2e/test_wheel.py), exit codes (tests/test_cli_exit_codes.py), the report's
first page (tests/report/test_first_page.py), kit trust (tests/bench/test_bench_trust.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import click
import pytest

from evoteam.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PERFORMANCE = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
RESULTS = ROOT / "benchmarks" / "results" / "2026-12-01-run_all.txt"


def _blocks(text: str) -> list[str]:
    return re.findall(r"```(?:bash)?\n(.*?)```", text, re.S)


def _commands(text: str, blocks: list[str] | None = None) -> list[str]:
    """The commands of the code blocks, without their trailing comments."""
    lines = [line.split("  #")[0].strip() for block in (blocks or _blocks(text)) for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_the_two_commands_come_first_and_ci_runs_exactly_them():
    first = _commands(README, _blocks(README)[:1])
    assert first == ["./install.sh", ".venv/bin/python -m pytest -q -rs"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
    assert "./install.sh" in ci and ci[-1] == first[1]
    assert "-rs" in first[1].split()  # skips print their reason
    # What CI installs between the two, the README names (a newcomer's run skips those tests).
    optional = {"torch": "PyTorch", "[ray]": "Ray", "codex_cli": "Codex CLI", "chromium": "Chromium",
                "postgresql": "PostgreSQL", "strace": "strace"}
    between = ci[ci.index("./install.sh") + 1:-1]
    assert between and all(any(key in line for key in optional) for line in between), between
    start = " ".join(README.split("## What you get", 1)[0].split())
    for key, name in optional.items():
        assert any(key in line for line in between) and name in start, (key, name)


def _resolves(words: list[str]) -> bool:
    """Whether `evoteam WORDS...` names a command (options and arguments after it are fine)."""
    command: click.Command = main
    ctx = click.Context(main)
    for word in words:
        if not isinstance(command, click.Group) or word.startswith("-"):
            return True
        sub = command.get_command(ctx, word)
        if sub is None:
            return False
        command, ctx = sub, click.Context(sub, parent=ctx)
    return not isinstance(command, click.Group)  # a group alone does nothing


def test_every_evoteam_command_in_the_readme_exists():
    named = [c for c in _commands(README) if c.startswith("evoteam ")]
    named += re.findall(r"`(evoteam [a-z][^`]*)`", README)
    assert len(named) >= 12
    missing = [c for c in named if not _resolves([w for w in c.split()[1:] if w not in ("…",)])
               and not c.rstrip().endswith("…")]
    assert not missing, missing


def test_every_path_and_link_in_the_readme_exists():
    for link in re.findall(r"\]\(([^)#]+)\)", README):
        assert (ROOT / link).exists(), link
    for path in re.findall(r"(task_kits/[\w./]+\.py|task_kits/\w+|docs/\w+\.md|\.ci/run|benchmarks/run_all)", README):
        assert (ROOT / path).exists(), path
    kits = {p.name for p in (ROOT / "task_kits").iterdir() if (p / "kit.json").is_file()}
    for kit in re.findall(r"^\| `([\w]+)`", README, re.M):
        assert kit in kits or kit in ("knowledge", "team", "retrieval", "bench", "evoteam"), kit
    for row in re.findall(r"^\| `(\w+)`, `(\w+)` \|", README, re.M):
        assert set(row) <= kits


def test_the_install_route_and_the_downloads_are_said():
    assert "pipx install ./evoteam" not in README and "pipx install ." in README
    assert (ROOT / "pyproject.toml").is_file()  # `.` is the installable project (tests/e2e/test_wheel.py builds it)
    # The Codex tests fetch the pinned CLI from npm; the README says so, and where it goes.
    from tests.support import codex_cli

    assert "@openai/codex" in README and "npm" in README and "~/.cache/evoteam-tests" in README
    import os

    if not os.environ.get("EVOTEAM_TEST_CACHE"):  # the folder the README names is where it goes
        assert codex_cli.CACHE.parent == Path.home() / ".cache" / "evoteam-tests"


def test_ndg_is_defined_and_the_trust_step_shown():
    assert re.search(r"\*\*NDG\*\*, the\s+normalised discovery gain: 100 · \(best − x0\) / \(best known − x0\)", README)
    assert "evoteam bench trust" in README and "examples/" in README


def test_every_kit_ships_the_starting_program_and_examples_the_readme_promises():
    """The first session's sentence on what each kit ships, held for every shipped kit: a CPU kit
    has its starting program and a better and a wrong example, a GPU kit a wrong one."""
    import json

    assert "Every CPU kit ships a starting program (`baseline.py`, or `initial_program.py`" in " ".join(README.split())
    kits = [p for p in (ROOT / "task_kits").iterdir() if (p / "kit.json").is_file()]
    assert len(kits) >= 6
    for kit in kits:
        manifest = json.loads((kit / "kit.json").read_text(encoding="utf-8"))
        examples = manifest.get("examples", {})
        promised = {"wrong"} if manifest.get("device") == "cuda" else {"better", "wrong"}
        assert promised <= set(examples), (kit.name, examples)
        for name in promised:
            assert examples[name].startswith("examples/") and (kit / examples[name]).is_file(), (kit.name, name)
        if manifest.get("device") != "cuda":
            start = manifest.get("initial_program") if manifest["kind"] == "program" else \
                manifest["baseline"][0].split("::")[0]
            assert start in ("baseline.py", "initial_program.py") and (kit / start).is_file(), (kit.name, start)


def _skip_calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = ast.unparse(node.func)
            if name in ("pytest.skip", "skip") or name.endswith(("mark.skip", "mark.skipif", "importorskip")):
                yield name, node


def test_every_skip_in_the_suite_gives_a_reason():
    """`-rs` shows a skip's reason; a skip without one would show nothing useful."""
    silent = []
    for path in (ROOT / "tests").rglob("*.py"):
        for name, node in _skip_calls(ast.parse(path.read_text(encoding="utf-8"))):
            if name.endswith("importorskip"):
                continue  # pytest words the reason itself ("could not import ...")
            if not node.args and not any(k.arg in ("reason", "msg") for k in node.keywords):
                silent.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            elif name.endswith("mark.skipif") and not any(k.arg == "reason" for k in node.keywords):
                silent.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not silent, silent


def test_the_readme_reads_in_five_minutes():
    words = len(README.split())
    assert words < 1500, words  # ~250 words a minute
    assert "| hot path |" not in README  # the performance tables live in docs/performance.md


_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?")


def test_every_figure_in_the_performance_tables_comes_from_the_cited_run():
    assert RESULTS.name in PERFORMANCE and "benchmarks/run_all" in PERFORMANCE
    # The run_all output, and any other saved run the page names for its own table.
    cited = [RESULTS, *(p for p in RESULTS.parent.glob("*.txt") if p != RESULTS and p.name in PERFORMANCE)]
    measured = [float(n.replace(",", "")) for path in cited for n in _NUMBER.findall(path.read_text(encoding="utf-8"))]

    def found(token: str) -> bool:
        digits = len(token.split(".")[1]) if "." in token else 0
        value = float(token.replace(",", ""))
        return any(abs(m - value) <= 0.5 * 10 ** -digits + 1e-9 for m in measured)

    lines = PERFORMANCE.splitlines()
    checked, missing = 0, []
    for i, line in enumerate(lines):
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        if i + 1 < len(lines) and set(lines[i + 1]) <= set("|- "):
            continue  # a header row: sizes and names, not figures
        for cell in line.strip("|").split("|")[1:]:
            for token in _NUMBER.findall(cell):
                checked += 1
                if not found(token):
                    missing.append((token, line[:60]))
    assert checked > 150 and not missing, missing


@pytest.mark.parametrize("doc", sorted(p.name for p in (ROOT / "docs").glob("*.md")))
def test_docs_links_resolve(doc):
    text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
    for link in re.findall(r"\]\(([^)#:]+)\)", text):
        assert (ROOT / "docs" / link).exists(), (doc, link)


def test_every_doc_the_code_and_texts_point_to_exists():
    """Error messages, skills and briefs send users and agents to docs/*.md: each must exist."""
    named = set()
    for folder in ("evoteam", "skills", "agents", "commands"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".md", ".toml", ".json") and path.is_file():
                named.update(re.findall(r"docs/([A-Za-z0-9_-]+\.md)", path.read_text(encoding="utf-8")))
    assert len(named) >= 3, named  # the walk found the references it exists to check
    assert not [n for n in sorted(named) if not (ROOT / "docs" / n).exists()]


def test_the_first_session_runs_as_written(tmp_path):
    """The README's first session, command by command, in a fresh folder with a fresh store:
    the examples evaluate (the wrong one exits 4, as it says), the user's own copy of the
    baseline evaluates and is recorded, and the report page is written."""
    import os
    import subprocess
    import sys

    section = README.split("## A first session", 1)[1].split("\n## ", 1)[0]
    commands = [c for c in _commands(section) if not c.startswith("source ")]
    assert commands[0] == "evoteam bench list" and commands[-1].startswith("evoteam report RUN")
    (tmp_path / "task_kits").symlink_to(ROOT / "task_kits")  # the README runs from the checkout
    env = {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
           "EVOTEAM_DB": str(tmp_path / "state" / "evoteam.db"), "LANG": "C.UTF-8",
           "EVOTEAM_HOME": str(tmp_path / ".evoteam")}
    run_id = None
    for command in commands:
        if "RUN" in command.split():
            command = command.replace("RUN", run_id)
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)
        expected = 4 if "wrong.py" in command else 0
        assert done.returncode == expected, (command, done.stdout[-2000:], done.stderr[-2000:])
        if command == "evoteam kb runs":
            run_id = done.stdout.split()[0]
            assert run_id.startswith("run_")
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "Failed candidates" in page and "INCORRECT_NUMERICAL" in page  # wrong.py, and why
    assert "id=count-candidates>3<" in page and "id=count-failed>1<" in page


def test_evoteams_folder_is_private_whichever_command_makes_it(tmp_path):
    """The README's "~/.evoteam/ (0700)": install.sh makes it so, and without install.sh (pipx, a
    wheel) the first command does, under the usual umask: the first session's first command,
    whose kit index is the first thing written there, made it 0755."""
    import os
    import subprocess
    import sys

    assert "`~/.evoteam/`\n(0700" in README or "`~/.evoteam/` (0700" in README
    env = {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
           "LANG": "C.UTF-8"}
    done = subprocess.run(["bash", "-c", "umask 022 && evoteam bench list"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    home = tmp_path / ".evoteam"
    assert home.stat().st_mode & 0o777 == 0o700
    assert any(home.rglob("*"))  # the command did write there (its kit index)
    home.chmod(0o750)  # a folder that exists is its owner's choice: left as it is
    subprocess.run(["bash", "-c", "evoteam bench list"], cwd=tmp_path, env=env, capture_output=True, timeout=300)
    assert home.stat().st_mode & 0o777 == 0o750
