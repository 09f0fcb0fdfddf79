"""The ARGUS-style reliability table: capability (P), consistency (CDC), robustness (RR), efficiency (E), overall.

A row is a model (`ModelRun.model`); its runs are its protocols. P and CDC come from the evaluation's scores,
RR and E from the model's latest stored robustness run (`relabel evaluate robustness`). A part that cannot be
computed is unknown (None), never 0 or 1: the overall score needs every part whose weight is not 0, so a model
is never rewarded or punished for a measurement nobody took. The formulas are in `evaluator.reliability` and in
`results.DEFINITIONS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np

from evaluator import EvaluationError
from evaluator.reliability import (
    PARTS,
    EfficiencyMeasurement,
    ReliabilityParts,
    capability,
    compare_rankings,
    cross_dataset_consistency,
    efficiency,
    overall,
)
from relabel.errors import InputError
from relabel.evaluation.results import ArgusRow, ArgusTable, EfficiencyReport, RobustnessResult, RunScore
from relabel.evaluation.runs import RunInfo

WEIGHT_NAMES = {"P": "capability", "CDC": "consistency", "RR": "robustness", "E": "efficiency"}
DEFAULT_WEIGHTS = {"P": 1.0, "CDC": 1.0, "RR": 1.0, "E": 1.0}
RR_REFERENCE = "imgt"  # RR is read against ImGT when the robustness run scored it, else its first reference


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


def build_argus(
    runs: Sequence[RunInfo],
    scores: Sequence[RunScore],
    robustness: Mapping[str, RobustnessResult],
    weights: Mapping[str, float] | None = None,
) -> ArgusTable:
    """One row per model of `runs`; `robustness` maps a model name to its latest robustness result."""
    weights = dict(weights or DEFAULT_WEIGHTS)
    by_model: dict[str, list[str]] = {}
    for r in runs:
        by_model.setdefault(r.model, []).append(r.name)
    e_parts, notes = _efficiency_parts([m for m in by_model if m in robustness], robustness)
    notes += _grid_notes({m: robustness[m] for m in by_model if m in robustness})
    rows = []
    for model, run_names in by_model.items():
        p, cdc, cells = _capability_parts(run_names, scores)
        rr = _retention(robustness.get(model))
        rows.append(ArgusRow(model, p, cdc, rr, e_parts.get(model), cells=cells))
    return _rank(rows, weights, notes)


def _capability_parts(run_names: list[str], scores: Sequence[RunScore]) -> tuple[float | None, float | None, int]:
    """P over reference × run cells and CDC over references (each the mean over the runs), or None if any is NaN."""
    per_reference: dict[str, list[float]] = {}
    for s in scores:
        if s.run in run_names:
            per_reference.setdefault(s.reference, []).append(s.top1.accuracy)
    cells = [a for values in per_reference.values() for a in values]
    if not cells or not np.isfinite(cells).all():
        return None, None, len(cells)
    means = [float(np.mean(v)) for v in per_reference.values()]
    return capability(cells), cross_dataset_consistency(means), len(cells)


def _grid_notes(results: Mapping[str, RobustnessResult]) -> list[str]:
    """A note when the compared models' RR comes from different grids (a CLIP model's includes class-name typos,
    an image-only classifier's cannot), so the RR column is read with that in mind."""
    grids = {model: (tuple(r.perturbations), tuple(r.severities), r.n_images) for model, r in results.items()}
    if len(set(grids.values())) <= 1:
        return []
    described = "; ".join(
        f"{model}: {', '.join(names)} at severities {','.join(map(str, sevs))} on {n} images"
        for model, (names, sevs, n) in grids.items()
    )
    return [f"RR compares robustness runs over different grids ({described})"]


def _retention(result: RobustnessResult | None) -> float | None:
    if result is None or not result.retention:
        return None
    return result.retention.get(RR_REFERENCE, next(iter(result.retention.values())))


def measurement(report: EfficiencyReport) -> EfficiencyMeasurement:
    """What E compares: memory is the CUDA peak for a model run on a GPU, else the process's peak RSS."""
    memory = report.cuda_peak_bytes if report.device.startswith("cuda") else report.peak_rss_bytes
    return EfficiencyMeasurement(
        latency_p50_s=report.latency_p50_s or None,
        latency_p95_s=report.latency_p95_s or None,
        peak_memory_bytes=memory or None,
        throughput_per_s=report.throughput_per_s or None,
        n_parameters=report.n_parameters or None,
        flops=report.flops_per_image or None,
    )


def _efficiency_parts(
    models: list[str], robustness: Mapping[str, RobustnessResult]
) -> tuple[dict[str, float], list[str]]:
    if not models:
        return {}, [
            "E and RR: no model of this evaluation has a robustness run yet (relabel evaluate robustness measures them)"
        ]
    try:
        values = efficiency([measurement(robustness[m].efficiency) for m in models])
    except EvaluationError as exc:
        return {}, [f"E unknown: {exc}"]
    notes = []
    devices = {robustness[m].efficiency.device.split(":")[0] for m in models}
    if len(devices) > 1:
        notes.append(f"E compares models measured on different devices ({', '.join(sorted(devices))})")
    return {m: float(v) for m, v in zip(models, values)}, notes


def _rank(rows: list[ArgusRow], weights: dict[str, float], notes: list[str]) -> ArgusTable:
    """Overall score of every row whose weighted parts are known; ranks by P and by overall among those rows."""
    w = {WEIGHT_NAMES[k]: v for k, v in weights.items()}
    complete: dict[str, ReliabilityParts] = {}
    for row in rows:
        values = {name: getattr(row, name) for name in PARTS}
        if all(v is not None or w[name] == 0 for name, v in values.items()):
            complete[row.model] = ReliabilityParts(**{k: 0.0 if v is None else v for k, v in values.items()})
    unknown = [r.model for r in rows if r.model not in complete]
    if unknown:
        notes.append(f"no overall score for {', '.join(unknown)}: a part with a non-zero weight is unknown")
    scores = {
        m: overall(p.capability, p.consistency, p.robustness, p.efficiency, weights=w) for m, p in complete.items()
    }
    ranks: dict[str, tuple[int, int]] = {}
    tau = None
    if len(complete) >= 2:
        table = compare_rankings(complete, w)
        ranks = {r.name: (r.rank_by_capability, r.rank_by_overall) for r in table.rows}
        tau = table.kendall_tau if math.isfinite(table.kendall_tau) else None
    elif complete:
        ranks = {next(iter(complete)): (1, 1)}
    ranked = [
        replace(r, overall=scores.get(r.model), rank_by_capability=ranks.get(r.model, (None, None))[0],
                rank_by_overall=ranks.get(r.model, (None, None))[1])
        for r in rows
    ]  # fmt: skip
    ranked.sort(key=lambda r: (r.rank_by_overall is None, r.rank_by_overall or 0, -(r.capability or 0), r.model))
    return ArgusTable(tuple(ranked), dict(weights), tau, tuple(notes))
