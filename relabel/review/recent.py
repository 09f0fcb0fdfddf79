"""What an annotator did lately: how many images they decided today (the UTC day) and their last decisions, for
the card's top bar ("12 left for you · 30 today") and its recent-decisions panel (key R).

Both read the decision log (`annotations`) of one dataset. A decision counts for today when its newest event of the
day on that image is a decision, not an undo (`Verdict.retract`): an image decided and then undone counts once it is
decided again. The recent list holds each image once, at its newest decision, newest first; an image whose decision
was undone since is marked `undone`. Both read a range of the primary key, never every event (the annotations table
has no index on its user or time).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import func, select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.enums import Verdict
from db.models import Annotation, Image

RECENT = 20  # decisions the panel lists
SCAN = 500  # newest events read to find them (a user's undos and re-decisions of one image count once each)
CHUNK = 5000  # image ids per look-up
WINDOW = 20_000  # the workspace's newest events searched for them: a user idle since then has no recent list


@dataclass(frozen=True)
class RecentDecision:
    """One of a user's recent decisions: the image, its verdict and classes, when, and whether it was undone."""

    annotation_id: int
    image_id: int
    path: str
    verdict: Verdict
    classes: tuple[int, ...]
    created_at: datetime  # UTC
    undone: bool
    adjudication: bool


def utc(moment: datetime) -> datetime:
    """`moment` as an aware UTC time (SQLite hands back naive times stored as UTC)."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def day_start(now: datetime) -> datetime:
    """Midnight UTC of the day `now` falls in."""
    return utc(now).replace(hour=0, minute=0, second=0, microsecond=0)


def first_event_since(conn: Connection, moment: datetime) -> int | None:
    """The smallest id from which every decision event is at or after `moment`; None when none is.

    Events are numbered in the order they are stored, so their times rise with their ids: a bisection over the
    primary key (about 17 look-ups for 150,000 events) instead of a scan of a column without an index."""
    low = conn.execute(select(func.min(col(Annotation.id)))).scalar()  # one each: SQLite reads an end of the key
    high = conn.execute(select(func.max(col(Annotation.id)))).scalar()
    if low is None or high is None:
        return None
    lo, hi = int(low), int(high)

    def since(threshold: int) -> bool:
        first = conn.execute(
            select(col(Annotation.created_at))
            .where(col(Annotation.id) >= threshold)
            .order_by(col(Annotation.id))
            .limit(1)
        ).first()
        return first is not None and utc(first[0]) >= moment

    if not since(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if since(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


_day_starts: dict[tuple[str, datetime], int] = {}  # (database, midnight) -> the day's first event


def is_day_start(conn: Connection, event_id: int, midnight: datetime) -> bool:
    """Whether `event_id` is still where the events since `midnight` begin: two look-ups by primary key."""
    at = conn.execute(
        select(col(Annotation.created_at)).where(col(Annotation.id) >= event_id).order_by(col(Annotation.id)).limit(1)
    ).first()
    before = conn.execute(
        select(col(Annotation.created_at))
        .where(col(Annotation.id) < event_id)
        .order_by(col(Annotation.id).desc())
        .limit(1)
    ).first()
    return at is not None and utc(at[0]) >= midnight and (before is None or utc(before[0]) < midnight)


def first_event_of_day(conn: Connection, midnight: datetime) -> int | None:
    """`first_event_since(midnight)`, remembered once found and checked on each use (two look-ups instead of a
    bisection: later events only add larger ids)."""
    key = (str(conn.engine.url), midnight)
    found = _day_starts.get(key)
    if found is None or not is_day_start(conn, found, midnight):
        found = first_event_since(conn, midnight)
        if found is not None:
            if len(_day_starts) > 64:
                _day_starts.clear()
            _day_starts[key] = found
    return found


def decided_today(conn: Connection, dataset_id: int, user_id: int, now: datetime) -> int:
    """Images of the dataset that `user_id` decided since midnight UTC of `now` and did not undo since."""
    start = first_event_of_day(conn, day_start(now))
    if start is None:
        return 0
    rows = conn.execute(
        select(col(Annotation.image_id), col(Annotation.verdict))
        .where(col(Annotation.id) >= start, col(Annotation.user_id) == user_id)
        .order_by(col(Annotation.id))
    )
    last: dict[int, Verdict] = {}
    for image_id, verdict in rows:
        last[image_id] = Verdict(verdict)
    ours = paths_in(conn, dataset_id, [i for i, v in last.items() if v is not Verdict.retract])
    return len(ours)


def paths_in(conn: Connection, dataset_id: int, image_ids: list[int]) -> dict[int, str]:
    """The paths of those of `image_ids` that are images of the dataset (looked up by primary key, in chunks)."""
    out: dict[int, str] = {}
    for k in range(0, len(image_ids), CHUNK):
        chunk = image_ids[k : k + CHUNK]
        query = select(col(Image.id), col(Image.path)).where(col(Image.id).in_(chunk))
        out.update((r.id, r.path) for r in conn.execute(query.where(col(Image.dataset_id) == dataset_id)))
    return out


def recent_decisions(conn: Connection, dataset_id: int, user_id: int, limit: int = RECENT) -> list[RecentDecision]:
    """The user's newest decisions in the dataset, one per image (its newest decision), newest first, among the
    last WINDOW decision events of the workspace (a range of the primary key: no scan of every event)."""
    newest = conn.execute(select(func.max(col(Annotation.id)))).scalar()
    if newest is None:
        return []
    rows = conn.execute(
        select(
            col(Annotation.id),
            col(Annotation.image_id),
            col(Annotation.verdict),
            col(Annotation.classes),
            col(Annotation.created_at),
            col(Annotation.retracts_id),
            col(Annotation.is_adjudication),
        )
        .where(col(Annotation.id) > newest - WINDOW, col(Annotation.user_id) == user_id)
        .order_by(col(Annotation.id).desc())
        .limit(SCAN)
    ).all()
    paths = paths_in(conn, dataset_id, list({r.image_id for r in rows}))
    rows = [r for r in rows if r.image_id in paths]
    retracted = {r.retracts_id for r in rows if r.retracts_id is not None}
    out: list[RecentDecision] = []
    seen: set[int] = set()
    for r in rows:
        verdict = Verdict(r.verdict)
        if verdict is Verdict.retract or r.image_id in seen:
            continue
        seen.add(r.image_id)
        out.append(
            RecentDecision(
                annotation_id=r.id,
                image_id=r.image_id,
                path=paths[r.image_id],
                verdict=verdict,
                classes=tuple(r.classes or ()),
                created_at=utc(r.created_at),
                undone=r.id in retracted,
                adjudication=bool(r.is_adjudication),
            )
        )
        if len(out) >= limit:
            break
    return out
