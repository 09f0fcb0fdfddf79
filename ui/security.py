"""The studio's web trust boundary: one ASGI middleware in front of Gradio's routes (`StudioGuard`).

- **Same origin.** A browser sends its session cookie with any request to the studio's host, whichever page asked;
  cookies are not kept apart by port, so a page served from another port of 127.0.0.1 is "same-site" and its
  requests carry the session. So a request that names where it comes from must come from the studio itself: an
  `Origin` header (sent by browsers on every cross-origin request and on every POST) must match the `Host` the
  request was sent to, on every method (which also stops Gradio's CORS answers letting a localhost page read
  replies); a state-changing request (POST, PUT, PATCH, DELETE) without `Origin` must carry a matching `Referer`
  if it carries one. A request with neither comes from a program (httpx, gradio_client), not from a page: it
  holds no ambient browser credentials, only what its own code signed in with, and is let through.
- **Cookies.** Gradio sets its session cookies with `SameSite=None` (one of them); every cookie goes out as
  `SameSite=Lax`, so other sites' pages never send it on their requests to the studio.
- **No framing.** Pages may not be framed by another origin (`frame-ancestors 'self'`): a page cannot lay the
  studio under its own buttons.
- **API listing.** FastAPI's and Gradio's OpenAPI documents and Gradio's monitoring pages answer 404 (the studio's
  events are for its own page; `ui.app.StudioBlocks` empties the listing in `/gradio_api/info` and the page).
- **No uploads.** The studio has no component that takes a file, so the upload routes answer 404: no user can
  store files on the server or leave them for another. Every answer says `X-Content-Type-Options: nosniff`.

Gradio adds its CORS middleware outside this one: it still answers preflight requests, and puts its
Access-Control headers on this middleware's refusals, which a foreign page may then read (they say only
"refused"); the request itself never reaches a route.

`client_address()` is the address of the request being served, for the sign-in throttle (`ui.login`).
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HIDDEN_PATHS = (
    "/openapi.json",
    "/docs",
    "/redoc",
    "/gradio_api/openapi.json",
    "/gradio_api/mcp",
    "/monitoring",
    "/gradio_api/upload",  # the studio takes no files: nothing to upload, nothing for users to drop for each other
    "/gradio_api/upload_progress",
)
DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}

_address: contextvars.ContextVar[str] = contextvars.ContextVar("client_address", default="unknown")
_SAMESITE = re.compile(r";\s*samesite=[^;]*", re.IGNORECASE)


def client_address() -> str:
    """The client address of the request being served ("unknown" outside one)."""
    return _address.get()


def same_origin(url: str, host: str | None) -> bool:
    """True when `url` (an Origin or Referer) names the host and port of the `Host` header `host`. The scheme is
    not compared: a TLS proxy in front of the studio forwards https requests as http."""
    try:
        parts = urlsplit(url)
        if parts.scheme not in DEFAULT_PORTS or not parts.hostname or not host:
            return False
        target = urlsplit(f"//{host}")
        default = DEFAULT_PORTS[parts.scheme]
        return (parts.hostname, parts.port or default) == (target.hostname, target.port or default)
    except ValueError:  # a malformed port or address
        return False


def cross_origin_refusal(method: str, headers: Headers) -> str | None:
    """Why a request is refused as cross-origin, or None when it may pass (see the module's docstring)."""
    host = headers.get("host")
    origin = headers.get("origin")
    if origin is not None:
        return None if same_origin(origin, host) else f"cross-origin request from {origin!r} refused"
    referer = headers.get("referer")
    if method in STATE_CHANGING and referer and not same_origin(referer, host):
        return "cross-origin request refused (its Referer is another site)"
    return None


def is_hidden(path: str) -> bool:
    """True for the routes that list the API or monitor it."""
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in HIDDEN_PATHS)


def lax_cookie(value: str) -> str:
    """A Set-Cookie value with its SameSite attribute replaced by `SameSite=Lax`."""
    return _SAMESITE.sub("", value) + "; SameSite=Lax"


class StudioGuard:
    """The ASGI middleware described in the module's docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = cross_origin_refusal(scope.get("method", "GET"), Headers(scope=scope))
        if scope["type"] == "websocket":
            if refusal:
                await send({"type": "websocket.close", "code": 1008, "reason": refusal})
            else:
                await self.app(scope, receive, send)
            return
        if refusal or is_hidden(scope["path"]):
            await PlainTextResponse(refusal or "not found", status_code=403 if refusal else 404)(scope, receive, send)
            return
        client = scope.get("client")
        token = _address.set(str(client[0]) if client else "unknown")
        try:
            await self.app(scope, receive, self._secured(send))
        finally:
            _address.reset(token)

    @staticmethod
    def _secured(send: Send) -> Send:
        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                cookies: Iterable[str] = headers.getlist("set-cookie")
                if cookies:
                    cookies = [lax_cookie(c) for c in cookies]
                    del headers["set-cookie"]
                    for cookie in cookies:
                        headers.append("set-cookie", cookie)
                headers.setdefault("content-security-policy", "frame-ancestors 'self'")
                headers.setdefault("x-frame-options", "SAMEORIGIN")
                headers.setdefault("x-content-type-options", "nosniff")  # a file is what its type says, never HTML
            await send(message)

        return secured
