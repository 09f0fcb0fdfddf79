"""The reliability table, after ARGUS: one row per run of the evaluated dataset (a model read through a protocol).

Only CDC's formula follows the ARGUS authors; P, RR, E, the label-noise sensitivity, the weights and the overall
score are this project's definitions (`METHOD`, printed with every table). The maths is in
`evaluator.model_reliability`; which scores enter is decided here and in `dataset_scores`:

- P: top-1 on the evaluated dataset, on the images the run scored, against the cleanest of the references the
  command named (`dataset_scores.ReferenceChoice`; MC: against ImGT, which its options were built from). Rows are
  ranked against the rows of their task only: a four-option MC accuracy is not comparable with a choice among all
  classes.
- CDC: over the model's top-1 on two or more different datasets of the workspace (e.g. ImageNet val, ImageNetV2,
  a domain set), each on the images that run scored there; the model is found on another dataset by model name and
  protocol. With one dataset CDC is unknown, never 1.
- label-noise sensitivity (not a part of the overall score): top-1 against P's reference minus top-1 against
  ImGT, on the images the run scored under both, with a paired bootstrap interval. Signed: positive when the model
  scores higher against the cleaner reference; it nets multi-label leniency, ImGT's wrong labels and the labels the
  reference drops (`relabel.evaluation.label_changes` takes it apart), so it is not ImGT's label noise alone.
- RR and E: from the latest robustness run of the same model and protocol (`relabel evaluate robustness`;
  `reliability_robustness`). E is against fixed budgets (`evaluator.model_reliability.BUDGETS`), so a model's E
  never depends on the other rows.
- intervals of CDC, RR, the overall score and the ranks: one joint bootstrap per task (`reliability_intervals`).

A row stands alone: every part of it (P, its interval, CDC and the top-1 behind it, the label-noise sensitivity,
RR, E, the overall score and its interval) is a function of that run's predictions and the named references only,
bit for bit the same whatever other runs are evaluated beside it. Comparisons across rows (the ranks by P and by
overall, Kendall's tau, places gained and their intervals) are on the task's common images, the images every
ranked row scored (`reliability_ranks`): P is recomputed there for ranking only, and their number is printed beside
the table.

A part that cannot be computed is unknown (None), never 0 or 1: the overall score needs every part whose weight
is not 0, so a model is never rewarded or punished for a measurement nobody took.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict

import numpy as np
from sqlmodel import Session

from db.models import Dataset
from evaluator.intervals import wilson_interval
from evaluator.model_reliability import BUDGETS, consistency_of_resamples, cross_dataset_consistency
from evaluator.paired import paired_many
from evaluator.reliability_parts import parts
from relabel.common.errors import InputError
from relabel.evaluation.dataset_scores import (
    CLASSES,
    ReferenceChoice,
    ReferenceOutcomes,
    dataset_seed,
    matching_runs,
    other_datasets,
    reference_outcomes,
    task_of,
)
from relabel.evaluation.references import Reference
from relabel.evaluation.reliability_intervals import interval, uncertainty
from relabel.evaluation.reliability_ranks import TaskImages, complete_weights, default_weights, rank_rows, weight_names
from relabel.evaluation.reliability_robustness import with_robustness
from relabel.evaluation.results import DatasetScore, NoiseSensitivity, ReliabilityRow, ReliabilityTable
from relabel.evaluation.runs import RunPredictions, load_run

TITLE = "Reliability, after ARGUS"
METHOD = (
    "Reliability, after ARGUS: only the formula of cross-dataset consistency (CDC) is the ARGUS authors'; "
    "capability (P), robustness retention (RR), efficiency (E), the label-noise sensitivity, the weights and the "
    "overall score are defined by this project (relabel), in the spirit of ARGUS."
)
DEFINITIONS = {
    "capability": "P (defined here): top-1 on the evaluated dataset against the cleanest of the references the "
    "command named (--reference; default ImGT and the newest snapshot): a named snapshot (the newest of them), else "
    "the named prior labelling the most images, else ImGT; MC against ImGT only; a reference not named never "
    "enters; on the images the run scored (n_images), whatever other runs are evaluated; one protocol per row",
    "consistency": "CDC (ARGUS formula): 1 - mean_i |a_i - mean(a)| / mean(a) over the model's top-1 a_i on 2 or "
    "more different datasets of the workspace (same model name and protocol), each on the images that run scored "
    "there (datasets: dataset, reference, n_images, accuracy), against the reference of P's spec there, else that "
    "dataset's ImGT; clipped to [0, 1]; unknown with one dataset",
    "noise": "label-noise sensitivity (defined here, not in the overall score): top-1 against P's reference minus "
    "top-1 against ImGT (when named) on the images the run scored under both, with a 95 % paired bootstrap "
    "interval; positive: the model scores higher against that reference than against ImGT on the same images, "
    "which nets multi-label leniency, images where ImGT's label is wrong and images whose ImGT label the reference "
    "drops (the report takes it apart), so it is not ImGT's label noise alone",
    "robustness": "RR (defined here): mean over perturbations x severities of min(perturbed top-1 / clean top-1, "
    "1), from the latest robustness run of the same model and protocol, against ImGT; robustness_ci: 95 % "
    "percentile interval over resamples of that run's images (clean and perturbed with the same images), null for a "
    "run stored without per-image outcomes",
    "efficiency": "E (defined here): mean over the measures known for the model of budget / (budget + value) "
    "against fixed budgets (see budgets; 0.5 at the budget); unknown measures (memory and FLOPs of a model behind "
    "an API) enter no term; independent of the other models",
    "overall": "weighted mean of the row's own {parts} (weights shown, normalised to sum 1); only for rows "
    "whose weighted parts are all known; overall_ci: 95 % percentile interval over resamples of the row's own "
    "images (E held fixed, a measurement)",
    "ranks": "rank_by_capability, rank_by_overall, Kendall's tau and places gained are among the rows of the same "
    "task with an overall score, on the task's common images (common: the images every one of them scored, with "
    "their n): capability_common is P there, and the overall score used to rank is the weighted mean with "
    "capability_common in place of P; a row's own numbers never change; rank_by_capability_ci, "
    "rank_by_overall_ci, shift_ci: 95 % percentile intervals over joint resamples (every row of the task with the "
    "same draws)",
}


def definitions() -> dict[str, str]:
    """`DEFINITIONS`, with the help line of each registered part they do not define, before the overall score,
    whose definition names the registered parts."""
    added = {p.name: f"{p.symbol}: {p.help}" for p in parts() if p.name not in DEFINITIONS}
    head = {k: v for k, v in DEFINITIONS.items() if k not in ("overall", "ranks")}
    *first, last = [p.symbol for p in parts()]
    named = f"{', '.join(first)} and {last}" if first else last
    return {**head, **added, "overall": DEFINITIONS["overall"].format(parts=named), "ranks": DEFINITIONS["ranks"]}


def parse_weights(text: str | None) -> dict[str, float]:
    """`P=1,CDC=1,RR=0.5,E=0` as a dict keyed by the parts' symbols (`evaluator.reliability_parts.RELIABILITY_PARTS`);
    parts not named keep weight 1. Raises InputError for a bad entry."""
    names = weight_names()
    weights = default_weights()
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip().upper()
        if not sep or key not in names:
            raise InputError(f"weight {item.strip()!r}: expected NAME=NUMBER with NAME one of {', '.join(names)}")
        try:
            weights[key] = float(value)
        except ValueError:
            raise InputError(f"weight {item.strip()!r}: {value.strip()!r} is not a number") from None
        if not math.isfinite(weights[key]) or weights[key] < 0:
            raise InputError(f"weight {item.strip()!r} must be a finite number ≥ 0")
    if not any(weights.values()):
        raise InputError("weights are all 0; give at least one part a positive weight")
    return weights


def build_reliability(
    session: Session,
    dataset: Dataset,
    runs: Sequence[RunPredictions],
    references: Sequence[Reference],
    *,
    weights: Mapping[str, float] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> ReliabilityTable:
    """The reliability table of `runs` (runs of `dataset`) against the cleanest of `references` (those the command
    named); `n_boot` resamples give the intervals of CDC, RR, the label-noise sensitivity, the overall score and
    the ranks (0: none; `reliability_intervals`). `weights` are keyed by the parts' symbols (P, CDC, RR, E); a part
    they do not name has weight 1, as on the command line."""
    weights = complete_weights(weights)
    by_task: dict[str, dict[str, RunPredictions]] = {}
    for run in runs:
        by_task.setdefault(task_of(run.info.protocol), {})[run.info.name] = run
    choice = ReferenceChoice(session, dataset, references)
    rows: list[ReliabilityRow] = []
    notes: list[str] = []
    anchors: dict[str, TaskImages] = {}
    for task, members in by_task.items():
        task_rows, anchor = _task_rows(session, dataset, task, members, choice, n_boot, seed, notes)
        rows += task_rows
        if anchor is not None:
            anchors[task] = TaskImages(anchor, dataset_seed(seed, dataset))
    rows = with_robustness(session, rows, notes, n_boot, seed)
    ranked = rank_rows(rows, anchors, weights, notes, n_boot)
    return ReliabilityTable(
        tuple(ranked.rows), dict(weights), ranked.kendall_tau, tuple(notes), TITLE, METHOD, asdict(BUDGETS),
        uncertainty(n_boot), definitions(), ranked.common,
    )  # fmt: skip


Scored = tuple[ReferenceOutcomes, np.ndarray | None]  # a dataset's outcomes, and the row's resampled top-1 there


def _task_rows(
    session: Session,
    dataset: Dataset,
    task: str,
    members: dict[str, RunPredictions],
    choice: ReferenceChoice,
    n_boot: int,
    seed: int,
    notes: list[str],
) -> tuple[list[ReliabilityRow], ReferenceOutcomes | None]:
    """P, the label-noise sensitivity and CDC of the runs of one task, each on its own images, with their
    resamples; and the task's outcomes on the evaluated dataset (for the ranks)."""
    reference = choice.for_task(task)
    if reference is None:
        notes.append(f"P unknown for {', '.join(members)}: {_missing(dataset, task)}")
        return [_row(run, task, []) for run in members.values()], None
    if task != CLASSES:
        notes.append(f"{task} runs are scored against {reference.name} only: their options were built around it")
    anchor = reference_outcomes(dataset.name, reference, members)
    others = _other_scores(session, dataset, task, members, choice)
    per_key: dict[str, list[Scored]] = {key: [] for key in members}
    for other, found in [(dataset, anchor), *others]:
        resampled = found.resample(list(found.scored), n_boot, dataset_seed(seed, other))
        for key in found.scored:
            # the evaluated dataset comes first: a run without P there has no CDC either
            if other is dataset or per_key[key]:
                per_key[key].append((found, resampled.get(key)))
    noise = _noise_of(dataset, task, members, anchor, choice, n_boot, dataset_seed(seed, dataset), notes)
    rows = [_row(run, task, per_key[key], noise.get(key), n_boot > 0) for key, run in members.items()]
    return rows, anchor


def _missing(dataset: Dataset, task: str) -> str:
    if task != CLASSES:
        return f"{task} runs are scored against imgt only, and imgt is not among the references (--reference imgt)"
    return f"no reference of dataset {dataset.name!r} was named to score against"


def _noise_of(
    dataset: Dataset,
    task: str,
    members: dict[str, RunPredictions],
    anchor: ReferenceOutcomes,
    choice: ReferenceChoice,
    n_boot: int,
    seed: int,
    notes: list[str],
) -> dict[str, NoiseSensitivity]:
    """The label-noise sensitivity of each run of a CLASSES task, or a note saying why it is unknown."""
    if task != CLASSES:
        return {}
    imgt = choice.imgt()
    if imgt is None or anchor.reference == imgt.name:
        why = "imgt is not among the references" if imgt is None else "no named reference is cleaner than imgt"
        notes.append(f"label-noise sensitivity unknown on dataset {dataset.name!r}: {why} (name one with --reference)")
        return {}
    return _noise(reference_outcomes(dataset.name, imgt, members), anchor, n_boot, seed)


def _other_scores(
    session: Session, dataset: Dataset, task: str, members: dict[str, RunPredictions], choice: ReferenceChoice
) -> list[tuple[Dataset, ReferenceOutcomes]]:
    """The same models and protocols on every other dataset of the workspace that has runs of them."""
    rows_of: dict[tuple[str, str], list[str]] = {}
    for name, r in members.items():
        rows_of.setdefault((r.info.model, r.info.protocol), []).append(name)
    out = []
    for other in other_datasets(session, dataset):
        found = matching_runs(session, other, set(rows_of))
        reference = choice.on_other(other, task) if found else None
        if reference is None:
            continue
        loaded = {key: load_run(session, run) for key, run in found.items()}
        by_row = {name: loaded[key] for key in loaded for name in rows_of[key]}
        out.append((other, reference_outcomes(other.name, reference, by_row)))
    return out


def _noise(
    under_imgt: ReferenceOutcomes, cleaner: ReferenceOutcomes, n_boot: int, seed: int
) -> dict[str, NoiseSensitivity]:
    """Top-1 against the cleaner reference minus against ImGT, per run, on the images the run scored under both;
    each run's paired interval drawn on its own (from `seed`), so no row depends on another."""
    out = {}
    for key in (k for k in cleaner.scored if k in under_imgt.scored):
        b_ids = cleaner.image_ids[cleaner.scored[key]]
        ids = np.intersect1d(b_ids, under_imgt.image_ids[under_imgt.scored[key]], assume_unique=True)
        if not len(ids):
            continue
        a = under_imgt.correct[key][np.searchsorted(under_imgt.image_ids, ids)]
        b = cleaner.correct[key][np.searchsorted(cleaner.image_ids, ids)]
        d = paired_many(a[None], b[None], n_boot=n_boot, seed=seed).row(0)
        out[key] = NoiseSensitivity(
            cleaner.reference, d.n_common, d.accuracy_a, d.accuracy_b, d.difference, d.ci_low, d.ci_high
        )
    return out


def _row(
    run: RunPredictions,
    task: str,
    scored: Sequence[Scored],
    noise: NoiseSensitivity | None = None,
    with_interval: bool = False,
) -> ReliabilityRow:
    """The row of `run`: P from the first of `scored` (the evaluated dataset), CDC over all of them."""
    info = run.info
    row = ReliabilityRow(info.name, info.model, info.protocol, task, None, None, None, None, noise=noise)
    if not scored:
        return row
    datasets = tuple(_dataset_score(s, info.name, with_interval) for s, _ in scored)
    anchor = datasets[0]
    p_ci = (anchor.ci_low, anchor.ci_high) if anchor.ci_low is not None and anchor.ci_high is not None else None
    cdc, cdc_ci = None, None
    resampled = [r for _, r in scored if r is not None]
    kept = {"capability": scored[0][1]} if scored[0][1] is not None else {}
    if len(datasets) >= 2:
        cdc = cross_dataset_consistency([d.accuracy for d in datasets])
        if len(resampled) == len(datasets):
            kept["consistency"] = consistency_of_resamples(np.stack(resampled, axis=1))
            cdc_ci = interval(kept["consistency"])
    return ReliabilityRow(info.name, info.model, info.protocol, task, anchor.accuracy, cdc, None, None,
                          reference=anchor.reference, n_images=anchor.n_images, capability_ci=p_ci,
                          consistency_ci=cdc_ci, datasets=datasets, noise=noise, resampled=kept)  # fmt: skip


def _dataset_score(scores: ReferenceOutcomes, key: str, with_interval: bool) -> DatasetScore:
    """One dataset's top-1 of a row on the images the run scored there, with its Wilson interval (a single
    proportion: never degenerate at 0 or n)."""
    n, right = scores.n_images(key), int(np.count_nonzero(scores.correct[key]))
    low, high = (float(v[()]) for v in wilson_interval(right, n)) if with_interval else (None, None)
    return DatasetScore(scores.dataset, scores.runs.get(key, key), scores.reference, n, right / n, low, high)
