"""Intervals of RR, of the overall score and of the ranks in the reliability table, from one joint bootstrap.

Every part that is a sample of images is resampled, and every row of a task sees the same resamples:

- P: the evaluated dataset's reference images (`dataset_scores.ReferenceOutcomes.resample`, seeded per dataset),
  each row's top-1 on its own scored images in every draw (for its overall score), or on the task's common images
  (for the ranks);
- CDC: each dataset's reference images on their own, each row on its own images there, the evaluated dataset with
  P's resamples;
- RR: the images of the robustness run, clean and perturbed with the same images (paired); runs of the same
  dataset on the same images share their resamples (seeded by the seed, the dataset and the image ids), runs on
  other images are resampled on their own. A robustness run stored before per-image outcomes were kept has no
  resamples, and its RR no interval;
- E is held fixed: it is a measurement (latency, memory, FLOPs, cost), not a sample of images.

Which parts are resampled and which held fixed is read from the registry of parts
(`evaluator.reliability_parts.RELIABILITY_PARTS`, each part's `interval`), as is how a row gives its value and its
resamples. `retention_of` gives a robustness run's RR with its interval for its text and report
(`robustness_summary.build_robustness_summary`, before anything is rendered).

Resample b of a row's overall score is Σ w_j · part_j[b] with each of its own parts' resample b. The ranks by P
and by overall are taken within each resample among the task's rows with an overall score, P on the common images
in place of the row's own; their 95 % percentile intervals (and that of places gained) are read by
`evaluator.ranking.rank_intervals`. The draws depend on the image counts and the seed only, so a row's own
intervals are the same whatever other rows exist. Images of different datasets are independent
samples, so their resamples are independent draws; the robustness run's images are resampled apart from P's even
where they are a subset of the same dataset, which leaves out the (small) correlation between P and RR.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from evaluator.model_reliability import overall_of_resamples, resampled_retention
from evaluator.paired import percentile_interval
from evaluator.ranking import rank_intervals
from evaluator.reliability_parts import CAPABILITY, ReliabilityPart, parts
from relabel.evaluation.results import ReliabilityRow, RobustnessResult
from relabel.evaluation.robustness_outcomes import RobustnessOutcomes

RETENTION_BOOT, RETENTION_SEED = 1000, 0  # `relabel evaluate`'s defaults, so that both show the same interval


@dataclass(frozen=True)
class Retention:
    """RR of a robustness run against one reference, with its 95 % percentile interval over `n_boot` resamples of
    the run's images (None for a run stored without per-image outcomes)."""

    reference: str
    value: float
    ci: tuple[float, float] | None
    n_boot: int


def retention_of(
    result: RobustnessResult, reference: str, n_boot: int = RETENTION_BOOT, seed: int = RETENTION_SEED
) -> Retention:
    """RR of `result` against `reference` (one of its grid's references) with its interval: clean and perturbed
    resampled with the same images, as the reliability table does (`robustness_resamples`)."""
    resampled, _ = robustness_resamples({"run": result}, lambda _: reference, n_boot, seed)
    return Retention(reference, result.retention[reference], interval(resampled.get("run")), n_boot)


def robustness_resamples(
    results: Mapping[str, RobustnessResult],
    reference_of: Callable[[RobustnessResult], str | None],
    n_boot: int,
    seed: int,
) -> tuple[dict[str, np.ndarray], list[str]]:
    """RR of each row's robustness run over `n_boot` resamples of its images, (n_boot,) by row name, against the
    reference `reference_of` gives (the one RR is read against); and notes for runs without per-image outcomes."""
    if not n_boot:
        return {}, []
    usable: dict[int, tuple[str, RobustnessOutcomes, str]] = {}  # by result: dataset, outcomes, reference
    old: dict[str, list[str]] = {}
    other_reference: dict[str, list[str]] = {}
    for run, result in results.items():
        ref, outcomes = reference_of(result), result.outcomes
        label = f"#{result.id}" if result.id is not None else result.model
        if outcomes is None:
            old.setdefault(label, []).append(run)
        elif ref is None or ref not in outcomes.scored:
            other_reference.setdefault(label, []).append(run)
        else:
            usable[id(result)] = (result.dataset, outcomes, ref)
    resampled: dict[int, np.ndarray] = {}
    for key, (dataset, outcomes, ref) in usable.items():
        # runs on the same images draw the same resamples (JointBootstrap depends on the image count and the seed
        # only), whatever their grids: a CLIP run with typos beside a classifier without them
        group_seed = (seed << 32) + zlib.crc32(dataset.encode() + outcomes.image_ids.tobytes())
        values = resampled_retention(
            outcomes.correct[ref][None], outcomes.scored[ref][None], n_boot=n_boot, seed=group_seed
        )
        resampled[key] = values[:, 0]
    notes = [
        f"RR interval unknown for {', '.join(runs)}: robustness run {label} was stored without per-image outcomes "
        "(before they were kept); running `relabel evaluate robustness` again keeps them"
        for label, runs in old.items()
    ] + [
        f"RR interval unknown for {', '.join(runs)}: robustness run {label} kept no per-image outcomes against the "
        "reference RR is read against"
        for label, runs in other_reference.items()
    ]
    return {run: resampled[id(r)] for run, r in results.items() if id(r) in resampled}, notes


def interval(resampled: np.ndarray | None) -> tuple[float, float] | None:
    """The 95 % percentile interval of `resampled` (NaN resamples ignored); None without a finite one."""
    if resampled is None or not np.isfinite(resampled).any():
        return None
    low, high = percentile_interval(resampled)
    return float(low), float(high)


def with_overall_intervals(
    members: Sequence[ReliabilityRow], complete: Sequence[str], weights: Mapping[str, float], n_boot: int
) -> tuple[list[ReliabilityRow], list[str]]:
    """`members` (the rows of one task) with the interval of the overall score of each row of `complete` (those
    with an overall score), over the row's own resamples (P on its own images, CDC, RR; E fixed); notes for what
    could not be resampled."""
    rows = {r.run: r for r in members}
    if not n_boot or not complete:
        return list(members), []
    weighted = [p for p in parts() if weights[p.name] > 0]
    drawn = {run: _drawn([rows[run]], weighted) for run in complete}
    missing = {run: [name for name, values in found.items() if values is None] for run, found in drawn.items()}
    lacking = [f"{run} ({', '.join(names)})" for run, names in missing.items() if names]
    notes = [f"overall 95 % CI unknown for {', '.join(lacking)}: a weighted part has no resamples"] if lacking else []
    for run in (run for run in complete if not missing[run]):
        values = {**drawn[run], **{p.name: _fixed([rows[run]], p.value) for p in weighted if p.interval == "fixed"}}
        rows[run] = replace(rows[run], overall_ci=interval(overall_of_resamples(values, weights)[:, 0]))
    return [rows[r.run] for r in members], notes


def _drawn(rows: Sequence[ReliabilityRow], weighted: Sequence[ReliabilityPart]) -> dict[str, np.ndarray | None]:
    """Each resampled part's resamples of `rows` side by side (n_boot, n_rows); None when a row has none."""
    out: dict[str, np.ndarray | None] = {}
    for part in (p for p in weighted if p.interval == "resampled"):
        found = [values for row in rows if (values := part.resamples(row)) is not None]
        out[part.name] = np.stack(found, axis=1) if len(found) == len(rows) else None
    return out


def _fixed(rows: Sequence[ReliabilityRow], value: Callable[[ReliabilityRow], float | None]) -> np.ndarray:
    """A fixed part's value of each row (n_rows,), the same in every resample."""
    return np.array([value(row) for row in rows], dtype=np.float64)


def with_rank_intervals(
    members: Sequence[ReliabilityRow],
    ranked: Sequence[str],
    capability_common: Mapping[str, np.ndarray],
    weights: Mapping[str, float],
) -> tuple[list[ReliabilityRow], list[str]]:
    """`members` with the intervals of the ranks by P and by overall and of the places gained of the `ranked` rows:
    P from `capability_common` (each row's top-1 on the common images, (n_boot,) over joint resamples), CDC and RR
    from each row's own resamples, E fixed; a note when a ranked row lacks a weighted part's resamples."""
    rows = {r.run: r for r in members}
    weighted = [p for p in parts() if weights[p.name] > 0 and p.name != CAPABILITY]
    lacking = [run for run in ranked if run not in capability_common
               or any(v is None for v in _drawn([rows[run]], weighted).values())]  # fmt: skip
    if lacking:
        return list(members), [f"rank 95 % CIs unknown: {', '.join(lacking)} lack resamples of a weighted part"]
    if len(ranked) == 1:  # alone in its task: first by both, in every resample
        only = ranked[0]
        rows[only] = replace(rows[only], rank_by_capability_ci=(1, 1), rank_by_overall_ci=(1, 1), shift_ci=(0, 0))
        return [rows[r.run] for r in members], []
    capability = np.stack([capability_common[run] for run in ranked], axis=1)
    in_rank = [rows[run] for run in ranked]
    values = {**_drawn(in_rank, weighted), **{p.name: _fixed(in_rank, p.value) for p in weighted
                                               if p.interval == "fixed"}, CAPABILITY: capability}  # fmt: skip
    found = rank_intervals(capability, overall_of_resamples(values, weights), list(ranked))
    for i in found:
        rows[i.name] = replace(rows[i.name], rank_by_capability_ci=i.rank_a, rank_by_overall_ci=i.rank_b,
                               shift_ci=i.shift)  # fmt: skip
    return [rows[r.run] for r in members], []


def uncertainty(n_boot: int) -> str:
    """What the table's 95 % intervals are, and what has none."""
    if not n_boot:
        return "not computed: the evaluation ran without bootstrap resamples (--boot 0)"
    return (
        "95 % intervals: P (and each dataset's top-1) the Wilson score interval on the run's own images; CDC the "
        f"percentile interval over {n_boot} bootstrap resamples of images (every run of a dataset with the same "
        "draws, each on its own images there, each dataset on its own); the label-noise sensitivity a paired "
        "bootstrap over the images the run scored under both references; RR "
        f"the percentile interval over {n_boot} resamples of the robustness run's images (clean and perturbed with "
        "the same images; runs on the same images with the same resamples), unknown for runs stored without "
        "per-image outcomes; the overall score the percentile interval over the same resamples of the row's own "
        "parts; the ranks by P and by overall and the places gained over the same joint resamples with P on the "
        "task's common images (E held fixed: it is a measurement, not a sample of images). Not computed for E itself"
    )
