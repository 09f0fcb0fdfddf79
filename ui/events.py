"""How the studio's handlers meet Gradio: the signed-in user and one-line errors.

Gradio passes the request to a handler parameter annotated `gr.Request`; `guarded` takes the user from it (the
server-side session, never a form value) and turns a RelabelError into a one-line message. The cards' server
functions (`ui.card_component`) get the user from the session cookie through `session_user`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

import gradio as gr

from relabel.common.errors import RelabelError


def user_of(request: gr.Request | None) -> str:
    """The logged-in user of a request: the server-side session, never a form value."""
    name = getattr(request, "username", None)
    if not name:
        raise gr.Error("not logged in", print_exception=False)
    return str(name)


def session_user(request: Any) -> str:
    """The signed-in user of a server-function request, read from the session cookie as Gradio's own login check
    reads it (the route has already refused a request without a valid session)."""
    name = getattr(request, "username", None)  # a gr.Request
    if name:
        return str(name)
    app = getattr(request, "app", None)
    tokens, cookie_id = getattr(app, "tokens", None), getattr(app, "cookie_id", None)
    cookies = getattr(request, "cookies", None) or {}
    if isinstance(tokens, Mapping) and cookie_id:  # a dict, or the database's sessions (`ui.sessions`)
        token = cookies.get(f"access-token-{cookie_id}") or cookies.get(f"access-token-unsecure-{cookie_id}")
        user = tokens.get(token) if token else None
        if user:
            return str(user)
    raise NotSignedInError("not signed in: reload the page and sign in")


class NotSignedInError(RelabelError):
    """A request without a signed-in session."""


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn(user, *inputs)` as a Gradio handler: the user comes from the request, errors become one-line messages.

    Gradio passes the request to a parameter annotated `gr.Request`; the wrapper's signature is `fn`'s inputs (its
    parameters after `user` that have no default) followed by that parameter.
    """

    def handler(*args: Any) -> Any:
        *values, request = args
        try:
            return fn(user_of(request), *values)
        except RelabelError as exc:
            raise gr.Error(str(exc), print_exception=False) from exc

    inputs = [p for p in list(inspect.signature(fn).parameters.values())[1:] if p.default is inspect.Parameter.empty]
    request = inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=gr.Request)
    handler.__signature__ = inspect.Signature([*inputs, request])  # type: ignore[attr-defined]
    handler.__annotations__ = {"request": gr.Request}
    handler.__name__ = getattr(fn, "__name__", "handler")
    return handler
