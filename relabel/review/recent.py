"""What an annotator did lately: how many images they decided today (the UTC day) and their last decisions, for
the card's top bar ("12 left for you · 30 today") and its recent-decisions panel (key R).

Both read the decision log (`annotations`) of one dataset. A decision counts for today when its newest event of the
day on that image is a decision, not an undo (`Verdict.retract`): an image decided and then undone counts once it is
decided again. The recent list holds each image once, at its newest decision, newest first; an image whose decision
was undone since is marked `undone`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.enums import Verdict
from db.models import Annotation, Image

RECENT = 20  # decisions the panel lists
SCAN = 500  # newest events read to find them (a user's undos and re-decisions of one image count once each)


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


def decided_today(conn: Connection, dataset_id: int, user_id: int, now: datetime) -> int:
    """Images of the dataset that `user_id` decided since midnight UTC of `now` and did not undo since."""
    rows = conn.execute(
        select(col(Annotation.image_id), col(Annotation.verdict))
        .join(Image, col(Image.id) == col(Annotation.image_id))
        .where(col(Image.dataset_id) == dataset_id, col(Annotation.user_id) == user_id)
        .where(col(Annotation.created_at) >= day_start(now))
        .order_by(col(Annotation.id))
    )
    last: dict[int, Verdict] = {}
    for image_id, verdict in rows:
        last[image_id] = Verdict(verdict)
    return sum(v is not Verdict.retract for v in last.values())


def recent_decisions(conn: Connection, dataset_id: int, user_id: int, limit: int = RECENT) -> list[RecentDecision]:
    """The user's newest decisions in the dataset, one per image (its newest decision), newest first."""
    rows = conn.execute(
        select(
            col(Annotation.id),
            col(Annotation.image_id),
            col(Image.path),
            col(Annotation.verdict),
            col(Annotation.classes),
            col(Annotation.created_at),
            col(Annotation.retracts_id),
            col(Annotation.is_adjudication),
        )
        .join(Image, col(Image.id) == col(Annotation.image_id))
        .where(col(Image.dataset_id) == dataset_id, col(Annotation.user_id) == user_id)
        .order_by(col(Annotation.id).desc())
        .limit(SCAN)
    ).all()
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
                path=r.path,
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
