"""Cards and tables as plain values for Gradio components.

Everything here is text, numbers or file paths: class names, model output and notes are untrusted, so they only
ever go into components that display text as text (Textbox, Label, Dataframe), never into HTML or Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from relabel.review.cards import Card, Event, Suggestion
from relabel.vocabulary import Vocabulary

SHORTCUTS = (
    ("1", "original is right"),
    ("2", "suggestion is right"),
    ("3", "both"),
    ("Enter", "save picked classes"),
    ("Z", "no class fits"),
    ("X", "unclear"),
    ("K", "skip"),
    ("U", "undo"),
    ("N", "next card"),
    ("F", "full resolution"),
    ("/", "search classes"),
    ("D M C I", "toggle flags"),
    ("Esc", "leave a text field"),
)
FLAG_LABELS = (
    ("drawing or render", "drawing"),
    ("multiple objects", "multiple_objects"),
    ("duplicate", "duplicate"),
    ("inappropriate", "inappropriate"),
)
VERDICT_TEXT = {"labels": "", "none_fit": "no class fits (Z)", "unclear": "unclear (X)", "retract": "undo"}


def class_text(vocab: Vocabulary, index: int | None) -> str:
    """'tabby, tabby cat (n02123045)': the display name and wnid of one class."""
    if index is None or not 0 <= index < len(vocab):
        return "—"
    c = vocab.classes[index]
    return f"{c.name} ({c.wnid})" if c.wnid else c.name


def classes_text(vocab: Vocabulary, classes: tuple[int, ...] | list[int]) -> str:
    return "; ".join(class_text(vocab, c) for c in classes) if classes else "(none)"


def picker_choices(vocab: Vocabulary) -> list[tuple[str, int]]:
    """Dropdown choices whose labels hold the name, the synonyms and the wnid, so type-ahead finds any of them."""
    out = []
    for c in vocab.classes:
        extra = [s for s in c.synonyms if s != c.name]
        label = c.name + (f" — {', '.join(extra)}" if extra else "") + (f" · {c.wnid}" if c.wnid else "")
        out.append((label, c.index))
    return out


def original_text(vocab: Vocabulary, card: Card) -> str:
    if not card.original:
        return "no original label"
    lines = []
    for index in card.original:
        c = vocab.classes[index]
        lines.append(class_text(vocab, index))
        if c.synonyms:
            lines.append("synonyms: " + ", ".join(c.synonyms))
        if c.gloss:
            lines.append(c.gloss)
    return "\n".join(lines)


def suggestion_text(vocab: Vocabulary, s: Suggestion | None, fallback: Suggestion | None = None) -> str:
    """The MLLM suggestion; without one, the classifier's top-1 stands in (and "suggestion is right" takes it)."""
    if s is None:
        if fallback is not None and fallback.top1 is not None:
            return (
                f"no MLLM suggestion; classifier top-1 ({fallback.model}):\nclass: {class_text(vocab, fallback.top1)}"
            )
        return "no suggestion for this image"
    head = f"{s.model} · {s.protocol} · run {s.run}"
    if not s.ok:
        return f"{head}\nthe model failed on this image: {s.error}"
    lines = [head, f"class: {class_text(vocab, s.top1)}"]
    if s.raw:
        lines.append(f"answer: {s.raw}")
    if s.details.get("oop"):
        lines.append("out of prompt" + (" (mapped by similarity)" if s.details.get("mapped") else ""))
    if "similarity" in s.details:
        lines.append(f"mapping similarity: {s.details['similarity']:.2f}")
    return "\n".join(lines)


def classifier_scores(vocab: Vocabulary, s: Suggestion | None, k: int = 5) -> dict[str, float]:
    """Top-k class → score, for gr.Label (rendered as text with bars)."""
    if s is None or not s.ok:
        return {}
    scores = s.scores or tuple(1.0 / (rank + 1) for rank in range(len(s.classes)))
    return {class_text(vocab, c): float(p) for c, p in list(zip(s.classes, scores))[:k]}


def prior_rows(vocab: Vocabulary, card: Card) -> list[list[str]]:
    rows = []
    for p in card.priors:
        detail = p.category or ""
        if p.extra and "votes" in p.extra:
            detail = (detail + " " if detail else "") + f"votes {p.extra['votes']}"
        rows.append([p.source, classes_text(vocab, p.classes) if p.classes else "(excluded / none)", detail])
    return rows


def event_summary(vocab: Vocabulary, e: Event) -> str:
    text = VERDICT_TEXT.get(e.verdict.value, "") or classes_text(vocab, e.classes)
    if e.flags:
        text += f" [flags: {', '.join(e.flags)}]"
    return text


def decision_rows(vocab: Vocabulary, events: list[Event]) -> list[list[str]]:
    return [
        [
            ("lead " if e.is_adjudication else "") + e.user,
            event_summary(vocab, e),
            e.note,
            e.created_at.strftime("%Y-%m-%d %H:%M"),
        ]
        for e in events
    ]


def history_rows(vocab: Vocabulary, events: tuple[Event, ...] | list[Event]) -> list[list[Any]]:
    """The audit trail of one image, oldest first: who, when, what, what it replaced, how the suggestion fared,
    the note and the seconds on the item. An undo is its own row."""
    standing: dict[tuple[str, bool], Event] = {}
    by_id = {e.annotation_id: e for e in events}
    rows = []
    for e in events:
        slot = (e.user, e.is_adjudication)
        before = standing.get(slot)
        if e.retracts_id:
            what = f"undo of #{e.retracts_id}"
            undone = by_id.get(e.retracts_id)
            standing.pop(slot, None)
            was = event_summary(vocab, undone) if undone else ""
        else:
            what = event_summary(vocab, e)
            was = event_summary(vocab, before) if before else ""
            standing[slot] = e
        rows.append(
            [
                e.annotation_id,
                e.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                e.user,
                ("adjudication: " if e.is_adjudication else "") + what,
                was,
                e.suggestion_action,
                e.note,
                "" if e.seconds_on_item is None else f"{e.seconds_on_item:.1f}",
            ]
        )
    return rows


def audit_rows(vocab: Vocabulary, events: list[tuple[Event, str]]) -> list[list[Any]]:
    """The dataset-wide audit trail, newest first."""
    return [
        [
            e.annotation_id,
            e.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            e.user,
            path,
            ("adjudication: " if e.is_adjudication else "")
            + (f"undo of #{e.retracts_id}" if e.retracts_id else event_summary(vocab, e)),
            e.suggestion_action,
            e.note,
        ]
        for e, path in events
    ]


@dataclass(frozen=True)
class CardView:
    """The review tab's values, in the order of `ReviewOutputs` in ui.app."""

    image: str | None
    header: str
    original: str
    suggestion: str
    classifier: dict[str, float]
    priors: list[list[str]]
    examples: list[tuple[str, str]]
    others: list[list[str]]
    card_key: str
    status: str


def empty_view(status: str) -> CardView:
    return CardView(None, "", "", "", {}, [], [], [], "", status)


def header_text(card: Card) -> str:
    size = f"{card.width}×{card.height}" if card.width and card.height else "size unknown"
    text = f"{card.dataset} · {card.image.path} · {size}"
    return text + (f" · {card.notes}" if card.notes else "")
