"""ImageNet-C's corruption error beside RR: CE per corruption and, for a full run, mCE and relative mCE.

A robustness run's grid holds top-1 per perturbation and severity against each reference; `evaluator.corruption_error`
turns the ImageNet-C corruptions among them into errors relative to AlexNet's (Hendrycks & Dietterich 2019). mCE and
relative mCE need all 15 corruptions at severities 1-5; a partial run gets CE for each corruption it covers at all
five severities and a one-line note. The figures compare with AlexNet's errors on the released ImageNet-C files,
against ImageNet's original labels: comparable in kind, not exactly, to a run on other images, from 256-px views, or
against another reference.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluator.corruption_error import CorruptionErrors, alexnet_baseline, corruption_errors
from relabel.evaluation.cells import Table, pct
from relabel.evaluation.reliability_intervals import Retention
from relabel.evaluation.reliability_text import retention_line
from relabel.evaluation.results import RobustnessResult

CE_TITLE = "Corruption error against AlexNet"
CE_NOTE = (
    "CE: the model's top-1 error summed over severities 1-5, divided by AlexNet's (Hendrycks & Dietterich's "
    "baseline; AlexNet = 100 %, lower is better). Relative CE: the same after subtracting each model's clean error, "
    "so it counts only what the corruption costs. mCE and relative mCE are their means over the 15 corruptions. "
    "AlexNet's errors were measured on the released ImageNet-C files against ImageNet's original labels: against "
    "another reference or on other images the ratio is comparable in kind, not exactly."
)


def run_corruption_errors(result: RobustnessResult, reference: str) -> CorruptionErrors | None:
    """CE of the ImageNet-C corruptions in `result`'s grid against `reference`; None when it has none of them."""
    from evaluator.perturbations import BENCHMARK_CORRUPTIONS, PERTURBATIONS  # scipy.signal: only with a robustness run

    errors = {
        PERTURBATIONS[name].imagenet_c_name: {s: 1 - v for s, v in zip(result.severities, values)}
        for name, values in zip(result.perturbations, result.grid[reference])
        if name in BENCHMARK_CORRUPTIONS
    }
    if not errors:
        return None
    return corruption_errors(errors, 1 - result.clean[reference].accuracy, alexnet_baseline())


def corruption_error_line(result: RobustnessResult, reference: str) -> str:
    """'mCE 76.70 %, relative mCE 105.21 %', or why there is none; '' for a run without ImageNet-C corruptions."""
    return ce_line(run_corruption_errors(result, reference))


def ce_line(ce: CorruptionErrors | None) -> str:
    """`corruption_error_line` of finished corruption errors (None: a run without ImageNet-C corruptions)."""
    if ce is None:
        return ""
    if ce.mce is not None:
        return f"mCE {pct(ce.mce)} %, relative mCE {pct(ce.relative_mce)} %"
    from evaluator.perturbations import BENCHMARK_CORRUPTIONS

    covered = len(BENCHMARK_CORRUPTIONS) - len(ce.missing)
    return (
        f"CE per corruption only: mCE needs all {len(BENCHMARK_CORRUPTIONS)} ImageNet-C corruptions at severities "
        f"1-5; this run has {covered} of them at all five"
    )


def corruption_error_table(result: RobustnessResult, reference: str) -> Table | None:
    """CE % and relative CE % per ImageNet-C corruption of the run (NA where a severity of 1-5 is missing)."""
    return ce_table(run_corruption_errors(result, reference), result.perturbations)


def ce_table(ce: CorruptionErrors | None, perturbations: Sequence[str]) -> Table | None:
    """`corruption_error_table` of finished corruption errors of a run of `perturbations` (None: no CE)."""
    if ce is None:
        return None
    from evaluator.perturbations import BENCHMARK_CORRUPTIONS, PERTURBATIONS

    rows = []
    for name in perturbations:
        if name in BENCHMARK_CORRUPTIONS:
            key = PERTURBATIONS[name].imagenet_c_name
            rows.append([name, pct(ce.ce.get(key), 1), pct(ce.relative_ce.get(key), 1)])
    if ce.mce is not None:
        rows.append(["(mean of 15)", pct(ce.mce, 1), pct(ce.relative_mce, 1)])
    return ["corruption", "CE %", "relative CE %"], rows


def retention_and_ce_line(retention: Retention, ce: CorruptionErrors | None) -> str:
    """RR with its interval (`retention_line`), then mCE and relative mCE (or why not) for ImageNet-C runs; both
    against `retention.reference`, from finished numbers (`robustness_summary.ReferenceRobustness`)."""
    line = ce_line(ce)
    return f"{retention_line(retention)}; {line}" if line else retention_line(retention)


def corruption_error_section(result: RobustnessResult, reference: str) -> tuple[str, str, Table] | None:
    """The CE table's title, what CE means (`CE_NOTE`) and the table; None for a run without ImageNet-C corruptions."""
    return ce_section(run_corruption_errors(result, reference), result.perturbations)


def ce_section(ce: CorruptionErrors | None, perturbations: Sequence[str]) -> tuple[str, str, Table] | None:
    """`corruption_error_section` of finished corruption errors of a run of `perturbations`."""
    table = ce_table(ce, perturbations)
    return None if table is None else (CE_TITLE, CE_NOTE, table)
