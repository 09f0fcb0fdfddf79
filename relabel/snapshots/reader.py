"""A stored snapshot read back: its rows in file-name order with their posteriors, as the exports and the diff use
them, and the class check every writer of labels applies.

A 50,000-image snapshot is 50,000 label rows and, when its consensus read votes, some 185,000 posteriors. They are
read as plain columns: the class lists as their JSON text, parsed once per distinct list (a snapshot has a few
thousand), the category as the name the column stores, the posteriors through the driver's own cursor. Loading
them through the columns' JSON and enum types cost more than the rest of an export. This module imports neither
numpy nor the vote machinery, so `relabel snapshot export` and `diff` do not pay for them at start-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection
from sqlmodel import Session, col

from db.bulk import plain_rows
from db.enums import Category
from db.models import Dataset, Image, Label, Snapshot, SnapshotLabel, SnapshotPosterior, pk
from relabel.common.collector import cyclic_gc_paused
from relabel.common.errors import InputError, examples, unknown_name
from relabel.common.storable import storable_text
from relabel.decisions.log import ParsedLists
from relabel.decisions.rules import reads_votes

CATEGORY_VALUES = {c.name: c.value for c in Category}  # the column stores a category's name


@dataclass
class SnapshotRow:
    path: str
    stem: str
    classes: list[int]
    category: str
    origin: str
    # class index -> P(class present) of the image's voted pairs; None: the snapshot stores no posteriors
    posteriors: dict[int, float] | None = None


def get_snapshot(session: Session, dataset: Dataset, name: str) -> Snapshot:
    """The snapshot `name` of `dataset`; NotFoundError listing the dataset's snapshots when there is none."""
    storable_text(name, "snapshot name", max_length=200)
    row = session.scalars(
        select(Snapshot).where(col(Snapshot.dataset_id) == dataset.id, col(Snapshot.name) == name)
    ).first()
    if row is None:
        known = session.scalars(select(col(Snapshot.name)).where(col(Snapshot.dataset_id) == dataset.id)).all()
        raise unknown_name(f"snapshot of dataset {dataset.name!r}", name, known)
    return row


def snapshot_rows(conn: Connection, snapshot_id: int) -> list[SnapshotRow]:
    """A snapshot's labels in file-name order (the order of ReaL's real.json for ImageNet val), with their
    posteriors when the snapshot's consensus read votes."""
    with cyclic_gc_paused():  # some 10^5 dicts and rows, none in a cycle: see relabel.decisions.log
        return _snapshot_rows(conn, snapshot_id)


def _snapshot_rows(conn: Connection, snapshot_id: int) -> list[SnapshotRow]:
    settings = conn.execute(select(col(Snapshot.consensus)).where(col(Snapshot.id) == snapshot_id)).scalar()
    posteriors = snapshot_posteriors(conn, snapshot_id) if reads_votes(settings) else None
    query = (
        select(
            pk(Image.id),
            col(Image.path),
            col(Image.stem),
            cast(col(SnapshotLabel.classes), String),
            cast(col(SnapshotLabel.category), String),
            col(SnapshotLabel.origin),
        )
        .join(Image, col(Image.id) == col(SnapshotLabel.image_id))
        .where(col(SnapshotLabel.snapshot_id) == snapshot_id)
        .order_by(col(Image.stem), col(Image.path))
    )
    lists, category = ParsedLists(), CATEGORY_VALUES
    if posteriors is None:
        return [SnapshotRow(p, st, list(lists[c]), category[cat], o) for _, p, st, c, cat, o in conn.execute(query)]
    return [
        SnapshotRow(p, st, list(lists[c]), category[cat], o, posteriors.get(i, {}))
        for i, p, st, c, cat, o in conn.execute(query)
    ]


def snapshot_posteriors(conn: Connection, snapshot_id: int) -> dict[int, dict[int, float]]:
    """Image id -> class index -> posterior, of every pair the snapshot stores (`snapshot_posteriors`)."""
    out: dict[int, dict[int, float]] = {}
    query = select(
        col(SnapshotPosterior.image_id), col(SnapshotPosterior.class_index), col(SnapshotPosterior.posterior)
    ).where(col(SnapshotPosterior.snapshot_id) == snapshot_id)
    for rows in plain_rows(conn, query):
        for image_id, class_index, p in rows:
            image = out.get(image_id)
            if image is None:
                image = out[image_id] = {}
            image[class_index] = p
    return out


def source_labels(conn: Connection, source_id: int) -> dict[int, tuple[int, ...]]:
    """Image id -> the classes a label source gives it (read as text and parsed once per distinct list)."""
    query = select(col(Label.image_id), cast(col(Label.classes), String)).where(col(Label.source_id) == source_id)
    lists = ParsedLists()
    return {image_id: lists[text] for image_id, text in conn.execute(query)}


def check_classes(labelled: Iterable[tuple[str, Sequence[int], str]], n_classes: int, what: str) -> None:
    """Refuse (one InputError) labels holding a class outside the vocabulary: (path, classes, where from) rows.

    Such labels can only come from a decision or a file made against another vocabulary; a snapshot or an export
    that carried them would be read as other classes, or not read at all."""
    rows = list(labelled)
    every = [c for _, classes, _ in rows for c in classes]
    if not every or (set(map(type, every)) == {int} and min(every) >= 0 and max(every) < n_classes):
        return  # plain ints in range: no row to name
    bad = [
        f"{path} {list(classes)} ({where})"
        for path, classes, where in rows
        if any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < n_classes for c in classes)
    ]
    if bad:
        raise InputError(
            f"{what}: {len(bad)} image(s) hold classes outside 0..{n_classes - 1}: {examples(bad)}; "
            "undo or adjudicate those decisions, then try again"
        )
