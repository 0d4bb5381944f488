"""The dashboard's files (its scripts, style sheet, plotly.js and circuitsvis's bundle) as
responses that a browser caches and that cross the wire gzip-compressed.

Each file is read and compressed once per process. Its ETag is a hash of its bytes; a
request whose ``If-None-Match`` names it gets ``304 Not Modified`` with no body. Library
bundles are cached for a day (``max-age``); the page's own scripts are revalidated on every
load (``no-cache``), so an edited ``app.js`` is seen at once.

Example:
    >>> from starlette.requests import Request
    >>> def request(**headers):   # what the browser sends
    ...     raw = [(k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()]
    ...     return Request({"type": "http", "method": "GET", "headers": raw})
    >>> app_js = Path(interp.serve.__file__).with_name("static") / "app.js"
    >>> asset = Asset.of(app_js, "text/javascript", max_age=0)
    >>> response = asset.response(request(accept_encoding="gzip"))
    >>> response.status_code, response.headers["content-encoding"]
    (200, 'gzip')
    >>> asset.response(request(if_none_match=asset.etag)).status_code   # the browser has it
    304
"""

from __future__ import annotations

import functools
import gzip
import hashlib
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import Response

LIBRARY_MAX_AGE = 86400  # seconds a browser keeps plotly.js and circuitsvis without asking


@dataclass(frozen=True)
class Asset:
    """One file's bytes, their gzip form and ETag, and how long a browser may keep them."""

    body: bytes
    compressed: bytes
    etag: str
    media_type: str
    max_age: int

    @staticmethod
    @functools.cache
    def of(path: Path, media_type: str, max_age: int) -> Asset:
        """The file at ``path``, read and compressed once (cached by path)."""
        body = path.read_bytes()
        etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
        return Asset(body, gzip.compress(body, 6, mtime=0), etag, media_type, max_age)

    def response(self, request: Request) -> Response:
        """``304`` when the browser holds this version, else the file (gzip if accepted)."""
        cache = f"public, max-age={self.max_age}" if self.max_age else "no-cache"
        headers = {"etag": self.etag, "cache-control": cache, "vary": "accept-encoding"}
        if self.etag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        if "gzip" in request.headers.get("accept-encoding", ""):
            headers["content-encoding"] = "gzip"
            return Response(self.compressed, media_type=self.media_type, headers=headers)
        return Response(self.body, media_type=self.media_type, headers=headers)
