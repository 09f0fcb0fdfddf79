"""`evaluate`: score stored model runs against references, fold in robustness runs, and store the result.

Rescoring never runs a model: it reads the stored predictions, so scoring every run again after a labeling round
costs seconds. Every input is checked before anything is written; a bad request stores nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.engine import session_scope
from db.models import Dataset, utcnow
from evaluator.paired import resamples_kept
from relabel import __version__
from relabel.common.errors import InputError
from relabel.common.stages import stage
from relabel.common.workspace import dataset_vocabulary, get_dataset
from relabel.evaluation.compare import build_outcomes, common_ranking, coverage_warnings, paired_scores
from relabel.evaluation.dataset_scores import dataset_seed
from relabel.evaluation.label_changes import label_changes
from relabel.evaluation.label_sensitivity import label_sensitivity
from relabel.evaluation.published import score_published
from relabel.evaluation.references import Reference, default_reference_specs, load_reference, workspace_cache_dir
from relabel.evaluation.reliability import build_reliability
from relabel.evaluation.results import Evaluation
from relabel.evaluation.runs import failure_warnings, load_run, select_runs
from relabel.evaluation.scoring import score_run
from relabel.evaluation.storage import latest_robustness, store_evaluation
from relabel.evaluation.tasks import score_tasks, task_runs


def evaluate(
    engine: Engine,
    dataset: str | None = None,
    *,
    runs: Sequence[str] | None = None,
    references: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    metrics: Sequence[str] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    store: bool = True,
    show_progress: bool = False,
) -> Evaluation:
    """Score `runs` (default: every run of the dataset) against `references` (specs as in
    `relabel.evaluation.references`; default: ImGT and the newest snapshot), and store the evaluation.

    `weights` maps P, CDC, RR, E to the weights of the reliability table's overall score (default equal). `metrics` adds
    published metrics (`relabel.evaluation.published`, e.g. "shankar"). Every top-1 has its Wilson interval;
    `n_boot` bootstrap resamples give the paired intervals against the first reference and the rank intervals
    (0: none). Raises InputError, nothing stored, for an empty reference or a run without
    a prediction on a reference's labelled images. `show_progress`: each step's line on stderr
    (`relabel.common.stages`).
    """
    if n_boot < 0:
        raise InputError(f"--boot must be ≥ 0, got {n_boot}")
    # resamples kept: the expected top-1 and the label-noise sensitivity draw from the same images many times, and
    # a file workspace keeps them in its cache for the next evaluation (they depend on the image count and seed only)
    with session_scope(engine) as s, resamples_kept(workspace_cache_dir(s)):
        ds = get_dataset(s, dataset)
        drawn = dataset_seed(seed, ds)  # every resample of the dataset's images, reliability's included
        with stage(f"reading the references and runs of dataset {ds.name!r}", enabled=show_progress):
            specs = list(dict.fromkeys(references or default_reference_specs(s, ds)))
            refs = _unique_names([load_reference(s, ds, spec) for spec in specs])
            by_classes, by_task = task_runs(select_runs(s, ds, runs))  # pope and caption runs: their own tables
            loaded = [load_run(s, r) for r in by_classes]
        with stage(f"scoring {len(loaded)} run(s) × {len(refs)} reference(s)", enabled=show_progress):
            scores = [score_run(run, ref, n_boot=n_boot, seed=drawn) for run in loaded for ref in refs]
            outcomes = build_outcomes(loaded, refs)
            paired = paired_scores(outcomes, n_boot=n_boot, seed=drawn)
            scores = [replace(sc, paired=paired.get((sc.run, sc.reference))) for sc in scores]
            ranking = common_ranking(outcomes, n_boot=n_boot, seed=drawn)
            published = score_published(s, ds, metrics, loaded, n_boot=n_boot, seed=drawn) if metrics else []
        run_infos = [r.info for r in loaded]
        expected = {(sc.run, sc.reference): sc.uncertain for sc in scores}  # read again by the sensitivity
        with stage("reliability (P, CDC, RR, E)", enabled=show_progress):
            robustness = latest_robustness(s, {r.model for r in run_infos})
            reliability = build_reliability(s, ds, loaded, refs, weights=weights, n_boot=n_boot, seed=seed)
        with stage("label sensitivity and what each difference is made of", enabled=show_progress):
            sensitivity = label_sensitivity(s, ds, loaded, refs, n_boot=n_boot, seed=drawn, expected=expected)
            changes = label_changes(outcomes, refs, _class_names(s, ds), n_boot=n_boot, seed=drawn)
            tasks = score_tasks(s, by_task, refs, n_boot=n_boot, seed=drawn)
        evaluation = Evaluation(
            dataset=ds.name,
            created_at=utcnow(),
            tool_version=__version__,
            references=[r.info for r in refs],
            runs=run_infos,
            scores=scores,
            ranking=ranking.shift if ranking else None,
            reliability=reliability,
            robustness=list(robustness.values()),
            n_boot=n_boot,
            seed=seed,
            ranking_images=ranking.n_images if ranking else 0,
            rank_intervals=ranking.intervals if ranking else (),
            warnings=[*(w for r in run_infos for w in failure_warnings(r)), *coverage_warnings(outcomes, refs)],
            published=published,
            label_sensitivity=sensitivity,
            label_changes=changes,
            outcomes=outcomes,
            tasks=tasks,
        )
        if store:
            store_evaluation(s, ds, evaluation)
    return evaluation


def _class_names(session: Session, dataset: Dataset) -> list[str]:
    return [c.name for c in dataset_vocabulary(session, dataset).classes]


def _unique_names(refs: list[Reference]) -> list[Reference]:
    """Two specs may name one reference (`latest` and `snapshot:x`): keep it once; refuse a clash of names."""
    out: dict[str, Reference] = {}
    for ref in refs:
        other = out.get(ref.name)
        if other is not None and other.info != ref.info:
            raise InputError(f"two references are called {ref.name!r}; write source:{ref.name} or snapshot:{ref.name}")
        out.setdefault(ref.name, ref)
    return list(out.values())
