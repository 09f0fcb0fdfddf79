"""The review and adjudication cards as Gradio components: a gr.HTML whose page script (`ui/static/card.js`) draws
the card and calls the handlers of `ui.card_api` as the component's server functions.

A server function is one POST to Gradio's `/component_server` route, which requires a signed-in session; the user
is read from that session on the server (`ui.events.session_user`), never from the request's data. A RelabelError
becomes `{"error": message}`: the page shows it beside the card, which stays usable.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

import gradio as gr

from relabel.common.errors import InputError, RelabelError
from relabel.review.class_search import ClassSearch
from relabel.review.queue import one_look
from relabel.review.studio import Studio
from ui import card_api, card_extras, card_notes
from ui.events import session_user

Handler = Callable[[Studio, str, dict[str, Any]], dict[str, Any]]


@cache
def asset(name: str) -> str:
    """A file of ui/static as text (the card's markup, style and script)."""
    return resources.files("ui").joinpath("static", name).read_text(encoding="utf-8")


def server_function(studio: Studio, name: str, handler: Handler) -> Callable[..., dict[str, Any]]:
    """`handler` as a server function called `name`: the user from the session, errors as `{"error": ...}`."""

    def call(data: Any, request: gr.Request) -> dict[str, Any]:
        try:
            if not isinstance(data, dict):
                raise InputError(f"{name}: expected an object, got {type(data).__name__}")
            return handler(studio, session_user(request), data)
        except RelabelError as exc:
            return {"error": str(exc)}

    call.__name__ = name
    call.__qualname__ = name
    return call


def handlers(studio: Studio, mode: str) -> dict[str, Handler]:
    """The server functions of one card, by the names the page script calls: `card_handlers`, with reference
    thumbnails and the user's day (`ui.card_extras`), the guidelines and the image's comments (`ui.card_notes`).
    Each is one request: the queue looks at the other processes' decisions once in it (`one_look`)."""
    found = card_notes.extend(studio, mode, card_extras.extend(studio, mode, card_handlers(studio, mode)))
    return {name: looking_once(fn) for name, fn in found.items()}


def looking_once(handler: Handler) -> Handler:
    """`handler` in one `relabel.review.queue.one_look` block."""

    def call(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
        with one_look():
            return handler(studio, user, data)

    call.__name__ = getattr(handler, "__name__", "handler")
    return call


def card_handlers(studio: Studio, mode: str) -> dict[str, Handler]:
    """The card's own server functions: deciding, moving through the queue, searching classes."""
    searcher = ClassSearch(studio.vocab)
    shared: dict[str, Handler] = {
        "full": card_api.full_resolution,
        "history": card_api.history,
        "search": lambda s, u, d: card_api.search(s, u, d, searcher),
    }
    if mode == "review":
        return shared | {
            "boot": card_api.boot,
            "next": card_api.next_card,
            "open": card_api.open_image,
            "decide": card_api.decide,
            "skip": card_api.skip,
            "undo": card_api.undo,
        }
    return shared | {
        "boot": card_api.adjudication_boot,
        "open": card_api.adjudication_open,
        "disputed": lambda s, u, d: (s.require_lead(u), card_api.next_disputed(s, u))[1],
        "adjudicate": card_api.adjudicate,
        "take": card_api.take_answer,
        "skip": card_api.adjudication_skip,
    }


def card(studio: Studio, mode: str) -> gr.HTML:
    """The card of `mode` ("review" or "adjudicate") in the current Blocks context."""
    if mode not in ("review", "adjudicate"):
        raise ValueError(f"unknown card mode {mode!r}; known: review, adjudicate")
    functions = [server_function(studio, name, fn) for name, fn in handlers(studio, mode).items()]
    return gr.HTML(
        value="",
        html_template=asset("card.html"),
        js_on_load=asset("card.js"),
        apply_default_css=False,
        server_functions=functions,
        elem_id=f"{mode}-card",
        mode=mode,
    )
