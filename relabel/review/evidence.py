"""The evidence the review queue weighs, read from the workspace in a handful of bulk queries."""

from __future__ import annotations

from sqlalchemy import null, select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.enums import ImageStatus, SourceKind
from db.models import Image, Label, LabelSource, Prediction, SnapshotLabel, pk
from relabel.decisions.log import current_decisions
from relabel.review.benefit import ReviewBenefit, newest_vote_snapshot
from relabel.review.cards import RunChoice
from relabel.review.image_evidence import Evidence
from relabel.votes.posteriors import UNCERTAIN


def load_evidence(
    conn: Connection, dataset_id: int, runs: RunChoice, benefit: ReviewBenefit | None = None
) -> list[Evidence]:
    """Queue evidence for every readable image of the dataset, in a handful of bulk queries. `benefit`: the
    expected benefit of one more review (`relabel.review.benefit.load_benefit`) each image takes; None: none."""
    ids = (
        conn.execute(
            select(pk(Image.id))
            .where(col(Image.dataset_id) == dataset_id, col(Image.status) == ImageStatus.ok)
            .order_by(col(Image.id))
        )
        .scalars()
        .all()
    )
    labels = conn.execute(
        select(col(Label.image_id), col(Label.classes), col(LabelSource.kind))
        .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
        .where(col(LabelSource.dataset_id) == dataset_id)
    ).all()
    original: dict[int, int] = {}
    original_labels: dict[int, tuple[int, ...]] = {}
    priors: dict[int, list[list[int]]] = {}
    for image_id, classes, kind in labels:
        if kind == SourceKind.original:
            if classes:
                original[image_id], original_labels[image_id] = classes[0], tuple(classes)
        else:
            priors.setdefault(image_id, []).append(list(classes))
    # without a generative run, the classifier's top-1 is the suggestion (as on the card): its rows are read once
    classifier = _predictions(conn, runs.classifier)
    suggested = _top1(_predictions(conn, runs.suggestion, scores=False) if runs.suggestion is not None else classifier)
    confidence = _confidence(classifier, original)
    decisions = current_decisions(conn, dataset_id)
    uncertain = uncertain_images(conn, dataset_id)
    scores = benefit.scores() if benefit is not None else {}
    out = []
    for image_id in ids:
        e = Evidence(
            image_id,
            original.get(image_id),
            suggested.get(image_id),
            confidence.get(image_id),
            priors.get(image_id, []),
            original_labels=original_labels.get(image_id, ()),
            uncertain=image_id in uncertain,
            benefit=scores.get(image_id),
        )
        e.take(decisions.get(image_id, ()))
        out.append(e)
    return out


def uncertain_images(conn: Connection, dataset_id: int) -> set[int]:
    """The images uncertain (origin "uncertain", category U) in the dataset's newest snapshot whose consensus read
    votes; empty when it has none. Older vote-based snapshots are superseded by the newest."""
    newest = newest_vote_snapshot(conn, dataset_id)
    if newest is None:
        return set()
    query = select(col(SnapshotLabel.image_id)).where(
        col(SnapshotLabel.snapshot_id) == newest[0], col(SnapshotLabel.origin) == UNCERTAIN
    )
    return set(conn.execute(query).scalars())


def _predictions(
    conn: Connection, run_id: int | None, scores: bool = True
) -> list[tuple[int, list[int], list[float] | None]]:
    """(image id, ranked classes, scores or None) of every prediction of a run; empty without a run."""
    if run_id is None:
        return []
    wanted = col(Prediction.scores) if scores else null()
    rows = conn.execute(
        select(col(Prediction.image_id), col(Prediction.classes), wanted).where(col(Prediction.run_id) == run_id)
    )
    return [(i, c, sc) for i, c, sc in rows]


def _top1(rows: list[tuple[int, list[int], list[float] | None]]) -> dict[int, int]:
    return {i: c[0] for i, c, _ in rows if c}


def _confidence(rows: list[tuple[int, list[int], list[float] | None]], original: dict[int, int]) -> dict[int, float]:
    """The classifier's probability of each image's original class (0 when it is outside the stored top-k)."""
    out = {}
    for image_id, classes, scores in rows:
        label = original.get(image_id)
        if label is None or not classes:
            continue
        out[image_id] = float(scores[classes.index(label)]) if scores and label in classes else 0.0
    return out
