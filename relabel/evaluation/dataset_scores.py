"""Scores for the reliability table: runs of one dataset against one reference, each on its own images.

Which reference a row is scored against (`ReferenceChoice`) is decided only among the references the command
named (`--reference`; by default ImGT and the newest snapshot, `references.default_reference_specs`); a snapshot
or prior the command did not name never enters:

- a protocol that builds its question around a reference (`needs_reference` in the protocol registry: MC, whose
  options are drawn around the ImGT label) is scored against ImGT only. Against another reference the right
  class may not be among the options it offered, so the score would measure the options, not the model;
- every other run (ranked scores, cw, cwplus, ow, imported predictions) against the cleanest of the named
  references, in this order: a named snapshot (the newest of them), else the named prior (ReaL, Shankar, ...)
  that labels the most images (ties by name), else ImGT;
- on another dataset of the workspace (for CDC) a row is scored against the reference of the same spec there
  (`imgt`, `source:real`, `snapshot:NAME`) when that dataset has it, else against that dataset's ImGT.

Each run is scored on its own images (predicted, with a non-empty reference set, and not an error of the
infrastructure): a row never depends on which other runs are evaluated beside it. Comparisons across rows (ranks)
use the images every compared run scored (`ReferenceOutcomes.common`), and say how many. A model is found on
another dataset by its model name and protocol.

Resamples: every run's top-1 is resampled over the same draws of the reference's images (`row_resamples`, seeded
per dataset by `dataset_seed`; the draws depend on the reference's image count and the seed only), each run on its
own scored images within a draw. So a row's resamples are the same whatever other rows exist, and rows are still
resampled jointly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, select
from sqlmodel import Session, col

from db.models import Dataset, ModelRun, Prediction, Snapshot
from evaluator import EvaluationError, LabelSets
from evaluator.scoring import image_outcomes
from relabel.common.errors import RelabelError
from relabel.common.workspace import IMGT
from relabel.evaluation.references import SNAPSHOT, SOURCE, Reference, load_reference
from relabel.evaluation.row_resamples import resample_top1
from relabel.evaluation.runs import RunPredictions, align
from relabel.suggest.protocols import PROTOCOLS

DATASET_SEED_SHIFT = 32  # dataset k's resamples are seeded with seed + (k − 1)·2^32 (`dataset_seed`)
CLASSES = "classes"  # the task of every protocol that chooses among the dataset's classes
TOPK = "topk"


def dataset_seed(seed: int, dataset: Dataset) -> int:
    """The seed of every resample of `dataset`'s images. Datasets are independent samples, so each draws its own
    (dataset k: seed + (k − 1)·2^32, the first dataset the seed itself), and every statistic of one dataset (the
    expected top-1, the label sensitivity, P and the ranks) reads the same resamples of its images: a set of
    draws depends on the image count and this seed only, so it is drawn once and kept."""
    return int(seed) + ((int(dataset.id or 1) - 1) << DATASET_SEED_SHIFT)


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


@dataclass(frozen=True, eq=False)
class ReferenceOutcomes:
    """Runs (keyed by their row) of one dataset against one reference, placed on the reference's `image_ids`:
    which images each run scored and got right. Every statistic of a key reads that key's masks only."""

    dataset: str
    reference: str
    image_ids: np.ndarray  # (n,) the reference's images, sorted: what every resample draws from
    scored: dict[str, np.ndarray]  # key -> (n,) bool, for the keys that scored any image
    correct: dict[str, np.ndarray]  # key -> (n,) bool, False where not scored
    runs: dict[str, str]  # key -> the name of its run on this dataset

    def n_images(self, key: str, where: np.ndarray | None = None) -> int:
        """Images `key` scored (within `where`, a (n,) bool mask, when given); 0 for a key that scored none."""
        if key not in self.scored:
            return 0
        return int(np.count_nonzero(self.scored[key] if where is None else self.scored[key] & where))

    def accuracy(self, key: str, where: np.ndarray | None = None) -> float | None:
        """Top-1 of `key` on its own scored images (within `where`); None when there are none."""
        n = self.n_images(key, where)
        if not n:
            return None
        right = self.correct[key] if where is None else self.correct[key] & where
        return int(np.count_nonzero(right)) / n

    def common(self, keys: Sequence[str]) -> np.ndarray:
        """(n,) bool: the images every one of `keys` scored (none for a key that scored nothing)."""
        mask = np.ones(len(self.image_ids), bool)
        for key in keys:
            mask &= self.scored.get(key, np.zeros(len(self.image_ids), bool))
        return mask

    def resample(
        self, keys: Sequence[str], n_boot: int, seed: int, where: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Each key's top-1 over `n_boot` resamples of the reference's images, (n_boot,) each, on its own scored
        images (within `where`). The draws depend on the image count and `seed` only, so a key's values are the
        same whatever other keys are asked (its sums are exact integers in float32). {} when n_boot = 0."""
        keys = [k for k in keys if self.n_images(k, where)]
        if not n_boot or not keys:
            return {}
        values = np.stack([self.correct[k] for k in keys])
        mask = np.stack([self.scored[k] if where is None else self.scored[k] & where for k in keys])
        means = resample_top1(values, mask, n_boot, seed)
        return {k: means[:, i] for i, k in enumerate(keys)}


def reference_outcomes(dataset: str, reference: Reference, runs: Mapping[str, RunPredictions]) -> ReferenceOutcomes:
    """Top-1 outcomes of each of `runs` against `reference`, each on the images it scored (runs that scored none
    are left out of `scored`)."""
    n = len(reference.image_ids)
    scored: dict[str, np.ndarray] = {}
    correct: dict[str, np.ndarray] = {}
    for key, run in runs.items():
        found = outcomes(run, reference)
        if not len(found.image_ids):
            continue
        at = np.searchsorted(reference.image_ids, found.image_ids)
        scored[key], correct[key] = np.zeros(n, bool), np.zeros(n, bool)
        scored[key][at], correct[key][at] = True, found.correct
    return ReferenceOutcomes(dataset, reference.name, reference.image_ids, scored, correct,
                             {key: run.info.name for key, run in runs.items()})  # fmt: skip


def spec_of(reference: Reference) -> str:
    """The spec that names `reference` on any dataset: imgt, source:NAME or snapshot:NAME."""
    if reference.info.kind == "snapshot":
        return f"{SNAPSHOT}{reference.name}"
    return IMGT if reference.info.kind == "original" else f"{SOURCE}{reference.name}"


class ReferenceChoice:
    """The references the table reads (module docstring): on the evaluated dataset only those the command named,
    on another dataset the same spec there, else its ImGT; each loaded once."""

    def __init__(self, session: Session, dataset: Dataset, named: Sequence[Reference]) -> None:
        self.session, self.dataset = session, dataset
        self.named = {spec_of(r): r for r in named}
        self._loaded: dict[tuple[int, str], Reference | None] = {}

    def for_task(self, task: str) -> Reference | None:
        """ImGT for a task built around it (MC), else the cleanest named reference; None when none is named."""
        return self.imgt() if task != CLASSES else self.cleanest()

    def imgt(self) -> Reference | None:
        """ImGT of the evaluated dataset when the command named it."""
        return self.named.get(IMGT)

    def cleanest(self) -> Reference | None:
        """A named snapshot (the newest), else the named prior labelling the most images, else ImGT."""
        snaps = [s for s in self.named if s.startswith(SNAPSHOT)]
        if snaps:
            return self.named[_newest(self.session, self.dataset, [s[len(SNAPSHOT) :] for s in snaps])]
        priors = sorted((s for s in self.named if s.startswith(SOURCE)),
                        key=lambda s: (-self.named[s].info.n_labelled, s))  # fmt: skip
        return self.named[priors[0]] if priors else self.imgt()

    def on_other(self, other: Dataset, task: str) -> Reference | None:
        """What a row of `task` is scored against on `other`: the same spec as on the evaluated dataset when
        `other` has it (ImGT for MC), else `other`'s ImGT; None when it has neither."""
        own = self.for_task(task)
        specs = [spec_of(own)] if own is not None else []
        return self._first(other, [*specs, IMGT])

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


def _newest(session: Session, dataset: Dataset, names: list[str]) -> str:
    """The spec of the newest of the snapshots `names` of `dataset`."""
    newest = session.scalars(
        select(col(Snapshot.name))
        .where(col(Snapshot.dataset_id) == dataset.id, col(Snapshot.name).in_(names))
        .order_by(col(Snapshot.created_at).desc(), col(Snapshot.id).desc())
    ).first()
    return f"{SNAPSHOT}{newest if newest is not None else sorted(names)[0]}"


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
