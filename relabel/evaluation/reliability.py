"""The reliability table, after ARGUS: one row per run of the evaluated dataset (a model read through a protocol).

Only CDC's formula follows the ARGUS authors; P, RR, E, the label-noise sensitivity, the weights and the overall
score are this project's definitions (`METHOD`, printed with every table). The maths is in
`evaluator.model_reliability`; which scores enter is decided here and in `dataset_scores`:

- P: top-1 on the evaluated dataset, on the images every compared run of the same task scored, against the
  dataset's cleanest reference (MC: against ImGT, which its options were built from). Rows are ranked against the
  rows of their task only: a four-option MC accuracy is not comparable with a choice among all classes.
- CDC: over the model's top-1 on two or more different datasets of the workspace (e.g. ImageNet val, ImageNetV2,
  a domain set), each scored as P is; the model is found on another dataset by model name and protocol. With one
  dataset CDC is unknown, never 1.
- label-noise sensitivity (not a part of the overall score): top-1 against the cleanest reference minus top-1
  against ImGT, on the same images, with a paired bootstrap interval. Signed: positive when the model gains once
  ImGT's label noise is removed.
- RR and E: from the latest robustness run of the same model and protocol (`relabel evaluate robustness`;
  `reliability_robustness`). E is against fixed budgets (`evaluator.model_reliability.BUDGETS`), so a model's E
  never depends on the other rows.
- intervals of CDC, RR, the overall score and the ranks: one joint bootstrap per task (`reliability_intervals`).

A part that cannot be computed is unknown (None), never 0 or 1: the overall score needs every part whose weight
is not 0, so a model is never rewarded or punished for a measurement nobody took.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, replace

import numpy as np
from sqlmodel import Session

from db.models import Dataset
from evaluator.intervals import wilson_interval
from evaluator.model_reliability import (
    BUDGETS,
    PARTS,
    ReliabilityParts,
    compare_rankings,
    consistency_of_resamples,
    cross_dataset_consistency,
    overall,
)
from evaluator.paired import paired_many
from relabel.errors import InputError
from relabel.evaluation.dataset_scores import (
    CLASSES,
    CommonScores,
    ReferenceCache,
    common_scores,
    coverage_note,
    matching_runs,
    other_datasets,
    restrict,
    task_of,
)
from relabel.evaluation.reliability_intervals import interval, uncertainty, with_overall_intervals
from relabel.evaluation.reliability_robustness import with_robustness
from relabel.evaluation.results import (
    DatasetScore,
    NoiseSensitivity,
    ReliabilityRow,
    ReliabilityTable,
)
from relabel.evaluation.runs import RunPredictions, load_run
from relabel.workspace import IMGT

TITLE = "Reliability, after ARGUS"
METHOD = (
    "Reliability, after ARGUS: only the formula of cross-dataset consistency (CDC) is the ARGUS authors'; "
    "capability (P), robustness retention (RR), efficiency (E), the label-noise sensitivity, the weights and the "
    "overall score are defined by this project (relabel), in the spirit of ARGUS."
)
WEIGHT_NAMES = {"P": "capability", "CDC": "consistency", "RR": "robustness", "E": "efficiency"}
DEFAULT_WEIGHTS = {"P": 1.0, "CDC": 1.0, "RR": 1.0, "E": 1.0}
DEFINITIONS = {
    "capability": "P (defined here): top-1 on the evaluated dataset against its cleanest reference (newest "
    "snapshot, else the prior labelling the most images, else ImGT; MC against ImGT only), on the images every "
    "compared run of the same task scored; one protocol per row",
    "consistency": "CDC (ARGUS formula): 1 - mean_i |a_i - mean(a)| / mean(a) over the model's top-1 a_i on 2 or "
    "more different datasets of the workspace (same model name and protocol, each scored as P), clipped to "
    "[0, 1]; unknown with one dataset",
    "noise": "label-noise sensitivity (defined here, not in the overall score): top-1 against the cleanest "
    "reference minus top-1 against ImGT on the same images, with a 95 % paired bootstrap interval; positive: the "
    "model gains when ImGT's label noise is removed",
    "robustness": "RR (defined here): mean over perturbations x severities of min(perturbed top-1 / clean top-1, "
    "1), from the latest robustness run of the same model and protocol, against ImGT; robustness_ci: 95 % "
    "percentile interval over resamples of that run's images (clean and perturbed with the same images), null for a "
    "run stored without per-image outcomes",
    "efficiency": "E (defined here): mean over the measures known for the model of budget / (budget + value) "
    "against fixed budgets (see budgets; 0.5 at the budget); unknown measures (memory and FLOPs of a model behind "
    "an API) enter no term; independent of the other models",
    "overall": "weighted mean of P, CDC, RR and E (weights shown, normalised to sum 1); only for rows whose "
    "weighted parts are all known; ranks are among rows of the same task; overall_ci, rank_by_capability_ci, "
    "rank_by_overall_ci, shift_ci: 95 % percentile intervals over joint resamples (P, CDC and RR of every row of "
    "the task resampled together, each on its own images; E held fixed, a measurement)",
}


def parse_weights(text: str | None) -> dict[str, float]:
    """`P=1,CDC=1,RR=0.5,E=0` as a dict; parts not named keep weight 1. Raises InputError for a bad entry."""
    weights = dict(DEFAULT_WEIGHTS)
    for item in (text or "").split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip().upper()
        if not sep or key not in WEIGHT_NAMES:
            raise InputError(
                f"weight {item.strip()!r}: expected NAME=NUMBER with NAME one of {', '.join(WEIGHT_NAMES)}"
            )
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
    *,
    weights: Mapping[str, float] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> ReliabilityTable:
    """The reliability table of `runs` (runs of `dataset`); `n_boot` joint bootstrap resamples give the intervals
    of CDC, RR, the label-noise sensitivity, the overall score and the ranks (0: none; `reliability_intervals`)."""
    weights = dict(weights or DEFAULT_WEIGHTS)
    by_task: dict[str, dict[str, RunPredictions]] = {}
    for run in runs:
        by_task.setdefault(task_of(run.info.protocol), {})[run.info.name] = run
    refs = ReferenceCache(session)
    rows: list[ReliabilityRow] = []
    notes: list[str] = []
    # P's resamples are only needed for the overall score: CDC (weight > 0) needs a second dataset, which
    # resamples the evaluated one anyway
    p_alone = weights["CDC"] == 0
    for task, members in by_task.items():
        rows += _task_rows(session, dataset, task, members, refs, n_boot, seed, notes, p_alone)
    rows = with_robustness(session, rows, notes, n_boot, seed)
    return _rank(rows, weights, notes, n_boot)


Scored = tuple[CommonScores, np.ndarray | None]  # a dataset's scores, and the row's resampled top-1 there (CDC)


def _task_rows(
    session: Session,
    dataset: Dataset,
    task: str,
    members: dict[str, RunPredictions],
    refs: ReferenceCache,
    n_boot: int,
    seed: int,
    notes: list[str],
    p_alone: bool = False,
) -> list[ReliabilityRow]:
    """P, the label-noise sensitivity and CDC of the runs of one task, with their resamples (P's only with
    another dataset or `p_alone`)."""
    reference = refs.for_task(dataset, task)
    if reference is None:
        notes.append(f"P unknown for {', '.join(members)}: dataset {dataset.name!r} has no reference to score against")
        return [_row(run, task, []) for run in members.values()]
    if task != CLASSES:
        notes.append(f"{task} runs are scored against {reference.name} only: their options were built around it")
    anchor = common_scores(dataset.name, reference, members)
    others = _other_scores(session, dataset, task, members, refs)
    per_key: dict[str, list[Scored]] = {key: [] for key in members}
    for other, found in [(dataset, anchor), *others]:
        shown = None if other is dataset else {k: f"{k} ({found.runs[k]} on {other.name})" for k in found.n_scored}
        note = coverage_note(found, shown)
        notes += [note] if note else []
        resampled = found.resample(n_boot, _seed(seed, other)) if others or p_alone else {}
        for key in found.correct:
            # the evaluated dataset comes first: a run without P there has no CDC either
            if found.accuracy(key) is not None and (other is dataset or per_key[key]):
                per_key[key].append((found, resampled.get(key)))
    noise: dict[str, NoiseSensitivity] = {}
    if task == CLASSES:
        imgt = refs.imgt(dataset)
        if reference.name == IMGT or imgt is None:
            notes.append(f"label-noise sensitivity unknown: dataset {dataset.name!r} has no snapshot or prior "
                         "cleaner than ImGT")  # fmt: skip
        else:
            noise = _noise(common_scores(dataset.name, imgt, members), anchor, n_boot, seed)
    return [_row(run, task, per_key[key], noise.get(key), n_boot > 0) for key, run in members.items()]


def _other_scores(
    session: Session, dataset: Dataset, task: str, members: dict[str, RunPredictions], refs: ReferenceCache
) -> list[tuple[Dataset, CommonScores]]:
    """The same models and protocols on every other dataset of the workspace that has runs of them."""
    rows_of: dict[tuple[str, str], list[str]] = {}
    for name, r in members.items():
        rows_of.setdefault((r.info.model, r.info.protocol), []).append(name)
    out = []
    for other in other_datasets(session, dataset):
        found = matching_runs(session, other, set(rows_of))
        reference = refs.for_task(other, task) if found else None
        if reference is None:
            continue
        loaded = {key: load_run(session, run) for key, run in found.items()}
        by_row = {name: loaded[key] for key in loaded for name in rows_of[key]}
        out.append((other, common_scores(other.name, reference, by_row)))
    return out


def _noise(under_imgt: CommonScores, cleaner: CommonScores, n_boot: int, seed: int) -> dict[str, NoiseSensitivity]:
    """Top-1 against the cleaner reference minus against ImGT, per run, on P's images that ImGT scores too."""
    ids = np.intersect1d(cleaner.image_ids, under_imgt.image_ids)
    keys = [k for k in cleaner.correct if k in under_imgt.correct]
    if not keys or not len(ids):
        return {}
    b, a = restrict(cleaner, ids), restrict(under_imgt, ids)
    diff = paired_many(np.stack([a.correct[k] for k in keys]), np.stack([b.correct[k] for k in keys]),
                       n_boot=n_boot, seed=seed)  # fmt: skip
    out = {}
    for i, key in enumerate(keys):
        d = diff.row(i)
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
    return replace(row, capability=anchor.accuracy, consistency=cdc, reference=anchor.reference,
                   n_images=anchor.n_images, capability_ci=p_ci, consistency_ci=cdc_ci, datasets=datasets,
                   resampled=kept)  # fmt: skip


def _dataset_score(scores: CommonScores, key: str, with_interval: bool) -> DatasetScore:
    """One dataset's top-1 of a row, with its Wilson interval (a single proportion: never degenerate at 0 or n)."""
    n, right = len(scores.image_ids), int(scores.correct[key].sum())
    low, high = (float(v[()]) for v in wilson_interval(right, n)) if with_interval else (None, None)
    return DatasetScore(scores.dataset, scores.runs.get(key, key), scores.reference, n, right / n, low, high)


def _seed(seed: int, dataset: Dataset) -> int:
    """Each dataset's images are resampled on their own (datasets are independent samples), seeded per dataset."""
    return (seed << 20) + int(dataset.id or 0)


def _rank(rows: list[ReliabilityRow], weights: dict[str, float], notes: list[str], n_boot: int) -> ReliabilityTable:
    """Overall score of every row whose weighted parts are known; ranks by P and by overall within each task."""
    w = {WEIGHT_NAMES[k]: v for k, v in weights.items()}
    _unknown_notes(rows, w, notes)
    ranked: list[ReliabilityRow] = []
    taus: dict[str, float | None] = {}
    for task in dict.fromkeys(r.task for r in rows):
        members = [r for r in rows if r.task == task]
        complete = {
            r.run: ReliabilityParts(**{k: getattr(r, k) or 0.0 for k in PARTS})
            for r in members
            if all(getattr(r, k) is not None or w[k] == 0 for k in PARTS)
        }
        scores = {k: overall(p.capability, p.consistency, p.robustness, p.efficiency, w) for k, p in complete.items()}
        ranks: dict[str, tuple[int, int]] = {next(iter(complete)): (1, 1)} if len(complete) == 1 else {}
        taus[task] = None
        if len(complete) >= 2:
            table = compare_rankings(complete, w)
            ranks = {r.name: (r.rank_by_capability, r.rank_by_overall) for r in table.rows}
            taus[task] = table.kendall_tau if math.isfinite(table.kendall_tau) else None
        members = [
            replace(r, overall=scores.get(r.run), rank_by_capability=ranks.get(r.run, (None, None))[0],
                    rank_by_overall=ranks.get(r.run, (None, None))[1])
            for r in members
        ]  # fmt: skip
        members, missing = with_overall_intervals(members, list(complete), w, n_boot)
        notes += missing
        members.sort(key=lambda r: (r.rank_by_overall is None, r.rank_by_overall or 0, -(r.capability or 0), r.run))
        ranked += members
    return ReliabilityTable(
        tuple(ranked), dict(weights), taus, tuple(notes), TITLE, METHOD, asdict(BUDGETS), uncertainty(n_boot),
        DEFINITIONS,
    )  # fmt: skip


def _unknown_notes(rows: list[ReliabilityRow], w: dict[str, float], notes: list[str]) -> None:
    one = [r.run for r in rows if r.capability is not None and r.consistency is None]
    if one:
        notes.append(
            f"CDC unknown for {', '.join(one)}: no run of the same model and protocol on a second dataset of the "
            "workspace (CDC is across different datasets, e.g. ImageNet val and ImageNetV2)"
            + ("; weight CDC=0 ranks without it" if w["consistency"] else "")
        )
    covered = {r.run: tuple(d.dataset for d in r.datasets) for r in rows if r.consistency is not None}
    if len(set(covered.values())) > 1:
        notes.append("CDC is over different datasets: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in covered.items()))
    unknown = [r.run for r in rows if not all(getattr(r, k) is not None or w[k] == 0 for k in PARTS)]
    if unknown:
        notes.append(f"no overall score for {', '.join(unknown)}: a part with a non-zero weight is unknown")
