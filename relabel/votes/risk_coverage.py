"""Risk and coverage of a vote-based consensus: how many voted images the votes settle at a threshold, and how often a
settled image's label set agrees with a reference the user names. Pure numpy.

An image is *settled* when none of its voted pairs is uncertain (`relabel.votes.aggregation.uncertain`, the rule a
snapshot applies); it then takes the classes `relabel.votes.aggregation.decide` accepts. A settled image *agrees* with
the reference when every voted pair does: the class is accepted exactly when the reference holds it. Raising the
threshold settles fewer images (coverage falls) and, with calibrated posteriors, more of them agree (risk falls); the
curve shows the trade. A reference that also calibrated the posteriors is no independent check: the figures are then
in-sample.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from relabel.votes.aggregation import Aggregate, decide, uncertain

CURVE = (0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)  # thresholds shown beside the chosen one


@dataclass(frozen=True)
class CoveragePoint:
    """At `threshold`: `settled` of `voted` images settled; of the settled images the reference labels (`checked`),
    `agreeing` have its label set on every voted pair."""

    threshold: float
    voted: int
    settled: int
    checked: int
    agreeing: int

    @property
    def coverage(self) -> float:
        return self.settled / self.voted if self.voted else float("nan")

    @property
    def agreement(self) -> float:
        return self.agreeing / self.checked if self.checked else float("nan")


def reference_truth(pairs: np.ndarray, reference: Mapping[int, Collection[int]]) -> tuple[np.ndarray, np.ndarray]:
    """((I,) bool the reference holds the pair's class, (I,) bool the reference labels the pair's image), for
    `pairs` (I, 2) (image id, class index) and `reference` image id -> classes."""
    rows = pairs.tolist()
    labelled = np.fromiter((i in reference for i, _ in rows), bool, len(rows))
    holds = np.fromiter((c in reference.get(i, ()) for i, c in rows), bool, len(rows))
    return holds, labelled


def risk_coverage(
    pairs: np.ndarray,
    result: Aggregate,
    truth: tuple[np.ndarray, np.ndarray],
    thresholds: Iterable[float],
    *,
    original: np.ndarray | None = None,
    keep_original: float | None = None,
) -> list[CoveragePoint]:
    """A `CoveragePoint` per threshold (ascending), for the voted `pairs` (I, 2) sorted by image, the posteriors of
    `result` and the reference's `truth` (`reference_truth`); `original` and `keep_original` as a snapshot uses them."""
    images, inverse = np.unique(pairs[:, 0], return_inverse=True)
    inverse = inverse.ravel()
    holds, labelled = truth
    checked_image = np.bincount(inverse, weights=labelled, minlength=len(images)) > 0
    points = []
    for t in sorted(set(thresholds)):
        open_ = uncertain(result, t, original=original, keep_original=keep_original)
        accepted = decide(result, t, original=original, keep_original=keep_original)
        settled = np.bincount(inverse, weights=open_, minlength=len(images)) == 0
        wrong = np.bincount(inverse, weights=(accepted != holds) & labelled, minlength=len(images)) > 0
        checked = settled & checked_image
        points.append(
            CoveragePoint(t, len(images), int(settled.sum()), int(checked.sum()), int((checked & ~wrong).sum()))
        )
    return points


def describe(points: list[CoveragePoint], reference: str, calibrated_on_it: bool) -> dict[str, Any]:
    """What a snapshot records of its risk and coverage (`Snapshot.consensus["risk_coverage"]`)."""
    return {"reference": reference, "in_sample": calibrated_on_it, "points": [asdict(p) for p in points]}


def coverage_lines(recorded: Mapping[str, Any], chosen: float) -> list[str]:
    """Plain-text lines of a recorded curve (`describe`): the chosen threshold first, then the curve."""
    points = [CoveragePoint(**p) for p in recorded.get("points", [])]
    caveat = " (in-sample: the posteriors were calibrated on it)" if recorded.get("in_sample") else ""
    ref = recorded.get("reference")
    out = []
    for p in points:
        if p.threshold == chosen:
            out.append(
                f"settled by the votes: {p.settled:,} of {p.voted:,} voted images ({p.coverage:.1%}); {p.agreeing:,} "
                f"of the {p.checked:,} that {ref} labels agree with it ({p.agreement:.2%}){caveat}"
            )
    curve = "; ".join(f"{p.threshold:g}: {p.coverage:.1%} settled, {p.agreement:.2%} agree" for p in points)
    return [*out, f"risk-coverage vs {ref} (threshold: settled, agreeing): {curve}"]
