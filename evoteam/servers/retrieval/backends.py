"""Search backends: `tavily` (web, through tavily-python's async client) and `local` (a
clean-room corpus indexed with SQLite FTS5), merged when both are configured."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

import httpx

from evoteam.config import Settings
from evoteam.errors import DomainError
from evoteam.servers.retrieval.corpus import Corpus, index_corpus
from evoteam.servers.retrieval.models import RawResult

log = logging.getLogger(__name__)

TAVILY_URL = "https://api.tavily.com"


class BackendError(DomainError):
    """A search backend could not answer; the text says what to do."""


class SearchBackend(Protocol):
    name: str

    async def search(self, query: str, limit: int) -> list[RawResult]: ...

    async def aclose(self) -> None: ...


class LocalBackend:
    """Searches one or more indexed corpus directories (indexing any not yet indexed)."""

    name = "local"

    def __init__(self, corpus_dirs: list[Path], auto_index: bool = True):
        self.corpora = [Corpus(Path(d)) for d in corpus_dirs]
        self.auto_index = auto_index
        self._ready = False
        self._lock = asyncio.Lock()

    async def _prepare(self) -> None:
        async with self._lock:
            if self._ready:
                return
            for corpus in self.corpora:
                if not corpus.indexed:
                    if not self.auto_index:
                        raise BackendError(f"corpus {corpus.root} is not indexed: run `evoteam corpus index {corpus.root}`")
                    log.info("indexing corpus %s", corpus.root)
                    await asyncio.to_thread(index_corpus, corpus.root, corpus.index)
            self._ready = True

    async def search(self, query: str, limit: int) -> list[RawResult]:
        await self._prepare()
        per = await asyncio.gather(*(asyncio.to_thread(c.search, query, limit) for c in self.corpora))
        return _interleave(per, limit)

    async def aclose(self) -> None:
        for corpus in self.corpora:
            corpus.close()


class TavilyBackend:
    """Web search through `tavily.AsyncTavilyClient`, with retries and exponential backoff
    on rate limits (429), timeouts, transport errors and 5xx replies."""

    name = "tavily"

    def __init__(self, api_key: str | None, *, transport: httpx.AsyncBaseTransport | None = None,
                 base_url: str = TAVILY_URL, retries: int = 3, backoff_s: float = 0.5, timeout_s: float = 30.0,
                 raw_content: bool = True, sleep: Callable[[float], Awaitable[None]] = asyncio.sleep):
        self.api_key = api_key
        self.transport = transport
        self.base_url = base_url
        self.retries = retries
        self.backoff_s = backoff_s
        self.timeout_s = timeout_s
        self.raw_content = raw_content
        self.sleep = sleep
        self._http: httpx.AsyncClient | None = None
        self._client = None

    def _tavily(self):
        if not self.api_key:
            # tavily-python would silently fall back to its keyless mode: refuse instead.
            raise BackendError("Tavily web search needs an API key: set TAVILY_API_KEY (or tavily_api_key in "
                               "evoteam.toml). Without it only the local corpus is searched.")
        if self._client is None:
            from tavily import AsyncTavilyClient

            self._http = httpx.AsyncClient(base_url=self.base_url, transport=self.transport,
                                           timeout=self.timeout_s,
                                           headers={"Authorization": f"Bearer {self.api_key}"})
            self._client = AsyncTavilyClient(api_key=self.api_key, client=self._http, client_source="evoteam")
        return self._client

    async def search(self, query: str, limit: int) -> list[RawResult]:
        from tavily.errors import (
            BadRequestError,
            ForbiddenError,
            InvalidAPIKeyError,
            UsageLimitExceededError,
        )
        from tavily.errors import TimeoutError as TavilyTimeout

        client = self._tavily()
        last: Exception | None = None
        for attempt in range(self.retries + 1):
            try:
                reply = await client.search(query, max_results=limit, search_depth="basic",
                                            include_raw_content="text" if self.raw_content else None,
                                            timeout=self.timeout_s)
                return self._parse(reply, limit)
            except InvalidAPIKeyError as exc:
                raise BackendError("Tavily rejected the API key (HTTP 401): check TAVILY_API_KEY") from exc
            except ForbiddenError as exc:
                raise BackendError(f"Tavily refused the request (HTTP 403): {exc or 'check the key and plan'}") from exc
            except BadRequestError as exc:
                raise BackendError(f"Tavily rejected the query {query!r} (HTTP 400): {exc}") from exc
            except (UsageLimitExceededError, TavilyTimeout, httpx.TransportError) as exc:
                last = exc
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code < 500:
                    raise BackendError(f"Tavily answered HTTP {exc.response.status_code}") from exc
                last = exc
            if attempt < self.retries:
                delay = self.backoff_s * (2 ** attempt) * (1 + 0.25 * random.random())
                log.info("tavily: %s; retrying in %.2fs", type(last).__name__, delay)
                await self.sleep(delay)
        kind = "rate limit (HTTP 429)" if isinstance(last, UsageLimitExceededError) else type(last).__name__
        raise BackendError(f"Tavily kept failing ({kind}) after {self.retries + 1} tries; try again later "
                           f"or search the local corpus")

    @staticmethod
    def _parse(reply: dict, limit: int) -> list[RawResult]:
        out = []
        for item in (reply or {}).get("results", [])[:limit]:
            if not isinstance(item, dict) or not isinstance(item.get("url"), str):
                continue
            content = item.get("raw_content") or item.get("content") or ""
            out.append(RawResult(url=item["url"], title=str(item.get("title") or item["url"]),
                                 content=str(content), backend="tavily",
                                 score=item.get("score") if isinstance(item.get("score"), (int, float)) else None))
        return out

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None
            self._client = None


def _interleave(lists: list[list[RawResult]], limit: int) -> list[RawResult]:
    out, i = [], 0
    while len(out) < limit and any(i < len(x) for x in lists):
        for x in lists:
            if i < len(x) and len(out) < limit:
                out.append(x[i])
        i += 1
    return out


class BackendSet:
    """The configured backends, queried together; a failing backend becomes a note as long
    as another one answered."""

    def __init__(self, backends: list[SearchBackend], notes: list[str] | None = None):
        self.backends = backends
        self.notes = list(notes or [])

    @property
    def names(self) -> list[str]:
        return [b.name for b in self.backends]

    async def search(self, query: str, limit: int) -> tuple[list[RawResult], list[str]]:
        if not self.backends:
            raise BackendError("no search backend is available. " + " ".join(self.notes))
        replies = await asyncio.gather(*(b.search(query, limit) for b in self.backends), return_exceptions=True)
        lists, notes = [], []
        for backend, reply in zip(self.backends, replies):
            if isinstance(reply, BaseException):
                if not isinstance(reply, (DomainError, OSError)):
                    raise reply
                notes.append(f"{backend.name}: {reply}")
            else:
                lists.append(reply)
        if not lists:
            raise BackendError("every search backend failed: " + "; ".join(notes))
        return _interleave(lists, limit), notes

    async def aclose(self) -> None:
        for b in self.backends:
            await b.aclose()


def build_backends(settings: Settings, *, tavily_transport: httpx.AsyncBaseTransport | None = None) -> BackendSet:
    """The backends named in `settings.search_backends` that can work here."""
    backends: list[SearchBackend] = []
    notes: list[str] = []
    for name in settings.search_backends:
        if name == "local":
            dirs = [d for d in settings.corpus_dirs if Path(d).is_dir()]
            missing = [str(d) for d in settings.corpus_dirs if not Path(d).is_dir()]
            if missing:
                notes.append(f"corpus directories not found: {', '.join(missing)}")
            if dirs:
                backends.append(LocalBackend(dirs))
            else:
                notes.append("no local corpus configured (set corpus_dirs in evoteam.toml or EVOTEAM_CORPUS, "
                             "then `evoteam corpus index DIR`)")
        elif name == "tavily":
            if settings.tavily_api_key:
                backends.append(TavilyBackend(settings.tavily_api_key, transport=tavily_transport))
            else:
                notes.append("no TAVILY_API_KEY: web search is off, only the local corpus is searched")
        else:
            notes.append(f"unknown search backend {name!r} ignored (use 'local' or 'tavily')")
    return BackendSet(backends, notes)
