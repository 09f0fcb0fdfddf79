"""RR and E of the reliability table's rows, read from the latest stored robustness run of each row's model and
protocol (`relabel evaluate robustness`); no model runs again.

RR is read against ImGT when the robustness run scored it, else against its first reference; its interval
resamples the run's images (`reliability_intervals`). E is against fixed budgets
(`evaluator.model_reliability.BUDGETS`), so a model's E never depends on the other rows; it is a measurement, held
fixed in every resample.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from sqlmodel import Session

from evaluator.model_reliability import MEASURE_LABELS, MEASURES, EfficiencyMeasurement, efficiency
from relabel.common.workspace import IMGT
from relabel.evaluation.dataset_scores import robustness_protocol
from relabel.evaluation.measure import model_memory
from relabel.evaluation.reliability_intervals import interval, robustness_resamples
from relabel.evaluation.results import ReliabilityRow, RobustnessResult
from relabel.evaluation.storage import latest_robustness_by_protocol

RR_REFERENCE = IMGT  # RR is read against ImGT when the robustness run scored it, else its first reference


def with_robustness(
    session: Session, rows: list[ReliabilityRow], notes: list[str], n_boot: int = 0, seed: int = 0
) -> list[ReliabilityRow]:
    """RR (with its resamples) and E of each row from the latest robustness run of its model and protocol."""
    keys = {row.run: (row.model, robustness_protocol(row.protocol)) for row in rows}
    found = latest_robustness_by_protocol(session, set(keys.values()))
    results = {run: found[key] for run, key in keys.items() if key in found}
    if not results:
        notes.append(
            "E and RR unknown: no model of this evaluation has a robustness run yet (relabel evaluate robustness "
            "measures them)"
        )
        return rows
    notes += _robustness_notes(results)
    resampled, missing = robustness_resamples(results, _rr_reference, n_boot, seed)
    notes += missing
    out = []
    for row in rows:
        result = results.get(row.run)
        if result is None:
            out.append(row)
            continue
        e = efficiency(measurement(result))
        rr = resampled.get(row.run)
        out.append(replace(row, robustness=_retention(result), efficiency=e.value, efficiency_terms=e.terms,
                           robustness_run=result.id, robustness_ci=interval(rr),
                           resampled={**row.resampled, **({"robustness": rr} if rr is not None else {})}))  # fmt: skip
    return out


def _robustness_notes(results: Mapping[str, RobustnessResult]) -> list[str]:
    """Notes for RR and E compared over different grids (a CLIP model's includes class-name typos, an image-only
    classifier's cannot), devices, or sets of measures."""
    notes = []
    grids = {run: (tuple(r.perturbations), tuple(r.severities), r.n_images) for run, r in results.items()}
    if len(set(grids.values())) > 1:
        described = "; ".join(
            f"{run}: {', '.join(names)} at severities {','.join(map(str, sevs))} on {n} images"
            for run, (names, sevs, n) in grids.items()
        )
        notes.append(f"RR compares robustness runs over different grids ({described})")
    devices = {r.efficiency.device.split(":")[0] for r in results.values()}
    if len(devices) > 1:
        notes.append(f"E compares latencies measured on different devices ({', '.join(sorted(devices))})")
    measured = {run: _known_measures(r) for run, r in results.items()}
    if len(set(measured.values())) > 1:
        described = "; ".join(f"{run}: {', '.join(m) or 'none'}" for run, m in measured.items())
        notes.append(f"E is over different measures ({described}); an unknown measure enters no term")
    return notes


def _known_measures(result: RobustnessResult) -> tuple[str, ...]:
    m = measurement(result)
    return tuple(MEASURE_LABELS[name] for name in MEASURES if getattr(m, name) is not None)


def _rr_reference(result: RobustnessResult) -> str | None:
    """The reference RR is read against: ImGT when the robustness run scored it, else its first one."""
    return RR_REFERENCE if RR_REFERENCE in result.retention else next(iter(result.retention), None)


def _retention(result: RobustnessResult) -> float | None:
    ref = _rr_reference(result)
    value = result.retention[ref] if ref is not None else math.nan
    return value if math.isfinite(value) else None


def measurement(result: RobustnessResult) -> EfficiencyMeasurement:
    """What E reads from a robustness run: median latency, the model's own peak memory (none for a model behind an
    API), FLOPs per image and cost per 1,000 images; None for what was not measured."""
    e = result.efficiency
    memory, _ = model_memory(e.device, e.cuda_peak_bytes, e.peak_rss_bytes, result.adapter)
    return EfficiencyMeasurement(
        latency_s=e.latency_p50_s or None,
        peak_memory_bytes=memory,
        flops=e.flops_per_image or None,
        cost_per_1k_images=e.cost_per_1k_images,
    )
