"""`evoteam bench remeasure`: the finalists of every version and the baseline, measured again
together, stored as a measurement set that the report shows beside the recorded scores."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

from evoteam.report.remeasure import Remeasured, judge


def test_judge_marks_only_scores_outside_the_noise_band():
    steady = Remeasured(candidate_id="a", team_version=1, recorded_score=4.0, dev_scores=[3.8, 4.1, 3.9])
    judge(steady, 0.10)
    assert steady.dev_median == 3.9 and not steady.changed
    inflated = Remeasured(candidate_id="b", team_version=2, recorded_score=9.0, dev_scores=[3.8, 4.1, 3.9])
    judge(inflated, 0.10)
    assert inflated.changed
    broken = Remeasured(candidate_id="c", team_version=3, recorded_score=2.0, dev_scores=[None, None])
    judge(broken, 0.10)
    assert broken.changed and broken.dev_median is None


def _expected_finalists(db, run_id) -> list[tuple[str, int]]:
    """Independently of the code under test: per version, the best passed, unflagged dev candidate."""
    import sqlite3

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, team_version, score FROM candidates WHERE run_id = ? AND status = 'PASSED' "
                            "AND flagged = 0 AND verified = 1 AND split = 'dev' AND score IS NOT NULL", (run_id,)).fetchall()
    best: dict[int, tuple[str, float]] = {}
    for cid, version, score in rows:
        if version not in best or score > best[version][1]:
            best[version] = (cid, score)
    return [(best[v][0], v) for v in sorted(best)]


def test_remeasure_cli_stores_a_set_the_report_shows(filled_db, tmp_path):
    db, run_id = filled_db
    copy = tmp_path / "remeasure.db"
    shutil.copy(db, copy)
    expected = _expected_finalists(copy, run_id)
    assert expected  # v1's baseline kernel at least
    env = {"EVOTEAM_DB": str(copy), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-m", "evoteam.cli", "bench", "remeasure", run_id, "--rounds", "2",
                           "--json"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    mset = json.loads(done.stdout)
    # The baseline first, then the best of each version, in version order.
    assert mset["entries"][0]["candidate_id"] == "baseline"
    assert [(e["candidate_id"], e["team_version"]) for e in mset["entries"][1:]] == expected
    assert all(len(e["dev_scores"]) == 2 for e in mset["entries"])
    baseline = mset["entries"][0]
    assert baseline["recorded_score"] is None and 0.5 < baseline["dev_median"] < 2
    page = tmp_path / "r.html"
    subprocess.run([sys.executable, "-m", "evoteam.cli", "report", run_id, "-o", str(page)], env=env, check=True,
                   capture_output=True, timeout=180)
    assert "Re-measured together" in page.read_text() and "2 interleaved rounds" in page.read_text()
