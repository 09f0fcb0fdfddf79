"""Stored model runs read as arrays, and aligned to a reference's images.

A run's predictions become a (n_predicted, k) int array of ranked classes (-1 padding; k ≤ MAX_K), an `ok` mask
(False for a failed model call), a `failed` mask and, for generative protocols whose predictions record it in
`details["oop"]`, an out-of-prompt mask.

A failed call (`status=error`) is scored by its cause (`relabel.evaluation.failure_causes`, one rule for
`evaluate` and `evaluate robustness`):

- the model's failure (`failed`): an unusable or empty reply, a refusal, a final HTTP 4xx about the request
  (400, 413, 422, ...). Scored as wrong in every score;
- an infrastructure or set-up error: no answer was obtained (timeouts, connection errors, HTTP 429/5xx after the
  adapter's retries, an unreadable image, out of memory; HTTP 401/403/404, no reference label). Left out of every
  score, and `failure_warnings` says how many, and which of them running `relabel suggest` again asks again
  (`relabel.suggest.failures`: the retryable ones; the final ones only with `--retry-errors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import String, cast, select
from sqlmodel import Session, col

from db.bulk import all_plain_rows
from db.enums import PredictionStatus
from db.models import Dataset, ModelRun, Prediction, stored_id
from evaluator.scoring import OopRate, oop_rate
from relabel.common.errors import InputError, unknown_name
from relabel.common.stored_columns import json_values
from relabel.evaluation.failure_causes import FailureCause, exclusion_warnings, failure_cause
from relabel.suggest.failures import RETRYABLE_MARK, needs_retry

MAX_K = 5  # top-5 is the widest score reported; longer rankings are cut
SUGGEST_ORIGIN = "relabel suggest"  # ModelRun.origin of a run `relabel suggest` wrote (and can resume)


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
    n_failed: int = 0  # of n_errors: the model's failures, scored as wrong; the rest are left out
    n_setup: int = 0  # of the errors left out: refused by the set-up (HTTP 401/403/404, no reference label)
    n_asked_again: int = 0  # of the errors left out: those running `relabel suggest` again asks again
    origin: str = ""  # `relabel suggest`, or the file the run was imported from
    distractors: str | None = None  # an mc run's `--distractors` (e.g. "random", "wordnet"); None for other runs

    @property
    def protocol_label(self) -> str:
        """The protocol as tables show it: an mc run with its distractors, "mc (random)" or "mc (wordnet)"."""
        return f"{self.protocol} ({self.distractors})" if self.distractors else self.protocol

    @property
    def n_infrastructure_errors(self) -> int:
        """Errors left out of the scores: infrastructure and set-up (module docstring)."""
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
    rows = all_plain_rows(
        session.connection(),
        select(
            col(Prediction.image_id),
            cast(col(Prediction.status), String),
            cast(col(Prediction.classes), String),
            cast(col(Prediction.details), String),
        )
        .where(col(Prediction.run_id) == run.id)
        .order_by(col(Prediction.image_id)),
    )
    classes = _ranked(json_values([ranked for _, _, ranked, _ in rows]))
    ok = np.array([s == PredictionStatus.ok.name for _, s, _, _ in rows], dtype=bool)
    oop = _oop([details for _, _, _, details in rows])
    ids = np.fromiter((image_id for image_id, _, _, _ in rows), dtype=np.int64, count=len(rows))
    causes = _error_causes(session, run)
    failed = np.zeros(len(ids), bool)
    model = [i for i, (cause, _) in causes.items() if cause.scored]
    failed[np.searchsorted(ids, np.array(model, dtype=np.int64))] = True
    info = RunInfo(
        stored_id(run),
        run.name,
        run.model,
        run.protocol,
        len(rows),
        int((~ok).sum()),
        classes.shape[1],
        oop_rate(oop, ok) if oop is not None else None,
        len(model),
        n_setup=sum(cause is FailureCause.setup for cause, _ in causes.values()),
        n_asked_again=sum(not cause.scored and again for cause, again in causes.values()),
        origin=run.origin,
        distractors=_distractors(run.params),
    )
    return RunPredictions(info, ids, classes, ok, oop, failed)


def _ranked(lists: list[list[int]]) -> np.ndarray:
    """(n, width) the ranked classes, cut at the longest ranking or MAX_K, -1 padded."""
    width = min(MAX_K, max((len(c) for c in lists), default=1)) or 1
    lengths = np.fromiter((min(len(c), width) for c in lists), dtype=np.int64, count=len(lists))
    flat = np.fromiter((k for c in lists for k in c[:width]), dtype=np.int64, count=int(lengths.sum()))
    classes = np.full((len(lists), width), -1, dtype=np.int64)
    rows = np.repeat(np.arange(len(lists)), lengths)
    classes[rows, np.arange(len(flat)) - np.repeat(np.cumsum(lengths) - lengths, lengths)] = flat
    return classes


def _oop(details: list[str | None]) -> np.ndarray | None:
    """(n,) bool: the predictions whose details mark an out-of-prompt answer; None when no details record it.
    Only the details whose text names the key are decoded (an imported run stores none)."""
    named = [i for i, d in enumerate(details) if d is not None and "oop" in d]
    decoded = dict(zip(named, json_values([details[i] for i in named])))
    if not any(d is not None and "oop" in d for d in decoded.values()):
        return None
    return np.array([bool(decoded.get(i) and decoded[i].get("oop")) for i in range(len(details))], dtype=bool)


def _distractors(params: dict[str, Any] | None) -> str | None:
    """An mc run's distractor setting with its spread when not 1; None for runs that record none."""
    if not params or "distractors" not in params:
        return None
    spread = params.get("distractor_spread", 1)
    return str(params["distractors"]) + (f", spread {spread}" if spread != 1 else "")


def _error_causes(session: Session, run: ModelRun) -> dict[int, tuple[FailureCause, bool]]:
    """Image id -> (cause, whether running `relabel suggest` again asks it again) for each error of `run`."""
    errors = session.execute(
        select(
            col(Prediction.image_id), col(Prediction.reason), col(Prediction.details), col(Prediction.raw_output)
        ).where(col(Prediction.run_id) == run.id, col(Prediction.status) == PredictionStatus.error)
    ).all()
    return {
        image_id: (
            failure_cause(reason or "", raw_output=raw or "", retryable=(details or {}).get(RETRYABLE_MARK)),
            needs_retry(details, retry_errors=False),
        )
        for image_id, reason, details, raw in errors
    }


def failure_warnings(info: RunInfo) -> list[str]:
    """The warning lines for the errors `info`'s run leaves out of its scores (none when it leaves none out)."""
    if not info.n_infrastructure_errors:
        return []
    counts = {
        FailureCause.setup: info.n_setup,
        FailureCause.infrastructure: info.n_infrastructure_errors - info.n_setup,
    }
    return exclusion_warnings(f"run {info.name!r}", counts, _asked_again(info))


def _asked_again(info: RunInfo) -> str:
    """What asks a run's left-out errors again: a plain re-run for the retryable ones, --retry-errors for the rest."""
    if info.origin != SUGGEST_ORIGIN:
        return f"it was imported ({info.origin or 'origin unknown'}): import it again once they are answered"
    final = info.n_infrastructure_errors - info.n_asked_again
    command = f"`relabel suggest --run {info.name}`"
    if not final:
        return f"running {command} again asks them again"
    if not info.n_asked_again:
        return f"running {command} again with --retry-errors asks them again (final: a plain re-run skips them)"
    return (
        f"running {command} again asks {info.n_asked_again:,} of them again; the other {final:,} are final and "
        "only --retry-errors asks them again"
    )


def align(run: RunPredictions, reference_ids: np.ndarray) -> Aligned:
    """The run's predictions for the reference images it has (both id arrays sorted ascending)."""
    pos = np.searchsorted(run.image_ids, reference_ids)
    pos = np.minimum(pos, max(len(run.image_ids) - 1, 0))
    hit = (run.image_ids[pos] == reference_ids) if len(run.image_ids) else np.zeros(len(reference_ids), bool)
    rows = np.flatnonzero(hit)
    failed = run.failed[pos[rows]] if run.failed is not None else np.zeros(len(rows), bool)
    return Aligned(rows, run.classes[pos[rows]], run.ok[pos[rows]], failed)
