"""Issue 24: the local read-only commands import only what they use. `kb runs` and `team status`
read the embedded store: no MCP SDK, no numpy or rich, no YAML, no PostgreSQL layer, and the
store's and team's pydantic models are built on first use, not at import. (Their time is
measured, not asserted: benchmarks/bench_startup.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cliprobe import RUN_CLI

NEVER = {"mcp", "mcp_types", "numpy", "rich", "yaml", "psycopg", "psycopg_pool", "httpx", "httpx2", "anyio",
         "starlette", "uvicorn", "anthropic"}
PROBE = RUN_CLI + """from pydantic import BaseModel
models = []
stack = list(BaseModel.__subclasses__())
while stack:
    cls = stack.pop()
    stack.extend(cls.__subclasses__())
    if cls.__module__.startswith("evoteam.") and cls.__dict__.get("__pydantic_complete__"):
        models.append(f"{cls.__module__}.{cls.__qualname__}")
print("PROBE", json.dumps({"code": code, "modules": sorted(sys.modules), "built": sorted(set(models))}))
"""


@pytest.fixture
def store_with_a_run(tmp_path: Path) -> dict[str, str]:
    env = {"EVOTEAM_DB": str(tmp_path / "kb.db"), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-m", "evoteam", "kb", "start", "read me"], env=env, cwd=tmp_path,
                   capture_output=True, text=True, timeout=120, check=True)
    return env


def _probe(env: dict[str, str], cwd: Path, *args: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("PROBE ")), None)
    assert line is not None, done.stdout + done.stderr
    return json.loads(line[len("PROBE "):])


@pytest.mark.parametrize("args", [("kb", "runs"), ("team", "status")])
def test_local_reads_import_only_what_they_use(store_with_a_run, tmp_path, args):
    got = _probe(store_with_a_run, tmp_path, *args)
    assert got["code"] in (0, None), got["code"]
    tops = {m.split(".")[0] for m in got["modules"]}
    assert not tops & NEVER, sorted(tops & NEVER)
    assert "evoteam.servers.knowledge.pg" not in got["modules"]  # PostgreSQL only for a postgresql:// store
    assert not any(m.startswith("evoteam.servers.bench") for m in got["modules"])
    # Built on first use: a read builds the few models it returns, not the team's or the store's
    # write models.
    built = set(got["built"])
    for unused in ("evoteam.servers.team.models.TeamVersion", "evoteam.servers.team.models.RoleSpec",
                   "evoteam.servers.team.models.SpawnPlan", "evoteam.servers.knowledge.models.CandidateCreate",
                   "evoteam.servers.knowledge.auth.TokenInfo"):
        assert unused not in built, sorted(built)


@pytest.mark.parametrize("module", ["evoteam", "evoteam.cli"])
def test_a_file_in_the_working_folder_never_shadows_a_module(store_with_a_run, tmp_path: Path, module):
    """`python -m evoteam …` (without -P) started in a project folder: a candidate named like a
    standard module there was imported in its place and stopped the command (a bench server
    stopped on a candidate called copy.py)."""
    (tmp_path / "json.py").write_text("raise SystemExit('the working folder shadowed json')\n")
    done = subprocess.run([sys.executable, "-m", module, "kb", "runs", "--json"], env=store_with_a_run, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["total"] == 1


def test_nothing_a_project_folder_holds_is_imported_before_it_leaves_sys_path(tmp_path: Path):
    """In an installation without the dev venv's .pth files (which load pathlib and more at
    startup), `python -m evoteam` imported evoteam/__init__.py's modules while the working folder
    was still first on sys.path: a project's pathlib.py or re.py stopped it. Run without site
    (-S), evoteam and its packages on PYTHONPATH, beside files named like standard modules."""
    import site

    import evoteam

    # (Not what runpy itself imports first, e.g. collections: that is Python's own; -P avoids both.)
    for name in ("re", "pathlib", "fnmatch", "json", "typing", "__future__"):
        (tmp_path / f"{name}.py").write_text(f"raise SystemExit('the working folder shadowed {name}')\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "EVOTEAM_DB": str(tmp_path / "kb.db"),
           "PYTHONPATH": ":".join([str(Path(evoteam.__file__).parents[1]), *site.getsitepackages()])}
    done = subprocess.run([sys.executable, "-S", "-m", "evoteam", "--version"], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "version" in done.stdout, done.stdout + done.stderr
