"""Scoring of model predictions against ImGT and ReGT references.

Pure functions on numpy arrays and small dataclasses: this package never imports gradio, torch or the
workspace database, so rescoring stored predictions against a new snapshot is cheap and testable in isolation.
`relabel` loads labels and predictions from the workspace and hands arrays to it.

Modules, in the order a result is built:

- `references`: `LabelSets`, the multi-label reference (padded int array, -1 padding), and input checks;
- `scoring`: top-k and ReaL-rule accuracy (failed replies scored as wrong, infrastructure errors apart),
  per-category breakdown, per-image outcomes, OOP rate, and `score_many` for rescoring many models at once;
- `per_class`: mean per-class accuracy, by reference set or by a class per image, and one model's top-1 per class
  under two references on the same images (`per_class_shift`, paired intervals per class);
- `intervals`: Wilson and Clopper–Pearson intervals of one accuracy (never degenerate at 0 or 1);
- `paired`: differences of two accuracies on the same images (paired bootstrap), and `JointBootstrap`, one set
  of image resamples shared by every model and reference;
- `decomposition`: a paired difference between the original labels and another reference split into multi-label
  leniency, images the original label gets wrong, and images whose original label the reference drops;
- `label_uncertainty`: top-1 against probabilistic labels (posteriors of a consensus): thresholded, expected over
  sampled label sets, and an interval combining label draws with the image bootstrap (after Stutz et al. 2023);
- `published`: metrics as their authors define them (Shankar et al. 2020);
- `ranking`: how the ranking of models changes between two references (ranks, shifts, Kendall's τ, rank
  intervals from joint resamples);
- `model_reliability`: model reliability after ARGUS (capability, CDC, robustness retention, efficiency against
  budgets);
- `agreement`: annotator reliability: Cohen's and Fleiss' κ, Krippendorff's α with set distances, percent
  agreement and agreement with adjudicated labels, on set-valued labels;
- `presence`: object-presence probes after POPE (negatives sampled random, popular, adversarial; accuracy,
  precision, recall, F1, yes-ratio), and the same answers against two references with a paired interval;
- `chair`: caption hallucination after CHAIR (CHAIR-i, CHAIR-s, coverage) against one or two references;
- `retrieval`: text → image R@K, item recall@K and mAP, image → text R@K, on embeddings or a similarity matrix;
- `perturbations`: seeded ImageNet-C corruptions and text typos for robustness runs (a name → function registry).
- `corruptions`: the ImageNet-C image corruptions themselves, pure functions on uint8 arrays.

Every public function validates its input and raises `EvaluationError` (a `ValueError`) naming the bad value.
"""

from typing import TYPE_CHECKING, Any

from evaluator.errors import EvaluationError

if TYPE_CHECKING:
    from evaluator.references import LabelSets

__all__ = ["EvaluationError", "LabelSets"]


def __getattr__(name: str) -> Any:
    """`LabelSets` imported when first asked for: a module without numpy (`reliability_parts`) stays light."""
    if name == "LabelSets":
        from evaluator.references import LabelSets

        return LabelSets
    raise AttributeError(f"module 'evaluator' has no attribute {name!r}")
