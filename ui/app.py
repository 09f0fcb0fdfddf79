"""The annotation studio as a Gradio app: review, adjudication, history, dashboard and snapshots.

Login is Gradio's own (`launch(auth=studio.login)`); every handler takes the user from `gr.Request.username`, the
server-side session, and lead-only handlers check the role again on the server. Keyboard shortcuts are a small
script in the page head that clicks the buttons (ids in `ui.views.SHORTCUTS`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import gradio as gr

from relabel.review.studio import Studio
from ui import dashboard_tab, handlers, reports_tab, views
from ui.events import card_event, guarded
from ui.files import served_copy
from ui.keyboard import KEYBOARD_JS

CATEGORY_CHOICES = [
    ("A: original confirmed", "A"),
    ("B: one other class", "B"),
    ("M: several classes", "M"),
    ("Z: no class fits", "Z"),
    ("X: unclear", "X"),
]
STATUS_CHOICES = [
    ("to review", "open"),
    ("disputed: add an opinion", "disputed"),
    ("decided", "decided"),
    ("mine (revisit)", "mine"),
]
HISTORY_HEADERS = ["#", "when", "who", "what", "replaced", "suggestion", "note", "seconds"]
CSS = """
#card-image img { object-fit: contain; max-height: 70vh; }
#shortcuts { font-size: 0.85em; opacity: 0.8; }
"""


class ReviewOutputs:
    """The card's components and its decision form, laid out as they are created (CardView's field order).

    The image and what others decided sit on the left; the labels, the suggestion and everything the annotator
    acts on sit on the right, so a keyboard user sees the status and the form without scrolling.
    """

    def __init__(
        self,
        vocab_choices: list[tuple[str, int]],
        prefix: str = "card",
        form_prefix: str = "act",
        others_label: str = "other decisions (shown after you decide)",
    ) -> None:
        with gr.Row():
            with gr.Column(scale=3):
                self.image = gr.Image(
                    label="image", type="filepath", interactive=False, elem_id=f"{prefix}-image", height=480
                )
                with gr.Row():
                    self.header = gr.Textbox(
                        show_label=False, interactive=False, lines=1, elem_id=f"{prefix}-header", scale=4
                    )
                    self.full_btn = gr.Button("Full resolution [F]", elem_id=f"{prefix}-full", size="sm", scale=1)
                self.others = gr.Textbox(
                    label=others_label, interactive=False, lines=1, max_lines=8, elem_id=f"{prefix}-others"
                )
                self.examples = gr.Gallery(label="reference examples", columns=2, height=160, visible=False)
            with gr.Column(scale=2):
                self.original = gr.Textbox(
                    label="original label (ImGT)",
                    interactive=False,
                    lines=2,
                    max_lines=5,
                    elem_id=f"{prefix}-original",
                )
                self.suggestion = gr.Textbox(
                    label="suggestion", interactive=False, lines=2, max_lines=5, elem_id=f"{prefix}-suggestion"
                )
                self.classifier = gr.Label(
                    label="classifier top-5", num_top_classes=5, show_heading=False, elem_id=f"{prefix}-classifier"
                )
                self.priors = gr.Textbox(
                    label="prior relabels", interactive=False, lines=1, max_lines=5, elem_id=f"{prefix}-priors"
                )
                self.status = gr.Textbox(label="status", interactive=False, lines=1, elem_id=f"{prefix}-status")
                self.form = DecisionForm(vocab_choices, form_prefix)
        self.card_key = gr.Textbox(visible="hidden", elem_id=f"{prefix}-key")

    def components(self) -> list[Any]:
        return [
            self.image,
            self.header,
            self.original,
            self.suggestion,
            self.classifier,
            self.priors,
            self.examples,
            self.others,
            self.card_key,
            self.status,
        ]


def card_values(view: views.CardView) -> list[Any]:
    """A CardView as component values, followed by the cleared picker, flags and note. Tables become plain text
    lines: cheaper to send than dataframes, and never interpreted as markup."""
    return [
        view.image,
        view.header,
        view.original,
        view.suggestion,
        view.classifier or None,
        "\n".join(" · ".join(cell for cell in row if cell) for row in view.priors) or "none imported",
        view.examples,
        "\n".join(
            f"{who}: {what}" + (f" — {note}" if note else "") + f" ({when})" for who, what, note, when in view.others
        ),
        view.card_key,
        view.status,
        [],
        [],
        "",
    ]


class DecisionForm:
    """Quick actions, the class picker, flags and a note. Button ids are what the keyboard script clicks."""

    QUICK = (
        ("original", "Original is right [1]"),
        ("suggestion", "Suggestion is right [2]"),
        ("both", "Both [3]"),
        ("none_fit", "No class fits [Z]"),
        ("unclear", "Unclear [X]"),
    )

    def __init__(self, vocab_choices: list[tuple[str, int]], prefix: str) -> None:
        with gr.Row():
            self.buttons = {
                action: gr.Button(label, elem_id=f"{prefix}-{action}", size="md", min_width=120)
                for action, label in self.QUICK
            }
        with gr.Row():
            self.picker = gr.Dropdown(
                vocab_choices,
                multiselect=True,
                value=[],
                label="classes in the image (type a name, synonym or wnid)",
                elem_id=f"{prefix}-picker",
                scale=4,
            )
            self.buttons["labels"] = gr.Button(
                "Save classes [Enter]", elem_id=f"{prefix}-labels", scale=1, variant="primary", min_width=100
            )
        with gr.Row():
            self.flags = gr.CheckboxGroup(
                list(views.FLAG_LABELS), value=[], label="flags [D M C I]", elem_id=f"{prefix}-flags"
            )
        with gr.Row():
            self.note = gr.Textbox(label="note", lines=1, max_length=2000, elem_id=f"{prefix}-note")
        with gr.Row():
            self.skip = gr.Button("Skip [K]", elem_id=f"{prefix}-skip", size="sm")
            self.undo = gr.Button("Undo [U]", elem_id=f"{prefix}-undo", size="sm")


def build_app(studio: Studio, *, exports_dir: Path, reports_dir: Path) -> gr.Blocks:
    """The studio's Blocks; `launch_app` serves it."""
    vocab_choices = views.picker_choices(studio.vocab)
    with gr.Blocks(title="ReGT studio") as app:
        with gr.Row():
            gr.Markdown("## ReGT studio")
            whoami = gr.Textbox(show_label=False, interactive=False, lines=1, elem_id="whoami")
        with gr.Tab("Review", id="review"):
            review_tab(studio, vocab_choices)
        with gr.Tab("Adjudicate", id="adjudicate", visible=False) as adjudicate_tab:
            adjudication_tab(studio, vocab_choices)
        with gr.Tab("Dashboard", id="dashboard", visible=False) as dash_tab:
            dashboard_tab.build(studio, guarded)
        with gr.Tab("Snapshots", id="snapshots", visible=False) as snap_tab:
            snapshot_tab(studio, exports_dir)
        with gr.Tab("Reports", id="reports", visible=False) as rep_tab:
            reports_tab.build(studio, guarded, reports_dir, rep_tab)

        def on_load(user: str) -> tuple[Any, ...]:
            _, role = studio.user(user)
            lead = role.value == "lead"
            return f"signed in as {user} ({role.value})", *(gr.Tab(visible=lead) for _ in range(4))

        app.load(
            guarded(on_load), None, [whoami, adjudicate_tab, dash_tab, snap_tab, rep_tab], api_visibility="private"
        )
    return app


def review_tab(studio: Studio, vocab_choices: list[tuple[str, int]]) -> None:
    with gr.Row():
        class_filter = gr.Dropdown(
            [(handlers.ALL_CLASSES, handlers.ALL_CLASSES), *vocab_choices],
            value=handlers.ALL_CLASSES,
            label="queue: original class",
            scale=2,
        )
        status_filter = gr.Radio(STATUS_CHOICES, value="open", label="queue: status", scale=3)
        category_filter = gr.Dropdown(
            [("any", handlers.ANY_CATEGORY), *CATEGORY_CHOICES],
            value=handlers.ANY_CATEGORY,
            label="queue: consensus category",
            scale=1,
        )
        next_btn = gr.Button("Next card", elem_id="act-next", scale=1, variant="primary")
    out = ReviewOutputs(vocab_choices)
    form = out.form
    gr.Markdown("Shortcuts: " + " · ".join(f"`{k}` {v}" for k, v in views.SHORTCUTS), elem_id="shortcuts")
    with gr.Accordion("History of this image", open=False):
        history_btn = gr.Button("Show history", size="sm", elem_id="act-history")
        history = gr.Dataframe(headers=HISTORY_HEADERS, interactive=False, wrap=True, elem_id="card-history")

    filters = [class_filter, status_filter, category_filter]
    outputs = [*out.components(), form.picker, form.flags, form.note]
    card_event(
        next_btn,
        lambda u, c, s, k: card_values(handlers.next_card(studio, u, c, s, k)),
        filters,
        outputs,
        api_name="next_card",
    )
    for action, button in form.buttons.items():

        def decide(
            u: str, key: str, picked: Any, flags: Any, note: str, c: Any, s: Any, k: Any, action: str = action
        ) -> Any:
            return card_values(handlers.decide(studio, u, key, action, picked, flags, note, c, s, k))

        card_event(
            button, decide, [out.card_key, form.picker, form.flags, form.note, *filters], outputs,
            api_name=f"decide_{action}",
        )  # fmt: skip
    card_event(
        form.skip,
        lambda u, key, c, s, k: card_values(handlers.skip(studio, u, key, c, s, k)),
        [out.card_key, *filters],
        outputs,
        api_name="skip",
    )
    card_event(form.undo, lambda u: card_values(handlers.undo(studio, u)), None, outputs, api_name="undo")
    out.full_btn.click(
        guarded(lambda u, key: handlers.full_resolution(studio, u, key)),
        out.card_key,
        out.image,
        api_name="full_resolution",
    )
    history_btn.click(
        guarded(lambda u, key: handlers.history(studio, u, key)), out.card_key, history, api_name="history"
    )


def adjudication_tab(studio: Studio, vocab_choices: list[tuple[str, int]]) -> None:
    gr.Markdown("Images whose annotators disagree. All decisions are shown; yours becomes the consensus.")
    with gr.Row():
        list_btn = gr.Button("List disputed images", size="sm")
        image_id = gr.Number(label="image id (empty: the most disputed)", precision=0, scale=1)
        open_btn = gr.Button("Open", elem_id="adj-open", size="sm")
    disputed = gr.Dataframe(headers=["image id", "path", "original", "decisions"], interactive=False, wrap=True)
    out = ReviewOutputs(vocab_choices, "adjcard", "adj", others_label="annotators' decisions")
    form = out.form
    outputs = [*out.components(), form.picker, form.flags, form.note]
    list_btn.click(guarded(lambda u: handlers.adjudication_list(studio, u)), None, disputed, api_name="disputed")
    card_event(
        open_btn,
        lambda u, i: card_values(handlers.open_for_adjudication(studio, u, i)),
        image_id,
        outputs,
        api_name="open_for_adjudication",
    )
    for action, button in form.buttons.items():

        def adjudicate(u: str, key: str, picked: Any, flags: Any, note: str, action: str = action) -> Any:
            return card_values(handlers.adjudicate(studio, u, key, action, picked, flags, note))

        card_event(
            button, adjudicate, [out.card_key, form.picker, form.flags, form.note], outputs,
            api_name=f"adjudicate_{action}",
        )  # fmt: skip
    card_event(
        form.skip,
        lambda u: card_values(handlers.open_for_adjudication(studio, u, None)),
        None,
        outputs,
        api_visibility="private",
    )
    card_event(form.undo, lambda u: card_values(handlers.undo(studio, u)), None, outputs, api_visibility="private")


def snapshot_tab(studio: Studio, exports_dir: Path) -> None:
    gr.Markdown("Freeze the current consensus as an immutable snapshot, then export it.")
    with gr.Row():
        name = gr.Textbox(label="snapshot name", lines=1)
        undecided = gr.Radio(["keep", "exclude"], value="keep", label="undecided images")
        min_votes = gr.Number(value=1, precision=0, label="minimum agreeing votes")
        create_btn = gr.Button("Create snapshot", variant="primary")
    created = gr.Textbox(label="result", interactive=False)
    with gr.Row():
        export_name = gr.Textbox(label="snapshot to export", lines=1)
        fmt = gr.Radio(["real", "jsonl", "csv"], value="real", label="format")
        export_btn = gr.Button("Export")
    exported = gr.File(label="export", interactive=False)
    create_btn.click(
        guarded(lambda u, n, p, m: handlers.create_snapshot(studio, u, n, p, m)),
        [name, undecided, min_votes],
        created,
        api_name="create_snapshot",
    )
    export_btn.click(
        guarded(lambda u, n, f: served_copy(handlers.export_snapshot(studio, u, n, f, exports_dir))),
        [export_name, fmt],
        exported,
        api_name="export_snapshot",
    )


def launch_app(
    studio: Studio,
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    exports_dir: Path,
    block: bool = True,
    concurrency: int = 16,
    reports_dir: Path | None = None,
) -> gr.Blocks:
    """Serve the studio. Never creates a share link; binds 127.0.0.1 unless told otherwise."""
    exports_dir.mkdir(parents=True, exist_ok=True)
    reports_dir = reports_dir or exports_dir.parent / reports_tab.REPORTS_DIR  # both in the workspace by default
    reports_dir.mkdir(parents=True, exist_ok=True)
    # Card images are served from the display cache where they lie instead of being copied into Gradio's cache on
    # every card; /file= still requires a signed-in session. The cache holds only images the studio wrote or
    # linked in under an image suffix; dataset roots, exports and reports are never served as they are (lead-only
    # downloads go out as copies, ui.files).
    gr.set_static_paths([studio.display.folder])
    app = build_app(studio, exports_dir=exports_dir, reports_dir=reports_dir)
    # Gradio rebuilds a pandas summary of up to 10,000 past events after every event by default: O(events) work
    # per decision that only its monitoring page reads. Summarise every 1000 events over the last 2000 instead.
    os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", "1000")
    os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", "2000")
    app.queue(default_concurrency_limit=concurrency)
    app.launch(
        server_name=host,
        server_port=port,
        share=False,
        auth=studio.login,
        auth_message="ReGT studio: sign in with the name and password a lead gave you (relabel users add).",
        allowed_paths=[str(studio.display.folder)],
        prevent_thread_lock=not block,
        quiet=True,
        show_error=True,
        css=CSS,
        head=KEYBOARD_JS,
        footer_links=[],
        ssr_mode=False,
    )
    return app
