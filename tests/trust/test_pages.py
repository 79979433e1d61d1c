"""Issue 23 (low): the run pages. A role name cannot break the report's scripts, no page can be
framed by another site, and the shared server accepts a browser Origin only from its own port."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import httpx

from evoteam.report.page import _json_for_script
from tests.knowledge.conftest import KnowledgeServer, free_port, make_token

HOSTILE = 'Scout<!--<script>alert(1)</script>--></script><script>x()</script>&amp;'


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[str] = []
        self._open = False

    def handle_starttag(self, tag, attrs):
        self._open = tag == "script"

    def handle_data(self, data):
        if self._open:
            self.bodies.append(data)

    def handle_endtag(self, tag):
        self._open = False


def test_a_hostile_name_stays_inside_its_json_script():
    text = _json_for_script({"roles": [HOSTILE]})
    assert not set("<>&") & set(text)
    assert json.loads(text) == {"roles": [HOSTILE]}
    parser = _Scripts()
    parser.feed(f'<script type="application/json" id="s">{text}</script><script>run()</script>')
    assert parser.bodies == [text, "run()"]


def test_pages_cannot_be_framed_and_other_local_origins_are_refused(tmp_path: Path):
    db = tmp_path / "kb.db"
    token = make_token(db, "alice", None)
    port = free_port()
    server = KnowledgeServer(db=db, port=port, home=tmp_path).start()
    try:
        base = f"http://127.0.0.1:{port}"
        login = httpx.get(base + "/runs")
        assert login.status_code == 401
        assert login.headers["x-frame-options"] == "DENY"
        assert "frame-ancestors 'none'" in login.headers["content-security-policy"]
        listing = httpx.get(base + "/runs", headers={"Authorization": f"Bearer {token}"})
        assert listing.status_code == 200 and listing.headers["x-frame-options"] == "DENY"
        other = httpx.get(base + "/runs", headers={"Authorization": f"Bearer {token}",
                                                    "Origin": f"http://127.0.0.1:{port + 1}"})
        assert other.status_code == 403
        own = httpx.get(base + "/runs", headers={"Authorization": f"Bearer {token}", "Origin": base})
        assert own.status_code == 200
    finally:
        server.kill()
