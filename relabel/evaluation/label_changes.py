"""What changes when the labels change: each paired difference against the original labels, taken apart.

For every run and every reference after the first (the original labels, one per image; ImGT by default), on the
images the run has scored under both:

- the difference split into three parts (`evaluator.decomposition`): multi-label leniency (the prediction is in
  the reference's set beside the original label), the original label wrong (the reference lacks it and accepts
  the prediction), and the original label dropped (the prediction is the original label, the reference lacks it);
  they sum to the difference exactly;
- top-1 per class of the original label under both references (`evaluator.per_class.per_class_shift`), the
  classes that gain and lose the most, with a paired interval each;
- whether the first reference's top-1 on those images is 0 % or 100 % on part of its images: images picked by the
  run's own (dis)agreement with the original labels (cleanlab's candidate label errors are the run's
  disagreements), so the difference is there by construction and is no gain.

Nothing here is computed when the first reference has several labels on an image: the parts are defined against
one original label.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evaluator.decomposition import decompose_difference
from evaluator.per_class import per_class_shift
from relabel.evaluation.references import Reference
from relabel.evaluation.result_parts import ClassShiftRow, LabelChange, Outcomes

TOP_CLASSES = 10  # classes shown per direction (largest gains, largest losses)


def label_changes(
    outcomes: Outcomes,
    references: Sequence[Reference],
    class_names: Sequence[str],
    *,
    n_boot: int,
    seed: int,
    top: int = TOP_CLASSES,
) -> list[LabelChange]:
    """Every run under every reference after the first, taken apart (module docstring); [] when the first
    reference is multi-label or there is only one reference."""
    if len(references) < 2 or (references[0].labels.counts > 1).any():
        return []
    original = _on_universe(outcomes.image_ids, references[0])
    out = []
    for j, ref in enumerate(references[1:], start=1):
        kept = _original_in(outcomes.image_ids, ref, original)
        for i, run in enumerate(outcomes.runs):
            common = outcomes.scored[i, 0] & outcomes.scored[i, j]
            if not common.any():
                continue
            a, b = outcomes.correct[i, 0], outcomes.correct[i, j]
            parts = decompose_difference(a, b, kept, common, n_boot=n_boot, seed=seed)
            extreme = _by_construction(parts.n_common, int((a & common).sum()), outcomes.scored[i, 0], a)
            change = LabelChange(run, ref.name, references[0].name, parts, extreme, 0)
            if not extreme:
                change = _with_classes(change, a, b, original, common, class_names, n_boot, seed, top)
            out.append(change)
    return out


def _on_universe(universe: np.ndarray, ref: Reference) -> np.ndarray:
    """The first reference's one label per image of `universe` (-1 where it has none)."""
    labels = np.full(len(universe), -1, np.int64)
    labels[np.searchsorted(universe, ref.image_ids)] = ref.labels.labels[:, 0]
    return labels


def _original_in(universe: np.ndarray, ref: Reference, original: np.ndarray) -> np.ndarray:
    """Per image of `universe`: the reference's set holds the original label."""
    where = np.searchsorted(universe, ref.image_ids)
    held = np.zeros(len(universe), bool)
    label = original[where]
    held[where] = (ref.labels.labels == label[:, None]).any(axis=1) & (label >= 0)
    return held


def _by_construction(n_common: int, n_right: int, scored_a: np.ndarray, correct_a: np.ndarray) -> bool:
    """Baseline 0 or 100 % on part of the run's images under it, while the run is neither overall."""
    n_all, right_all = int(scored_a.sum()), int((correct_a & scored_a).sum())
    return 0 < n_common < n_all and n_right in (0, n_common) and 0 < right_all < n_all


def _with_classes(
    change: LabelChange,
    a: np.ndarray,
    b: np.ndarray,
    original: np.ndarray,
    common: np.ndarray,
    names: Sequence[str],
    n_boot: int,
    seed: int,
    top: int,
) -> LabelChange:
    """`change` with the classes that gain and lose most (intervals for the shown classes only)."""
    n_classes = len(names)
    classes = np.where(common, original, -1)
    shift = per_class_shift(a, b, classes, n_classes=n_classes, n_boot=0)
    present = np.flatnonzero(shift.n_images > 0)
    diff = shift.difference[present]
    more = -shift.n_images[present]  # among equal differences, the class with more images first
    by_gain, by_loss = np.lexsort((more, -diff)), np.lexsort((more, diff))
    gains = present[by_gain][diff[by_gain] > 0][:top].tolist()
    losses = present[by_loss][diff[by_loss] < 0][:top].tolist()
    shown = np.array(gains + losses, dtype=np.int64)
    if n_boot and len(shown):
        shift = per_class_shift(a, b, classes, n_classes=n_classes, n_boot=n_boot, seed=seed, intervals_for=shown)

    acc_a, acc_b = shift.accuracy_a, shift.accuracy_b  # computed once: properties over every class

    def row(c: int) -> ClassShiftRow:
        low, high = float(shift.ci_low[c]), float(shift.ci_high[c])
        return ClassShiftRow(int(c), names[c], int(shift.n_images[c]), float(acc_a[c]), float(acc_b[c]),
                             float(acc_b[c] - acc_a[c]), None if np.isnan(low) else low,
                             None if np.isnan(high) else high)  # fmt: skip

    return LabelChange(change.run, change.reference, change.baseline, change.parts, False, len(present),
                       tuple(row(c) for c in gains), tuple(row(c) for c in losses))  # fmt: skip


def by_construction(changes: Sequence[LabelChange]) -> set[tuple[str, str]]:
    """(run, reference) of the paired rows whose baseline is 0 or 100 % by construction: no gain to show."""
    return {(c.run, c.reference) for c in changes if c.baseline_by_construction}
