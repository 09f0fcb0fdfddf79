"""Counts per dataset: image status, label sources, model runs, decisions, snapshots."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.models import Annotation, Dataset, Image, Label, LabelSource, ModelRun, Prediction, Snapshot, User
from relabel.ingest.service import find_duplicates
from relabel.suggest.distractor_sources import distractors_line
from relabel.vote_report import Reliability, dataset_reliability


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


def workspace_stats(engine: Engine) -> list[DatasetStats]:
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
            notes = {
                name: line
                for name, params in conn.execute(
                    select(col(ModelRun.name), col(ModelRun.params)).where(col(ModelRun.dataset_id) == ds.id)
                )
                if (line := distractors_line(params or {}))
            }
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
                    len(find_duplicates(engine, ds.id)),
                    {getattr(k, "value", k): v for k, v in users.items()},
                    dataset_reliability(conn.connection(), ds.id),
                    notes,
                )
            )
    return out
