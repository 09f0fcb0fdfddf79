"""The studio's sign-in sessions as Gradio sees them, kept in the database (`relabel.review.sessions`).

Gradio keeps its sessions in `app.tokens`, a dict from a cookie's token to a user name, under cookies named after
`app.cookie_id`, a random name per process. `SharedSessions`, an ASGI middleware inside `ui.security.StudioGuard`,
gives Gradio's app a `SessionTokens` mapping instead, backed by the database, and a cookie name every process on the
database shares: a user signed in on one process is signed in on all of them, and still after a restart.

- **Sign-in.** Gradio's /login stores the new token (`SessionTokens.__setitem__`). The login page gains a "Keep me
  signed in" box (`LOGIN_PAGE_SCRIPT`); ticked, the page posts to /login?remember=1: the session then lasts
  REMEMBER_S whatever its use and its cookies persist as long (Max-Age); otherwise it ends IDLE_S after its last
  use and its cookies end with the browser.
- **Every request.** Gradio asks `app.tokens.get(token)`: `DbSessions.user_of`, cached for a few seconds.
- **Sign-out.** A POST to /logout (`StudioGuard` refuses any other) ends every session of the user whose cookie it
  carries, in the database, so on every process; Gradio then clears the cookies.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, MutableMapping
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from relabel.review.sessions import DbSessions

COOKIE_PREFIX = "access-token-"  # Gradio's session cookies: access-token-ID and access-token-unsecure-ID
LOGIN_PAGE_SCRIPT = """<script>
(() => {
  const BOX = "regt-remember";
  const addBox = () => {
    const button = [...document.querySelectorAll("button")].find((b) => b.textContent.trim() === "Login");
    if (!button || document.getElementById(BOX)) return;
    const label = document.createElement("label");
    const box = document.createElement("input");
    box.type = "checkbox";
    box.id = BOX;
    label.style.cssText = "display: flex; gap: 0.5em; align-items: center; margin: 0.5em 0;";
    label.append(box, "Keep me signed in (DAYS days, on this browser)");
    button.before(label);
  };
  new MutationObserver(addBox).observe(document.documentElement, { childList: true, subtree: true });
  const send = window.fetch;
  window.fetch = function (input, init) {
    const box = document.getElementById(BOX);
    if (box && box.checked && typeof input === "string" && init && init.method === "POST") {
      const url = new URL(input, location.href);
      if (url.pathname.endsWith("/login")) {
        url.searchParams.set("remember", "1");
        input = url.href;
      }
    }
    return send.call(this, input, init);
  };
})();
</script>"""
_LOGIN_PAGE_MARK = b'{"auth_required":true'  # the config of the page Gradio serves to a visitor not signed in

_remember: contextvars.ContextVar[bool] = contextvars.ContextVar("remember_sign_in", default=False)


class SessionTokens(MutableMapping[str, str]):
    """Gradio's `app.tokens` (token -> user name), kept in the database. Sessions cannot be listed (the database
    holds only their hashes): Gradio's own sign-out loop finds none, and `SharedSessions` ends them instead."""

    def __init__(self, sessions: DbSessions) -> None:
        self.sessions = sessions

    def __getitem__(self, token: str) -> str:
        user = self.sessions.user_of(token) if isinstance(token, str) and token else None
        if user is None:
            raise KeyError("no such session")
        return user

    def __setitem__(self, token: str, user: str) -> None:
        self.sessions.create(token, user, remember=_remember.get())

    def __delitem__(self, token: str) -> None:
        if self.sessions.end(token) is None:
            raise KeyError("no such session")

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def clear(self) -> None:
        """End every session: everyone signs in again."""
        self.sessions.end_all()


def session_tokens(headers: Headers) -> list[str]:
    """The tokens of Gradio's session cookies a request carries."""
    cookie = SimpleCookie()
    try:
        cookie.load(headers.get("cookie", ""))
    except CookieError:
        return []
    return [m.value for name, m in cookie.items() if name.startswith(COOKIE_PREFIX) and m.value]


def persistent_cookie(value: str, seconds: float) -> str:
    """A Set-Cookie value of a session cookie made to last `seconds` (a deletion is left as it is)."""
    if not value.startswith(COOKIE_PREFIX) or "max-age=0" in value.lower().replace(" ", ""):
        return value
    return f"{value}; Max-Age={int(seconds)}"


class SharedSessions:
    """The ASGI middleware described in the module's docstring: `tokens` become Gradio's `app.tokens` and
    `cookie_id` its cookie name (`relabel.review.sessions.cookie_id`, the same in every process on the database)."""

    def __init__(self, app: ASGIApp, tokens: SessionTokens, cookie_id: str) -> None:
        self.app, self.tokens, self.cookie_id = app, tokens, cookie_id
        days = round(tokens.sessions.remember_s / 86400)
        self.script = LOGIN_PAGE_SCRIPT.replace("DAYS days", f"{days} days").encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        gradio_app = scope.get("app")
        if gradio_app is not None and getattr(gradio_app, "tokens", None) is not self.tokens:
            gradio_app.tokens, gradio_app.cookie_id = self.tokens, self.cookie_id  # before any route reads them
        path, method = scope["path"], scope.get("method", "GET")
        if path == "/logout":  # reached only by a same-origin POST (`ui.security.StudioGuard`)
            for token in session_tokens(Headers(scope=scope)):
                self.tokens.sessions.end(token)
        remember = path == "/login" and method == "POST" and _asks_to_remember(scope)
        marker = _remember.set(remember)
        try:
            await self.app(scope, receive, self._answer(send, remember, method == "GET"))
        finally:
            _remember.reset(marker)

    def _answer(self, send: Send, remember: bool, page: bool) -> Send:
        held: list[Message] = []

        async def answer(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                if remember:
                    cookies = [
                        persistent_cookie(c, self.tokens.sessions.remember_s) for c in headers.getlist("set-cookie")
                    ]
                    del headers["set-cookie"]
                    for cookie in cookies:
                        headers.append("set-cookie", cookie)
                if page and headers.get("content-type", "").startswith("text/html"):
                    held.append(message)  # the login page gains its box: its length changes
                    return
            if held:
                await _send_page(send, held, message, self.script)
                return
            await send(message)

        return answer


async def _send_page(send: Send, held: list[Message], message: Message, script: bytes) -> None:
    """Collect an HTML page's body; once whole, add `script` (the "keep me signed in" box) to a login page and
    send it."""
    held.append(message)
    if message.get("more_body", False):
        return
    start, parts = held[0], held[1:]
    body = b"".join(m.get("body", b"") for m in parts)
    if _LOGIN_PAGE_MARK in body and b"</head>" in body:
        body = body.replace(b"</head>", script + b"</head>", 1)
        headers = MutableHeaders(scope=start)
        headers["content-length"] = str(len(body))
    held.clear()
    await send(start)
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _asks_to_remember(scope: Scope) -> bool:
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return query.get("remember", [""])[-1] == "1"
