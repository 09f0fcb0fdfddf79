"""The overall score and the ranks of the reliability table: each row's own score, ranks on common images.

A row's overall score is the weighted mean of its own parts (P on its own images), so it never moves when another
run is evaluated beside it. The ranks compare rows, so they are taken on one set of images: the task's common
images, those every ranked row (a row with an overall score) scored against the task's reference. There P is
recomputed (`capability_common`) and the rows are ranked by it and by the overall score with it in place of P;
Kendall's tau, the places gained and the rank intervals are on the same images. The common images, with their
count, go into the table (`CommonImages`) and are printed beside it; when the rows cover different images a note
says so in one line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from evaluator.model_reliability import ReliabilityParts, compare_rankings, overall
from evaluator.reliability_parts import CAPABILITY, ReliabilityPart, parts
from relabel.common.errors import InputError
from relabel.evaluation.dataset_scores import ReferenceOutcomes
from relabel.evaluation.reliability_intervals import with_overall_intervals, with_rank_intervals
from relabel.evaluation.results import CommonImages, ReliabilityRow

DEFAULT_WEIGHT = 1.0  # a part the weights do not name


def weight_names() -> dict[str, str]:
    """symbol -> part name of every registered part (`evaluator.reliability_parts.RELIABILITY_PARTS`)."""
    return {p.symbol: p.name for p in parts()}


def default_weights() -> dict[str, float]:
    """Every registered part at `DEFAULT_WEIGHT`, keyed by symbol."""
    return {p.symbol: DEFAULT_WEIGHT for p in parts()}


def complete_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """`weights` (keyed by symbol, e.g. {"P": 2}) with every registered part it does not name at `DEFAULT_WEIGHT`,
    in registry order; InputError naming a key that is no part's symbol."""
    known = weight_names()
    unknown = [k for k in weights or {} if k not in known]
    if unknown:
        raise InputError(f"weight {unknown[0]!r}: not a reliability part; parts: {', '.join(known)}")
    return {**default_weights(), **(weights or {})}


@dataclass(frozen=True, eq=False)
class TaskImages:
    """A task's outcomes on the evaluated dataset (every row against the task's reference), and their seed."""

    outcomes: ReferenceOutcomes
    seed: int


@dataclass(frozen=True)
class Ranked:
    """The rows with their overall scores and ranks, Kendall's tau per task, and each task's common images."""

    rows: list[ReliabilityRow]
    kendall_tau: dict[str, float | None]
    common: tuple[CommonImages, ...]


def rank_rows(
    rows: Sequence[ReliabilityRow],
    anchors: Mapping[str, TaskImages],
    weights: Mapping[str, float],
    notes: list[str],
    n_boot: int,
) -> Ranked:
    """Overall score (own parts) of every row whose weighted parts are known; ranks by P and by overall within each
    task on its common images (module docstring); notes appended to `notes`. `weights` are keyed by symbol; a
    part they do not name has weight 1 (`complete_weights`)."""
    names = weight_names()
    w = {names[k]: v for k, v in complete_weights(weights).items()}
    unknown_notes(rows, w, notes)
    ranked: list[ReliabilityRow] = []
    taus: dict[str, float | None] = {}
    common: list[CommonImages] = []
    for task in dict.fromkeys(r.task for r in rows):
        members = [r for r in rows if r.task == task]
        complete = [r.run for r in members if _known(r, w)]
        members = [replace(r, overall=_overall(r, w)) if r.run in complete else r for r in members]
        members, missing = with_overall_intervals(members, complete, w, n_boot)
        notes += missing
        taus[task] = None
        anchor = anchors.get(task)
        if complete and anchor is not None:
            members, taus[task], found = _ranks(members, complete, anchor, w, n_boot, notes)
            common.append(found)
        members.sort(key=lambda r: (r.rank_by_overall is None, r.rank_by_overall or 0, -(r.capability or 0), r.run))
        ranked += members
    return Ranked(ranked, taus, tuple(common))


def _known(row: ReliabilityRow, w: Mapping[str, float]) -> bool:
    """Whether every part of `row` with a non-zero weight is known."""
    return all(p.value(row) is not None or w[p.name] == 0 for p in parts())


def _overall(row: ReliabilityRow, w: Mapping[str, float]) -> float:
    return overall({p.name: p.value(row) or 0.0 for p in parts()}, w)


def _ranks(
    members: list[ReliabilityRow],
    complete: list[str],
    anchor: TaskImages,
    w: Mapping[str, float],
    n_boot: int,
    notes: list[str],
) -> tuple[list[ReliabilityRow], float | None, CommonImages]:
    """The rows of one task ranked on its common images, Kendall's tau there, and the common images."""
    found = anchor.outcomes
    mask = found.common(complete)
    n = int(np.count_nonzero(mask))
    by_run = {r.run: r for r in members}
    same = all(by_run[run].n_images == n for run in complete)
    common = CommonImages(members[0].task, found.dataset, found.reference, n, tuple(complete), same)
    if not same:
        notes.append(_coverage_note(common, by_run))
    if n == 0:
        notes.append(f"no ranks for {', '.join(complete)}: no image of {found.dataset!r} is scored by all of them")
        return members, None, common
    p_common = {run: found.accuracy(run, mask) or 0.0 for run in complete}
    ranks: dict[str, tuple[int, int]] = {complete[0]: (1, 1)}
    tau = None
    if len(complete) >= 2:
        on_common = {run: ReliabilityParts(**{**{p.name: _part(by_run[run], p, w) for p in parts()},
                                              CAPABILITY: p_common[run]}) for run in complete}  # fmt: skip
        table = compare_rankings(on_common, w)
        ranks = {r.name: (r.rank_by_capability, r.rank_by_overall) for r in table.rows}
        tau = table.kendall_tau if math.isfinite(table.kendall_tau) else None
    members = [
        replace(r, capability_common=p_common[r.run], rank_by_capability=ranks[r.run][0],
                rank_by_overall=ranks[r.run][1]) if r.run in ranks else r
        for r in members
    ]  # fmt: skip
    if n_boot:
        resampled = found.resample(complete, n_boot, anchor.seed, where=mask)
        members, missing = with_rank_intervals(members, complete, resampled, w)
        notes += missing
    return members, tau, common


def _part(row: ReliabilityRow, part: ReliabilityPart, w: Mapping[str, float]) -> float:
    value = part.value(row)
    return 0.0 if value is None or w[part.name] == 0 else float(value)


def _coverage_note(common: CommonImages, rows: Mapping[str, ReliabilityRow]) -> str:
    each = ", ".join(f"{run} {rows[run].n_images}" for run in common.runs)
    return (
        f"the {common.task} runs cover different images of {common.dataset!r} against {common.reference} ({each}): "
        f"each row is on its own images; the ranks, Kendall's tau and places gained are on the {common.n_images} "
        "image(s) all of them scored"
    )


def unknown_notes(rows: Sequence[ReliabilityRow], w: Mapping[str, float], notes: list[str]) -> None:
    """Notes for CDC unknown, CDC over different datasets, and rows without an overall score."""
    one = [r.run for r in rows if r.capability is not None and r.consistency is None]
    if one:
        notes.append(
            f"CDC unknown for {', '.join(one)}: no run of the same model and protocol on a second dataset of the "
            "workspace (CDC is across different datasets, e.g. ImageNet val and ImageNetV2)"
            + ("; weight CDC=0 ranks without it" if w.get("consistency") else "")
        )
    covered = {r.run: tuple(d.dataset for d in r.datasets) for r in rows if r.consistency is not None}
    if len(set(covered.values())) > 1:
        notes.append("CDC is over different datasets: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in covered.items()))
    unknown = [r.run for r in rows if not _known(r, w)]
    if unknown:
        notes.append(f"no overall score for {', '.join(unknown)}: a part with a non-zero weight is unknown")
