"""ReGT snapshots: freeze the current consensus labels of a dataset, immutably, under a content hash."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from db.engine import session_scope
from db.enums import Category
from db.models import Dataset, Image, Label, Snapshot, SnapshotLabel
from relabel import __version__
from relabel.consensus import Outcome, settle_images
from relabel.decision_log import current_decisions
from relabel.errors import ConflictError, InputError, examples, unknown_name
from relabel.storable import one_line_name, storable_text
from relabel.workspace import IMGT, dataset_vocabulary, get_dataset, get_source

MAX_MIN_VOTES = 1000  # more agreeing votes than any team gives one image: a typo, not a policy
UNDECIDED_POLICIES = {
    "keep": "undecided images keep the base source's labels (ImGT unless --base names a prior)",
    "exclude": "undecided images get an empty label set and drop out of multi-label scoring",
}


def snapshot_hash(rows: list[tuple[str, list[int], str]]) -> str:
    """sha256 over (path, classes, category) in path order: equal labels give an equal hash."""
    h = hashlib.sha256()
    for path, classes, category in sorted(rows):
        h.update(json.dumps([path, classes, category], separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()


def check_classes(labelled: Iterable[tuple[str, Sequence[int], str]], n_classes: int, what: str) -> None:
    """Refuse (one InputError) labels holding a class outside the vocabulary: (path, classes, where from) rows.

    Such labels can only come from a decision or a file made against another vocabulary; a snapshot or an export
    that carried them would be read as other classes, or not read at all."""
    bad = [
        f"{path} {list(classes)} ({where})"
        for path, classes, where in labelled
        if any(isinstance(c, bool) or not isinstance(c, int) or not 0 <= c < n_classes for c in classes)
    ]
    if bad:
        raise InputError(
            f"{what}: {len(bad)} image(s) hold classes outside 0..{n_classes - 1}: {examples(bad)}; "
            "undo or adjudicate those decisions, then try again"
        )


def source_labels(conn: Connection, source_id: int) -> dict[int, list[int]]:
    return dict(conn.execute(select(Label.image_id, Label.classes).where(Label.source_id == source_id)).all())  # type: ignore[arg-type]


@dataclass
class SnapshotSummary:
    name: str
    content_hash: str
    n_images: int
    counts: dict[str, int]
    origins: dict[str, int] = field(default_factory=dict)  # adjudication / consensus / base, and disputed


def create_snapshot(
    engine: Engine,
    name: str,
    *,
    dataset: str | None = None,
    base: str = IMGT,
    undecided: str = "keep",
    min_votes: int = 1,
    created_by: str = "",
) -> SnapshotSummary:
    """Freeze the consensus of every image of the dataset as snapshot `name`: the decision and category that
    `relabel.consensus` settles on (the `unanimous` rule with `min_votes`), else the base source's labels under
    the `undecided` policy, category U."""
    if undecided not in UNDECIDED_POLICIES:
        raise InputError(f"unknown undecided-image policy {undecided!r}; known: {', '.join(UNDECIDED_POLICIES)}")
    one_line_name(name, "snapshot name")
    if not 1 <= min_votes <= MAX_MIN_VOTES:
        raise InputError(f"--min-votes must be between 1 and {MAX_MIN_VOTES}, got {min_votes}")
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        if s.scalars(select(Snapshot).where(Snapshot.dataset_id == ds.id, Snapshot.name == name)).first():
            raise ConflictError(f"snapshot {name!r} already exists and is immutable; choose another name")
        conn = s.connection()
        base_labels = source_labels(conn, get_source(s, ds, base).id)  # type: ignore[arg-type]
        imgt = get_source(s, ds, IMGT) if base != IMGT else None
        original = source_labels(conn, imgt.id) if imgt else base_labels  # type: ignore[arg-type]
        decisions = current_decisions(conn, ds.id)  # type: ignore[arg-type]
        images = conn.execute(select(Image.id, Image.path).where(Image.dataset_id == ds.id).order_by(Image.path)).all()
        if not images:
            raise InputError(f"dataset {ds.name!r} has no images; nothing to freeze")
        settled = settle_images(decisions, (i for i, _ in images), min_votes=min_votes)
        rows: list[tuple[int, str, list[int], Category, str]] = []
        origins: Counter[str] = Counter()
        sources: list[str] = []
        for image_id, path in images:
            decision, outcome = settled[image_id]
            if decision is not None:
                classes, category = list(decision.classes), settled[image_id].category(original.get(image_id))
                origin = outcome.value
                sources.append(f"decision #{decision.annotation_id}")
            else:
                classes = base_labels.get(image_id, []) if undecided == "keep" else []
                category, origin = Category.U, ("disputed" if outcome is Outcome.disputed else "base")
                sources.append(f"source {base!r}")
            origins[origin] += 1
            rows.append((image_id, path, classes, category, origin))
        n_classes = len(dataset_vocabulary(s, ds))
        labelled = ((path, classes, where) for (_, path, classes, _, _), where in zip(rows, sources))
        check_classes(labelled, n_classes, f"snapshot {name!r} not created")
        digest = snapshot_hash([(p, c, cat.value) for _, p, c, cat, _ in rows])
        counts = Counter(cat.value for *_, cat, _ in rows)
        snap = Snapshot(
            dataset_id=ds.id,
            name=name,
            content_hash=digest,
            base_source=base,  # type: ignore[arg-type]
            undecided_policy=undecided,
            n_images=len(rows),
            counts=dict(sorted(counts.items())),
            created_by=created_by,
            tool_version=__version__,
        )
        s.add(snap)
        s.flush()
        values = [
            {"snapshot_id": snap.id, "image_id": i, "classes": c, "category": cat, "origin": o}
            for i, _, c, cat, o in rows
        ]
        for start in range(0, len(values), 5000):
            s.execute(insert(SnapshotLabel), values[start : start + 5000])
    return SnapshotSummary(name, digest, len(rows), dict(sorted(counts.items())), dict(sorted(origins.items())))


def get_snapshot(session: Session, dataset: Dataset, name: str) -> Snapshot:
    storable_text(name, "snapshot name", max_length=200)
    row = session.scalars(select(Snapshot).where(Snapshot.dataset_id == dataset.id, Snapshot.name == name)).first()
    if row is None:
        known = session.scalars(select(Snapshot.name).where(Snapshot.dataset_id == dataset.id)).all()
        raise unknown_name(f"snapshot of dataset {dataset.name!r}", name, known)
    return row


def list_snapshots(engine: Engine, dataset: str | None = None) -> list[Snapshot]:
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        return list(s.scalars(select(Snapshot).where(Snapshot.dataset_id == ds.id).order_by(Snapshot.created_at)))


@dataclass
class SnapshotRow:
    path: str
    stem: str
    classes: list[int]
    category: str
    origin: str


def snapshot_rows(conn: Connection, snapshot_id: int) -> list[SnapshotRow]:
    """A snapshot's labels in file-name order (the order of ReaL's real.json for ImageNet val)."""
    result = conn.execute(
        select(Image.path, Image.stem, SnapshotLabel.classes, SnapshotLabel.category, SnapshotLabel.origin)
        .join(Image, Image.id == SnapshotLabel.image_id)  # type: ignore[arg-type]
        .where(SnapshotLabel.snapshot_id == snapshot_id)
        .order_by(Image.stem, Image.path)
    )
    return [SnapshotRow(p, st, c, Category(cat).value, o) for p, st, c, cat, o in result]


@dataclass
class SnapshotDiff:
    a: str
    b: str
    unchanged: int
    changed: list[tuple[str, list[int], list[int], str, str]]  # path, classes in a, in b, category a, b
    only_in_a: list[str]
    only_in_b: list[str]
    transitions: dict[str, int]  # "A->B": count


def diff_snapshots(engine: Engine, a: str, b: str, *, dataset: str | None = None) -> SnapshotDiff:
    """What changed between snapshots `a` and `b` (label sets compared as sets, order ignored)."""
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        conn = s.connection()
        rows_a = {r.path: r for r in snapshot_rows(conn, get_snapshot(s, ds, a).id)}  # type: ignore[arg-type]
        rows_b = {r.path: r for r in snapshot_rows(conn, get_snapshot(s, ds, b).id)}  # type: ignore[arg-type]
    changed: list[tuple[str, list[int], list[int], str, str]] = []
    transitions: Counter[str] = Counter()
    unchanged = 0
    for path in sorted(rows_a.keys() & rows_b.keys()):
        ra, rb = rows_a[path], rows_b[path]
        if set(ra.classes) == set(rb.classes) and ra.category == rb.category:
            unchanged += 1
            continue
        changed.append((path, ra.classes, rb.classes, ra.category, rb.category))
        transitions[f"{ra.category}->{rb.category}"] += 1
    return SnapshotDiff(
        a,
        b,
        unchanged,
        changed,
        sorted(rows_a.keys() - rows_b.keys()),
        sorted(rows_b.keys() - rows_a.keys()),
        dict(transitions.most_common()),
    )
