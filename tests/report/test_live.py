"""The live run pages on the shared knowledge server: nothing without a token, a browser login
that keeps the token out of URLs and scripts, and one project's runs invisible to another."""

from __future__ import annotations

import asyncio
import html
import re
import shutil
import subprocess
import sys
import time

import httpx
import pytest

from evoteam.servers.knowledge.bestline import listed_best, listed_interval
from evoteam.servers.knowledge.local import LocalKnowledgeStore
from evoteam.servers.knowledge.store import Actor
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token


@pytest.fixture
def server(filled_db, tmp_path):
    db, run_id = filled_db
    copy = tmp_path / "served.db"
    shutil.copy(db, copy)
    alice = make_token(copy, "alice", "default")
    bob = make_token(copy, "bob", "elsewhere")
    srv = KnowledgeServer(db=copy, port=free_port(), home=tmp_path).start()
    yield srv, run_id, alice, bob
    srv.kill()


def _listed(db, run_id: str) -> str:
    async def read():
        async with LocalKnowledgeStore.open(db, Actor(user="tester", client="test")) as store:
            return await store.get_run(run_id)

    run = asyncio.run(read())
    assert run.best_interval and run.best_interval[0] < run.best_interval[1], run  # a 95% interval to show
    return listed_best(run.best_score, listed_interval(run.best_interval, run.best_runs is not None))


def test_live_pages_need_a_token_and_keep_projects_apart(server, filled_db):
    srv, run_id, alice, bob = server
    db = filled_db[0]
    base = f"http://127.0.0.1:{srv.port}"
    # No token: 401 and a login form, with nothing from the store on it.
    for path in ("/runs", f"/runs/{run_id}"):
        r = httpx.get(base + path)
        assert r.status_code == 401 and run_id not in r.text and "fast RMSNorm" not in r.text
        assert '<form method="post" action="/login">' in r.text
    # A wrong token does not log in.
    r = httpx.post(base + "/login", data={"token": "evt_wrong"})
    assert r.status_code == 401 and "set-cookie" not in r.headers
    # The right token: a session cookie (HttpOnly, SameSite=Strict) that is not the token itself.
    r = httpx.post(base + "/login", data={"token": alice})
    assert r.status_code == 303 and r.headers["location"] == "/runs"
    cookie = r.headers["set-cookie"]
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower() and alice not in cookie
    session = r.cookies["evoteam_session"]
    with httpx.Client(base_url=base, cookies={"evoteam_session": session}, timeout=60) as browser:
        listing = browser.get("/runs")
        assert listing.status_code == 200 and run_id in listing.text and alice not in listing.text
        listed = _listed(db, run_id)
        assert re.fullmatch(r"[\d.]+ \([\d.]+–[\d.]+\)", listed), listed  # the best with its interval
        assert f"<td>{html.escape(listed)}</td>" in listing.text
        page = browser.get(f"/runs/{run_id}")
        assert page.status_code == 200 and "Score vs cumulative spend" in page.text
        assert 'http-equiv="refresh"' in page.text  # the run is active: the page refreshes
        assert alice not in page.text
    # A script may send the bearer token instead of a cookie.
    assert httpx.get(f"{base}/runs/{run_id}", headers={"Authorization": f"Bearer {alice}"}, timeout=60).status_code == 200
    # Another project's token sees neither the run nor that it exists.
    r = httpx.get(f"{base}/runs/{run_id}", headers={"Authorization": f"Bearer {bob}"})
    missing = httpx.get(f"{base}/runs/run_doesnotexist", headers={"Authorization": f"Bearer {bob}"})
    assert r.status_code == missing.status_code == 404
    assert "fast RMSNorm" not in r.text and r.text.replace(run_id, "X") == missing.text.replace(
        "run_doesnotexist", "X")
    assert run_id not in httpx.get(f"{base}/runs", headers={"Authorization": f"Bearer {bob}"}).text
    # A foreign Host header (DNS rebinding) is refused before any of this.
    assert httpx.get(f"{base}/runs", headers={"Host": "evil.example", "Authorization": f"Bearer {alice}"}
                     ).status_code == 421
    # Revoking the token ends the browser session at its next request.
    subprocess.run([sys.executable, "-m", "evoteam.cli", "token", "revoke", _token_id(srv, "alice")],
                   env=srv.env(), check=True, capture_output=True, timeout=60)
    time.sleep(0.1)
    assert httpx.get(base + "/runs", cookies={"evoteam_session": session}).status_code == 401


def _token_id(srv: KnowledgeServer, user: str) -> str:
    out = subprocess.run([sys.executable, "-m", "evoteam.cli", "token", "list"], env=srv.env(), check=True,
                         capture_output=True, text=True, timeout=60).stdout
    return next(line.split()[0] for line in out.splitlines() if f" {user} " in f" {line} " and "tok_" in line)
