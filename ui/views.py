"""Classes, decisions and audit trails as plain text, for the cards' payloads and the leads' tables.

Everything here is text or numbers: class names, model output and notes are untrusted, so they only ever go into
the page as text (the cards' script sets `textContent`; the leads' tabs use Textbox and Dataframe), never into
HTML or Markdown.
"""

from __future__ import annotations

from typing import Any

from relabel.common.vocabulary import Vocabulary
from relabel.decisions.rules import replay
from relabel.review.cards import Card, HistoryEntry, slot

VERDICT_TEXT = {"labels": "", "none_fit": "no class fits (Z)", "unclear": "unclear (X)", "retract": "undo"}


def class_text(vocab: Vocabulary, index: int | None) -> str:
    """'tabby, tabby cat (n02123045)': the display name and wnid of one class."""
    if index is None or not 0 <= index < len(vocab):
        return "—"
    c = vocab.classes[index]
    return f"{c.name} ({c.wnid})" if c.wnid else c.name


def classes_text(vocab: Vocabulary, classes: tuple[int, ...] | list[int]) -> str:
    return "; ".join(class_text(vocab, c) for c in classes) if classes else "(none)"


def prior_rows(vocab: Vocabulary, card: Card) -> list[list[str]]:
    rows = []
    for p in card.priors:
        detail = p.category or ""
        if p.extra and "votes" in p.extra:
            detail = (detail + " " if detail else "") + f"votes {p.extra['votes']}"
        rows.append([p.source, classes_text(vocab, p.classes) if p.classes else "(excluded / none)", detail])
    return rows


def event_summary(vocab: Vocabulary, e: HistoryEntry) -> str:
    text = VERDICT_TEXT.get(e.verdict.value, "") or classes_text(vocab, e.classes)
    if e.flags:
        text += f" [flags: {', '.join(e.flags)}]"
    return text


def history_rows(vocab: Vocabulary, events: tuple[HistoryEntry, ...] | list[HistoryEntry]) -> list[list[Any]]:
    """The audit trail of one image, oldest first: who, when, what, what it replaced (for an undo, the decision
    undone), how the suggestion fared, the note and the seconds on the item. An undo is its own row; the decision
    before the one undone stands again (`relabel.decisions.rules.replay`)."""
    rows = []
    for e, before in replay(events, slot):
        what = f"undo of #{e.retracts_id}" if e.retracts_id else event_summary(vocab, e)
        was = event_summary(vocab, before) if before else ""
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


def audit_rows(vocab: Vocabulary, events: list[tuple[HistoryEntry, str]]) -> list[list[Any]]:
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
