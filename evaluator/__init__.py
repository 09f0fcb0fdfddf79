"""Scoring of model predictions against ImGT and ReGT references.

Pure functions on numpy arrays and small dataclasses: this package never imports gradio, torch or the
workspace database, so rescoring stored predictions against a new snapshot is cheap and testable in isolation.
`relabel` loads labels and predictions from the workspace and hands arrays to it.

Modules, in the order a result is built:

- `references`: `LabelSets`, the multi-label reference (padded int array, -1 padding), and input checks;
- `scoring`: top-k and ReaL-rule accuracy, mean per-class accuracy, per-category breakdown, bootstrap CIs, OOP
  rate, and `score_many` for rescoring many models at once;
- `ranking`: how the ranking of models changes between two references (ranks, shifts, Kendall's τ);
- `reliability`: ARGUS-style parts (capability, consistency, robustness retention, efficiency) and overall;
- `perturbations`: seeded ImageNet-C corruptions and text typos for robustness runs (a name → function registry).

Every public function validates its input and raises `EvaluationError` (a `ValueError`) naming the bad value.
"""

from evaluator.errors import EvaluationError
from evaluator.references import LabelSets

__all__ = ["EvaluationError", "LabelSets"]
