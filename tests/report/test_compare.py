"""`evoteam compare`: runs of one kit side by side; different kits are refused."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import sys

from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.models import RunCreate
from evoteam.servers.knowledge.store import Actor
from tests.report.conftest import fill_run


def _cli(env, *args):
    return subprocess.run([sys.executable, "-m", "evoteam.cli", *args], env=env, capture_output=True, text=True,
                          timeout=180)


def test_compare_two_runs_of_one_kit_and_refuse_two_kits(filled_db, tmp_path):
    db, evolving = filled_db
    copy = tmp_path / "compare.db"
    shutil.copy(db, copy)

    async def more():
        async with LocalKnowledgeStore.open(copy, Actor(user="tester", client="test")) as store:
            solo = await fill_run(store, tmp_path, goal="fast RMSNorm, one agent", versions=1)
            other = await store.start_run(RunCreate(goal="circles", kit="circle_packing_26"))
            return solo, other.id

    solo, other = asyncio.run(more())
    env = {"EVOTEAM_DB": str(copy), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = tmp_path / "compare.html"
    done = _cli(env, "compare", evolving, solo, "-o", str(out), "--threshold", "2.0")
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    assert evolving in page and solo in page and "Progress against spend" in page
    # The evolving run reached 2.0 at some spend; the solo run (baseline only) never did.
    row = {line.split("</td>")[0].rsplit(">", 1)[-1]: line for line in page.split("<tr>") if "<td>run_" in line}
    assert "$" in row[evolving].split("</td>")[-2] and row[solo].split("</td>")[-2].endswith("—")
    refused = _cli(env, "compare", evolving, other, "-o", str(tmp_path / "no.html"))
    assert refused.returncode != 0 and "different kits" in refused.stderr and "Traceback" not in refused.stderr
    assert not (tmp_path / "no.html").exists()
