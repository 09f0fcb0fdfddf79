"""How the studio's handlers meet Gradio: the signed-in user, one-line errors, and card events that postprocess
their outputs in their own worker thread.

Gradio passes the request to a handler parameter annotated `gr.Request`; `guarded` takes the user from it (the
server-side session, never a form value) and turns a RelabelError into a one-line message. `card_event` wires a
card handler with `postprocess=False` and does the components' postprocessing in the handler's thread: Gradio
would otherwise hop to a thread once per output and move every file payload twice, most of a card event's cost
under concurrent annotators.
"""

from __future__ import annotations

import inspect
import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from relabel.errors import RelabelError


def user_of(request: gr.Request | None) -> str:
    """The logged-in user of a request: the server-side session, never a form value."""
    name = getattr(request, "username", None)
    if not name:
        raise gr.Error("not logged in", print_exception=False)
    return str(name)


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


def gallery_data(items: list[tuple[str, str]] | None) -> Any:
    """(path, caption) pairs as Gradio's gallery payload, built directly: `Gallery.postprocess` starts a thread
    pool on every call."""
    from gradio.components.gallery import GalleryData, GalleryImage
    from gradio.data_classes import ImageData

    return GalleryData(
        root=[
            GalleryImage(
                image=ImageData(path=path, orig_name=Path(path).name, mime_type=mimetypes.guess_type(path)[0]),
                caption=caption,
            )
            for path, caption in items or []
        ]
    )


def postprocessed(fn: Callable[..., Any], outputs: list[Any]) -> Callable[..., Any]:
    """`fn` whose values are postprocessed by their components in the handler's own worker thread.

    Events wired with it pass `postprocess=False`: Gradio would otherwise hop to a thread once per output and move
    every file payload twice, which is most of a card event's cost under concurrent annotators.
    """

    def handler(*args: Any) -> list[Any]:
        values = fn(*args)
        return [gallery_data(v) if isinstance(c, gr.Gallery) else c.postprocess(v) for c, v in zip(outputs, values)]

    handler.__signature__ = inspect.signature(fn)  # type: ignore[attr-defined]
    handler.__annotations__ = getattr(fn, "__annotations__", {})
    handler.__name__ = getattr(fn, "__name__", "handler")
    return handler


def card_event(trigger: Any, fn: Callable[..., Any], inputs: Any, outputs: list[Any], **kwargs: Any) -> None:
    """Wire a guarded card handler (it returns `card_values`) with its outputs postprocessed in its thread."""
    trigger.click(postprocessed(guarded(fn), outputs), inputs, outputs, postprocess=False, **kwargs)
