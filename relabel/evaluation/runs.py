"""Stored model runs read as arrays, and aligned to a reference's images.

A run's predictions become a (n_predicted, k) int array of ranked classes (-1 padding; k ≤ MAX_K), an `ok` mask
(False for a failed model call), a `failed` mask and, for generative protocols whose predictions record it in
`details["oop"]`, an out-of-prompt mask.

A failed call (`status=error`) is one of two kinds, told apart by `is_infrastructure_error`:

- a failed reply (`failed`): the model answered, but the answer cannot be used (a multi-image reply that broke
  the numbered format, a refusal, anything not recognised below). It is the model's own failure and is scored as
  wrong in the headline numbers;
- an infrastructure error: no answer was obtained (HTTP errors, timeouts, connection failures, a malformed
  response, an unreadable image, a model that ran out of memory): the error is marked retryable
  (`details["retryable"]`, see `relabel.suggest.failures`), or its reason says so. It is counted apart and never
  scored: re-running the command asks again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlmodel import Session, col

from db.enums import PredictionStatus
from db.models import Dataset, ModelRun, Prediction, stored_id
from evaluator.scoring import OopRate, oop_rate
from relabel.errors import InputError, unknown_name
from relabel.suggest.failures import RETRYABLE_MARK

MAX_K = 5  # top-5 is the widest score reported; longer rankings are cut
# What the adapters write first in the reason of a call that got no answer (openai_api, hf_vlm, imaging); only the
# text before a quote is read, since a failed reply quotes the model's words, which may say anything.
NO_ANSWER = re.compile(
    r"\b(HTTP \d{3}|time(d)? ?out|connect|unreachable|cannot be reached|malformed response|"
    r"cannot read image|no output|out of memory|CUDA)",
    re.IGNORECASE,
)


def is_infrastructure_error(reason: str, details: Mapping[str, Any] | None, raw_output: str = "") -> bool:
    """Whether a failed call got no answer from the model (module docstring): marked retryable, or no reply text
    and a reason naming HTTP, a timeout, the connection, an unreadable image, ...; else it is a failed reply."""
    if (details or {}).get(RETRYABLE_MARK) is True:
        return True
    if raw_output.strip():
        return False  # the model's words are there: it answered
    return bool(NO_ANSWER.search(re.split(r"['\"]", reason or "", maxsplit=1)[0]))


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
    n_failed: int = 0  # of n_errors: failed replies, scored as wrong; the rest are infrastructure errors

    @property
    def n_infrastructure_errors(self) -> int:
        return self.n_errors - self.n_failed


@dataclass(frozen=True, eq=False)
class RunPredictions:
    """`classes` (n, width) int64 ranked best first, -1 padded; `ok`, `oop` and `failed` (n,) bool (`failed`:
    the failed replies, None for none); ids sorted ascending."""

    info: RunInfo
    image_ids: np.ndarray
    classes: np.ndarray
    ok: np.ndarray
    oop: np.ndarray | None
    failed: np.ndarray | None = None


@dataclass(frozen=True, eq=False)
class Aligned:
    """A run's predictions on the images of a reference that the run predicted: `rows` index the reference."""

    rows: np.ndarray
    classes: np.ndarray
    ok: np.ndarray
    failed: np.ndarray


def select_runs(session: Session, dataset: Dataset, names: Sequence[str] | None) -> list[ModelRun]:
    """The named runs in the order given, or every run of the dataset by name; none at all is an error."""
    runs = list(
        session.scalars(select(ModelRun).where(col(ModelRun.dataset_id) == dataset.id).order_by(col(ModelRun.name)))
    )
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
        select(col(Prediction.image_id), col(Prediction.status), col(Prediction.classes), col(Prediction.details))
        .where(col(Prediction.run_id) == run.id)
        .order_by(col(Prediction.image_id))
    ).all()
    width = min(MAX_K, max((len(c) for _, _, c, _ in rows), default=1)) or 1
    classes = np.full((len(rows), width), -1, dtype=np.int64)
    for i, (_, _, ranked, _) in enumerate(rows):
        top = ranked[:width]
        classes[i, : len(top)] = top
    ok = np.array([PredictionStatus(s) is PredictionStatus.ok for _, s, _, _ in rows], dtype=bool)
    flagged = [d is not None and "oop" in d for _, _, _, d in rows]
    oop = np.array([bool(d and d.get("oop")) for _, _, _, d in rows], dtype=bool) if any(flagged) else None
    ids = np.array([image_id for image_id, _, _, _ in rows], dtype=np.int64)
    failed = _failed_replies(session, run, ids, ok)
    info = RunInfo(
        stored_id(run),
        run.name,
        run.model,
        run.protocol,
        len(rows),
        int((~ok).sum()),
        width,
        oop_rate(oop, ok) if oop is not None else None,
        int(failed.sum()),
    )
    return RunPredictions(info, ids, classes, ok, oop, failed)


def _failed_replies(session: Session, run: ModelRun, ids: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """(n,) bool: the errors of `run` that are failed replies, not infrastructure errors (module docstring)."""
    failed = np.zeros(len(ids), bool)
    if ok.all():
        return failed
    errors = session.execute(
        select(
            col(Prediction.image_id), col(Prediction.reason), col(Prediction.details), col(Prediction.raw_output)
        ).where(col(Prediction.run_id) == run.id, col(Prediction.status) == PredictionStatus.error)
    ).all()
    replies = [i for i, reason, details, raw in errors if not is_infrastructure_error(reason, details, raw or "")]
    failed[np.searchsorted(ids, np.array(replies, dtype=np.int64))] = True
    return failed


def align(run: RunPredictions, reference_ids: np.ndarray) -> Aligned:
    """The run's predictions for the reference images it has (both id arrays sorted ascending)."""
    pos = np.searchsorted(run.image_ids, reference_ids)
    pos = np.minimum(pos, max(len(run.image_ids) - 1, 0))
    hit = (run.image_ids[pos] == reference_ids) if len(run.image_ids) else np.zeros(len(reference_ids), bool)
    rows = np.flatnonzero(hit)
    failed = run.failed[pos[rows]] if run.failed is not None else np.zeros(len(rows), bool)
    return Aligned(rows, run.classes[pos[rows]], run.ok[pos[rows]], failed)
