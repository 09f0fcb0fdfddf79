"""The studio's web trust boundary: one ASGI middleware in front of Gradio's routes (`StudioGuard`).

- **Served names only.** Every request's `Host` must name the studio: a loopback name (localhost, 127.0.0.1, ::1),
  the address it binds, or a name given with `relabel serve --allowed-host`. A page on another site whose name is
  made to resolve to 127.0.0.1 (DNS rebinding) is "same origin" with itself, so the origin checks below cannot see
  it; its requests still say `Host: evil.example` and are refused (403) before any route, /login included.
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
- **Sign-out is a POST.** A GET of /logout would sign a user out from any page on the same site (an `<img>` on
  another port of 127.0.0.1 sends the session cookie); it answers a page whose button posts the form instead. A
  POST passes the origin check above and is then handed to Gradio's own /logout, which ends the user's sessions.
- **Forwarded addresses.** `X-Forwarded-For` names the client only when the request comes from a proxy named with
  `relabel serve --trusted-proxy` (uvicorn's proxy-header handling, given exactly that list: by default none), so
  a client cannot choose its own address for the per-address sign-in limit.

Gradio adds its CORS middleware outside this one: it still answers preflight requests, and puts its
Access-Control headers on this middleware's refusals, which a foreign page may then read (they say only
"refused"); the request itself never reaches a route.

`client_address()` is the address of the request being served, for the sign-in throttle (`ui.login`).
"""

from __future__ import annotations

import contextvars
import ipaddress
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import HTMLResponse, PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relabel.common.errors import InputError, brief

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
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})  # every interface: no single name of the machine
LOGOUT_PATH = "/logout"
LOGOUT_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign out · ReGT studio</title></head>
<body style="font-family: sans-serif; margin: 3em;">
<form method="post" action="logout"><p>Sign out of ReGT studio?</p><button type="submit">Sign out</button>
<a href="./" style="margin-left: 1em;">back to the studio</a></form>
</body></html>
"""
_HOST_NAME = re.compile(r"(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9])?)*")

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


def host_name(host: str | None) -> str | None:
    """The name a `Host` header gives, lower case, without port, brackets or a trailing dot; None when malformed."""
    if not host:
        return None
    try:
        parts = urlsplit(f"//{host}")
        parts.port  # noqa: B018 (raises ValueError for a port outside 0..65535 or not a number)
    except ValueError:  # a malformed port or address
        return None
    if parts.username is not None or parts.path or parts.query or parts.fragment or not parts.hostname:
        return None
    return parts.hostname.rstrip(".")


def served_hosts(bind_host: str, allowed: Iterable[str] = ()) -> frozenset[str]:
    """The names a request's `Host` may give: the loopback names, the bound address (unless it binds every
    interface) and the `allowed` names (already checked by `check_allowed_host`)."""
    bound = set() if bind_host in WILDCARD_BINDS else {host_name(bind_host) or bind_host.lower()}
    return frozenset(LOOPBACK_NAMES | bound | {a.lower() for a in allowed})


def host_refusal(headers: Headers, served: frozenset[str]) -> str | None:
    """Why a request is refused for the host it names, or None when it names one the studio serves."""
    host = headers.get("host")
    name = host_name(host)
    if name is None:
        return f"refused: the request names no valid Host ({brief(host, 60)})"
    if name not in served:
        return f"refused: host {brief(name, 80)} is not served here (relabel serve --allowed-host adds a name)"
    return None


def check_allowed_host(value: str) -> str:
    """A name or address given to `--allowed-host`, in lower case; anything else (a URL, a port, a pattern) is one
    InputError."""
    name = value.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")
    try:
        return str(ipaddress.ip_address(name))
    except ValueError:
        pass
    if not _HOST_NAME.fullmatch(name):
        raise InputError(
            f"--allowed-host {brief(value, 80)} is not a host name or address; give the name users type in the "
            "address bar, without scheme, port or path (e.g. studio.lab.example)"
        )
    return name


def check_trusted_proxy(value: str) -> str:
    """An address or network given to `--trusted-proxy` (10.0.0.5, 10.0.0.0/24, ::1); anything else, a host name
    or "*" included, is one InputError: trusting every peer would let any client name its own address."""
    try:
        return str(ipaddress.ip_network(value.strip(), strict=False))
    except ValueError:
        raise InputError(
            f"--trusted-proxy {brief(value, 80)} is not an IP address or network; give the address the reverse "
            "proxy connects from (e.g. 127.0.0.1 or 10.0.0.0/24)"
        ) from None


def is_hidden(path: str) -> bool:
    """True for the routes that list the API or monitor it."""
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in HIDDEN_PATHS)


def lax_cookie(value: str) -> str:
    """A Set-Cookie value with its SameSite attribute replaced by `SameSite=Lax`."""
    return _SAMESITE.sub("", value) + "; SameSite=Lax"


class StudioGuard:
    """The ASGI middleware described in the module's docstring; `served` are the names `Host` may give
    (`served_hosts`), by default the loopback names."""

    def __init__(self, app: ASGIApp, served: frozenset[str] = LOOPBACK_NAMES) -> None:
        self.app = app
        self.served = served

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        method = scope.get("method", "GET")
        refusal = host_refusal(headers, self.served) or cross_origin_refusal(method, headers)
        if scope["type"] == "websocket":
            if refusal:
                await send({"type": "websocket.close", "code": 1008, "reason": refusal})
            else:
                await self.app(scope, receive, send)
            return
        if refusal or is_hidden(scope["path"]):
            await PlainTextResponse(refusal or "not found", status_code=403 if refusal else 404)(scope, receive, send)
            return
        if scope["path"] == LOGOUT_PATH and method in ("GET", "HEAD"):
            await HTMLResponse(LOGOUT_PAGE)(scope, receive, self._secured(send))  # signs no one out
            return
        if scope["path"] == LOGOUT_PATH and method == "POST":
            scope = {**scope, "method": "GET"}  # Gradio's sign-out route, reached only by a same-origin POST
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
