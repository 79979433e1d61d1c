"""`evoteam report` on a store filled by a real run: the numbers, the page, the charts drawn."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import vl_convert

from evoteam.report.data import gather
from evoteam.report.page import render_report, report_charts
from tests.report.conftest import fill_run


async def test_report_numbers_come_from_the_run(filled):
    kb, run_id, report = filled
    run = await kb.get_run(run_id)
    assert [v.version for v in report.versions] == [1, 2, 3]
    assert [v.version for v in report.interventions] == [2, 3]
    # Spend: the supervisor's share is counted, and the whole equals the run's spend.
    by_role = {s.label: s.usd for s in report.spend_by_role}
    assert by_role["supervisor"] == pytest.approx(0.75)
    assert sum(by_role.values()) == pytest.approx(run.spent_usd)
    assert {s.label: s.usd for s in report.spend_by_version} == pytest.approx({"v1": 1.0, "v2": 2.0, "v3": 3.0})
    # The running best is monotone and ends at the run's best; the wrong kernel never ranks.
    bests = [c.best_so_far for c in report.candidates if c.best_so_far is not None]
    assert bests == sorted(bests) and bests[-1] == pytest.approx(run.best_score)
    assert report.best_candidate_id == run.best_candidate_id
    assert any(c.status != "PASSED" for c in report.candidates)
    # Cumulative spend grows along the run; an intervention sits at the spend of its moment.
    spends = [c.spent_usd for c in report.candidates]
    assert spends == sorted(spends) and spends[-1] <= run.spent_usd + 1e-9
    assert report.versions[1].spent_usd < report.versions[2].spent_usd
    # Per-workload speedups of the best candidate (rmsnorm has three dev workloads, all faster).
    assert len(report.best_workloads) == 3 and all(w.speedup and w.speedup > 1 for w in report.best_workloads)
    # Retrieval: one gate per intervention, forecast pairs credited with realised scores.
    assert [g.decision for g in report.retrieval.gates] == ["retrieve", "retrieve"]
    assert report.retrieval.pairs and report.retrieval.distinct_urls > 0


def _labels(svg: str, prefix: str) -> list[str]:
    return re.findall(rf'aria-label="{prefix}[^"]*"', svg)


async def test_charts_draw_one_marker_per_intervention(filled):
    _, _, report = filled
    specs = report_charts(report)
    assert set(specs) == {"progress", "versions", "workloads", "spend", "retrieval"}
    svg = vl_convert.vegalite_to_svg(specs["progress"])
    assert len(_labels(svg, "intervention v")) == len(report.interventions) == 2
    ranked = [c for c in report.candidates if c.status == "PASSED" and c.split != "heldout"]
    assert len(_labels(svg, "candidate cand_")) == len(ranked)
    workloads = vl_convert.vegalite_to_svg(specs["workloads"])
    assert len(_labels(workloads, "workload ")) == 3


async def test_page_is_self_contained_and_escapes_store_text(kb, tmp_path):
    run_id = await fill_run(kb, tmp_path, goal="</script><script>alert(1)</script> & <b>bold</b>", versions=1)
    page = render_report(await gather(kb, run_id))
    assert "<script>alert(1)</script>" not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)" in page
    # No network at view time: nothing is loaded from elsewhere.
    assert not re.search(r'<(script|link|img)[^>]+(src|href)=["\']?(https?:)?//', page)
    assert "vegaEmbed" in page


def test_report_cli_writes_html_and_pngs(filled_db, tmp_path):
    db, run_id = filled_db
    env = {"EVOTEAM_DB": str(db), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = tmp_path / "r.html"
    done = subprocess.run([sys.executable, "-m", "evoteam.cli", "report", run_id, "-o", str(out), "--png",
                           str(tmp_path / "png")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert out.stat().st_size > 100_000 and run_id in out.read_text()
    pngs = sorted(p.name for p in (tmp_path / "png").iterdir())
    assert pngs == ["progress.png", "retrieval.png", "spend.png", "versions.png", "workloads.png"]
    assert all((tmp_path / "png" / p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)
    missing = subprocess.run([sys.executable, "-m", "evoteam.cli", "report", "run_nope"], env=env,
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "Traceback" not in missing.stderr and "run_nope" in missing.stderr


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(CHROMIUM is None, reason="headless Chromium not installed (Debian package `chromium`)")
async def test_page_renders_in_headless_chromium(filled, tmp_path):
    """The page as a browser draws it: the charts render (SVG in the DOM, one diamond per
    intervention) and a screenshot is not blank."""
    _, _, report = filled
    page = tmp_path / "report.html"
    page.write_text(render_report(report))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000",
             "--window-size=1200,2400"]
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True,
                         timeout=120).stdout
    assert len(_labels(dom, "intervention v")) == len(report.interventions) == 2
    assert dom.count("<svg") >= 5
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *flags, f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120)
    # A blank page of this size compresses to a few KB; text, axes and marks do not.
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 60_000


async def test_the_team_server_tells_the_supervisor_the_reports_numbers(filled_db):
    from mcp import Client

    from evoteam.config import load_settings
    from evoteam.servers.knowledge.local import LocalKnowledgeStore
    from evoteam.servers.knowledge.store import Actor
    from evoteam.servers.team.server import build_server
    from tests.knowledge.conftest import held

    db, run_id = filled_db
    async with LocalKnowledgeStore.open(db, Actor(user="tester", client="test")) as store:
        run = await store.get_run(run_id)
        async with held(Client(build_server(load_settings(), store))) as client:
            result = await client.call_tool("run_report", {"run_id": run_id})
            assert not result.is_error, result.content
            summary = result.structured_content
            missing = await client.call_tool("run_report", {"run_id": "run_nope"})
    assert summary["best_dev_score"] == run.best_score and summary["spent_usd"] == run.spent_usd
    assert [v["version"] for v in summary["versions"]] == [1, 2, 3]
    assert summary["spend_by_role"]["supervisor"] == 0.75
    assert summary["gate_decisions"] == {"retrieve": 2}
    assert summary["report_command"].startswith(f"evoteam report {run_id}")
    assert missing.is_error and "run_nope" in missing.content[0].text
