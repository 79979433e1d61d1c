"""What makes two fetched documents one: the URL key and the content hash; and the excerpt an
agent reads."""

from __future__ import annotations

import hashlib
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from evoteam.servers.retrieval.models import EXCERPT_CHARS

MAX_CONTENT_CHARS = 60_000
_TRACKING = re.compile(r"^(utm_|fbclid$|gclid$|ref$|ref_src$)")
_SPACE = re.compile(r"\s+")


def url_key(url: str) -> str:
    """The deduplication key of a URL: scheme and host lower-cased, default ports, tracking
    parameters and (for web pages) the fragment and trailing slash removed."""
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return url.strip()
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if parts.port and not ((scheme == "http" and parts.port == 80) or (scheme == "https" and parts.port == 443)):
        host = f"{host}:{parts.port}"
    query = urlencode(sorted((k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True)
                             if not _TRACKING.match(k)))
    path = parts.path
    fragment = parts.fragment
    if scheme in ("http", "https"):
        path = path.rstrip("/") or "/"
        fragment = ""
        scheme = "https"  # http and https copies of a page are one document
    return urlunsplit((scheme, host, path, query, fragment))


def content_hash(text: str) -> str:
    return hashlib.sha256(_SPACE.sub(" ", text).strip().lower().encode("utf-8")).hexdigest()


def excerpt(text: str, chars: int = EXCERPT_CHARS) -> str:
    flat = _SPACE.sub(" ", text).strip()
    return flat if len(flat) <= chars else flat[: chars - 1].rstrip() + "…"
