"""The leads' image grid and per-annotator review: which images match a filter, in what order, a page at a time.

Every image the review queue knows (the readable images of the dataset, `relabel.review.queue.Evidence`: original
labels and the suggestion) is read with its standing decisions from the database (`current_decisions`, so the
decisions stored by every studio process count) and with its assignees (`relabel.review.assignments`). Status:

- **undecided**: no standing annotator decision and no adjudication;
- **decided**: the annotators agree (`relabel.decisions.rules`, as the queue settles it);
- **disputed**: the annotators disagree and no lead has adjudicated;
- **adjudicated**: a lead's adjudication stands.

Sorts: `image` (path), `decisions` (standing annotator decisions, most first), `newest` (newest standing decision
first; ids grow with time), `disagreement` (the share of annotators outside the largest agreeing group, highest
first). Ties keep the image order. Plain functions on a connection: no web framework.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.models import Annotation, Image, User, pk
from relabel.common.errors import InputError
from relabel.decisions.log import current_decisions
from relabel.decisions.rules import Decision, Outcome, consensus
from relabel.review.assignments import assigned_images, load_rows

if TYPE_CHECKING:
    from relabel.review.image_evidence import Evidence

STATUSES = ("undecided", "decided", "disputed", "adjudicated")
SORTS = ("image", "decisions", "newest", "disagreement")
PAGE_SIZE = 48
_STATUS = {
    Outcome.undecided: "undecided",
    Outcome.consensus: "decided",
    Outcome.disputed: "disputed",
    Outcome.adjudication: "adjudicated",
}


@dataclass(frozen=True)
class GridFilter:
    """Which images a lead looks at: a status (STATUSES), an original class, an annotator with a standing decision
    on it, only images whose suggestion is not among their original labels, an annotator it is assigned to. None or
    False: no condition."""

    status: str | None = None
    class_index: int | None = None
    annotator: int | None = None  # user id
    disagrees: bool = False
    assigned_to: int | None = None  # user id

    def __post_init__(self) -> None:
        if self.status is not None and self.status not in STATUSES:
            raise InputError(f"unknown status {self.status!r}; known: {', '.join(STATUSES)}")


@dataclass(frozen=True)
class GridImage:
    """One image as the grid shows and sorts it."""

    image_id: int
    path: str
    original: tuple[int, ...]  # ImGT classes
    suggestion: int | None
    status: str  # one of STATUSES
    decisions: tuple[Decision, ...]  # standing annotator decisions (not adjudications), oldest first
    consensus: Decision | None  # the decision that settles the image; None when undecided or disputed
    newest: int  # id of the newest standing decision (adjudications too); 0: none
    disagreement: float  # in [0, 1): 1 - largest agreeing group / annotators; 0 with fewer than two
    assignees: frozenset[int]

    @property
    def suggestion_disagrees(self) -> bool:
        return self.suggestion is not None and self.suggestion not in self.original

    def matches(self, flt: GridFilter) -> bool:
        return (
            (flt.status is None or self.status == flt.status)
            and (flt.class_index is None or flt.class_index in self.original)
            and (flt.annotator is None or any(d.user_id == flt.annotator for d in self.decisions))
            and (not flt.disagrees or self.suggestion_disagrees)
            and (flt.assigned_to is None or flt.assigned_to in self.assignees)
        )


@dataclass(frozen=True)
class Page:
    """One page of a selection: its images, its number (1-based) of `pages`, and how many images matched."""

    images: list[GridImage]
    number: int
    pages: int
    total: int


def load_grid(conn: Connection, dataset_id: int, evidence: Mapping[int, Evidence]) -> list[GridImage]:
    """Every image of `evidence` with its decisions and assignees now, in path order."""
    query = select(pk(Image.id), col(Image.path)).where(col(Image.dataset_id) == dataset_id)
    paths: dict[int, str] = {i: p for i, p in conn.execute(query)}
    standing = current_decisions(conn, dataset_id)
    ordered = sorted(evidence, key=lambda i: (paths.get(i, ""), i))
    assigned = assigned_images(
        load_rows(conn, dataset_id), {i: e.original_labels for i, e in evidence.items()}, ordered
    )
    out = []
    for image_id in ordered:
        e = evidence[image_id]
        decisions = sorted(standing.get(image_id, []), key=lambda d: d.annotation_id)
        votes = tuple(d for d in decisions if not d.is_adjudication)
        settled = consensus(decisions)
        out.append(
            GridImage(
                image_id=image_id,
                path=paths.get(image_id, ""),
                original=e.original_labels,
                suggestion=e.suggestion,
                status=_STATUS[settled.outcome],
                decisions=votes,
                consensus=settled.decision,
                newest=max((d.annotation_id for d in decisions), default=0),
                disagreement=_disagreement(votes),
                assignees=assigned.users.get(image_id, frozenset()),
            )
        )
    return out


def select_images(images: Sequence[GridImage], flt: GridFilter, sort: str = "image") -> list[GridImage]:
    """The images that match `flt`, in the order `sort` (one of SORTS) names."""
    if sort not in SORTS:
        raise InputError(f"unknown sort {sort!r}; known: {', '.join(SORTS)}")
    found = [g for g in images if g.matches(flt)]
    if sort == "decisions":
        found.sort(key=lambda g: -len(g.decisions))
    elif sort == "newest":
        found.sort(key=lambda g: -g.newest)
    elif sort == "disagreement":
        found.sort(key=lambda g: (-g.disagreement, -len(g.decisions)))
    return found


def page_of(images: Sequence[GridImage], number: int, size: int = PAGE_SIZE) -> Page:
    """Page `number` (1-based; beyond the last: the last) of `images`, `size` a page."""
    if size < 1:
        raise InputError(f"a page holds at least one image, not {size}")
    pages = max(1, -(-len(images) // size))
    number = min(max(1, number), pages)
    start = (number - 1) * size
    return Page(list(images[start : start + size]), number, pages, len(images))


@dataclass(frozen=True)
class AnnotatorDecision:
    """One standing decision of the annotator under review, beside the image's other opinions."""

    image_id: int
    path: str
    decision: Decision
    at: datetime | None
    others: int  # other annotators with a standing decision on the image
    others_agreeing: int  # of them, those whose decision is the same
    consensus: str  # "agrees", "differs", or the image's status when it has no consensus (undecided, disputed)


def annotator_decisions(
    conn: Connection, images: Sequence[GridImage], user_id: int, flt: GridFilter = GridFilter()
) -> list[AnnotatorDecision]:
    """The standing decisions of `user_id` on the images of `images` that match `flt`, newest first."""
    rows = []
    for g in images:
        mine = next((d for d in g.decisions if d.user_id == user_id), None)
        if mine is None or not g.matches(flt):
            continue
        others = [d for d in g.decisions if d.user_id != user_id]
        verdict = g.status if g.consensus is None else "agrees" if g.consensus.key == mine.key else "differs"
        rows.append((g, mine, len(others), sum(d.key == mine.key for d in others), verdict))
    rows.sort(key=lambda r: -r[1].annotation_id)
    ids = [r[1].annotation_id for r in rows]
    times: dict[int, datetime] = {}
    for start in range(0, len(ids), 5000):
        chunk = ids[start : start + 5000]
        query = select(pk(Annotation.id), col(Annotation.created_at)).where(pk(Annotation.id).in_(chunk))
        times.update((i, at) for i, at in conn.execute(query))
    return [AnnotatorDecision(g.image_id, g.path, d, times.get(d.annotation_id), n, k, v) for g, d, n, k, v in rows]


def user_ids(conn: Connection) -> dict[str, int]:
    """Every user's id by name."""
    return {name: i for name, i in conn.execute(select(col(User.name), pk(User.id)))}


def _disagreement(votes: Sequence[Decision]) -> float:
    if len(votes) < 2:
        return 0.0
    largest = Counter(d.key for d in votes).most_common(1)[0][1]
    return 1.0 - largest / len(votes)
