"""The server's gate, checked on every request before any route: who may ask, and how much.

* Without a token the server answers only loopback clients whose ``Host`` header names a
  loopback address (a web page elsewhere cannot reach it, even by DNS rebinding).
* With a token (``--token``; required for a non-local ``--host``) every request must carry
  it: an ``Authorization: Bearer TOKEN`` or ``X-Interp-Token`` header, a ``token`` query
  parameter, or the cookie the server sets when the page was opened with ``?token=``.
* A request body is at most ``max_body`` bytes.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

COOKIE = "interp_token"
MAX_BODY = 64 * 1024
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine.

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("10.0.0.2")
        (True, False)
    """
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(host_header: str) -> str:
    """The host of a ``Host`` header, without its port (``[::1]:8000`` -> ``::1``)."""
    if host_header.startswith("["):
        return host_header[1 : host_header.find("]")]
    return host_header.rsplit(":", 1)[0] if host_header.count(":") == 1 else host_header


async def _refuse(send: Any, status: int, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Guard:
    """ASGI middleware: the token or locality check and the body limit (see the module).

    Args:
        app: the ASGI app behind the gate.
        token: the secret every request must carry, or None to answer loopback clients only.
        max_body: the largest request body in bytes.

    Example:
        >>> from fastapi import FastAPI
        >>> from fastapi.testclient import TestClient
        >>> fastapi_app = FastAPI()
        >>> _ = fastapi_app.get("/")(lambda: "hello")
        >>> app = Guard(fastapi_app, token=None)            # loopback clients only
        >>> TestClient(app, client=("10.0.0.2", 5000)).get("/").status_code
        403
        >>> app = Guard(fastapi_app, token="s3cret")        # anyone who has the token
        >>> TestClient(app, client=("10.0.0.2", 5000)).get("/?token=s3cret").json()
        'hello'
    """

    def __init__(self, app: Any, token: str | None, max_body: int = MAX_BODY) -> None:
        self.app, self.token, self.max_body = app, token, max_body

    def _given_token(self, scope: dict[str, Any]) -> tuple[str | None, bool]:
        """The token a request carries, and whether it came in the query string."""
        headers = {
            key.decode("latin-1").lower(): value.decode("latin-1")
            for key, value in scope["headers"]
        }
        authorization = headers.get("authorization", "")
        if authorization.lower().startswith("bearer "):
            return authorization[7:].strip(), False
        if "x-interp-token" in headers:
            return headers["x-interp-token"], False
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if "token" in query:
            return query["token"][0], True
        cookie = SimpleCookie(headers.get("cookie", ""))
        return (cookie[COOKIE].value if COOKIE in cookie else None), False

    def _refusal(self, scope: dict[str, Any]) -> str | None:
        """Why this request is refused, or None."""
        if self.token is None:
            client = scope.get("client")
            if not is_loopback(client[0] if client else None):
                return (
                    "This server answers only requests from this machine; to serve others, "
                    "restart it with --host ADDRESS and --token TOKEN."
                )
            host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
            if _host_name(host) not in LOCAL_HOSTS:
                return (
                    f"Host {host!r} is not this machine's loopback address; open the page at "
                    "http://127.0.0.1:PORT/ (or start the server with --token)."
                )
            return None
        given, _ = self._given_token(scope)
        if given is None or not hmac.compare_digest(given.encode(), self.token.encode()):
            return (
                "A valid token is required: open the page as http://HOST:PORT/?token=TOKEN, or "
                "send the header 'Authorization: Bearer TOKEN'."
            )
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            await _refuse(send, 403 if self.token is None else 401, refusal)
            return
        length = dict(scope["headers"]).get(b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_body):
            await _refuse(send, 413, f"The request body is over {self.max_body} bytes.")
            return
        if length is None and scope["method"] in ("POST", "PUT", "PATCH"):
            # A body without a length (chunked): read it here, up to the limit, then replay it.
            chunks, size, more = [], 0, True
            while more:
                message = await receive()
                if message["type"] != "http.request":
                    break
                chunks.append(message.get("body", b""))
                size += len(chunks[-1])
                more = message.get("more_body", False)
                if size > self.max_body:
                    await _refuse(send, 413, f"The request body is over {self.max_body} bytes.")
                    return
            body, replayed = b"".join(chunks), False

            async def receive_body() -> dict[str, Any]:
                nonlocal replayed
                if replayed:
                    return await receive()
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}

            receive = receive_body
        set_cookie = self.token is not None and self._given_token(scope)[1]

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if set_cookie and message["type"] == "http.response.start":
                cookie = f"{COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie.encode())]
            await send(message)

        await self.app(scope, receive, send_with_cookie)
