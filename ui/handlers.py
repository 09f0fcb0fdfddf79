"""The studio's event handlers as plain functions: (studio, logged-in user, form values) -> view values.

ui.app wires them to Gradio and passes the user from the server-side session (`gr.Request.username`), never from a
form field. Tests call them directly, without a server. Errors are RelabelError subclasses; ui.app shows them as
one-line messages.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from relabel.errors import InputError
from relabel.review.cards import Card
from relabel.review.queue import QueueFilter
from relabel.review.studio import Studio
from ui import views
from ui.views import CardView

ALL_CLASSES = "all classes"
ANY_CATEGORY = "any"


def parse_filter(studio: Studio, class_choice: Any, status: str | None, category: str | None = None) -> QueueFilter:
    """The queue filter from the review tab's class dropdown (an index, or ALL_CLASSES), status radio and
    category dropdown (ANY_CATEGORY, or A/B/M/Z/X)."""
    index = None if class_choice in (None, "", ALL_CLASSES) else int(class_choice)
    if index is not None and not 0 <= index < len(studio.vocab):
        raise InputError(f"class {index} is outside 0..{len(studio.vocab) - 1}")
    chosen = None if category in (None, "", ANY_CATEGORY) else category
    return QueueFilter(class_index=index, status=status or "open", category=chosen)


def parse_card_key(card_key: str) -> tuple[int, str]:
    """'IMAGE_ID:TOKEN' as the review tab holds it."""
    image_id, _, token = (card_key or "").partition(":")
    if not image_id.isdigit() or not token:
        raise InputError("no card is open; press 'next' to load one")
    return int(image_id), token


def render(studio: Studio, card: Card | None, token: str, status: str, *, reveal: bool = False) -> CardView:
    if card is None:
        return views.empty_view(status)
    vocab = studio.vocab
    try:
        image: str | None = str(studio.display.path_for(card.image))
    except Exception as exc:  # a file gone or broken since ingest: show the card without it, and say why
        image, status = None, f"{status} · image cannot be shown: {exc}"
    return CardView(
        image=image,
        header=views.header_text(card),
        original=views.original_text(vocab, card),
        suggestion=views.suggestion_text(vocab, card.suggestion, card.classifier),
        classifier=views.classifier_scores(vocab, card.classifier),
        priors=views.prior_rows(vocab, card),
        examples=examples(studio, card),
        others=views.decision_rows(vocab, card.others(reveal=reveal)),
        card_key=f"{card.image_id}:{token}",
        status=status,
    )


def examples(studio: Studio, card: Card) -> list[tuple[str, str]]:
    """A reference image of the original and of the suggested class, when the dataset has one (not this image)."""
    out: list[tuple[str, str]] = []
    wanted = [("original", card.original[0] if card.original else None), ("suggested", card.suggested_class)]
    seen: set[int] = set()
    for role, index in wanted:
        example = studio.examples.get(index) if index is not None else None
        if example is None or example.image_id == card.image_id or example.image_id in seen:
            continue
        seen.add(example.image_id)
        try:
            path = studio.display.path_for(example, side=256)
        except Exception:  # an example that cannot be shown is left out; the card itself still works
            continue
        out.append((str(path), f"{role}: {views.class_text(studio.vocab, index)}"))
    return out


def progress_text(studio: Studio, user: str, done_now: str = "") -> str:
    counts = studio.queue.counts()
    mine = studio.decided_by(user)
    text = (
        f"you decided {mine} · {counts['complete']} of {counts['images']} images complete "
        f"(overlap {studio.overlap}) · {counts['disputed']} disputed"
    )
    return f"{done_now} · {text}" if done_now else text


def next_card(
    studio: Studio, user: str, class_choice: Any = None, status: str | None = None, category: str | None = None
) -> CardView:
    card, token = studio.next_card(user, parse_filter(studio, class_choice, status, category))
    if card is None:
        return views.empty_view("nothing left to review under this filter · " + progress_text(studio, user))
    return render(studio, card, token, progress_text(studio, user))


def decide(
    studio: Studio,
    user: str,
    card_key: str,
    action: str,
    classes: list[int] | None = None,
    flags: list[str] | None = None,
    note: str = "",
    class_choice: Any = None,
    status: str | None = None,
    category: str | None = None,
) -> CardView:
    """Store the decision on the open card, then show the next card (one round trip)."""
    image_id, token = parse_card_key(card_key)
    saved = studio.decide(
        user, token, image_id, action, classes=[int(c) for c in classes or []], flags=flags or [], note=note or ""
    )
    done = f"saved #{saved.annotation_id}" + (" (already saved)" if saved.duplicate else "")
    card, token = studio.next_card(user, parse_filter(studio, class_choice, status, category))
    if card is None:
        return views.empty_view(f"{done} · nothing left to review · " + progress_text(studio, user))
    return render(studio, card, token, progress_text(studio, user, done))


def skip(
    studio: Studio,
    user: str,
    card_key: str,
    class_choice: Any = None,
    status: str | None = None,
    category: str | None = None,
) -> CardView:
    image_id, _ = parse_card_key(card_key)
    studio.skip(user, image_id)
    return next_card(studio, user, class_choice, status, category)


def undo(studio: Studio, user: str) -> CardView:
    """Undo the user's last decision and reopen that image."""
    image_id = studio.undo(user)
    if image_id is None:
        return views.empty_view("nothing to undo")
    card, token = studio.open_card(user, image_id, hold=True)
    return render(studio, card, token, progress_text(studio, user, f"undid your decision on image {image_id}"))


def full_resolution(studio: Studio, user: str, card_key: str) -> str | None:
    image_id, _ = parse_card_key(card_key)
    studio.user(user)
    return str(studio.display.path_for(studio.stored_image(image_id), side=0))


def history(studio: Studio, user: str, card_key: str) -> list[list[Any]]:
    """The open image's audit trail. Before deciding, an annotator sees only their own events (blind review)."""
    image_id, _ = parse_card_key(card_key)
    card, _ = studio.open_card(user, image_id)
    events = list(card.history)
    _, role = studio.user(user)
    if role.value != "lead" and card.own() is None:
        events = [e for e in events if e.user == user]
    return views.history_rows(studio.vocab, events)


# -- leads -------------------------------------------------------------------------------------------------------


def reload_queue(studio: Studio, user: str) -> str:
    """Rebuild the queue and the suggestions it weighs from the database (after imports or new suggestion runs)."""
    studio.require_lead(user)
    studio.refresh()
    counts = studio.queue.counts()
    return (
        f"queue rebuilt: {counts['images']} images, {counts['disputed']} disputed; suggestions from run "
        f"{studio.runs.name(studio.runs.suggestion)!r}, classifier run {studio.runs.name(studio.runs.classifier)!r}"
    )


def audit_log(studio: Studio, user: str, who: str | None = None, limit: Any = 200) -> list[list[Any]]:
    """The newest decisions of the dataset (of one user, if `who`), newest first; leads only."""
    from relabel.review.cards import audit_events

    studio.require_lead(user)
    n = int(limit or 200)
    if not 1 <= n <= 10_000:
        raise InputError(f"show between 1 and 10000 events, not {n}")
    with studio.engine.connect() as conn:
        events = audit_events(conn, studio.dataset_id, user=(who or "").strip() or None, limit=n)
    return views.audit_rows(studio.vocab, events)


def adjudication_list(studio: Studio, user: str) -> list[list[Any]]:
    studio.require_lead(user)
    return [
        [image_id, path, views.classes_text(studio.vocab, original), n]
        for image_id, path, original, n in studio.disputed_images()
    ]


def open_for_adjudication(studio: Studio, user: str, image_id: Any) -> CardView:
    studio.require_lead(user)
    if image_id in (None, ""):
        ids = studio.disputed_images(limit=1)
        if not ids:
            return views.empty_view("no disputed image left")
        image_id = ids[0][0]
    card, token = studio.open_card(user, int(image_id))
    return render(studio, card, token, f"adjudicating image {card.image_id}", reveal=True)


def adjudicate(
    studio: Studio,
    user: str,
    card_key: str,
    action: str,
    classes: list[int] | None = None,
    flags: list[str] | None = None,
    note: str = "",
) -> CardView:
    studio.require_lead(user)
    image_id, token = parse_card_key(card_key)
    saved = studio.decide(
        user,
        token,
        image_id,
        action,
        classes=[int(c) for c in classes or []],
        flags=flags or [],
        note=note or "",
        adjudicate=True,
    )
    view = open_for_adjudication(studio, user, None)
    return replace(view, status=f"adjudicated image {image_id} (#{saved.annotation_id}) · {view.status}")


def create_snapshot(studio: Studio, user: str, name: str, undecided: str, min_votes: Any) -> str:
    from relabel.snapshots import create_snapshot as create

    studio.require_lead(user)
    if not (name or "").strip():
        raise InputError("give the snapshot a name")
    summary = create(
        studio.engine,
        name.strip(),
        dataset=studio.dataset_name,
        undecided=undecided or "keep",
        min_votes=int(min_votes or 1),
        created_by=user,
    )
    counts = ", ".join(f"{k} {v}" for k, v in summary.counts.items())
    return f"snapshot {summary.name!r}: {summary.n_images} images ({counts}), hash {summary.content_hash[:12]}"


def export_snapshot(studio: Studio, user: str, name: str, fmt: str, folder: Path) -> str:
    from relabel.exports import export_snapshot as export

    studio.require_lead(user)
    if not (name or "").strip():
        raise InputError("pick a snapshot to export")
    suffix = {"real": "json", "jsonl": "jsonl", "csv": "csv"}.get(fmt, "txt")
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name.strip())
    out = folder / f"{safe}-{datetime.now():%Y%m%d-%H%M%S}.{fmt}.{suffix}"
    export(studio.engine, name.strip(), fmt=fmt, out=out, dataset=studio.dataset_name)
    return str(out)
