"""The report's first page tells the truth at any size of run, as headless Chromium draws it:
one candidate with nothing spent, one passed and one failed, one team version, every candidate
failed, and fifty candidates over three team versions. The test reads the drawn page (the DOM after the charts
ran): axes whose ranges hold the scores, legends without "null", labelled workloads, every failed
candidate listed with its status and message, the counts, and no chart drawn without data."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from evoteam.report.data import FAILED_SHOWN, gather
from evoteam.report.page import render_report
from evoteam.servers.knowledge.connect import component_store
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import CandidateCreate, CostCreate, RunCreate, WorkloadResult
from evoteam.servers.knowledge.store import Actor
from evoteam.servers.team.core import TeamService
from evoteam.servers.team.models import TeamDesign

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
WORKLOADS = ["b1_d4096", "b8_d4096", "b64_d1024"]
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian package "
                                                         "`chromium`; .ci/run installs it)")


def _workloads(score: float) -> list[WorkloadResult]:
    return [WorkloadResult(workload=w, status="PASSED", speedup=score * (0.9 + 0.1 * i)) for i, w in enumerate(WORKLOADS)]


async def _record(store, run_id: str, *, score: float | None, failed: str | None = None, version: int | None = None,
                  role: str | None = None) -> None:
    bench = store.with_actor(Actor(user="tester", client="test", role=role, team_version=version, verifier=True))
    if failed:
        await bench.record_candidate(CandidateCreate(
            run_id=run_id, code="raise SystemExit", status="RUNTIME_ERROR", verified=True,
            metrics={"message": failed}))
    else:
        await bench.record_candidate(CandidateCreate(run_id=run_id, code="x = 1", status="PASSED", score=score,
                                                     verified=True, workloads=_workloads(score)))


async def _version(store, tmp_path: Path, run_id: str, v: int) -> None:
    team = TeamService(component_store("team", store), kb=store, write_agent_files=False, project_dir=tmp_path)
    await team.design_team(TeamDesign.model_validate({
        "run_id": run_id, "diagnosis": f"diagnosis {v}", "rationale": "answer it",
        "roles": [{"name": "Tuner", "mandate": "tune the kernel", "isolation": "shared"}]}))
    tuner = store.with_actor(Actor(user="tester", client="test", role="Tuner", team_version=v))
    await tuner.record_cost(CostCreate(run_id=run_id, usd=0.4 * v, source="transcript"))


async def build(store, tmp_path: Path, size: str) -> str:
    run = await store.start_run(RunCreate(goal=f"a {size} run", kit="rmsnorm_cpu", x0=1.0, budget_usd=10.0))
    if size == "one":
        await _record(store, run.id, score=2.541)
    elif size == "two":
        await _record(store, run.id, score=1.7)
        await _record(store, run.id, score=None, failed="ImportError: no module named 'triton'")
    elif size == "one version":
        await _version(store, tmp_path, run.id, 1)
        for score in (1.2, 1.5, 1.4):
            await _record(store, run.id, score=score, version=1, role="Tuner")
    elif size == "all failed":
        for i in range(3):
            await _record(store, run.id, score=None, failed=f"TIMEOUT after 60 s (attempt {i})")
    else:  # fifty candidates over three team versions, one in five failing
        n = 0
        for v in (1, 2, 3):
            await _version(store, tmp_path, run.id, v)
            for _ in range(17 if v < 3 else 16):
                n += 1
                if n % 5 == 0:
                    await _record(store, run.id, score=None, failed=f"INCORRECT_NUMERICAL: max error {n}e-3",
                                  version=v, role="Tuner")
                else:
                    await _record(store, run.id, score=1.0 + 0.05 * n, version=v, role="Tuner")
    return run.id


def draw(page: Path) -> str:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000", "--window-size=1200,2400"]
    done = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                          timeout=180)
    return done.stdout


def _range(dom: str, axis: str, title_part: str) -> tuple[float, float]:
    found = re.findall(rf"{axis}-axis titled '([^']*)' for a (?:linear|log) scale with values from "
                       rf"([-\d.e]+) to ([-\d.e]+)", dom)
    hits = [(float(lo), float(hi)) for title, lo, hi in found if title_part in title]
    assert hits, (axis, title_part, found)
    return hits[0]


def _text(dom: str, element_id: str) -> str:
    return re.search(rf'id="{element_id}">([^<]*)<', dom).group(1)


SIZES = ["one", "two", "one version", "all failed", "fifty"]


@pytest.mark.parametrize("size", SIZES)
async def test_the_first_page_tells_the_truth(size, tmp_path):
    async with LocalKnowledgeStore.open(tmp_path / "kb.db", Actor(user="tester", client="test")) as store:
        report = await gather(store, await build(store, tmp_path, size))
    page = tmp_path / "report.html"
    page.write_text(render_report(report))
    dom = draw(page)
    assert "</svg>" in dom or size == "all failed", "the charts did not draw"

    passed = [c for c in report.candidates if c.status == "PASSED"]
    failed = [c for c in report.candidates if c.status != "PASSED"]
    assert _text(dom, "count-candidates") == str(len(report.candidates))
    assert _text(dom, "count-passed") == str(len(passed)) and _text(dom, "count-failed") == str(len(failed))

    # Every failed candidate is listed with its status and message.
    rows = re.findall(r'<tr class="failed-candidate">(.*?)</tr>', dom)
    assert len(rows) == min(len(failed), FAILED_SHOWN)
    for c in failed:
        row = next(r for r in rows if c.id in r)
        assert c.status in row and c.message and c.message.split(" ")[0] in row

    # No chart is drawn without data: each chart holder got a drawing, each missing one a sentence.
    holders = re.findall(r'<div class="chart[^"]*" id="chart-(\w+)"', dom)
    assert len(re.findall(r"<svg", dom)) >= len(holders)
    assert "null" not in " ".join(re.findall(r'aria-label="([^"]*legend[^"]*)"', dom, re.I))

    if not passed:
        assert holders == [] and 'id="no-chart-progress"' in dom
        return
    # The score axis spans every score (its domain as the axis labels round it), and one score
    # too gets a range around it rather than a collapsed axis.
    scores = [c.score for c in passed]
    lo, hi = _range(dom, "Y", "score")
    assert lo < hi and lo <= min(scores) and max(scores) <= hi
    assert len(re.findall(r'aria-label="candidate cand_', dom)) == len(passed)
    # The best candidate's workloads are labelled, one row each.
    assert "workloads" in holders
    for w in WORKLOADS:
        assert f">{w}</text>" in dom, w
    lo, hi = _range(dom, "X", "speedup")
    assert lo < hi and lo <= min(w.speedup for w in report.best_workloads)
    assert max(w.speedup for w in report.best_workloads) <= hi
    spent = any(c.spent_usd > 0 for c in report.candidates)
    _range(dom, "X", "cumulative spend" if spent else "order recorded")
    if len(report.versions) >= 2:
        assert "versions" in holders
        assert len(re.findall(r'aria-label="intervention v', dom)) == len(report.interventions)
    else:  # no chart of one point (or none): the timeline table or a sentence says it
        assert "versions" not in holders
        assert ('id="no-chart-versions"' in dom) if report.versions else ("No team version yet" in dom)
    if size == "fifty":
        legend = next(a for a in re.findall(r'aria-label="([^"]*legend[^"]*)"', dom) if "team version" in a)
        assert all(f"v{v}" in legend for v in (1, 2, 3))
        shot = tmp_path / "shot.png"
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000",
                        "--window-size=1200,2400", f"--screenshot={shot}", page.as_uri()], capture_output=True,
                       timeout=180)
        # A blank page of this size compresses to a few KB; text, axes and marks do not.
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 60_000
