"""A snapshot as arrays: its image ids, packed label sets, categories and stored posteriors, as a snapshot reference
scores against them (`relabel.evaluation.references`), kept in the workspace's cache folder.

Snapshots are immutable, so the arrays are kept under the snapshot's id, content hash and creation time and the
vocabulary's size (`relabel.common.kept_arrays`). `create_snapshot` keeps them as it freezes the snapshot, from the
rows it has just written, so no reader queries them (reading 50,000 labels and 185,000 posteriors back costs about
0.3 s); a reader that finds none (a workspace from before, a deleted cache) reads the rows and keeps them. Both
build the arrays with `arrays_of` from what the columns store, in image-id order and the posteriors in (image,
class) order, so the two give the same arrays, bit for bit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path

import numpy as np
from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection
from sqlmodel import Session, col

from db.bulk import all_plain_rows
from db.models import Snapshot, SnapshotLabel, SnapshotPosterior, stored_id
from evaluator import EvaluationError
from relabel.common.kept_arrays import keep_arrays, kept_or_derived, kept_path
from relabel.common.stored_columns import pack_label_sets
from relabel.snapshots.reader import CATEGORY_VALUES

CACHE_PREFIX = "snapshot-arrays"

# label rows: (image id, class list as its stored JSON text, category name); posterior rows: (image id, class, P)
LabelRow = tuple[int, str, str]
PosteriorRow = tuple[int, int, float]


def kept_arrays_path(folder: Path | None, snap: Snapshot, n_classes: int) -> Path | None:
    """Where the arrays of `snap` over a vocabulary of `n_classes` are kept; None without a folder."""
    key = json.dumps([snap.id, snap.content_hash, str(snap.created_at), n_classes])
    return kept_path(folder, CACHE_PREFIX, stored_id(snap), key)


def snapshot_arrays(session: Session, snap: Snapshot, n_classes: int, folder: Path | None) -> dict[str, np.ndarray]:
    """The arrays of `snap` (module docstring): kept in `folder`, or read from the rows and kept there. Raises
    EvaluationError for a class outside the vocabulary."""
    path = kept_arrays_path(folder, snap, n_classes)
    return kept_or_derived(path, lambda: _read(session.connection(), stored_id(snap), n_classes))


def keep_frozen_arrays(
    folder: Path | None, snap: Snapshot, n_classes: int, labels: Sequence[LabelRow], posteriors: Sequence[PosteriorRow]
) -> None:
    """Keep the arrays of `snap` made from the rows `create_snapshot` has just written (any order), as a reader
    would read them back; nothing without a folder, or for a class outside the vocabulary (a reader then reads the
    rows and says which)."""
    path = kept_arrays_path(folder, snap, n_classes)
    if path is None:
        return
    try:
        arrays = arrays_of(sorted(labels), posteriors, n_classes)
    except EvaluationError:
        return
    keep_arrays(path, arrays)


def arrays_of(labels: Sequence[LabelRow], posteriors: Sequence[PosteriorRow], n_classes: int) -> dict[str, np.ndarray]:
    """The arrays of a snapshot's label rows (in image-id order) and posterior rows (any order: sorted here by
    image and class). Raises EvaluationError for a class outside 0..n_classes-1."""
    ids = np.fromiter(map(itemgetter(0), labels), dtype=np.int64, count=len(labels))
    categories = np.array([CATEGORY_VALUES[name] for _, _, name in labels], dtype=str)
    packed = pack_label_sets([text for _, text, _ in labels], n_classes)
    post_ids, post_classes, post_probs = (
        np.fromiter(map(itemgetter(k), posteriors), dtype=dtype, count=len(posteriors))  # a column at a time
        for k, dtype in enumerate((np.int64, np.int64, np.float64))
    )
    order = np.lexsort((post_classes, post_ids))
    return {
        "ids": ids, "categories": categories, "labels": packed.labels, "n_classes": np.array(packed.n_classes),
        "has_posteriors": np.array(bool(len(posteriors))), "post_ids": post_ids[order],
        "post_classes": post_classes[order], "post_probs": post_probs[order],
    }  # fmt: skip


def _read(conn: Connection, snapshot_id: int, n_classes: int) -> dict[str, np.ndarray]:
    """The arrays of the snapshot's stored rows."""
    labels = all_plain_rows(
        conn,
        select(
            col(SnapshotLabel.image_id),
            cast(col(SnapshotLabel.classes), String),
            cast(col(SnapshotLabel.category), String),
        )
        .where(col(SnapshotLabel.snapshot_id) == snapshot_id)
        .order_by(col(SnapshotLabel.image_id)),
    )
    posteriors = all_plain_rows(
        conn,
        select(
            col(SnapshotPosterior.image_id), col(SnapshotPosterior.class_index), col(SnapshotPosterior.posterior)
        ).where(col(SnapshotPosterior.snapshot_id) == snapshot_id),
    )
    return arrays_of(labels, posteriors, n_classes)
