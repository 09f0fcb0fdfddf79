"""What the card shows beside the decision itself: reference thumbnails of classes (the picker's results and the
classifier's top-5) and the user's day (images left for them, decided today, their recent decisions).

A reference thumbnail is a reference photo of the class (`relabel.review.examples`: an image of the dataset whose
original label is that class, never the card's own image) at THUMB_SIDE pixels, in the display cache, the one
folder the studio serves to signed-in users. The page asks for a class, never for a path: a reply names a
thumbnail's address when it is already made (a file test, no decoding); the others come from one `thumbs` call
that renders them, made by the page after it drew the list, into `<img loading="lazy">`, so a keystroke in the
picker never waits on an image being resized.

`extend` adds these to a card's server functions (`ui.card_component.handlers`): `thumbs` and `recent`, and the
reference and day fields on every reply that holds a card or search results.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any, NamedTuple

from relabel.common.errors import InputError, RelabelError
from relabel.review.examples import pick_example
from relabel.review.left import QueueLeft
from relabel.review.queue import QueueFilter
from relabel.review.recent import decided_today, recent_decisions
from relabel.review.studio import Studio
from ui import card_api, views
from ui.card_payload import class_ref, file_url

THUMB_SIDE = 128  # longer side of a reference thumbnail, in pixels (shown at 96 px or less, sharp on HiDPI)
MAX_THUMBS = 16  # classes one `thumbs` call renders: a picker's results (12) or a card's top-5
LEFT_TTL_S = 20.0  # how long a count of the images left for a user stands (less their own decisions since)
TODAY_TTL_S = 20.0  # how long a count of a user's decisions today stands (plus their own decisions since)
SYNC_IMAGES = 10_000  # queues up to this size are counted in the reply; larger ones in the background

Handler = Callable[[Studio, str, dict[str, Any]], dict[str, Any]]
CARD_REPLIES = ("boot", "next", "open", "decide", "skip", "undo", "adjudicate", "take", "disputed")


def thumb_url(studio: Studio, index: int, exclude: int | None = None, *, render: bool = False) -> str | None:
    """The address of a reference thumbnail of class `index` ("" when it is not made yet and `render` is off);
    None when the dataset has no reference photo of it that can be shown."""
    example = pick_example(studio.examples, index, exclude=exclude if exclude is not None else -1)
    if example is None:
        return None
    try:
        if render:
            return file_url(studio.display.path_for(example, side=THUMB_SIDE))
        path = studio.display.ready_path(example, side=THUMB_SIDE)
    except Exception:  # a reference photo that cannot be shown is left out; the card itself still works
        return None
    return "" if path is None else file_url(path)


def with_thumb(studio: Studio, entry: dict[str, Any], exclude: int | None) -> dict[str, Any]:
    """`entry` (a class as the page shows it) with `thumb`: the thumbnail's address, "" while not made, None when
    the class has no reference photo."""
    return entry | {"thumb": thumb_url(studio, int(entry["index"]), exclude)}


def parse_indices(studio: Studio, value: Any) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(c, int) and not isinstance(c, bool) for c in value):
        raise InputError(f"thumbs: classes must be a list of class indices, not {value!r:.60}")
    if len(value) > MAX_THUMBS:
        raise InputError(f"thumbs: at most {MAX_THUMBS} classes at once, not {len(value)}")
    bad = [c for c in value if not 0 <= c < len(studio.vocab)]
    if bad:
        raise InputError(f"thumbs: classes {bad} are outside 0..{len(studio.vocab) - 1}")
    return list(dict.fromkeys(value))


def parse_exclude(value: Any) -> int | None:
    """The open card's image (its own photo is never its reference), or None."""
    return None if value in (None, "") else card_api.parse_image_id(value)


def thumbs(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """Reference thumbnails of up to MAX_THUMBS classes, made now where needed: `{"thumbs": {index: address}}`,
    without the classes that have none."""
    studio.user(user)
    exclude = parse_exclude(data.get("exclude"))
    found = {str(i): thumb_url(studio, i, exclude, render=True) for i in parse_indices(studio, data.get("classes"))}
    return {"thumbs": {i: url for i, url in found.items() if url}}


class LeftCounts:
    """How many images a user's queue still holds under a filter: one full pass over the queue counts every user
    at once (`ReviewQueue.left_by_user`), made at most every LEFT_TTL_S per filter; in between, a user's count is
    that pass's less their decisions since (an undo gives one back). Other users' progress shows within
    LEFT_TTL_S. On a queue of more than SYNC_IMAGES the pass runs in the background: a reply never waits on it,
    and until the first one is done it says nothing of what is left."""

    def __init__(self, studio: Studio) -> None:
        self.studio = studio
        # filter -> (when, the pass's counts, each user's standing decisions then)
        self._counts: dict[QueueFilter, tuple[float, QueueLeft, dict[int, int]]] = {}
        self._running: set[QueueFilter] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="left-counts")

    def left(self, user_id: int, flt: QueueFilter) -> int | None:
        queue = self.studio.queue
        decided = queue.decided_by(user_id)
        with self._lock:
            known = self._counts.get(flt)
        if known is None or time.monotonic() - known[0] > LEFT_TTL_S:
            if len(queue.order) <= SYNC_IMAGES:
                self._count(flt)
            else:
                with self._lock:
                    start = flt not in self._running
                    self._running.add(flt)
                if start:
                    self._pool.submit(self._count, flt)
            with self._lock:
                known = self._counts.get(flt)
        if known is None:
            return None
        _, left, decided_then = known
        return max(0, left.of(user_id) - (decided - decided_then.get(user_id, 0)))

    def _count(self, flt: QueueFilter) -> None:
        try:
            left, decided = self.studio.queue.left_by_user(flt)
            with self._lock:
                self._counts[flt] = (time.monotonic(), left, decided)
        finally:
            with self._lock:
                self._running.discard(flt)


class TodayCounts:
    """How many images a user decided today (`relabel.review.recent.decided_today`): read from the decision log
    at most every TODAY_TTL_S per user and at each new UTC day, and in between the last count plus the images
    the user decided since in this process (the queue's count of their standing decisions: an undo takes one
    back). Decisions the user makes in another process show within TODAY_TTL_S."""

    def __init__(self, studio: Studio) -> None:
        self.studio = studio
        self._counts: dict[int, tuple[float, datetime, int, int]] = {}  # user -> (when, day, today, decided then)
        self._lock = threading.Lock()

    def today(self, user_id: int) -> int:
        now = datetime.now(timezone.utc)
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        decided = self.studio.queue.decided_by(user_id)
        with self._lock:
            known = self._counts.get(user_id)
        if known is None or known[1] != day or time.monotonic() - known[0] > TODAY_TTL_S:
            with self.studio.engine.connect() as conn:
                count = decided_today(conn, self.studio.dataset_id, user_id, now)
            known = (time.monotonic(), day, count, decided)
            with self._lock:
                self._counts[user_id] = known
        _, _, count, decided_then = known
        return max(0, count + decided - decided_then)


class DayCounts(NamedTuple):
    left: LeftCounts
    today: TodayCounts


_day_counts: weakref.WeakKeyDictionary[Studio, DayCounts] = weakref.WeakKeyDictionary()
_day_lock = threading.Lock()


def counters(studio: Studio) -> DayCounts:
    """The studio's counters of the user's day, made again when its queue was rebuilt (`Studio.refresh`)."""
    with _day_lock:
        found = _day_counts.get(studio)
        if found is None or found.left.studio.queue is not studio.queue:
            found = _day_counts[studio] = DayCounts(LeftCounts(studio), TodayCounts(studio))
        return found


def day_counts(studio: Studio, user: str, flt: QueueFilter) -> dict[str, int | None]:
    """How many images the user's queue still holds under `flt` (None while not counted yet), and how many they
    decided today (UTC); both from memory on most replies (`LeftCounts`, `TodayCounts`)."""
    user_id, _ = studio.user(user)
    found = counters(studio)
    return {"left": found.left.left(user_id, flt), "today": found.today.today(user_id)}


def recent(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
    """The user's last decisions in this dataset, newest first, each with whether they may open its image now."""
    user_id, _ = studio.user(user)
    with studio.engine.connect() as conn:
        found = recent_decisions(conn, studio.dataset_id, user_id)
    vocab = studio.vocab
    items = [
        {
            "image_id": d.image_id,
            "annotation_id": d.annotation_id,
            "path": d.path,
            "classes": [class_ref(vocab, c) for c in d.classes],
            "what": views.VERDICT_TEXT.get(d.verdict.value, "") or views.classes_text(vocab, d.classes),
            "when": d.created_at.strftime("%Y-%m-%d %H:%M UTC"),
            "undone": d.undone,
            "lead": d.adjudication,
            "can_open": not d.undone or studio.may_open(user, d.image_id),  # a standing decision: always
        }
        for d in found
    ]
    return {"items": items}


def decorate(studio: Studio, user: str, data: dict[str, Any], reply: dict[str, Any], mode: str) -> dict[str, Any]:
    """A card reply with its top-5's reference thumbnails and, on the review card, the user's day."""
    card = reply.get("card")
    if isinstance(card, dict):
        classifier = card.get("classifier")
        if isinstance(classifier, dict) and classifier.get("top"):
            exclude = card.get("image_id")
            classifier["top"] = [with_thumb(studio, t, exclude) for t in classifier["top"]]
    if mode == "review" and "card" in reply:
        try:
            flt = card_api.parse_filter(studio, data)
        except InputError:
            flt = QueueFilter()
        reply["today"] = day_counts(studio, user, flt)
    return reply


def decorated(name: str, handler: Handler, mode: str) -> Handler:
    def call(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
        return decorate(studio, user, data, handler(studio, user, data), mode)

    call.__name__ = name
    return call


def searched(handler: Handler) -> Handler:
    """The picker's search with each result's reference thumbnail (made ones only; `thumbs` makes the rest)."""

    def call(studio: Studio, user: str, data: dict[str, Any]) -> dict[str, Any]:
        reply = handler(studio, user, data)
        try:
            exclude = parse_exclude(data.get("exclude"))
        except RelabelError:
            exclude = None
        reply["matches"] = [with_thumb(studio, m, exclude) for m in reply.get("matches", [])]
        return reply

    return call


def extend(studio: Studio, mode: str, handlers: dict[str, Handler]) -> dict[str, Handler]:
    """`handlers` with the thumbnails and the user's day added (see the module's docstring)."""
    out = {name: decorated(name, fn, mode) if name in CARD_REPLIES else fn for name, fn in handlers.items()}
    if "search" in out:
        out["search"] = searched(out["search"])
    return out | {"thumbs": thumbs, "recent": recent}
