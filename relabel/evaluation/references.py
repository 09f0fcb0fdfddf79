"""References to score against, read from the workspace as arrays: ImGT, an imported prior, or a snapshot.

A reference names the images it covers (sorted workspace image ids) and the set of correct classes of each, as
an `evaluator.LabelSets`; an empty set excludes the image from scoring (ReaL's convention, and Z/X images of a
ReGT snapshot). Images a source has no row for are outside the reference. Missing images (a label file named
them, the pixels are not on disk) are inside: predictions made elsewhere may cover them.

A reference is named by a spec:

| spec            | reference                                                                 |
|-----------------|---------------------------------------------------------------------------|
| `imgt`          | the original labels (single-label for ImageNet)                           |
| `source:NAME`   | an imported prior source, e.g. `source:real`                              |
| `snapshot:NAME` | a frozen ReGT snapshot; its categories give the per-category breakdown    |
| `latest`        | the newest snapshot of the dataset                                        |
| `NAME`          | the source or the snapshot called NAME (an error if both exist)           |

A probabilistic snapshot (its consensus fitted posteriors, e.g. Dawid-Skene) also carries them as
`evaluator.label_uncertainty.Posteriors`: the stored P(class present) of each voted (image, class) pair; a class of
the snapshot's labels without a stored posterior (an adjudicated image, one the unanimous rule decided, a base
label) is certain (p = 1), and a class neither listed nor labelled is absent. Its images of category U without a
stored posterior (nobody rated or decided them; they keep the labels of the snapshot's base source) are `unrated`.

Snapshots are immutable, so what a snapshot reference reads (its image ids, packed label sets, categories and stored
posteriors) is kept in the workspace's cache folder from the moment it is frozen (`relabel.snapshots.arrays`),
and the reference is built from those arrays; where none are kept they are read from the rows (about 0.3 s for
50,000 images) and kept.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection
from sqlmodel import Session, col

from db.bulk import all_plain_rows
from db.enums import Category
from db.models import Dataset, Image, Label, LabelSource, Snapshot
from evaluator import EvaluationError, LabelSets
from evaluator.label_uncertainty import THRESHOLD, Posteriors
from relabel.common.errors import InputError, NotFoundError
from relabel.common.kept_arrays import cache_dir_of
from relabel.common.stored_columns import json_values, pack_label_sets
from relabel.common.workspace import IMGT, dataset_vocabulary, get_source
from relabel.snapshots.arrays import snapshot_arrays
from relabel.snapshots.content_hash import snapshot_hash
from relabel.snapshots.reader import get_snapshot

SOURCE, SNAPSHOT, LATEST = "source:", "snapshot:", "latest"


@dataclass(frozen=True)
class ReferenceInfo:
    """What a reference is, for reports and storage: no arrays."""

    name: str  # as shown in reports: "imgt", "real", "round-2"
    kind: str  # "original", "prior" or "snapshot"
    content_hash: str  # a snapshot's own hash; for a source, sha256 over (path, classes) in path order
    n_images: int  # images the reference covers
    n_labelled: int  # of those, images with a non-empty set
    multi_label: bool  # some image has more than one class
    categories: dict[str, int] | None = None  # snapshot categories (A/B/M/Z/X/U) -> images
    source_format: str | None = None  # the import format of a source ("real", "shankar", ...); None: a snapshot
    consensus: dict[str, Any] | None = None  # a snapshot's consensus settings ({"rule": "ds", "threshold": 0.9})
    n_posteriors: int = 0  # (image, class) posteriors a probabilistic snapshot stores


@dataclass(frozen=True, eq=False)
class Reference:
    """Label sets of `image_ids` (sorted, (n,) int64); `categories` (n,) str for a snapshot, else None;
    `posteriors` over the same images for a probabilistic snapshot (module docstring), else None."""

    info: ReferenceInfo
    image_ids: np.ndarray
    labels: LabelSets
    categories: np.ndarray | None = None
    posteriors: Posteriors | None = None
    unrated: np.ndarray | None = None  # (n,) bool, with posteriors: category U without a vote, labels of `base_source`
    base_source: str | None = None  # a snapshot's source of labels for the images nobody decided

    @property
    def threshold(self) -> float:
        """The posterior a class needed to enter a label set of this snapshot (its consensus setting)."""
        value = (self.info.consensus or {}).get("threshold")
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else THRESHOLD

    @property
    def name(self) -> str:
        return self.info.name


def default_reference_specs(session: Session, dataset: Dataset) -> list[str]:
    """ImGT, then the newest snapshot when the dataset has one."""
    newest = _newest_snapshot(session, dataset)
    return [IMGT] if newest is None else [IMGT, f"{SNAPSHOT}{newest.name}"]


def load_reference(session: Session, dataset: Dataset, spec: str) -> Reference:
    """The reference named by `spec` (module docstring); raises NotFoundError listing the known names."""
    spec = spec.strip()
    if spec == LATEST:
        newest = _newest_snapshot(session, dataset)
        if newest is None:
            raise NotFoundError(f"dataset {dataset.name!r} has no snapshot yet; `relabel snapshot create` makes one")
        return _snapshot_reference(session, dataset, newest)
    if spec.startswith(SNAPSHOT):
        return _snapshot_reference(session, dataset, get_snapshot(session, dataset, spec[len(SNAPSHOT) :]))
    if spec.startswith(SOURCE):
        return _source_reference(session, dataset, get_source(session, dataset, spec[len(SOURCE) :]))
    source = session.scalars(
        select(LabelSource).where(col(LabelSource.dataset_id) == dataset.id, col(LabelSource.name) == spec)
    ).first()
    snap = session.scalars(
        select(Snapshot).where(col(Snapshot.dataset_id) == dataset.id, col(Snapshot.name) == spec)
    ).first()
    if source is not None and snap is not None:
        raise InputError(f"{spec!r} is both a label source and a snapshot; write source:{spec} or snapshot:{spec}")
    if snap is not None:
        return _snapshot_reference(session, dataset, snap)
    return _source_reference(session, dataset, get_source(session, dataset, spec))


def _newest_snapshot(session: Session, dataset: Dataset) -> Snapshot | None:
    query = select(Snapshot).where(col(Snapshot.dataset_id) == dataset.id)
    return session.scalars(query.order_by(col(Snapshot.created_at).desc(), col(Snapshot.id).desc())).first()


def read_source_labels(session: Session, dataset: Dataset, source: LabelSource) -> tuple[np.ndarray, LabelSets]:
    """The sorted image ids a label source covers and their label sets, without the content hash (a reference's
    identity, which costs a pass over every image path)."""
    rows = _source_rows(session.connection(), source)
    ids = np.fromiter((image_id for image_id, _, _ in rows), dtype=np.int64, count=len(rows))
    return ids, _label_sets(session, dataset, source.name, [text for _, _, text in rows])


def _source_reference(session: Session, dataset: Dataset, source: LabelSource) -> Reference:
    rows = _source_rows(session.connection(), source)
    texts = [text for _, _, text in rows]
    digest = snapshot_hash([(path, classes, "") for (_, path, _), classes in zip(rows, json_values(texts))])
    kind = "original" if source.name == IMGT else "prior"
    ids = np.fromiter((image_id for image_id, _, _ in rows), dtype=np.int64, count=len(rows))
    ref = _build(session, dataset, source.name, kind, digest, ids, texts, None)
    return replace(ref, info=replace(ref.info, source_format=source.format))


def _source_rows(conn: Connection, source: LabelSource) -> list[tuple[int, str, str]]:
    """(image id, path, class list as JSON text) of every label of `source`, by image id."""
    return all_plain_rows(
        conn,
        select(col(Label.image_id), col(Image.path), cast(col(Label.classes), String))
        .join(Image, col(Image.id) == col(Label.image_id))
        .where(col(Label.source_id) == source.id)
        .order_by(col(Label.image_id)),
    )


def workspace_cache_dir(session: Session) -> Path | None:
    """The workspace's cache folder (`relabel.common.kept_arrays.cache_dir_of`); None for an in-memory database."""
    return cache_dir_of(session.get_bind().engine.url)


def _snapshot_reference(session: Session, dataset: Dataset, snap: Snapshot) -> Reference:
    n_classes = len(dataset_vocabulary(session, dataset))
    try:
        held = snapshot_arrays(session, snap, n_classes, workspace_cache_dir(session))
    except EvaluationError as exc:
        raise InputError(f"reference {snap.name!r}: {exc}") from None
    ids, categories = held["ids"], held["categories"]
    labels = LabelSets(held["labels"], int(held["n_classes"]))
    ref = _build(session, dataset, snap.name, "snapshot", snap.content_hash, ids, labels, categories)
    stored = None if not held["has_posteriors"] else (held["post_ids"], held["post_classes"], held["post_probs"])
    posteriors = None if stored is None else _snapshot_posteriors(snap, ref, stored)
    if posteriors is None:
        return replace(ref, info=replace(ref.info, consensus=snap.consensus))
    info = replace(ref.info, consensus=snap.consensus, n_posteriors=posteriors.n_posteriors)
    unrated = (categories == Category.U.value) & ~posteriors.rated
    return replace(ref, info=info, posteriors=posteriors.posteriors, unrated=unrated, base_source=snap.base_source)


@dataclass(frozen=True, eq=False)
class _Loaded:
    posteriors: Posteriors
    n_posteriors: int  # as stored (the certain labels added to `posteriors` not counted)
    rated: np.ndarray  # (n,) bool: images with a stored posterior


def _snapshot_posteriors(snap: Snapshot, ref: Reference, stored: tuple[np.ndarray, np.ndarray, np.ndarray]) -> _Loaded:
    """The `stored` posteriors of `snap` (image ids, classes, posteriors) over the images of `ref`, its labels
    without one certain."""
    image_ids, classes, probs = stored
    rows = np.searchsorted(ref.image_ids, image_ids)
    inside = (rows < len(ref.image_ids)) & (ref.image_ids[np.minimum(rows, len(ref.image_ids) - 1)] == image_ids)
    rows, classes, probs = rows[inside], classes[inside].astype(np.int64), probs[inside].astype(np.float64)
    label_rows, label_cols = np.nonzero(ref.labels.labels >= 0)
    label_classes = ref.labels.labels[label_rows, label_cols].astype(np.int64)
    n_classes = ref.labels.n_classes
    listed = np.sort(rows * n_classes + classes)  # membership by binary search: np.isin's answer, without its hashing
    wanted = label_rows * n_classes + label_classes
    at = np.minimum(np.searchsorted(listed, wanted), max(len(listed) - 1, 0))
    unlisted = ~(listed[at] == wanted) if len(listed) else np.ones(len(wanted), bool)
    try:
        posteriors = Posteriors(
            np.r_[rows, label_rows[unlisted]], np.r_[classes, label_classes[unlisted]],
            np.r_[probs, np.ones(int(unlisted.sum()))], ref.labels.n_images, n_classes,
        )  # fmt: skip
    except EvaluationError as exc:
        raise InputError(f"snapshot {snap.name!r}: {exc}") from None
    rated = np.zeros(ref.labels.n_images, bool)
    rated[rows] = True
    return _Loaded(posteriors, len(image_ids), rated)


def _build(
    session: Session,
    dataset: Dataset,
    name: str,
    kind: str,
    digest: str,
    ids: np.ndarray,
    sets: list[str] | LabelSets,
    categories: np.ndarray | None,
) -> Reference:
    """Check and pack one reference (`sets`: JSON class lists, or packed already). An empty reference is an error:
    there would be nothing to score against."""
    labels = sets if isinstance(sets, LabelSets) else _label_sets(session, dataset, name, sets)
    n_labelled = int(np.count_nonzero(labels.counts)) if len(ids) else 0
    if n_labelled == 0:
        raise InputError(
            f"reference {name!r} labels none of the {len(ids)} image(s) it covers in dataset {dataset.name!r}; "
            "nothing to score against (import labels or decide some images first)"
        )
    counts = None
    if categories is not None:
        names, n = np.unique(categories, return_counts=True)
        counts = {str(k): int(v) for k, v in zip(names, n)}
    info = ReferenceInfo(name, kind, digest, len(ids), n_labelled, bool((labels.counts > 1).any()), counts)
    return Reference(info, ids, labels, categories)


def _label_sets(session: Session, dataset: Dataset, name: str, texts: list[str]) -> LabelSets:
    """The class lists `texts` (JSON) packed, a class listed twice kept once; InputError naming the reference for a
    class outside the dataset's vocabulary."""
    n_classes = len(dataset_vocabulary(session, dataset))
    try:
        return pack_label_sets(texts, n_classes)
    except EvaluationError as exc:
        raise InputError(f"reference {name!r}: {exc}") from None
