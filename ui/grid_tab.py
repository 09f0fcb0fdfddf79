"""The leads' Images tab: a grid of thumbnails with filters, sort and pages; one annotator's decisions to review;
assigning the filtered images, or an original class, to an annotator.

`grid_values`, `adjudication_link`, `annotator_values`, `assign_filtered`, `assign_class` and `user_choices` are
plain functions (tests call them), leads only: each checks the role on the server first. The queries are
`relabel.review.grid` and `relabel.review.assignments`. Thumbnails come from the studio's display cache
(`relabel.review.display`: only images recorded in the workspace, from copies whose bytes match ingest), never from
a path a browser sends. Paths, class names and user names are untrusted text: captions, Dataframe cells and
Dropdown choices show them as text; the one Markdown this tab writes holds only an integer image id.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import gradio as gr

from relabel.common.errors import NotFoundError, RelabelError
from relabel.review.assignments import add_assignments
from relabel.review.grid import (
    PAGE_SIZE,
    SORTS,
    STATUSES,
    AnnotatorDecision,
    GridFilter,
    GridImage,
    annotator_decisions,
    load_grid,
    page_of,
    select_images,
    user_ids,
)
from relabel.review.studio import Studio
from ui.events import user_of

THUMB_SIDE = 256  # the longer side of a thumbnail, in pixels
ANY = "(any)"
ANNOTATOR_HEADERS = ["image", "file", "answer", "decided (UTC)", "others agreeing", "consensus", "adjudicate"]
Guard = Callable[[Callable[..., Any]], Callable[..., Any]]


def link(image_id: int) -> str:
    """The address that opens `image_id` on the adjudication card."""
    return f"?image={int(image_id)}&tab=adjudicate"


def _filter(
    studio: Studio,
    status: str | None,
    class_text: str | None,
    annotator: str | None,
    disagrees: bool,
    assigned_to: str | None,
) -> GridFilter:
    """The form's filter, each name looked up (an unknown class or user is a one-line error naming it)."""
    with studio.engine.connect() as conn:
        users = user_ids(conn)

    def user(name: str | None) -> int | None:
        if not name or name == ANY:
            return None
        if name not in users:
            raise NotFoundError(f"unknown user {name!r}")
        return users[name]

    text = (class_text or "").strip()
    return GridFilter(
        status=None if not status or status == ANY else status,
        class_index=studio.vocab.resolve(text) if text else None,
        annotator=user(annotator),
        disagrees=bool(disagrees),
        assigned_to=user(assigned_to),
    )


def _selected(studio: Studio, flt: GridFilter, sort: str | None) -> list[GridImage]:
    with studio.engine.connect() as conn:
        images = load_grid(conn, studio.dataset_id, studio.queue.evidence)
    return select_images(images, flt, sort or "image")


def _caption(studio: Studio, g: GridImage) -> str:
    original = ", ".join(studio.vocab.classes[c].name for c in g.original) or "no ImGT label"
    assigned = f" · assigned {len(g.assignees)}" if g.assignees else ""
    return f"#{g.image_id} {g.status}, {len(g.decisions)} dec. · {original} · {Path(g.path).name}{assigned}"


def grid_values(
    studio: Studio,
    user: str,
    status: str | None,
    class_text: str | None,
    annotator: str | None,
    disagrees: bool,
    assigned_to: str | None,
    sort: str | None,
    page: Any,
) -> list[Any]:
    """[gallery items (thumbnail path, caption), a one-line summary, the page number shown, the page's image ids]."""
    studio.require_lead(user)
    flt = _filter(studio, status, class_text, annotator, disagrees, assigned_to)
    shown = page_of(_selected(studio, flt, sort), int(page or 1), PAGE_SIZE)
    items: list[tuple[str, str]] = []
    ids: list[int] = []
    unshown = 0
    for g in shown.images:
        try:
            thumb = studio.display.path_for(studio.stored_image(g.image_id), side=THUMB_SIDE)
        except RelabelError:  # gone or changed since ingest: its card says why
            unshown += 1
            continue
        items.append((str(thumb), _caption(studio, g)))
        ids.append(g.image_id)
    summary = f"{shown.total:,} image(s) match; page {shown.number} of {shown.pages}"
    if unshown:
        summary += f"; {unshown} on this page cannot be shown (changed or gone since ingest)"
    return [items, summary, shown.number, ids]


def adjudication_link(ids: list[int], index: int | None) -> str:
    """The Markdown link of the thumbnail at `index` of the page (ids as `grid_values` returned them)."""
    if index is None or not 0 <= index < len(ids):
        return ""
    image_id = int(ids[index])
    return f"Image {image_id}: [open it on the adjudication card]({link(image_id)})"


def annotator_values(
    studio: Studio,
    user: str,
    who: str | None,
    status: str | None,
    class_text: str | None,
    disagrees: bool,
    assigned_to: str | None,
) -> list[list[Any]]:
    """`ANNOTATOR_HEADERS` rows: the standing decisions of annotator `who` under the grid's filters, newest first."""
    studio.require_lead(user)
    if not who or who == ANY:
        raise NotFoundError("choose the annotator whose decisions to review")
    flt = _filter(studio, status, class_text, who, disagrees, assigned_to)
    with studio.engine.connect() as conn:
        images = load_grid(conn, studio.dataset_id, studio.queue.evidence)
        rows = annotator_decisions(conn, images, flt.annotator or 0, flt)
    return [_annotator_row(studio, r) for r in rows]


def _annotator_row(studio: Studio, r: AnnotatorDecision) -> list[Any]:
    d = r.decision
    answer = ", ".join(studio.vocab.classes[c].name for c in d.classes) if d.classes else d.verdict.value
    at = f"{r.at:%Y-%m-%d %H:%M}" if r.at is not None else ""
    agreeing = f"{r.others_agreeing} of {r.others}" if r.others else "no other annotator"
    return [r.image_id, Path(r.path).name, answer, at, agreeing, r.consensus, link(r.image_id)]


def assign_filtered(
    studio: Studio,
    user: str,
    target: str | None,
    status: str | None,
    class_text: str | None,
    annotator: str | None,
    disagrees: bool,
    assigned_to: str | None,
) -> str:
    """Assign every image of the grid's filter (all pages) to `target`; a one-line result."""
    studio.require_lead(user)
    if not target or target == ANY:
        raise NotFoundError("choose the user to assign the images to")
    flt = _filter(studio, status, class_text, annotator, disagrees, assigned_to)
    ids = [g.image_id for g in _selected(studio, flt, "image")]
    if not ids:
        raise NotFoundError("no image matches the filter; nothing assigned")
    added = add_assignments(studio.engine, studio.dataset_id, target, image_ids=ids, by=user)
    return f"assigned {len(ids):,} image(s) to {target!r} ({added:,} new); they come first in {target!r}'s queue"


def assign_class(studio: Studio, user: str, target: str | None, class_text: str | None) -> str:
    """Assign the original class named in the filter's class box to `target`; a one-line result."""
    studio.require_lead(user)
    if not target or target == ANY:
        raise NotFoundError("choose the user to assign the class to")
    text = (class_text or "").strip()
    if not text:
        raise NotFoundError("name the class in the 'original class' box first")
    index = studio.vocab.resolve(text)
    added = add_assignments(studio.engine, studio.dataset_id, target, class_index=index, vocab=studio.vocab, by=user)
    shown = studio.vocab.describe(index)
    return f"assigned class {shown} to {target!r}" + ("" if added else " (it was already)")


def user_choices(studio: Studio, user: str) -> list[Any]:
    """The user pickers (annotator filter, assigned-to filter, review, assign target), filled with every user."""
    studio.require_lead(user)
    with studio.engine.connect() as conn:
        names = sorted(user_ids(conn))
    return [gr.Dropdown(choices=[ANY, *names]) for _ in range(2)] + [gr.Dropdown(choices=names) for _ in range(2)]


def build(studio: Studio, guarded: Guard, tab: gr.Tab) -> None:
    """The tab's layout inside `tab`; the users and the first page load when the tab is opened."""
    with gr.Row():
        status = gr.Dropdown([ANY, *STATUSES], value=ANY, label="status", filterable=False, elem_id="grid-status")
        class_text = gr.Textbox(label="original class (name or wnid)", lines=1)
        annotator = gr.Dropdown([ANY], value=ANY, label="decided by")
        assigned_to = gr.Dropdown([ANY], value=ANY, label="assigned to")
        disagrees = gr.Checkbox(label="suggestion differs from ImGT")
        sort = gr.Dropdown(list(SORTS), value="image", label="sort", filterable=False)
    with gr.Row():
        show = gr.Button("Show", variant="primary", elem_id="grid-show")
        previous = gr.Button("◀ Previous", size="sm")
        page = gr.Number(value=1, precision=0, minimum=1, label="page", scale=0)
        following = gr.Button("Next ▶", size="sm")
        summary = gr.Textbox(show_label=False, interactive=False, lines=1, scale=3, elem_id="grid-summary")
    ids = gr.State([])
    gallery = gr.Gallery(
        label="images", columns=6, height="auto", object_fit="cover", allow_preview=False, elem_id="grid-gallery"
    )
    chosen = gr.Markdown(elem_id="grid-link")
    with gr.Accordion("Assign to an annotator", open=False):
        with gr.Row():
            target = gr.Dropdown([], label="assign to", scale=2)
            assign_images = gr.Button("Assign the images of this filter (all pages)", size="sm")
            assign_cls = gr.Button("Assign the original class named above", size="sm")
        assigned = gr.Textbox(show_label=False, interactive=False, lines=1)
    with gr.Accordion("Review one annotator's decisions (under the filters above)", open=False):
        with gr.Row():
            who = gr.Dropdown([], label="annotator", scale=2)
            review = gr.Button("Show decisions", size="sm")
        decisions = gr.Dataframe(headers=ANNOTATOR_HEADERS, interactive=False, wrap=True)

    filters = [status, class_text, annotator, disagrees, assigned_to]
    view = guarded(lambda u, s, c, a, d, t, o, p: grid_values(studio, u, s, c, a, d, t, o, p))
    outputs = [gallery, summary, page, ids]
    tab.select(
        guarded(lambda u: user_choices(studio, u)),
        None,
        [annotator, assigned_to, who, target],
        api_visibility="private",
    )
    tab.select(view, [*filters, sort, page], outputs, api_visibility="private")
    show.click(lambda: 1, None, page, api_visibility="private").then(
        view, [*filters, sort, page], outputs, api_name="image_grid"
    )
    previous.click(lambda p: max(1, int(p or 1) - 1), page, page, api_visibility="private").then(
        view, [*filters, sort, page], outputs, api_visibility="private"
    )
    following.click(lambda p: int(p or 1) + 1, page, page, api_visibility="private").then(
        view, [*filters, sort, page], outputs, api_visibility="private"
    )

    def on_select(page_ids: list[int], evt: gr.SelectData, request: gr.Request) -> str:
        try:
            studio.require_lead(user_of(request))
        except RelabelError as exc:
            raise gr.Error(str(exc), print_exception=False) from exc
        return adjudication_link(page_ids, evt.index if isinstance(evt.index, int) else None)

    gallery.select(on_select, ids, chosen, api_visibility="private")
    assign_images.click(
        guarded(lambda u, t, s, c, a, d, to: assign_filtered(studio, u, t, s, c, a, d, to)),
        [target, *filters],
        assigned,
        api_name="assign_images",
    )
    assign_cls.click(
        guarded(lambda u, t, c: assign_class(studio, u, t, c)), [target, class_text], assigned, api_name="assign_class"
    )
    review.click(
        guarded(lambda u, w, s, c, d, t: annotator_values(studio, u, w, s, c, d, t)),
        [who, status, class_text, disagrees, assigned_to],
        decisions,
        api_name="annotator_decisions",
    )
