"""The leads' guidelines editor: a Markdown textbox, Save and a preview, in an accordion of the Dashboard tab.

Annotators read the saved guidelines on the review card (key G, `ui.card_notes.guidelines`). The text is untrusted
even from a lead (a pasted page can hold markup): the preview shows the card's Markdown subset (headings, bullet
lists, bold; `relabel.review.guidelines.guideline_blocks`) built from HTML-escaped text, so a tag in the text is
shown as text and never becomes an element. `load_values`, `save_values` and `preview_html` are plain functions
(tests call them); each checks the lead's role on the server.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import gradio as gr

from relabel.review.guidelines import MAX_GUIDELINES_BYTES, current_guidelines, guideline_blocks
from relabel.review.studio import Studio
from ui.card_notes import WHEN, save_lead_guidelines

LABEL = (
    "guidelines in Markdown: # headings, - bullet lists and **bold** are shown as such, everything else as plain "
    f"text (at most {MAX_GUIDELINES_BYTES // 1024} KiB)"
)


def preview_html(text: str) -> str:
    """`text` as the card shows it, as HTML in which every piece of the text is escaped."""
    parts: list[str] = []
    in_list = False
    for block in guideline_blocks(text or ""):
        inner = "".join(f"<strong>{html.escape(t)}</strong>" if bold else html.escape(t) for t, bold in block.spans)
        if block.kind == "li" and not in_list:
            parts.append("<ul>")
        elif block.kind != "li" and in_list:
            parts.append("</ul>")
        in_list = block.kind == "li"
        tag = block.kind if block.kind in ("h1", "h2", "h3", "li") else "p"
        style = ' style="white-space: pre-wrap"' if tag == "p" else ""
        parts.append(f"<{tag}{style}>{inner}</{tag}>")
    if in_list:
        parts.append("</ul>")
    return f'<div class="rg-guidelines-preview">{"".join(parts)}</div>'


def load_values(studio: Studio, user: str) -> tuple[str, str, str]:
    """(the current text, a line about its version, its preview) for the editor; a lead's only."""
    studio.require_lead(user)
    version = current_guidelines(studio.engine)
    if version is None:
        return "", "no guidelines yet: write them here and press Save", ""
    about = f"current: version {version.id} by {version.author}, {version.created_at:{WHEN}}"
    return version.text, about, preview_html(version.text)


def save_values(studio: Studio, user: str, text: str) -> tuple[str, str]:
    """Save `text` as the guidelines (a lead's only; refused text raises a one-line error); (message, preview)."""
    return save_lead_guidelines(studio, user, text), preview_html(text)


def build(studio: Studio, guarded: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """The editor, folded, in the current Blocks context; it loads the current guidelines when unfolded."""
    with gr.Accordion("Labeling guidelines (annotators read them on the card: G)", open=False) as editor:
        text = gr.Textbox(label=LABEL, lines=10, max_lines=30, elem_id="guidelines-text")
        with gr.Row():
            preview_button = gr.Button("Preview", size="sm", elem_id="guidelines-preview-button")
            save = gr.Button("Save", size="sm", variant="primary", elem_id="guidelines-save")
        message = gr.Textbox(show_label=False, interactive=False, lines=1, elem_id="guidelines-message")
        preview = gr.HTML(value="", js_on_load=None, elem_id="guidelines-preview")
    editor.expand(guarded(lambda u: load_values(studio, u)), None, [text, message, preview], api_visibility="private")
    save.click(guarded(lambda u, t: save_values(studio, u, t)), [text], [message, preview], api_visibility="private")
    preview_button.click(guarded(lambda u, t: (studio.require_lead(u), preview_html(t))[1]), [text], preview,
                         api_visibility="private")  # fmt: skip
