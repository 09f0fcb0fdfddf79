"""Per-image outcomes of a robustness run: which images each condition got right, kept so RR has an interval.

A robustness run scores the clean pass and every perturbation × severity. Its stored accuracies give RR, but an
interval of RR needs the images: resampling them, clean and perturbed with the same images, is what
`evaluator.model_reliability.resampled_retention` does. So a run keeps, per condition (clean first, then the grid
in `perturbations` × `severities` order):

errors    images whose call failed for reasons of the infrastructure or the set-up, or whose file could not be
          read: never scored (`relabel.evaluation.failure_causes`)
scored    per reference: images the condition's top-1 counts (not an error, a non-empty reference set); the
          model's failures are scored, as wrong
correct   per reference: the scored images whose top-1 is in the reference set (ReaL rule)

In JSON each mask is one base64 string of its bits (numpy `packbits`, little bit order: bit i is image i of
`image_ids`), so 1,000 images × 80 conditions take about 13 kB per mask kind. Results stored before outcomes were
kept read back with `outcomes = None`: their RR has no interval.
"""

from __future__ import annotations

import numpy as np

from evaluator.scoring import image_outcomes
from relabel.evaluation.references import Reference
from relabel.evaluation.result_parts import RobustnessOutcomes
from relabel.evaluation.runs import RunPredictions, align
from relabel.evaluation.scoring import subset_labels

CLEAN = "clean"


def condition_names(perturbations: tuple[str, ...], severities: tuple[int, ...]) -> tuple[str, ...]:
    """ "clean", then "name/severity" for every perturbation × severity, in the grid's order."""
    return (CLEAN, *(f"{name}/{severity}" for name in perturbations for severity in severities))


def robustness_outcomes(
    passes: list[RunPredictions], conditions: tuple[str, ...], references: list[Reference]
) -> RobustnessOutcomes:
    """The outcomes of one run from its passes, one per condition in the order of `conditions`, all on the same
    sorted image ids; a failed call that is not the model's failure is an error (never scored)."""
    image_ids = passes[0].image_ids
    shape = (len(conditions), len(image_ids))
    scored = {ref.name: np.zeros(shape, bool) for ref in references}
    correct = {ref.name: np.zeros(shape, bool) for ref in references}
    for ref in references:
        for row, run in enumerate(passes):
            aligned = align(run, ref.image_ids)
            if not len(aligned.rows):
                continue
            right, counted = image_outcomes(
                aligned.classes, subset_labels(ref.labels, aligned.rows), 1, aligned.ok, failed=aligned.failed
            )
            at = np.searchsorted(image_ids, ref.image_ids[aligned.rows])
            scored[ref.name][row, at], correct[ref.name][row, at] = counted, right & counted
    failed = [np.zeros(shape[1], bool) if run.failed is None else run.failed for run in passes]
    errors = np.stack([~run.ok & ~f for run, f in zip(passes, failed)])
    return RobustnessOutcomes(np.asarray(image_ids, np.int64), conditions, errors, scored, correct)
