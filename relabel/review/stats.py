"""Counts per dataset: image status, label sources, model runs, decisions, snapshots, and the workers' reliability
from a Dawid-Skene fit on the dataset's votes.

The fit (925,000 ReaL rater votes: about 3 s to read and 2.5 s to fit) is kept in the workspace's cache folder,
keyed by what the votes are made of: each vote source as imported (id, name, file hash, counts, time) and the
studio's decision events (count and newest id: they are never updated, an undo is a new event). A new import, a
replaced source or a new decision changes the key, and the next `relabel stats` fits again. A dataset with studio
decisions is fitted every time and nothing is kept: a decision votes on its card's candidate classes, which come
from the original labels and every run's answers (`relabel.votes.table`), and those change outside the key (a new
run, a resumed one, a re-ingest).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from db.models import Annotation, Dataset, Image, Label, LabelSource, ModelRun, Prediction, Snapshot, User, VoteSource
from relabel import __version__
from relabel.common.kept_arrays import cache_dir_of

if TYPE_CHECKING:
    from relabel.votes.report import Reliability

CACHE_PREFIX = "reliability"


@dataclass
class DatasetStats:
    name: str
    root: str | None
    images: dict[str, int]
    sources: dict[str, int]
    runs: dict[str, dict[str, int]]
    decisions: int
    decided_images: int
    snapshots: dict[str, dict[str, int]]
    duplicate_groups: int
    users: dict[str, int] = field(default_factory=dict)
    reliability: Reliability | None = None  # per-worker, when the dataset has votes (imported or the studio's)
    run_notes: dict[str, str] = field(default_factory=dict)  # run -> how it was asked, e.g. an mc run's distractors


def workspace_stats(engine: Engine, cache_dir: Path | None = None) -> list[DatasetStats]:
    """Each dataset's counts; the reliability fit is read from (and kept in) `cache_dir` when given, else from the
    workspace's own cache folder (`relabel.common.kept_arrays.cache_dir_of`; see the module docstring)."""
    if cache_dir is None:
        cache_dir = cache_dir_of(engine.url)
    out = []
    with Session(engine) as conn:
        users: dict[str, int] = dict(conn.execute(select(col(User.role), func.count()).group_by(col(User.role))).all())
        for ds in conn.execute(select(Dataset).order_by(col(Dataset.name))).scalars():
            images: dict[str, int] = dict(
                conn.execute(
                    select(col(Image.status), func.count())
                    .where(col(Image.dataset_id) == ds.id)
                    .group_by(col(Image.status))
                ).all()
            )
            sources: dict[str, int] = dict(
                conn.execute(
                    select(col(LabelSource.name), func.count(col(Label.id)))
                    .join(Label, col(Label.source_id) == col(LabelSource.id), isouter=True)
                    .where(col(LabelSource.dataset_id) == ds.id)
                    .group_by(col(LabelSource.name))
                ).all()
            )
            runs: dict[str, dict[str, int]] = {}
            for run, status, n in conn.execute(
                select(col(ModelRun.name), col(Prediction.status), func.count())
                .join(Prediction, col(Prediction.run_id) == col(ModelRun.id))
                .where(col(ModelRun.dataset_id) == ds.id)
                .group_by(col(ModelRun.name), col(Prediction.status))
            ):
                runs.setdefault(run, {})[getattr(status, "value", status)] = n
            notes = run_notes(
                conn.execute(select(col(ModelRun.name), col(ModelRun.params)).where(col(ModelRun.dataset_id) == ds.id))
            )
            ann = (
                select(Annotation)
                .join(Image, col(Image.id) == col(Annotation.image_id))
                .where(col(Image.dataset_id) == ds.id)
                .subquery()
            )
            decisions = conn.execute(select(func.count()).select_from(ann)).scalar_one()
            decided = conn.execute(select(func.count(func.distinct(ann.c.image_id)))).scalar_one()
            snapshots = {
                s.name: dict(s.counts)
                for s in conn.execute(
                    select(Snapshot).where(col(Snapshot.dataset_id) == ds.id).order_by(col(Snapshot.created_at))
                ).scalars()
            }
            out.append(
                DatasetStats(
                    ds.name,
                    ds.root,
                    {getattr(k, "value", k): v for k, v in images.items()},
                    sources,
                    runs,
                    decisions,
                    decided,
                    snapshots,
                    duplicate_groups(conn.connection(), ds.id),
                    {getattr(k, "value", k): v for k, v in users.items()},
                    cached_reliability(conn.connection(), ds.id, cache_dir),
                    notes,
                )
            )
    return out


def run_notes(rows: Any) -> dict[str, str]:
    """Run -> how it was asked (an MC run's distractors). The distractor module, and the suggestion machinery it
    imports, is loaded only when a run has distractors: `relabel stats` on runs without them stays light."""
    notes = {}
    for name, params in rows:
        if "distractors" in (params or {}):
            from relabel.suggest.distractor_sources import distractors_line

            if line := distractors_line(params):
                notes[name] = line
    return notes


def duplicate_groups(conn: Connection, dataset_id: int) -> int:
    """How many groups of byte-identical files (same sha256) the dataset holds."""
    dup_hashes = (
        select(col(Image.sha256))
        .where(col(Image.dataset_id) == dataset_id, col(Image.sha256).is_not(None))
        .group_by(col(Image.sha256))
        .having(func.count() > 1)
    )
    return conn.execute(select(func.count()).select_from(dup_hashes.subquery())).scalar_one()


def votes_key(conn: Connection, dataset_id: int) -> str | None:
    """What the dataset's votes are made of, as a hash (see the module docstring); None when it has none."""
    table = VoteSource.__table__  # type: ignore[attr-defined]
    sources = [
        [str(v) for v in row]
        for row in conn.execute(
            select(table.c.id, table.c.name, table.c.sha256, table.c.n_votes, table.c.n_workers,
                   table.c.workers_identified, table.c.imported_at)
            .where(table.c.dataset_id == dataset_id)
            .order_by(table.c.id)
        )
    ]  # fmt: skip
    events, newest = conn.execute(
        select(func.count(), func.max(col(Annotation.id)))
        .join(Image, col(Image.id) == col(Annotation.image_id))
        .where(col(Image.dataset_id) == dataset_id)
    ).one()
    if not sources and not events:
        return None
    text = json.dumps([__version__, dataset_id, sources, events, newest])
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def has_decisions(conn: Connection, dataset_id: int) -> bool:
    """Whether any studio decision event was stored on the dataset's images."""
    query = (
        select(col(Annotation.id))
        .join(Image, col(Image.id) == col(Annotation.image_id))
        .where(col(Image.dataset_id) == dataset_id)
        .limit(1)
    )
    return conn.execute(query).first() is not None


def cached_reliability(conn: Connection, dataset_id: int, cache_dir: Path | None) -> Reliability | None:
    """`relabel.votes.report.dataset_reliability`, read from `cache_dir` when the votes are unchanged since the
    last fit, else fitted and kept there (older fits of the dataset removed). Without votes: None, unfitted."""
    key = votes_key(conn, dataset_id)
    if key is None:
        return None
    from relabel.votes.report import Reliability, WorkerRow, dataset_reliability

    if has_decisions(conn, dataset_id):  # votes on candidate classes the key does not cover: fit, keep nothing
        if cache_dir is not None:
            for old in cache_dir.glob(f"{CACHE_PREFIX}-{dataset_id}-*.json"):
                old.unlink(missing_ok=True)
        cache_dir = None
    path = cache_dir / f"{CACHE_PREFIX}-{dataset_id}-{key}.json" if cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            rows = [WorkerRow(**{**r, "answers": tuple(r["answers"])}) for r in data["rows"]]
            return Reliability(int(data["votes"]), rows)
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache file: fit again and rewrite it
    from relabel.common.stages import stage

    with stage("fitting Dawid-Skene on the votes for worker reliability (kept for the next stats)"):
        fitted = dataset_reliability(conn, dataset_id)
    if path is not None and fitted is not None:
        from relabel.common.atomic import write_atomic
        from relabel.common.errors import OutputError

        try:
            for old in path.parent.glob(f"{CACHE_PREFIX}-{dataset_id}-*.json"):
                old.unlink(missing_ok=True)
            write_atomic(path, json.dumps({"votes": fitted.votes, "rows": [asdict(r) for r in fitted.rows]}))
        except (OSError, OutputError):
            pass  # a read-only workspace: stats still answer, fitting each time
    return fitted
