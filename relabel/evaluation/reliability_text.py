"""The reliability table (after ARGUS), robustness grids and efficiency measurements as rows of plain strings,
and the reliability table as terminal lines; cells as `relabel.evaluation.cells` writes them.

These functions print numbers computed elsewhere (the table, a robustness run's `RobustnessSummary`, a `Retention`)
and compute none; the parts' columns are those of the registry (`evaluator.reliability_parts.RELIABILITY_PARTS`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from evaluator.model_reliability import MEASURE_LABELS
from evaluator.reliability_parts import parts
from relabel.evaluation.cells import NA, Table, columns, num, pct, rank_span
from relabel.evaluation.reliability_intervals import Retention
from relabel.evaluation.results import CommonImages, ReliabilityTable, RobustnessResult

if TYPE_CHECKING:  # robustness_summary imports corruption_errors, which prints RR with `retention_line` from here
    from relabel.evaluation.robustness_summary import RobustnessSummary


def reliability_tasks(table: ReliabilityTable) -> list[tuple[str, str]]:
    """(task, title) of each task of the reliability table, in row order: rows are compared within a task. The
    title names the reference the rows are scored against and the common images the ranks are on, with their n."""
    titles = []
    common = {c.task: c for c in table.common}
    for task in dict.fromkeys(r.task for r in table.rows):
        refs = sorted({r.reference for r in table.rows if r.task == task and r.reference})
        why = "the cleanest of the named references" if task == "classes" else "its options were built around it"
        against = f"scored against {', '.join(refs)}, {why}" if refs else "no reference"
        name = "choosing among the dataset's classes" if task == "classes" else f"protocol {task}"
        titles.append((task, f"{name} ({against}){_common_line(common.get(task))}"))
    return titles


def _common_line(common: CommonImages | None) -> str:
    """Where the ranks are: '; ranks on the 4 images every ranked run scored (each row is on its own images)'."""
    if common is None:
        return ""
    own = "the rows' own images too" if common.same_images else "each row's own numbers are on its own images"
    return f"; ranks on the {common.n_images:,} common images every ranked run scored ({own})"


def reliability_table(table: ReliabilityTable, task: str) -> Table:
    """The parts, overall score and the two ranks of the rows of one task, with the 95 % intervals of the overall
    score, the rank by overall and the places gained (NA where not computed); P on the common images beside the
    ranks it gives."""
    registered = parts()
    header = ["run", "model", "protocol", *(p.symbol for p in registered), "overall", "overall 95 % CI",
              "P on common", "rank by P", "rank by overall", "rank 95 % CI", "places gained",
              "gained 95 % CI"]  # fmt: skip
    rows = []
    for r in (r for r in table.rows if r.task == task):
        shift = NA if r.rank_by_capability is None else f"{r.rank_by_capability - (r.rank_by_overall or 0):+d}"
        rows.append(
            [r.run, r.model, r.protocol, *(num(p.value(r)) for p in registered), num(r.overall),
             _pair(r.overall_ci, 1, 3), num(r.capability_common), str(r.rank_by_capability or NA),
             str(r.rank_by_overall or NA), rank_span(r.rank_by_overall_ci), shift.replace("+0", "0"),
             rank_span(r.shift_ci, signed=True)]
        )  # fmt: skip
    return header, rows


def reliability_basis_table(table: ReliabilityTable, task: str) -> Table:
    """What each part of a row is on, all on the run's own images: P's reference, images and interval; CDC's
    datasets (top-1 %, reference, images) and interval; the label-noise sensitivity (percentage points, with its
    paired interval and images); RR's interval; the measures E is over."""
    header = ["run", "P against", "images", "P 95 % CI", "CDC over (top-1 %, reference, images)", "CDC 95 % CI",
              "label noise Δ pp", "Δ 95 % CI", "Δ images", "RR 95 % CI", "E over"]  # fmt: skip
    rows = []
    for r in (r for r in table.rows if r.task == task):
        over = "; ".join(f"{d.dataset} {pct(d.accuracy)} ({d.reference}, {d.n_images})" for d in r.datasets) or NA
        noise = r.noise
        rows.append(
            [r.run, r.reference or NA, str(r.n_images) if r.reference else NA, _pair(r.capability_ci, 100, 1),
             over, _pair(r.consistency_ci, 1, 3), _signed(noise.difference if noise else None),
             _pair((noise.ci_low, noise.ci_high) if noise else None, 100, 1, signed=True),
             str(noise.n_images) if noise else NA, _pair(r.robustness_ci, 1, 3),
             ", ".join(MEASURE_LABELS.get(m, m) for m in r.efficiency_terms) or NA]
        )  # fmt: skip
    return header, rows


def _pair(bounds: tuple[float | None, float | None] | None, scale: float, digits: int, signed: bool = False) -> str:
    low, high = bounds if bounds is not None else (None, None)
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return NA
    form = f"{{:+.{digits}f}}" if signed else f"{{:.{digits}f}}"
    return f"{form.format(low * scale)} to {form.format(high * scale)}"


def _signed(value: float | None) -> str:
    return NA if value is None or not math.isfinite(value) else f"{100 * value:+.2f}"


def weights_line(table: ReliabilityTable) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in table.weights.items())


def budgets_line(table: ReliabilityTable) -> str:
    """The fixed budgets E is measured against, in readable units."""
    b = table.budgets
    shown = {
        "latency_s": lambda v: f"median latency {v:g} s per image",
        "peak_memory_bytes": lambda v: f"peak memory {v / 2**30:g} GiB",
        "flops": lambda v: f"{v / 1e9:g} GFLOPs per image",
        "cost_per_1k_images": lambda v: f"cost {v:g} per 1,000 images",
    }
    return ", ".join(form(b[name]) for name, form in shown.items() if name in b)


def render_reliability(table: ReliabilityTable) -> list[str]:
    """The reliability table as terminal lines: what it is, one pair of tables per task, the notes."""
    parts = [f"{table.title} (weights {weights_line(table)})", f"  {table.method}"]
    for task, title in reliability_tasks(table):
        tau = table.kendall_tau.get(task)
        parts += [
            f"  {title}" + (f"; Kendall's tau-b P vs overall {num(tau)}" if tau is not None else ""),
            columns(reliability_table(table, task), "  "),
            columns(reliability_basis_table(table, task), "  "),
        ]
    return parts + [f"  note: {n}" for n in table.notes]


def retention_line(retention: Retention) -> str:
    """'RR 0.602, 95 % CI 0.570 to 0.633' (`reliability_intervals.retention_of`); the RR alone for a run stored
    without per-image outcomes."""
    rr = f"RR {num(retention.value)}"
    bounds = retention.ci
    return rr if bounds is None else f"{rr}, 95 % CI {num(bounds[0])} to {num(bounds[1])}"


def robustness_table(summary: RobustnessSummary, reference: str) -> Table:
    """Top-1 % per perturbation (rows) and severity (columns), the clean score first, and RR per perturbation
    (`robustness_summary.build_robustness_summary`); a text perturbation's row says what it changed, e.g. "typo
    (class names)"."""
    result = summary.result
    header = ["perturbation", "clean", *(f"s{s}" for s in result.severities), "RR"]
    clean = pct(result.clean[reference].accuracy)
    rows = []
    per_perturbation = summary.references[reference].per_perturbation
    for name, values, rr in zip(result.perturbations, result.grid[reference], per_perturbation, strict=True):
        label = f"{name} ({result.text_target})" if name in result.text_perturbations else name
        rows.append([label, clean, *(pct(v) for v in values), num(rr)])
    rows.append(["(all)", clean, *([""] * len(result.severities)), num(result.retention[reference])])
    return header, rows


def efficiency_table(results: Sequence[RobustnessResult]) -> Table:
    header = ["model", "device", "batch", "p50 ms", "p95 ms", "images/s", "peak RSS MiB", "CUDA peak MiB",
              "parameters M", "GFLOPs/image"]  # fmt: skip
    rows = []
    for r in results:
        e = r.efficiency
        rows.append(
            [r.model, e.device, str(e.batch_size or NA), _scaled(e.latency_p50_s, 1e3), _scaled(e.latency_p95_s, 1e3),
             num(e.throughput_per_s, 1), _scaled(e.peak_rss_bytes, 2**-20, 0), _scaled(e.cuda_peak_bytes, 2**-20, 0),
             _scaled(e.n_parameters, 1e-6), _scaled(e.flops_per_image, 1e-9, 3)]
        )  # fmt: skip
    return header, rows


def _scaled(value: float | None, factor: float, digits: int = 2) -> str:
    return NA if value is None else f"{value * factor:.{digits}f}"
