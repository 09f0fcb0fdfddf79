"""The expected benefit of one more review of each image of a dataset, read from the workspace.

What goes in: the posteriors of the dataset's newest snapshot whose consensus read votes (`snapshot_posteriors`;
older vote-based snapshots are superseded by the newest, as for the uncertain images) and the top-1 class of every
stored run of the dataset on every image it predicted (a failed prediction, `status=error`, counts as not scored:
it is no answer). What comes out: `relabel.review.active.review_benefit` over the dataset's readable images, the
one definition of the benefit, which the review queue ranks by and the card explains in one line
(`ReviewBenefit.reason`). No vote-based snapshot: no benefit (None), and the queue keeps its evidence order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.enums import ImageStatus, PredictionStatus
from db.models import Image, ModelRun, Prediction, Snapshot, SnapshotPosterior, pk
from relabel.common.vocabulary import Vocabulary
from relabel.decisions.rules import reads_votes
from relabel.review.active import NO_RUN, Benefit, reason, review_benefit


@dataclass(frozen=True)
class ReviewBenefit:
    """The benefit of one more review of each readable image of a dataset. `image_ids` (n,) ascending: image id of
    each index of `benefit`; `snapshot`: the vote-based snapshot the posteriors come from; `runs`: the names of the
    runs whose top-1 counted (those with at least one answer)."""

    snapshot: str
    image_ids: np.ndarray
    benefit: Benefit
    runs: tuple[str, ...]

    def _index(self, image_id: int) -> int | None:
        at = int(np.searchsorted(self.image_ids, image_id))
        return at if at < len(self.image_ids) and int(self.image_ids[at]) == image_id else None

    def score(self, image_id: int) -> float | None:
        """The image's expected benefit of one more review; None when the snapshot holds no posterior of it."""
        at = self._index(image_id)
        if at is None or self.benefit.focus[at] < 0:
            return None
        return float(self.benefit.score[at])

    def scores(self) -> dict[int, float]:
        """Image id -> benefit, of the images the snapshot holds posteriors of."""
        voted = self.benefit.focus >= 0
        return dict(zip(self.image_ids[voted].tolist(), self.benefit.score[voted].tolist()))

    def reason(self, image_id: int, class_name: Callable[[int], str]) -> str | None:
        """Why the image is worth a review, in one line (`relabel.review.active.reason`, e.g. "P(tabby cat) = 0.55;
        changes 3 runs' top-1"); None when the snapshot holds no posterior of it."""
        at = self._index(image_id)
        if at is None or self.benefit.focus[at] < 0:
            return None
        return reason(self.benefit, at, class_name)


def class_names(vocab: Vocabulary) -> Callable[[int], str]:
    """A class index -> its display name ("class N" outside the vocabulary), for `ReviewBenefit.reason`."""
    return lambda c: vocab.classes[c].name if 0 <= c < len(vocab) else f"class {c}"


def load_benefit(conn: Connection, dataset_id: int) -> ReviewBenefit | None:
    """The benefit of one more review of every readable image of the dataset (module docstring); None when the
    dataset has no snapshot whose consensus read votes."""
    newest = newest_vote_snapshot(conn, dataset_id)
    if newest is None:
        return None
    snapshot_id, name = newest
    ids = np.array(
        conn.execute(
            select(pk(Image.id))
            .where(col(Image.dataset_id) == dataset_id, col(Image.status) == ImageStatus.ok)
            .order_by(col(Image.id))
        )
        .scalars()
        .all(),
        dtype=np.int64,
    )
    rows, classes, probs = snapshot_pairs(conn, snapshot_id, ids)
    runs, top1 = runs_top1(conn, dataset_id, ids, voted_in=snapshot_id)
    return ReviewBenefit(name, ids, review_benefit(rows, classes, probs, len(ids), top1), runs)


def newest_vote_snapshot(conn: Connection, dataset_id: int) -> tuple[int, str] | None:
    """(id, name) of the dataset's newest snapshot whose consensus read votes; None when it has none."""
    snapshots = conn.execute(
        select(col(Snapshot.id), col(Snapshot.name), col(Snapshot.consensus))
        .where(col(Snapshot.dataset_id) == dataset_id)
        .order_by(col(Snapshot.created_at).desc(), col(Snapshot.id).desc())
    ).all()
    return next(((i, name) for i, name, settings in snapshots if reads_votes(settings)), None)


def snapshot_pairs(
    conn: Connection, snapshot_id: int, image_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The snapshot's stored posteriors as (rows, classes, probs), rows indexing `image_ids` (ascending); pairs of
    images not in `image_ids` are left out."""
    query = select(
        col(SnapshotPosterior.image_id), col(SnapshotPosterior.class_index), col(SnapshotPosterior.posterior)
    ).where(col(SnapshotPosterior.snapshot_id) == snapshot_id)
    image, classes, probs = _columns(conn.execute(query).all(), (np.int64, np.int64, np.float64))
    rows, known = _positions(image_ids, image)
    return rows[known], classes[known], probs[known]


def runs_top1(
    conn: Connection, dataset_id: int, image_ids: np.ndarray, voted_in: int | None = None
) -> tuple[tuple[str, ...], np.ndarray]:
    """(run names, top1): the top-1 class of every run of the dataset with at least one answer on `image_ids`
    (ascending), `top1` (n_runs, n_images) with NO_RUN where the run has no answer (no prediction, a failed one, or
    an empty ranking). Runs by name. `voted_in`: a snapshot id; only the images it holds posteriors of are read
    (elsewhere every pair counts as absent, so a run's top-1 weighs nothing in the benefit), the rest NO_RUN."""
    first = col(Prediction.classes)[0].as_integer()  # the database reads the top-1 out of the JSON ranking
    query = (
        select(col(Prediction.run_id), col(Prediction.image_id), first)
        .join(ModelRun, col(ModelRun.id) == col(Prediction.run_id))
        .where(
            col(ModelRun.dataset_id) == dataset_id,
            col(Prediction.status) == PredictionStatus.ok,
            first.is_not(None),  # an empty ranking
        )
    )
    if voted_in is not None:
        voted = select(col(SnapshotPosterior.image_id)).where(col(SnapshotPosterior.snapshot_id) == voted_in)
        query = query.where(col(Prediction.image_id).in_(voted.distinct()))
    run, image, top = _columns(conn.execute(query).all(), (np.int64,) * 3)
    named = conn.execute(select(col(ModelRun.id), col(ModelRun.name)).where(col(ModelRun.dataset_id) == dataset_id))
    at, known = _positions(image_ids, image)
    names, rows = [], []
    for run_id, name in sorted(named, key=lambda r: r[1]):
        mine = known & (run == run_id)
        if not mine.any():
            continue
        row = np.full(len(image_ids), NO_RUN, dtype=np.int64)
        row[at[mine]] = top[mine]
        names.append(name)
        rows.append(row)
    return tuple(names), np.array(rows, dtype=np.int64).reshape(len(rows), len(image_ids))


def _columns(rows: Sequence[Sequence[Any]], dtypes: tuple[type, ...]) -> list[np.ndarray]:
    """The columns of result `rows` as arrays of `dtypes` (one per column)."""
    columns = list(zip(*rows)) if rows else [()] * len(dtypes)
    return [np.array(c, dtype=t) for c, t in zip(columns, dtypes)]


def _positions(image_ids: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(positions of `wanted` in the ascending `image_ids`, whether each is there)."""
    at = np.searchsorted(image_ids, wanted)
    clipped = np.minimum(at, max(len(image_ids) - 1, 0))
    known = (at < len(image_ids)) & (image_ids[clipped] == wanted) if len(image_ids) else np.zeros(len(wanted), bool)
    return clipped, known
