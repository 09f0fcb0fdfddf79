"""What changed between two snapshots of a dataset: label sets, categories (a transition table) and, for a
snapshot whose consensus read votes, the posteriors of the classes that changed."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

from sqlalchemy.engine import Engine

from db.engine import session_scope
from db.enums import Category
from db.models import stored_id
from relabel.common.workspace import get_dataset
from relabel.snapshots.reader import SnapshotRow, get_snapshot, snapshot_rows

Pair = tuple[float | None, float | None]  # a class's posterior in snapshot a and in b; None: not stored there


@dataclass
class SnapshotDiff:
    a: str
    b: str
    unchanged: int
    changed: list[tuple[str, list[int], list[int], str, str]]  # path, classes in a, in b, category a, b
    only_in_a: list[str]
    only_in_b: list[str]
    transitions: dict[str, int]  # "A->B": count of changed images
    # category in a -> category in b -> images, over every image in both (the unchanged on the diagonal)
    matrix: dict[str, dict[str, int]] = field(default_factory=dict)
    # path of a changed image -> class -> its posteriors, when either snapshot stores some: the classes added or
    # dropped, or, when only the category changed, every class with a posterior
    posteriors: dict[str, dict[int, Pair]] = field(default_factory=dict)


def diff_snapshots(engine: Engine, a: str, b: str, *, dataset: str | None = None) -> SnapshotDiff:
    """What changed between snapshots `a` and `b` (label sets compared as sets, order ignored)."""
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        conn = s.connection()
        rows_a = {r.path: r for r in snapshot_rows(conn, stored_id(get_snapshot(s, ds, a)))}
        rows_b = {r.path: r for r in snapshot_rows(conn, stored_id(get_snapshot(s, ds, b)))}
    changed: list[tuple[str, list[int], list[int], str, str]] = []
    transitions: Counter[str] = Counter()
    matrix: Counter[tuple[str, str]] = Counter()
    posteriors: dict[str, dict[int, Pair]] = {}
    unchanged = 0
    for path in sorted(rows_a.keys() & rows_b.keys()):
        ra, rb = rows_a[path], rows_b[path]
        matrix[ra.category, rb.category] += 1
        if set(ra.classes) == set(rb.classes) and ra.category == rb.category:
            unchanged += 1
            continue
        changed.append((path, ra.classes, rb.classes, ra.category, rb.category))
        transitions[f"{ra.category}->{rb.category}"] += 1
        if ra.posteriors or rb.posteriors:
            posteriors[path] = changed_posteriors(ra, rb)
    return SnapshotDiff(
        a,
        b,
        unchanged,
        changed,
        sorted(rows_a.keys() - rows_b.keys()),
        sorted(rows_b.keys() - rows_a.keys()),
        dict(transitions.most_common()),
        transition_matrix(matrix),
        posteriors,
    )


def changed_posteriors(ra: SnapshotRow, rb: SnapshotRow) -> dict[int, Pair]:
    """The posteriors of the classes one image gained or lost from `ra` to `rb` (class -> (in a, in b)); when
    only its category changed, of every class either snapshot holds a posterior for."""
    pa, pb = ra.posteriors or {}, rb.posteriors or {}
    classes = set(ra.classes) ^ set(rb.classes) or pa.keys() | pb.keys()
    return {c: (pa.get(c), pb.get(c)) for c in sorted(classes)}


def transition_matrix(counts: Mapping[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    """Category in a -> category in b -> images, both in the order A B M Z X U, zeros left out."""
    order = {c.value: k for k, c in enumerate(Category)}
    out: dict[str, dict[str, int]] = {}
    for (ca, cb), n in sorted(counts.items(), key=lambda kv: (order[kv[0][0]], order[kv[0][1]])):
        out.setdefault(ca, {})[cb] = n
    return out
