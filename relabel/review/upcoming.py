"""What the review queue serves next, and why, as `relabel queue` lists it.

The queue is built exactly as the studio builds it (`relabel.review.studio.Studio.refresh`: the same evidence, the
same benefit, the same seed, the default runs unless named), so the listing is the order a newcomer would be
served: the images with no standing decision of theirs that still take an opinion under the overlap. Each image
says why it stands where it does: its expected benefit's reason (`relabel.review.active.reason`) when the queue
ranks it by benefit, else the evidence signals that put it there (`evidence_reason`).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.models import Image, stored_id
from relabel.common.errors import InputError
from relabel.common.workspace import dataset_vocabulary, get_dataset
from relabel.decisions.rules import Outcome
from relabel.review.assignments import assigned_images, load_rows, user_id_of
from relabel.review.benefit import class_names, load_benefit
from relabel.review.cards import pick_runs
from relabel.review.evidence import load_evidence
from relabel.review.queue import NOBODY, Evidence, ReviewQueue
from relabel.review.ranking import by_benefit

LOW_CONFIDENCE = 0.5  # the classifier's probability of the original class under which the listing names it


@dataclass(frozen=True)
class QueueEntry:
    """One image of the listing: its 1-based `rank`, id, file, original classes (indices and display names),
    expected benefit (None: ranked by evidence) and the one line saying why it is there."""

    rank: int
    image_id: int
    path: str
    original: tuple[int, ...]
    original_names: tuple[str, ...]
    benefit: float | None
    reason: str


@dataclass(frozen=True)
class QueueListing:
    """The next images of a dataset's queue. `snapshot`: the vote-based snapshot the benefit comes from (None:
    the queue is in evidence order); `runs`: the runs whose top-1 the benefit weighs; `open_images`: how many
    images the queue still has to serve a newcomer (or the user the listing is for)."""

    dataset: str
    snapshot: str | None
    runs: tuple[str, ...]
    open_images: int
    entries: tuple[QueueEntry, ...]


def list_queue(
    engine: Engine,
    dataset: str | None = None,
    *,
    limit: int = 20,
    overlap: int = 1,
    suggestion_run: str | None = None,
    classifier_run: str | None = None,
    seed: int = 0,
    user: str | None = None,
) -> QueueListing:
    """The first `limit` images the studio's queue would serve (module docstring), with `overlap` annotators per
    image and the named runs as the studio's suggestion and classifier (None: the newest). Assignments count as in
    the studio: to `user` (a user's name) their assigned images come first and images assigned only to others never
    come; without `user` the listing is a newcomer's, who has nothing assigned."""
    if limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    if overlap < 1:
        raise InputError(f"--overlap must be at least 1, got {overlap}")
    with engine.connect() as conn:
        with Session(bind=conn) as s:
            ds = get_dataset(s, dataset)
            vocab = dataset_vocabulary(s, ds)
        dataset_id = stored_id(ds)
        runs = pick_runs(conn, dataset_id, suggestion_run, classifier_run)
        benefit = load_benefit(conn, dataset_id)
        queue = ReviewQueue(load_evidence(conn, dataset_id, runs, benefit), overlap=overlap, seed=seed)
        user_id = NOBODY if user is None else user_id_of(conn, user)
        rows = load_rows(conn, dataset_id)
        if rows:
            originals = {i: e.original_labels for i, e in queue.evidence.items()}
            queue.use_assignments(assigned_images(rows, originals, queue.order))
        ids = queue.upcoming(limit, user_id=user_id)
        paths = dict(conn.execute(select(col(Image.id), col(Image.path)).where(col(Image.id).in_(ids))).all())
    names = class_names(vocab)
    entries = []
    for rank, image_id in enumerate(ids, start=1):
        e = queue.evidence[image_id]
        ranked = benefit is not None and by_benefit(e)
        why = benefit.reason(image_id, names) if benefit is not None and ranked else None
        disputed = queue.settled(image_id).outcome is Outcome.disputed
        entries.append(
            QueueEntry(
                rank,
                image_id,
                paths.get(image_id, ""),
                e.original_labels,
                tuple(names(c) for c in e.original_labels),
                e.benefit if ranked else None,
                why or evidence_reason(e, disputed),
            )
        )
    return QueueListing(
        ds.name,
        None if benefit is None else benefit.snapshot,
        () if benefit is None else benefit.runs,
        queue.remaining(user_id),
        tuple(entries),
    )


def evidence_reason(e: Evidence, disputed: bool) -> str:
    """The evidence signals of `relabel.review.queue.priority` that hold for an image, in one line, e.g.
    "suggestion differs; classifier P(original) = 0.10; 1 of 2 prior relabels leave it out"."""
    if e.original is None:
        return "no original label"
    parts = ["uncertain in the snapshot"] if e.uncertain else []
    if e.suggestion is not None and e.suggestion != e.original:
        parts.append("suggestion differs")
    if e.original_confidence is not None and e.original_confidence < LOW_CONFIDENCE:
        parts.append(f"classifier P(original) = {e.original_confidence:.2f}")
    left_out = sum(e.original not in p for p in e.priors)
    if left_out:
        parts.append(f"{left_out} of {len(e.priors)} prior relabels leave it out")
    if disputed:
        parts.append("disputed")
    return "; ".join(parts) or "no evidence against the original label"
