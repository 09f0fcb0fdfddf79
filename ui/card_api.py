"""The review and adjudication cards' server side: plain functions (studio, signed-in user, request data) -> reply.

The page (`ui/static/card.js`) calls them through Gradio's server functions (`ui.card_component`): one HTTP
request per action, one small JSON reply. A reply holds the card to show (`card_payload`) and a message; a refused
action raises a RelabelError, which the page shows as a short message beside a card that stays usable. A decision
on a stale card (answered since in another tab, or too old: its token was dropped) is refused and the reply carries the
card reloaded, with the newest answer pre-filled; one whose token a stored decision already carries (resent after
a restart) is answered "already saved" (`Studio.decide`). A reply's message is said once: the card's status line
holds the progress, never the message again. Tests call these functions directly, without a server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from db.enums import Role, Verdict
from relabel.common.errors import InputError, NotFoundError, StaleCardError
from relabel.common.storable import storable_text
from relabel.common.vocabulary import Vocabulary
from relabel.decisions.card_flags import CARD_FLAGS
from relabel.decisions.rules import Outcome
from relabel.review.cards import Card
from relabel.review.class_search import ClassSearch
from relabel.review.queue import QueueFilter
from relabel.review.studio import ACTIONS, MAX_NOTE, Disputed, Studio
from ui import views
from ui.card_payload import card_payload, class_ref, file_url

MAX_SEARCH = 12
GLOSS_CHARS = 90  # a description in the picker: one short line
FULL_SIDE = 0  # the display cache's "full resolution"


# -- parsing what the page sends -----------------------------------------------------------------------------------


def parse_filter(studio: Studio, data: dict[str, Any]) -> QueueFilter:
    """The queue filter from `{"status": ..., "class_index": ..., "category": ...}` (missing: everything open)."""
    flt = data.get("filter") or {}
    if not isinstance(flt, dict):
        raise InputError(f"the queue filter must be an object, not {type(flt).__name__}")
    index = flt.get("class_index")
    if index in (None, ""):
        index = None
    elif not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(studio.vocab):
        raise InputError(f"queue filter: class {index!r} is not an index in 0..{len(studio.vocab) - 1}")
    category = flt.get("category") or None
    return QueueFilter(class_index=index, status=flt.get("status") or "open", category=category)


def parse_key(data: dict[str, Any]) -> tuple[int, str]:
    """'IMAGE_ID:TOKEN', the key of the card a decision answers."""
    image_id, _, token = str(data.get("key") or "").partition(":")
    if not (image_id.isascii() and image_id.isdigit()) or int(image_id[:12]) > MAX_IMAGE_ID or not token:
        raise InputError("no card is open: press N to load one")
    return int(image_id), token


MAX_IMAGE_ID = 2**31 - 1  # the largest id either database stores


def parse_image_id(value: Any) -> int:
    text = str(value).strip()[:40] if value is not None else ""
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_IMAGE_ID:
        raise InputError(f"image {text!r} is not an image id (a whole number from 1 to {MAX_IMAGE_ID})")
    return int(text)


def parse_classes(vocab: Vocabulary, value: Any) -> list[int]:
    if value in (None, ""):
        return []
    if not isinstance(value, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in value):
        raise InputError(f"classes must be a list of class indices, not {value!r:.60}")
    bad = [c for c in value if not 0 <= c < len(vocab)]
    if bad:
        raise InputError(f"classes {bad} are outside 0..{len(vocab) - 1}")
    return list(dict.fromkeys(value))


def parse_flags(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if not isinstance(value, list) or any(f not in CARD_FLAGS for f in value):
        raise InputError(f"unknown flags {value!r:.80}; known: {', '.join(CARD_FLAGS)}")
    return list(dict.fromkeys(value))


def parse_note(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InputError("the note must be text")
    return storable_text(value, "the note", max_length=MAX_NOTE)


# -- replies -------------------------------------------------------------------------------------------------------


def progress_text(studio: Studio, user: str, done: str = "") -> str:
    counts = studio.queue.counts()
    text = (
        f"you decided {studio.decided_by(user)} · {counts['complete']} of {counts['images']} images complete "
        f"(overlap {studio.overlap}) · {counts['disputed']} disputed"
    )
    return f"{done} · {text}" if done else text


def served(
    studio: Studio, user: str, card: Card, token: str, status: str, flt: QueueFilter | None, *, reveal: bool = False
) -> dict[str, Any]:
    """The card's payload, with the address of the image likely to come next for the page to fetch ahead."""
    upcoming = studio.upcoming_display(user, flt) if flt is not None else None
    prefetch = [file_url(upcoming)] if upcoming is not None else []
    return card_payload(studio, card, token, status, reveal=reveal, prefetch=prefetch)


def empty(status: str) -> dict[str, Any]:
    return {"card": None, "message": status}


def next_card(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """The next card of the user's queue under the page's filter."""
    return following(studio, user, parse_filter(studio, data))


def following(studio: Studio, user: str, flt: QueueFilter, done: str = "") -> dict[str, Any]:
    """The next card under `flt`, with `done` (what was just stored) as the message."""
    card, token = studio.next_card(user, flt)
    if card is None:
        return empty(" · ".join(x for x in (done, "nothing left to review under this filter") if x))
    return {"card": served(studio, user, card, token, progress_text(studio, user), flt), "message": done}


def open_image(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """One image by id (a shared link, Back, the history): for an annotator only within what they may see."""
    image_id = parse_image_id(data.get("image_id"))
    if not studio.may_open(user, image_id):
        raise NotFoundError(
            f"image {image_id} is not yours to open: it is not in this dataset, or other annotators have "
            "already given it all the opinions it needs"
        )
    card, token = studio.open_card(user, image_id, hold=True)
    return {"card": served(studio, user, card, token, progress_text(studio, user), parse_filter(studio, data))}


def boot(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """What the page needs once: who is signed in, the flags and queue choices, and the first card (the one in
    the address, `?image=ID`, else the card the user holds, else the next one).

    A lead's page opens on this card too, but a lead reviews only when they ask for a card (N, Next, a link):
    serving one at sign-in would hold an image back from the annotators for the lease's time."""
    reply: dict[str, Any] = {}
    if data.get("image_id") not in (None, ""):
        try:
            reply = open_image(studio, user, data)
        except (InputError, NotFoundError) as exc:
            reply = next_card(studio, user, data) | {"error": str(exc)}
    elif studio.user(user)[1] is Role.lead:
        minutes = max(1, round(studio.queue.lease_seconds / 60))
        reply = empty(f"press N (or Next) to review cards as an annotator; each card you take is held for you for "
                      f"{minutes} minutes")  # fmt: skip
    else:
        reply = next_card(studio, user, data)
    return reply | page_info(studio, user)


def page_info(studio: Studio, user: str) -> dict[str, Any]:
    """What a card's page needs once: who is signed in, the dataset, the flags and the queue's choices."""
    _, role = studio.user(user)
    return {
        "user": user,
        "role": role.value,
        "dataset": studio.dataset_name,
        "flags": [{"name": f.name, "label": f.label, "key": f.key} for f in CARD_FLAGS.values()],
        "statuses": [{"value": v, "label": label} for label, v in STATUS_CHOICES],
        "categories": [{"value": v, "label": label} for label, v in CATEGORY_CHOICES],
    }


def decide(studio: Studio, user: str, data: dict[str, Any], *, adjudicate: bool = False) -> dict[str, Any]:
    """Store the decision on the open card, then reply with the next card (one round trip)."""
    image_id, token = parse_key(data)
    action = str(data.get("action") or "")
    if action not in ACTIONS:
        raise InputError(f"unknown action {action!r}; known: {', '.join(ACTIONS)}")
    flt = None if adjudicate else parse_filter(studio, data)
    try:
        saved = studio.decide(
            user,
            token,
            image_id,
            action,
            classes=parse_classes(studio.vocab, data.get("classes")),
            flags=parse_flags(data.get("flags")),
            note=parse_note(data.get("note")),
            adjudicate=adjudicate,
        )
    except StaleCardError as exc:
        return reopened(studio, user, image_id, str(exc), data, reveal=adjudicate)
    done = f"saved #{saved.annotation_id} on image {image_id}" + (" (already saved)" if saved.duplicate else "")
    if flt is None:
        return next_disputed(studio, user, done, after=image_id)
    return following(studio, user, flt, done)


def reopened(
    studio: Studio, user: str, image_id: int, error: str, data: dict[str, Any], *, reveal: bool
) -> dict[str, Any]:
    """The card of `image_id` served afresh after a refused decision, with the refusal as the error; the next card
    instead when the user may no longer open that image (it went to others, or the token was forged for it)."""
    if not studio.may_open(user, image_id):
        following_card = next_disputed(studio, user) if reveal else following(studio, user, parse_filter(studio, data))
        return following_card | {"error": error}
    card, token = studio.open_card(user, image_id, hold=not reveal)
    flt = None if reveal else parse_filter(studio, data)
    status = f"{len(studio.queue.disputed())} disputed image(s) left" if reveal else progress_text(studio, user)
    return {"error": error, "card": served(studio, user, card, token, status, flt, reveal=reveal)}


def skip(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    image_id, _ = parse_key(data)
    flt = parse_filter(studio, data)
    studio.skip(user, image_id)
    return following(studio, user, flt, f"skipped image {image_id}")


def undo(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """Undo the user's last decision and reopen that image with the undone answer pre-filled."""
    image_id = studio.undo(user)
    if image_id is None:
        raise InputError("nothing to undo: you have no standing decision in this dataset")
    card, token = studio.open_card(user, image_id, hold=True)
    done = f"undid your decision on image {image_id}"
    return {"card": served(studio, user, card, token, progress_text(studio, user), None), "message": done}


def full_resolution(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """The address of the open image at full resolution (EXIF-corrected), for the zoom view."""
    image_id, _ = parse_key(data)
    if not studio.may_open(user, image_id):
        raise NotFoundError(f"image {image_id} is not yours to open")
    return {"url": file_url(studio.display.path_for(studio.stored_image(image_id), side=FULL_SIDE))}


def history(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """The open image's audit trail. Before deciding, an annotator sees only their own events (blind review)."""
    image_id, _ = parse_key(data)
    if not studio.may_open(user, image_id):
        raise NotFoundError(f"image {image_id} is not yours to open")
    card, _ = studio.open_card(user, image_id)
    events = list(card.history)
    _, role = studio.user(user)
    if role.value != "lead" and card.own() is None:
        events = [e for e in events if e.user == user]
    headers = ["#", "when", "who", "what", "replaced", "suggestion", "note", "seconds"]
    return {"rows": [dict(zip(headers, map(str, row))) for row in views.history_rows(studio.vocab, events)]}


def search(studio: Studio, user: str, data: dict[str, Any], searcher: ClassSearch) -> dict[str, Any]:
    """Classes for what was typed, best first (`relabel.review.class_search` explains the order)."""
    studio.user(user)
    query = data.get("query")
    if not isinstance(query, str):
        raise InputError("search for text")
    matches = searcher.search(query, limit=MAX_SEARCH)
    return {
        "query": query,
        "matches": [
            picker_ref(studio.vocab, m.index, searcher.twins) | {"how": m.how, "term": m.term} for m in matches
        ],
    }


def shortened(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, with "…" where it was cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:")
    return f"{cut}…"


def picker_ref(vocab: Vocabulary, index: int, twins_of: Mapping[int, tuple[int, ...]]) -> dict[str, Any]:
    """A search hit as the picker lists it: `class_ref`, the class's short description (what "mouse" or "boxer"
    is here) and the near-duplicate classes it may be confused with (`twins_of`: `ClassSearch.twins`), with the
    line the picker shows for them."""
    ref = class_ref(vocab, index)
    twins = [class_ref(vocab, t)["label"] for t in twins_of.get(index, ())]
    note = f"≈ near-duplicate of {', '.join(twins)}" if twins else ""
    return ref | {"gloss": shortened(vocab.classes[index].gloss, GLOSS_CHARS), "twins": twins, "twin_note": note}


# -- adjudication (leads) ------------------------------------------------------------------------------------------


def answer_text(vocab: Vocabulary, verdict: Verdict, classes: tuple[int, ...]) -> str:
    return views.VERDICT_TEXT.get(verdict.value, "") or views.classes_text(vocab, classes)


def disputed_rows(studio: Studio, items: list[Disputed]) -> list[dict[str, Any]]:
    vocab = studio.vocab
    return [
        {
            "image_id": d.image_id,
            "path": d.path,
            "original": views.classes_text(vocab, d.original),
            "answers": [{"id": a.annotation_id, "who": a.user, "what": answer_text(vocab, a.verdict, a.classes)}
                        for a in d.answers],
        }
        for d in items
    ]  # fmt: skip


def adjudication_card(studio: Studio, user: str, image_id: int, status: str) -> dict[str, Any]:
    card, token = studio.open_card(user, image_id)
    return card_payload(studio, card, token, status, reveal=True)


def next_disputed(studio: Studio, user: str, done: str = "", after: int | None = None) -> dict[str, Any]:
    """The refreshed list of disputed images and the first of them (after `after` in list order, if given)."""
    items = studio.disputed_images()
    ids = [d.image_id for d in items]
    start = ids.index(after) + 1 if after in ids else 0
    pick = next(iter(ids[start:] + ids[:start]), None)  # the one after `after`, round to the first again
    status = f"{len(ids)} disputed image(s) left"
    card = None if pick is None else adjudication_card(studio, user, pick, status)
    return {"list": disputed_rows(studio, items), "card": card, "message": done or ("" if ids else status)}


def adjudication_boot(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """The adjudication page's first reply: the disputed list and the linked image (`?image=ID&tab=adjudicate`),
    else the first disputed one. A link to an image that is not disputed opens it all the same (a lead may rule on
    any image) and says so in one line; an id that is not an image of the dataset says that, beside the first
    disputed image."""
    studio.require_lead(user)
    if data.get("image_id") in (None, ""):
        reply = next_disputed(studio, user)
    else:
        try:
            reply = adjudication_open(studio, user, data)
        except (InputError, NotFoundError) as exc:
            reply = next_disputed(studio, user) | {"error": str(exc)}
        else:
            image_id = reply["card"]["image_id"]
            queue = studio.queue
            if image_id not in queue.evidence or queue.settled(image_id).outcome is not Outcome.disputed:
                reply["message"] = f"image {image_id} is not disputed: a verdict on it overrides its annotators"
    return reply | page_info(studio, user)


def adjudication_open(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """A lead opens any image of the dataset for adjudication (from the list or a shared link)."""
    studio.require_lead(user)
    image_id = parse_image_id(data.get("image_id"))
    if not studio.may_open(user, image_id):
        raise NotFoundError(f"image {image_id} is not an image of dataset {studio.dataset_name!r}")
    items = studio.disputed_images()
    card = adjudication_card(studio, user, image_id, f"adjudicating image {image_id}")
    return {"list": disputed_rows(studio, items), "card": card}


def adjudicate(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    studio.require_lead(user)
    return decide(studio, user, data, adjudicate=True)


def take_answer(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """The lead's verdict is annotator N's answer (its verdict and classes; flags and note from the lead's form)."""
    studio.require_lead(user)
    image_id, _ = parse_key(data)
    answer_id = data.get("answer_id")
    answer = studio.standing_answer(image_id, answer_id if isinstance(answer_id, int) else -1)
    action = {Verdict.none_fit: "none_fit", Verdict.unclear: "unclear"}.get(answer.verdict, "labels")
    return decide(studio, user, data | {"action": action, "classes": list(answer.classes)}, adjudicate=True)


def adjudication_skip(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    studio.require_lead(user)
    image_id, _ = parse_key(data)
    return next_disputed(studio, user, f"skipped image {image_id}", after=image_id)


STATUS_CHOICES = (
    ("to review", "open"),
    ("disputed: add an opinion", "disputed"),
    ("decided", "decided"),
    ("mine (revisit)", "mine"),
)
CATEGORY_CHOICES = (
    ("A: original confirmed", "A"),
    ("B: one other class", "B"),
    ("M: several classes", "M"),
    ("Z: no class fits", "Z"),
    ("X: unclear", "X"),
    ("U: no consensus yet", "U"),
)
