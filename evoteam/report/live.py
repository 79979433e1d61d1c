"""The live run pages: `/runs` and `/runs/{id}`, the report of each run, refreshing while the
run is active — on the shared knowledge server behind its tokens, or from `evoteam report
--serve` for the embedded store.

A browser logs in once by pasting its token into a form; the server keeps the session under a
random id and gives the browser only that id, in an HttpOnly, SameSite=Strict cookie. Tokens
never travel in URLs. Every request re-checks the token, so revoking it ends the session.
Scripts may send `Authorization: Bearer <token>` instead. `evoteam report --serve` keeps its
sessions in memory (`Sessions`); the shared knowledge server keeps them in the store, so every
replica knows them (knowledge/sessions.py).
"""

from __future__ import annotations

import html
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from evoteam.report.data import gather
from evoteam.report.page import render_report
from evoteam.servers.knowledge.bestline import listed_best, run_interval
from evoteam.servers.knowledge.errors import StoreError
from evoteam.servers.knowledge.store import Actor, KnowledgeStore

COOKIE = "evoteam_session"
SESSION_SECONDS = 12 * 3600
REFRESH_SECONDS = 30

# token text -> the caller's identity, or None when the token is not (or no longer) valid
Verify = Callable[[str], Awaitable[Actor | None]]


@dataclass
class Sessions:
    """Browser sessions: random id -> (token, expiry). Memory only: a restart logs everyone out."""

    by_id: dict[str, tuple[str, float]] = field(default_factory=dict)

    def open(self, token: str) -> str:
        self._expire()
        sid = secrets.token_urlsafe(32)
        self.by_id[sid] = (token, time.monotonic() + SESSION_SECONDS)
        return sid

    def token(self, sid: str | None) -> str | None:
        entry = self.by_id.get(sid or "")
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]

    def close(self, sid: str | None) -> None:
        self.by_id.pop(sid or "", None)

    def _expire(self) -> None:
        now = time.monotonic()
        for sid in [s for s, (_, exp) in self.by_id.items() if exp < now]:
            del self.by_id[sid]


# No page may be framed by another site (clickjacking the sign-in or a run page), sniffed, or leak
# its address as a referrer; nothing is cached.
PAGE_HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                "Content-Security-Policy": "frame-ancestors 'none'", "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer"}

_LOGIN = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>evoteam: sign in</title>
<style>body{font:15px system-ui,sans-serif;margin:4em auto;max-width:32em}input{width:100%;padding:6px}</style>
</head><body><h1>evoteam</h1><p>{message}</p>
<form method="post" action="/login"><label>Token <input name="token" type="password" autocomplete="off"
autofocus></label><p><button type="submit">Sign in</button></p></form></body></html>"""


def _login_page(message: str, status: int) -> HTMLResponse:
    return HTMLResponse(_LOGIN.replace("{message}", html.escape(message)), status_code=status,
                        headers=PAGE_HEADERS)


class MemorySessions:
    """The session interface `dashboard_routes` uses, over in-memory `Sessions`."""

    def __init__(self, verify: Verify):
        self.sessions, self.verify = Sessions(), verify

    async def open(self, token: str) -> str:
        return self.sessions.open(token)

    async def caller(self, sid: str | None) -> Actor | None:
        token = self.sessions.token(sid)
        return await self.verify(token) if token else None

    async def close(self, sid: str | None) -> None:
        self.sessions.close(sid)


def dashboard_routes(store: KnowledgeStore, verify: Verify, secure_cookie: bool = False,
                     sessions=None) -> list[Route]:
    """Routes for the live pages over `store`, each request as the identity of its token.
    `sessions` keeps the browser sessions (`open`, `caller`, `close`); in memory by default."""
    sessions = sessions or MemorySessions(verify)

    async def caller(request: Request) -> Actor | None:
        header = request.headers.get("authorization", "")
        if header.lower().startswith("bearer "):
            token = header[7:].strip()
            return await verify(token) if token else None
        return await sessions.caller(request.cookies.get(COOKIE))

    def page(handler: Callable[[Request, KnowledgeStore], Awaitable[Response]]):
        async def endpoint(request: Request) -> Response:
            actor = await caller(request)
            if actor is None:
                return _login_page("Sign in with your evoteam token to see the runs.", 401)
            try:
                return await handler(request, store.with_actor(actor))
            except StoreError as exc:
                return HTMLResponse(f"<p>{html.escape(str(exc))}</p>", status_code=404)
        return endpoint

    def _best(r) -> str:
        return "" if r.best_score is None else listed_best(r.best_score, run_interval(r))

    async def runs(_request: Request, scoped: KnowledgeStore) -> Response:
        page_ = await scoped.list_runs(limit=100)
        rows = "".join(
            f'<tr><td><a href="/runs/{html.escape(r.id)}">{html.escape(r.id)}</a></td>'
            f"<td>{html.escape(r.status)}</td><td>{html.escape(r.kit or '')}</td>"
            f"<td>{html.escape(r.goal[:120])}</td><td>{html.escape(_best(r))}</td>"
            f"<td>${r.spent_usd:.2f}</td></tr>" for r in page_.items)
        body = (f"<!doctype html><html lang=en><head><meta charset=utf-8><title>evoteam runs</title>"
                f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}"></head><body style="font:14px system-ui">'
                f"<h1>Runs</h1><table><tr><th>run</th><th>status</th><th>kit</th><th>goal</th><th>best</th>"
                f"<th>spent</th></tr>{rows}</table>"
                f'<form method=post action="/logout"><button>Sign out</button></form></body></html>')
        return HTMLResponse(body, headers=PAGE_HEADERS)

    async def run_page(request: Request, scoped: KnowledgeStore) -> Response:
        report = await gather(scoped, request.path_params["run_id"])
        refresh = REFRESH_SECONDS if report.run.status == "active" else None
        return HTMLResponse(render_report(report, refresh_s=refresh), headers=PAGE_HEADERS)

    async def login(request: Request) -> Response:
        form = await request.form()
        token = str(form.get("token") or "").strip()
        if not token or await verify(token) is None:
            return _login_page("That token is not valid (or was revoked). Try again.", 401)
        response = RedirectResponse("/runs", status_code=303)
        response.set_cookie(COOKIE, await sessions.open(token), max_age=SESSION_SECONDS, httponly=True,
                            samesite="strict", secure=secure_cookie, path="/")
        return response

    async def logout(request: Request) -> Response:
        await sessions.close(request.cookies.get(COOKIE))
        response = RedirectResponse("/login", status_code=303)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def login_form(_request: Request) -> Response:
        return _login_page("Sign in with your evoteam token.", 200)

    return [Route("/runs", page(runs), methods=["GET"]),
            Route("/runs/{run_id}", page(run_page), methods=["GET"]),
            Route("/login", login_form, methods=["GET"]),
            Route("/login", login, methods=["POST"]),
            Route("/logout", logout, methods=["POST"])]
