"""Counts per dataset: image status, label sources, model runs, decisions, snapshots."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.models import Annotation, Dataset, Image, Label, LabelSource, ModelRun, Prediction, Snapshot, User
from relabel.ingest.service import find_duplicates
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


def workspace_stats(engine: Engine) -> list[DatasetStats]:
    out = []
    with Session(engine) as conn:
        users: dict[str, int] = dict(conn.execute(select(User.role, func.count()).group_by(User.role)).all())  # type: ignore[arg-type]
        for ds in conn.execute(select(Dataset).order_by(Dataset.name)).scalars():  # type: ignore[arg-type]
            images: dict[str, int] = dict(
                conn.execute(
                    select(Image.status, func.count()).where(Image.dataset_id == ds.id).group_by(Image.status)
                ).all()
            )
            sources: dict[str, int] = dict(
                conn.execute(
                    select(LabelSource.name, func.count(Label.id))
                    .join(Label, Label.source_id == LabelSource.id, isouter=True)  # type: ignore[arg-type]
                    .where(LabelSource.dataset_id == ds.id)
                    .group_by(LabelSource.name)
                ).all()
            )
            runs: dict[str, dict[str, int]] = {}
            for run, status, n in conn.execute(
                select(ModelRun.name, Prediction.status, func.count())
                .join(Prediction, Prediction.run_id == ModelRun.id)  # type: ignore[arg-type]
                .where(ModelRun.dataset_id == ds.id)
                .group_by(ModelRun.name, Prediction.status)
            ):
                runs.setdefault(run, {})[getattr(status, "value", status)] = n
            ann = (
                select(Annotation)
                .join(Image, Image.id == Annotation.image_id)
                .where(Image.dataset_id == ds.id)
                .subquery()
            )  # type: ignore[arg-type]
            decisions = conn.execute(select(func.count()).select_from(ann)).scalar_one()
            decided = conn.execute(select(func.count(func.distinct(ann.c.image_id)))).scalar_one()
            snapshots = {
                s.name: dict(s.counts)
                for s in conn.execute(
                    select(Snapshot).where(Snapshot.dataset_id == ds.id).order_by(Snapshot.created_at)
                ).scalars()
            }  # type: ignore[arg-type]
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
                )
            )
    return out
