"""Stored model runs read as arrays, and aligned to a reference's images.

A run's predictions become a (n_predicted, k) int array of ranked classes (-1 padding; k ≤ MAX_K), an `ok` mask
(False for a failed model call: counted apart, never scored as wrong) and, for generative protocols whose
predictions record it in `details["oop"]`, an out-of-prompt mask.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlmodel import Session

from db.enums import PredictionStatus
from db.models import Dataset, ModelRun, Prediction
from evaluator.scoring import OopRate, oop_rate
from relabel.errors import InputError, unknown_name

MAX_K = 5  # top-5 is the widest score reported; longer rankings are cut


@dataclass(frozen=True)
class RunInfo:
    """A model run as reports show it, with counts over all of its predictions."""

    id: int
    name: str
    model: str
    protocol: str
    n_predictions: int
    n_errors: int
    width: int  # classes in the longest ranking, at most MAX_K: top-5 is scored when this is 5
    oop: OopRate | None  # generative protocols that record out-of-prompt answers; None for the others


@dataclass(frozen=True, eq=False)
class RunPredictions:
    """`classes` (n, width) int64 ranked best first, -1 padded; `ok` and `oop` (n,) bool; ids sorted ascending."""

    info: RunInfo
    image_ids: np.ndarray
    classes: np.ndarray
    ok: np.ndarray
    oop: np.ndarray | None


@dataclass(frozen=True, eq=False)
class Aligned:
    """A run's predictions on the images of a reference that the run predicted: `rows` index the reference."""

    rows: np.ndarray
    classes: np.ndarray
    ok: np.ndarray


def select_runs(session: Session, dataset: Dataset, names: Sequence[str] | None) -> list[ModelRun]:
    """The named runs in the order given, or every run of the dataset by name; none at all is an error."""
    runs = list(session.scalars(select(ModelRun).where(ModelRun.dataset_id == dataset.id).order_by(ModelRun.name)))
    if not runs:
        raise InputError(
            f"dataset {dataset.name!r} has no model runs; `relabel predictions import` or `relabel suggest` first"
        )
    if not names:
        return runs
    by_name = {r.name: r for r in runs}
    missing = [n for n in names if n not in by_name]
    if missing:
        raise unknown_name(f"model run of dataset {dataset.name!r}", missing[0], list(by_name))
    return [by_name[n] for n in dict.fromkeys(names)]


def load_run(session: Session, run: ModelRun) -> RunPredictions:
    """Every prediction of `run` as arrays, in image-id order."""
    rows = session.execute(
        select(Prediction.image_id, Prediction.status, Prediction.classes, Prediction.details)
        .where(Prediction.run_id == run.id)
        .order_by(Prediction.image_id)
    ).all()
    width = min(MAX_K, max((len(c) for _, _, c, _ in rows), default=1)) or 1
    classes = np.full((len(rows), width), -1, dtype=np.int64)
    for i, (_, _, ranked, _) in enumerate(rows):
        top = ranked[:width]
        classes[i, : len(top)] = top
    ok = np.array([PredictionStatus(s) is PredictionStatus.ok for _, s, _, _ in rows], dtype=bool)
    flagged = [d is not None and "oop" in d for _, _, _, d in rows]
    oop = np.array([bool(d and d.get("oop")) for _, _, _, d in rows], dtype=bool) if any(flagged) else None
    info = RunInfo(
        run.id,  # type: ignore[arg-type]
        run.name,
        run.model,
        run.protocol,
        len(rows),
        int((~ok).sum()),
        width,
        oop_rate(oop, ok) if oop is not None else None,
    )
    ids = np.array([image_id for image_id, _, _, _ in rows], dtype=np.int64)
    return RunPredictions(info, ids, classes, ok, oop)


def align(run: RunPredictions, reference_ids: np.ndarray) -> Aligned:
    """The run's predictions for the reference images it has (both id arrays sorted ascending)."""
    pos = np.searchsorted(run.image_ids, reference_ids)
    pos = np.minimum(pos, max(len(run.image_ids) - 1, 0))
    hit = (run.image_ids[pos] == reference_ids) if len(run.image_ids) else np.zeros(len(reference_ids), bool)
    rows = np.flatnonzero(hit)
    return Aligned(rows, run.classes[pos[rows]], run.ok[pos[rows]])
