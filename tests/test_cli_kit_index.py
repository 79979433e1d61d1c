"""Issue 24: `evoteam bench list` and `bench describe KIT` answer from the kit index
(bench/formats/kitindex.py) without loading the kits, and print exactly what the normal path
prints; any change that a listing depends on sends the next call back to the kits. Outputs are
compared with EVOTEAM_QUICK_READS=0 runs; the quick runs' imports are counted (no pydantic, no
bench models): no timed asserts (benchmarks/bench_cli.py times them)."""

from __future__ import annotations

import json
import os
import shutil
import time
import subprocess
import sys
from pathlib import Path

import pytest

from evoteam.resources import kits_dir
from evoteam.servers.bench.formats import kitindex
from tests.support.cliprobe import RUN_CLI

PROBE = RUN_CLI + """print("PROBE", json.dumps({"code": code, "modules": sorted(sys.modules)}))
"""
SHIPPED = sorted(p.name for p in kits_dir().iterdir() if (p / "kit.json").is_file())


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    kits = tmp_path / "kits"
    mine = kits / "my_rmsnorm"
    shutil.copytree(kits_dir() / "rmsnorm_cpu", mine, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = json.loads((mine / "kit.json").read_text())
    # threads=None: the operator's OMP_NUM_THREADS reaches the workers (and the description)
    manifest.update(name="my_rmsnorm", goal="My own copy. It is for the tests.", threads=None)
    (mine / "kit.json").write_text(json.dumps(manifest))
    (tmp_path / "work").mkdir()
    return {"EVOTEAM_DB": str(tmp_path / "state" / "kb.db"), "HOME": str(tmp_path),
            "EVOTEAM_HOME": str(tmp_path / ".evoteam"), "EVOTEAM_KITS": str(kits), "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8", "COLUMNS": "150"}


def _settled(env: dict[str, str]) -> None:
    """Wait until nothing under the test's home (its kits, project and state) changed within the
    kit index's racy window. The index is rightly not kept when a file it depends on changed just
    before its facts were taken (the timestamps could then repeat), and on a fast machine a
    quick command starts within 50 ms of the test's own last write (seen: 47 ms)."""
    root = Path(env["HOME"])
    newest, fine = 0, False
    for path in [root, *root.rglob("*")]:
        try:
            st = path.stat()
        except OSError:
            continue
        newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
        fine = fine or st.st_ctime_ns % 1_000_000_000 != 0
    wait_ns = newest + (kitindex.RACY_FINE_NS if fine else kitindex.RACY_COARSE_NS) - time.time_ns()
    if wait_ns > 0:
        time.sleep(wait_ns / 1e9 + 0.01)


def _cli(env: dict[str, str], *args: str, quick: bool = True) -> subprocess.CompletedProcess:
    _settled(env)
    env = env if quick else {**env, kitindex.ENV_SWITCH: "0"}
    return subprocess.run([sys.executable, "-m", "evoteam", *args], env=env, cwd=Path(env["HOME"]) / "work",
                          capture_output=True, text=True, timeout=180)


def _probe(env: dict[str, str], *args: str) -> dict:
    _settled(env)
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd=Path(env["HOME"]) / "work",
                          capture_output=True, text=True, timeout=180)
    line = next((ln for ln in done.stdout.splitlines() if ln.startswith("PROBE ")), None)
    assert line is not None, done.stdout + done.stderr
    return json.loads(line[len("PROBE "):])


def _from_index(env: dict[str, str], *args: str) -> bool:
    """Whether this call answered from the index: the kits' models were never imported."""
    got = _probe(env, *args)
    assert got["code"] in (0, None), got
    return "pydantic" not in got["modules"] and "evoteam.servers.bench.models" not in got["modules"]


def _same_both_ways(env: dict[str, str], *args: str) -> str:
    quick, normal = _cli(env, *args), _cli(env, *args, quick=False)
    assert quick.returncode == normal.returncode == 0, (quick.stderr, normal.stderr)
    assert quick.stdout == normal.stdout and quick.stderr == normal.stderr
    return quick.stdout


def _index_file(env: dict[str, str]) -> Path:
    return Path(env["EVOTEAM_DB"]).parent / "bench" / "kit-index.json"


@pytest.mark.parametrize("columns", ["150", "60"])
def test_listing_and_describing_answer_from_the_index_as_the_kits_would(env, columns):
    env = {**env, "COLUMNS": columns}  # a table, or a heading per kit where the table would cut names
    assert not _from_index(env, "bench", "list")  # nothing kept yet: the kits are loaded
    assert _index_file(env).stat().st_mode & 0o777 == 0o600
    listing = _same_both_ways(env, "bench", "list")
    assert _from_index(env, "bench", "list")
    for name in [*SHIPPED, "my_rmsnorm"]:
        assert name in listing
        text = _same_both_ways(env, "bench", "describe", name)
        assert _from_index(env, "bench", "describe", name)
        assert text.startswith(name)
    mine = _cli(env, "bench", "describe", "my_rmsnorm").stdout
    assert "My own copy. It is for the tests." in mine and "tolerance: atol=1e-05 rtol=0.0001" in mine
    assert "dev workloads" in mine and "timing method:" in mine and "worker env:" in mine


def _new_kit(env):
    other = Path(env["EVOTEAM_KITS"]) / "second_kit"
    shutil.copytree(Path(env["EVOTEAM_KITS"]) / "my_rmsnorm", other)
    manifest = json.loads((other / "kit.json").read_text())
    manifest["name"] = "second_kit"
    (other / "kit.json").write_text(json.dumps(manifest))
    return "second_kit"


def _edited_goal(env):
    path = Path(env["EVOTEAM_KITS"]) / "my_rmsnorm" / "kit.json"
    manifest = json.loads(path.read_text())
    manifest["goal"] = "An edited goal. Seen at once."
    path.write_text(json.dumps(manifest))
    return "An edited goal."


def _edited_workloads(env):
    path = Path(env["EVOTEAM_KITS"]) / "my_rmsnorm" / "workloads.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows[0]["uuid"] = "a_renamed_workload"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return "a_renamed_workload"


def _threads(env):
    env["OMP_NUM_THREADS"] = "3"
    return "OMP_NUM_THREADS=3"


def _moved_kits(env):
    moved = Path(env["HOME"]) / "other_kits"
    shutil.copytree(env["EVOTEAM_KITS"], moved)
    manifest = json.loads((moved / "my_rmsnorm" / "kit.json").read_text())
    manifest["goal"] = "The moved copy. Another folder."
    (moved / "my_rmsnorm" / "kit.json").write_text(json.dumps(manifest))
    env["EVOTEAM_KITS"] = str(moved)
    return "The moved copy."


def _package_on_pythonpath(env):
    """A numerical package appears where this process finds it: the kits are read again, and
    describe_kit still calls it not installed, as a worker (`python -I`, no PYTHONPATH) cannot
    import it (review 2026-12-05: it was listed as importable)."""
    folder = Path(env["HOME"]) / "site" / "numba"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    env["PYTHONPATH"] = str(folder.parent)
    from evoteam.servers.bench.evaluation.catalog import importable_packages

    said = importable_packages()  # what this install's workers import (a CI install holds more than numpy)
    assert "numba" in said.partition("; not installed: ")[2], said
    return f"packages: {said}"


def _removed_kit(env):
    shutil.rmtree(Path(env["EVOTEAM_KITS"]) / "my_rmsnorm")
    return None


@pytest.mark.parametrize("change", [_new_kit, _edited_goal, _edited_workloads, _threads, _moved_kits, _removed_kit,
                                    _package_on_pythonpath],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_change_the_listing_depends_on_sends_the_next_call_to_the_kits(env, change):
    _cli(env, "bench", "list")
    _cli(env, "bench", "describe", "my_rmsnorm")
    assert _from_index(env, "bench", "list")
    shown = change(env)
    args = ("bench", "describe", "second_kit" if shown == "second_kit" else "my_rmsnorm")
    if shown is None:  # the kit is gone: the normal path's not-found answer, not the index's old text
        done = _cli(env, *args)
        assert done.returncode == 3 and "no kit named 'my_rmsnorm'" in done.stderr
        assert "my_rmsnorm" not in _same_both_ways(env, "bench", "list")
        return
    assert not _from_index(env, *args)  # the index no longer holds: the kits are loaded again
    text = _same_both_ways(env, *args)
    assert shown in text
    assert _from_index(env, *args)  # ... and kept again


def test_json_detail_and_a_folder_of_that_name_take_the_normal_path(env):
    _cli(env, "bench", "list")
    assert not _from_index(env, "bench", "list", "--json")
    assert json.loads(_cli(env, "bench", "list", "--json").stdout)["total"] == len(SHIPPED) + 1
    assert not _from_index(env, "bench", "describe", "my_rmsnorm", "--detail")
    # a folder named like a kit in the working folder is a kit by path (and needs trust)
    shutil.copytree(Path(env["EVOTEAM_KITS"]) / "my_rmsnorm", Path(env["HOME"]) / "work" / "my_rmsnorm")
    quick, normal = _cli(env, "bench", "describe", "my_rmsnorm"), _cli(env, "bench", "describe", "my_rmsnorm",
                                                                      quick=False)
    assert quick.returncode == normal.returncode != 0 and quick.stderr == normal.stderr
    assert "not trusted" in quick.stderr


@pytest.mark.parametrize("content", ["{not json", json.dumps({"format": 1, "modules": [], "listing": [],
                                                               "details": {}}), json.dumps([1, 2])])
def test_a_damaged_index_is_ignored_and_written_again(env, content):
    _cli(env, "bench", "list")
    _index_file(env).write_text(content)
    assert not _from_index(env, "bench", "list")
    assert _same_both_ways(env, "bench", "list").count("my_rmsnorm") == 1
    assert _from_index(env, "bench", "list")


def test_withdrawn_trust_is_not_outlived_by_the_index(env, tmp_path):
    """A kernel kit only a project file names is described once the user trusts its folder; the
    user then takes the trust back (edits the trusted-kits list): the description kept while it
    was trusted must not be served."""
    project = tmp_path / "work"
    shutil.move(env["EVOTEAM_KITS"], project / "pkits")
    env = {k: v for k, v in env.items() if k != "EVOTEAM_KITS"}
    (project / "evoteam.toml").write_text('kits_dirs = ["pkits"]\n')
    assert _cli(env, "bench", "trust", str(project / "pkits" / "my_rmsnorm")).returncode == 0
    assert "My own copy." in _same_both_ways(env, "bench", "describe", "my_rmsnorm")
    assert _from_index(env, "bench", "describe", "my_rmsnorm")
    (_index_file(env).parent / "trusted_kits").write_text("")
    refused = _cli(env, "bench", "describe", "my_rmsnorm")
    assert refused.returncode != 0 and "evoteam bench trust" in refused.stderr


def test_no_index_where_a_gpu_may_be_visible(monkeypatch, tmp_path):
    """There, whether a kit runs needs torch's own answer: the index is neither kept nor read."""
    values = {"db": tmp_path / "kb.db", "kits_dirs": [], "project_kits_dirs": []}
    assert kitindex.snapshot(values).facts is not None
    monkeypatch.setattr(kitindex, "gpu_driver_present", lambda: True)
    real = kitindex.importlib.util.find_spec
    monkeypatch.setattr(kitindex.importlib.util, "find_spec",
                        lambda name, *a: object() if name == "torch" else real(name, *a))
    assert kitindex.snapshot(values).facts is None


# ---------------------------------------------------------------- what a review found (each failed before)


def _definitions_folder(env):
    (Path(env["EVOTEAM_KITS"]) / "my_rmsnorm" / "definitions").mkdir()  # an empty folder: now a trace set


def _same_size_edit_keeping_mtime(env):
    path = Path(env["EVOTEAM_KITS"]) / "my_rmsnorm" / "kit.json"
    st = path.stat()
    path.write_text(path.read_text().replace("My own copy.", "My own COPY."))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # as `touch -r`, `cp -p` or `tar x` leave it


def _bad_setting(env):
    env["EVOTEAM_CORES_PER_EVAL"] = "0"  # refused by the settings model


def _shadowed_yaml(env):
    shadow = Path(env["HOME"]) / "shadow"
    shadow.mkdir()
    (shadow / "yaml.py").write_text("raise ImportError('not here')\n")
    env["PYTHONPATH"] = str(shadow)


def _other_kit_broken(env):
    (Path(env["EVOTEAM_KITS"]) / "my_rmsnorm" / "workloads.jsonl").unlink()


@pytest.mark.parametrize("change", [_definitions_folder, _same_size_edit_keeping_mtime, _bad_setting, _shadowed_yaml,
                                    _other_kit_broken], ids=lambda f: f.__name__.strip("_"))
def test_after_a_change_both_ways_answer_alike(env, change):
    """The listing and a description agree with loading the kits, exit codes included."""
    _cli(env, "bench", "list")
    _cli(env, "bench", "describe", "my_rmsnorm")
    assert _from_index(env, "bench", "list")
    change(env)
    for args in (("bench", "list"), ("bench", "describe", "my_rmsnorm"), ("bench", "describe", "rmsnorm_cpu"),
                 ("bench", "list")):
        quick, normal = _cli(env, *args), _cli(env, *args, quick=False)
        assert (quick.returncode, quick.stdout, quick.stderr) == (normal.returncode, normal.stdout, normal.stderr)
        assert "Traceback" not in quick.stderr
    # a broken kit elsewhere never fails the listing or another kit's description
    assert _cli(env, "bench", "list").returncode in (0, 1)
    if change is _other_kit_broken:
        assert _cli(env, "bench", "list").returncode == 0
        assert _cli(env, "bench", "describe", "rmsnorm_cpu").returncode == 0


def test_a_linked_kit_folder_is_never_served_from_the_index(env, tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    shutil.move(Path(env["EVOTEAM_KITS"]) / "my_rmsnorm", real / "my_rmsnorm")
    (Path(env["EVOTEAM_KITS"]) / "my_rmsnorm").symlink_to(real / "my_rmsnorm")
    _cli(env, "bench", "list")
    assert not _from_index(env, "bench", "list")  # its files are elsewhere: not stated, not kept
    path = real / "my_rmsnorm" / "kit.json"
    path.write_text(path.read_text().replace("My own copy.", "The linked copy."))
    assert "The linked copy." in _same_both_ways(env, "bench", "list")


@pytest.mark.parametrize("damage", ["deep", "shape"])
def test_an_index_that_cannot_be_printed_falls_back(env, damage):
    _cli(env, "bench", "list")
    _cli(env, "bench", "describe", "my_rmsnorm")
    path = _index_file(env)
    if damage == "deep":
        path.write_text("[" * 100_000)
    else:  # facts that hold, contents that do not print
        doc = json.loads(path.read_text())
        doc["listing"] = {}
        doc["details"]["my_rmsnorm"] = "not a description"
        path.write_text(json.dumps(doc))
    for args in (("bench", "list"), ("bench", "describe", "my_rmsnorm")):
        quick, normal = _cli(env, *args), _cli(env, *args, quick=False)
        assert quick.returncode == 0 and (quick.stdout, quick.stderr) == (normal.stdout, normal.stderr)


def test_facts_that_moved_while_the_kits_loaded_are_not_kept(env, monkeypatch):
    """The index is kept only when the facts taken before loading still hold after it, and no
    file changed just before they were taken (its timestamps could then repeat)."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(Path(env["HOME"]) / "work")
    from evoteam.configsource import setting_values

    values = setting_values()
    kit = Path(env["EVOTEAM_KITS"]) / "my_rmsnorm" / "kit.json"
    before = kitindex.snapshot(values)
    for _ in range(100):  # the kit was copied a moment ago: wait until that is no longer "just now"
        if not before.racy():
            break
        time.sleep(0.05)
        before = kitindex.snapshot(values)
    assert before.facts is not None and not before.racy()
    kit.write_text(kit.read_text().replace("My own copy.", "Changed meanwhile."))
    kitindex.write(values, before, [Path(d) for d, _ in before.facts["dirs"]], [], [], {"items": [], "total": 0},
                   {})
    assert not _index_file(env).exists()
    racy = kitindex.snapshot(values)  # taken right after the edit
    assert racy.racy()
    kitindex.write(values, racy, [Path(d) for d, _ in racy.facts["dirs"]], [], [], {"items": [], "total": 0}, {})
    assert not _index_file(env).exists()
