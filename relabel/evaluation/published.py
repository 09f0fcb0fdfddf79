"""Published metrics: score runs on an imported source the way its authors defined, beside the ReGT-style reading.

A source used as a reference (`--reference shankar`) is read the ReGT way: its label set per image, the ReaL rule,
pooled over the images it labels. Some papers prescribe another reading; `--metric NAME` adds it, named as such:

| metric    | source format | reading                                                                          |
|-----------|---------------|----------------------------------------------------------------------------------|
| `shankar` | `shankar`     | Shankar et al. (2020): problematic images skipped; a prediction among the correct |
|           |               | or the unclear labels counts; per-class accuracy by original label, averaged     |

`NAME` uses the dataset's one source of that format; `NAME:SOURCE` names the source.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlmodel import Session, col

from db.models import Dataset, Label, LabelSource
from evaluator import EvaluationError, LabelSets
from evaluator.per_class import PerClassScore
from evaluator.published import shankar_accuracy
from evaluator.scoring import multilabel_accuracy
from relabel.common.errors import InputError, NotFoundError, unknown_name
from relabel.common.workspace import dataset_vocabulary
from relabel.evaluation.results import PublishedScore
from relabel.evaluation.runs import Aligned, RunPredictions, align
from relabel.evaluation.scoring import subset_labels


@dataclass(frozen=True, eq=False)
class SourceLabels:
    """An imported source as arrays: sorted `image_ids` (n,), its label sets, and its `extra` fields per image."""

    name: str
    image_ids: np.ndarray
    labels: LabelSets
    extra: list[dict[str, Any]]


@dataclass(frozen=True)
class PublishedMetric:
    name: str
    title: str
    source_format: str
    prepare: Callable[[SourceLabels], dict[str, Any]]  # arrays of the whole source, computed once
    score: Callable[[dict[str, Any], np.ndarray, Aligned, int, int], PerClassScore]  # (prepared, rows, aligned, ...)


def _prepare_shankar(source: SourceLabels) -> dict[str, Any]:
    n_classes = source.labels.n_classes
    try:
        unclear = LabelSets.from_lists([list(dict.fromkeys(e.get("unclear") or [])) for e in source.extra], n_classes)
    except EvaluationError as exc:
        raise InputError(f"source {source.name!r}: unclear labels: {exc}") from None
    original = np.array([-1 if e.get("original_label") is None else e["original_label"] for e in source.extra])
    problematic = np.array([bool(e.get("problematic")) for e in source.extra], dtype=bool)
    missing = int(((original < 0) & ~problematic).sum())
    if missing:
        raise InputError(
            f"source {source.name!r}: {missing} image(s) lack original_label, which Shankar et al.'s metric averages "
            "over; re-import the CSV with its original_label column"
        )
    return {"correct": source.labels, "unclear": unclear, "original": original, "problematic": problematic}


def _score_shankar(
    prepared: dict[str, Any], rows: np.ndarray, aligned: Aligned, n_boot: int, seed: int
) -> PerClassScore:
    return shankar_accuracy(
        aligned.classes,
        subset_labels(prepared["correct"], rows),
        subset_labels(prepared["unclear"], rows),
        prepared["original"][rows],
        prepared["problematic"][rows],
        1,
        aligned.ok,
        failed=aligned.failed,
        n_boot=n_boot,
        seed=seed,
    )


PUBLISHED_METRICS = {
    "shankar": PublishedMetric(
        "shankar",
        "Shankar et al. (2020) multi-label accuracy",
        "shankar",
        _prepare_shankar,
        _score_shankar,
    ),
}


def score_published(
    session: Session,
    dataset: Dataset,
    specs: Sequence[str],
    runs: Sequence[RunPredictions],
    *,
    n_boot: int,
    seed: int,
) -> list[PublishedScore]:
    """Every run under every metric named in `specs` (`NAME` or `NAME:SOURCE`, module docstring)."""
    out = []
    for spec in dict.fromkeys(s.strip() for s in specs):
        name, _, source_name = spec.partition(":")
        if name not in PUBLISHED_METRICS:
            raise unknown_name("metric", name, list(PUBLISHED_METRICS))
        metric = PUBLISHED_METRICS[name]
        source = load_source_labels(session, dataset, _pick_source(session, dataset, metric, source_name))
        prepared = metric.prepare(source)
        out += [_score_run(metric, source, prepared, run, n_boot, seed) for run in runs]
    return out


def _score_run(
    metric: PublishedMetric, source: SourceLabels, prepared: dict[str, Any], run: RunPredictions, n_boot: int, seed: int
) -> PublishedScore:
    aligned = align(run, source.image_ids)
    rows = aligned.rows
    n_skipped = int(prepared["problematic"][rows].sum()) if "problematic" in prepared else 0
    labels = subset_labels(source.labels, rows)
    if not len(rows) or not labels.counts.any():
        nan = float("nan")
        return PublishedScore(metric.name, metric.title, run.info.name, source.name, len(rows), 0, n_skipped,
                              int((~aligned.ok & ~aligned.failed).sum()), 0, nan, None, None)  # fmt: skip
    score = metric.score(prepared, rows, aligned, n_boot, seed)
    pooled = multilabel_accuracy(aligned.classes, labels, 1, aligned.ok, failed=aligned.failed)
    return PublishedScore(
        metric.name,
        metric.title,
        run.info.name,
        source.name,
        len(rows),
        score.n_scored,
        n_skipped,
        score.n_errors,
        score.n_classes_scored,
        score.accuracy,
        score.ci_low,
        score.ci_high,
        pooled,
    )


def _pick_source(session: Session, dataset: Dataset, metric: PublishedMetric, name: str) -> LabelSource:
    """The source `name`, or the dataset's one source of the metric's format."""
    sources = session.scalars(
        select(LabelSource).where(col(LabelSource.dataset_id) == dataset.id).order_by(col(LabelSource.name))
    ).all()
    fitting = [s for s in sources if s.format == metric.source_format]
    if name:
        chosen = next((s for s in sources if s.name == name), None)
        if chosen is None:
            raise unknown_name(f"label source of dataset {dataset.name!r}", name, [s.name for s in sources])
        if chosen.format != metric.source_format:
            raise InputError(
                f"--metric {metric.name}:{name}: source {name!r} was imported as {chosen.format!r}; the metric reads "
                f"a source imported with --format {metric.source_format}"
            )
        return chosen
    if not fitting:
        raise NotFoundError(
            f"--metric {metric.name} needs a source imported with --format {metric.source_format}; dataset "
            f"{dataset.name!r} has none (`relabel labels import FILE --format {metric.source_format}`)"
        )
    if len(fitting) > 1:
        names = ", ".join(s.name for s in fitting)
        raise InputError(f"--metric {metric.name}: dataset {dataset.name!r} has several such sources ({names}); "
                         f"name one, e.g. --metric {metric.name}:{fitting[0].name}")  # fmt: skip
    return fitting[0]


def load_source_labels(session: Session, dataset: Dataset, source: LabelSource) -> SourceLabels:
    """A source's label sets and `extra` fields, in image-id order."""
    rows = session.execute(
        select(col(Label.image_id), col(Label.classes), col(Label.extra))
        .where(col(Label.source_id) == source.id)
        .order_by(col(Label.image_id))
    ).all()
    n_classes = len(dataset_vocabulary(session, dataset))
    try:
        labels = LabelSets.from_lists([list(dict.fromkeys(c)) for _, c, _ in rows], n_classes)
    except EvaluationError as exc:
        raise InputError(f"source {source.name!r}: {exc}") from None
    ids = np.array([i for i, _, _ in rows], dtype=np.int64)
    return SourceLabels(source.name, ids, labels, [e or {} for _, _, e in rows])
