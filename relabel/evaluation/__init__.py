"""Evaluation: score stored model runs against ImGT and ReGT references, measure robustness and efficiency,
combine them into the reliability table (after ARGUS), and write reports.

The modules follow the data: `references` and `runs` read the workspace into arrays (with
`relabel.common.stored_columns`, which reads the rows as plain columns), `scoring` hands them to the pure
`evaluator` package, `compare` sets every number beside another on the same images (paired differences, the
ranking on common images, coverage warnings),
`published` adds metrics as their authors define them,
`reliability` (with `dataset_scores`, `reliability_robustness` for RR and E, `reliability_ranks` for the overall
score and the ranks on common images, and `reliability_intervals` for the bootstrap of its intervals) builds the
reliability table, each row on its own images, `service.evaluate` ties them together and
`storage` keeps every evaluation; `robustness` (with `measure`, and `robustness_outcomes` for each image's outcome
per condition) runs a scoring model on perturbed images; `report` (with `plots` and `text`) renders the results.
torch and matplotlib are imported only where they are used: `relabel evaluate --no-report` imports no report module.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from relabel.evaluation.results import Evaluation, RobustnessResult, RunScore
from relabel.evaluation.service import evaluate
from relabel.evaluation.storage import evaluation_history

if TYPE_CHECKING:
    from relabel.evaluation.report import latest_report, write_report
    from relabel.evaluation.robustness import run_robustness

# Imported on first use: the report (plots, matplotlib) and the robustness runner (adapters), which scoring and
# `relabel evaluate --no-report` do without.
_LAZY = {
    "latest_report": "relabel.evaluation.report",
    "write_report": "relabel.evaluation.report",
    "run_robustness": "relabel.evaluation.robustness",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "Evaluation",
    "RobustnessResult",
    "RunScore",
    "evaluate",
    "evaluation_history",
    "latest_report",
    "run_robustness",
    "write_report",
]
