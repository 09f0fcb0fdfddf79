"""Scores for the reliability table: runs of one dataset against one reference, on the images all of them scored.

Which reference a run is scored against on a dataset:

- a protocol that builds its question around a reference (`needs_reference` in the protocol registry: MC, whose
  options are drawn around the ImGT label) is scored against ImGT only. Against another reference the right
  class may not be among the options it offered, so the score would measure the options, not the model;
- every other run (ranked scores, cw, cwplus, ow, imported predictions) against the dataset's cleanest
  reference, in this order: its newest snapshot (ReGT), else the imported prior (ReaL, Shankar, MTurk, ...)
  that labels the most images (ties by name), else ImGT. A candidate that labels no image is skipped.

Runs are compared on common images: the images of the reference that every compared run scored (predicted, with
a non-empty reference set, and not an error of the infrastructure). A run that covers a subset of the images
therefore narrows everyone's score to that subset, and `coverage_note` says so; nothing is compared silently
over different images. A model is found on another dataset by its model name and protocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import reduce

import numpy as np
from sqlalchemy import func, select
from sqlmodel import Session, col

from db.enums import SourceKind
from db.models import Dataset, LabelSource, ModelRun, Prediction
from evaluator import EvaluationError, LabelSets
from evaluator.paired import JointBootstrap
from evaluator.scoring import image_outcomes
from relabel.errors import RelabelError
from relabel.evaluation.references import SNAPSHOT, SOURCE, Reference, default_reference_specs, load_reference
from relabel.evaluation.runs import RunPredictions, align
from relabel.suggest.protocols import PROTOCOLS
from relabel.workspace import IMGT

CLASSES = "classes"  # the task of every protocol that chooses among the dataset's classes
TOPK = "topk"


def task_of(protocol: str) -> str:
    """The task a run's protocol sets: CLASSES, or the protocol's own name when it builds its question around a
    reference (MC). Rows are compared with rows of the same task only."""
    entry = PROTOCOLS.get(protocol)
    return entry.name if entry is not None and entry.needs_reference else CLASSES


def robustness_protocol(protocol: str) -> str:
    """The protocol a robustness run of the same model reads it through: a generative protocol by its name, any
    run of ranked classes (topk, imported, supervised) as topk."""
    entry = PROTOCOLS.get(protocol)
    return entry.name if entry is not None and entry.generative else TOPK


@dataclass(frozen=True, eq=False)
class Outcomes:
    """One run against one reference: the sorted image ids it scored, and whether its top-1 was right on each."""

    image_ids: np.ndarray
    correct: np.ndarray

    def at(self, ids: np.ndarray) -> np.ndarray:
        """Correctness on `ids`, which must all be in `image_ids`."""
        return self.correct[np.searchsorted(self.image_ids, ids)]


@dataclass(frozen=True, eq=False)
class CommonScores:
    """Runs (keyed by their row) of one dataset against one reference, on the `image_ids` every one scored."""

    dataset: str
    reference: str
    image_ids: np.ndarray
    correct: dict[str, np.ndarray]  # key -> (n_common,) bool, for the keys that scored any image
    n_scored: dict[str, int]  # key -> images the run scored against the reference (0: none; not in `correct`)
    runs: dict[str, str]  # key -> the name of its run on this dataset

    def accuracy(self, key: str) -> float | None:
        """Top-1 of `key` on the common images; None when it scored nothing or nothing is common."""
        if key not in self.correct or not len(self.image_ids):
            return None
        return float(self.correct[key].mean())

    def resample(self, n_boot: int, seed: int) -> dict[str, np.ndarray]:
        """Each key's top-1 over `n_boot` joint resamples of the common images, (n_boot,) each; {} when n_boot = 0
        or nothing is common."""
        if not n_boot or not len(self.image_ids):
            return {}
        keys = list(self.correct)
        means = JointBootstrap(len(self.image_ids), n_boot, seed).means(np.stack([self.correct[k] for k in keys]))
        return {k: means[:, i] for i, k in enumerate(keys)}


def outcomes(run: RunPredictions, reference: Reference) -> Outcomes:
    """`run`'s top-1 outcome on each image of `reference` it scored."""
    aligned = align(run, reference.image_ids)
    none = Outcomes(np.zeros(0, np.int64), np.zeros(0, bool))
    if not len(aligned.rows):
        return none
    sets = LabelSets(reference.labels.labels[aligned.rows], reference.labels.n_classes)
    if not sets.counts.any():
        return none
    correct, scored = image_outcomes(aligned.classes, sets, 1, aligned.ok, failed=aligned.failed)
    return Outcomes(reference.image_ids[aligned.rows][scored], correct[scored])


def common_scores(dataset: str, reference: Reference, runs: Mapping[str, RunPredictions]) -> CommonScores:
    """Top-1 of each of `runs` against `reference` on the images all of them scored (runs that scored none are
    left out of the intersection, with n_scored 0)."""
    found = {key: outcomes(run, reference) for key, run in runs.items()}
    scoring = {key: o for key, o in found.items() if len(o.image_ids)}
    ids = reduce(np.intersect1d, [o.image_ids for o in scoring.values()]) if scoring else np.zeros(0, np.int64)
    return CommonScores(
        dataset,
        reference.name,
        ids,
        {key: o.at(ids) for key, o in scoring.items()},
        {key: len(o.image_ids) for key, o in found.items()},
        {key: run.info.name for key, run in runs.items()},
    )


def restrict(scores: CommonScores, ids: np.ndarray) -> CommonScores:
    """`scores` on the subset `ids` of its common images."""
    keep = np.isin(scores.image_ids, ids)
    correct = {k: v[keep] for k, v in scores.correct.items()}
    return CommonScores(scores.dataset, scores.reference, scores.image_ids[keep], correct, scores.n_scored, scores.runs)


def coverage_note(scores: CommonScores, names: Mapping[str, str] | None = None) -> str | None:
    """A warning when the compared runs scored different images (a subset run, failures, missing predictions);
    None when every run scored exactly the common images. `names` shows a key under another name."""
    n = len(scores.image_ids)
    wider = {k: v for k, v in scores.n_scored.items() if v != n}
    if not wider or len(scores.n_scored) < 2:
        return None
    label = names or {}
    listed = ", ".join(f"{label.get(k, k)} {v}" for k, v in scores.n_scored.items())
    return (
        f"compared runs cover different images of {scores.dataset!r} (against {scores.reference}): scores are on "
        f"the {n} image(s) every run scored; images scored by each run: {listed}"
    )


class ReferenceCache:
    """The references of each dataset the table reads, loaded once: ImGT and the cleanest one."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self._loaded: dict[tuple[int, str], Reference | None] = {}

    def for_task(self, dataset: Dataset, task: str) -> Reference | None:
        """ImGT for a task built around it (MC), else the cleanest reference; None when the dataset has neither."""
        return self.imgt(dataset) if task != CLASSES else self.cleanest(dataset)

    def imgt(self, dataset: Dataset) -> Reference | None:
        return self._first(dataset, [IMGT])

    def cleanest(self, dataset: Dataset) -> Reference | None:
        return self._first(dataset, cleanest_order(self.session, dataset))

    def _first(self, dataset: Dataset, specs: list[str]) -> Reference | None:
        for spec in specs:
            key = (int(dataset.id or 0), spec)
            if key not in self._loaded:
                try:
                    self._loaded[key] = load_reference(self.session, dataset, spec)
                except (RelabelError, EvaluationError):  # labels no image, or no such source: the next one
                    self._loaded[key] = None
            if self._loaded[key] is not None:
                return self._loaded[key]
        return None


def cleanest_order(session: Session, dataset: Dataset) -> list[str]:
    """Reference specs from cleanest to least clean: the newest snapshot, priors by labels (most first), ImGT."""
    snapshots = [s for s in default_reference_specs(session, dataset) if s.startswith(SNAPSHOT)]
    priors = session.scalars(
        select(col(LabelSource.name))
        .where(col(LabelSource.dataset_id) == dataset.id, col(LabelSource.kind) == SourceKind.prior)
        .order_by(col(LabelSource.n_labels).desc(), col(LabelSource.name))
    ).all()
    return [*snapshots, *(f"{SOURCE}{p}" for p in priors), IMGT]


def other_datasets(session: Session, dataset: Dataset) -> list[Dataset]:
    """Every dataset of the workspace but `dataset`, by name."""
    return list(session.scalars(select(Dataset).where(col(Dataset.id) != dataset.id).order_by(col(Dataset.name))))


def matching_runs(session: Session, dataset: Dataset, keys: set[tuple[str, str]]) -> dict[tuple[str, str], ModelRun]:
    """The run of `dataset` for each (model, protocol) of `keys` that has one: with several, the one with the most
    predictions, then the newest."""
    rows = session.execute(
        select(ModelRun, func.count(col(Prediction.id)))
        .join(Prediction, col(Prediction.run_id) == col(ModelRun.id), isouter=True)
        .where(col(ModelRun.dataset_id) == dataset.id)
        .group_by(col(ModelRun.id))
        .order_by(func.count(col(Prediction.id)).desc(), col(ModelRun.id).desc())
    ).all()
    found: dict[tuple[str, str], ModelRun] = {}
    for run, _ in rows:
        if (run.model, run.protocol) in keys:
            found.setdefault((run.model, run.protocol), run)
    return found
