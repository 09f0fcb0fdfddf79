"""The parts of an evaluation that its own modules compute and `relabel.evaluation.results` holds: per-image
top-1 outcomes (`relabel.evaluation.compare`), paired differences taken apart (`label_changes`), the aggregation
sensitivity rows (`label_sensitivity`) and a robustness run's per-image outcomes (`robustness_outcomes`). Plain
dataclasses in a leaf module, so that the results read them without importing the modules that compute them (which
import the results).

A robustness run's outcomes are stored in JSON with each mask as one base64 string of its bits (numpy `packbits`,
little bit order: bit i is image i of `image_ids`).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from evaluator.decomposition import DifferenceParts
from evaluator.paired import JointBootstrap
from relabel.common.errors import InputError

ENCODING = "base64 of numpy.packbits(mask, bitorder='little'): bit i is image_ids[i]"

Cell = tuple[str, str]  # (run, reference)


@dataclass(frozen=True, eq=False)
class Outcomes:
    """Top-1 outcomes per image: `correct` and `scored` are bool (n_runs, n_references, n_images) over
    `image_ids`, the sorted union of the references' images. An image outside a reference, not predicted by the
    run, excluded by the reference or lost to an infrastructure error is not scored; a failed reply is scored,
    and wrong."""

    image_ids: np.ndarray
    runs: tuple[str, ...]
    references: tuple[str, ...]
    correct: np.ndarray
    scored: np.ndarray

    def cell(self, run: str, reference: str) -> tuple[np.ndarray, np.ndarray]:
        """(correct, scored) of one run under one reference, (n_images,) each."""
        i, j = self.runs.index(run), self.references.index(reference)
        return self.correct[i, j], self.scored[i, j]

    def resampled_top1(self, n_boot: int, seed: int, cells: Sequence[Cell] | None = None) -> dict[Cell, np.ndarray]:
        """{(run, reference): (n_boot,) top-1 in each resample}: every cell on its own scored images, all cells
        from the same joint resamples of `image_ids` (`evaluator.paired.JointBootstrap`), so a statistic built
        from several cells (a mean over references, a difference between models) gets its interval from the
        percentiles of the same statistic over the resamples. NaN where a resample holds none of a cell's images."""
        wanted = list(cells) if cells is not None else [(r, f) for r in self.runs for f in self.references]
        index = [(self.runs.index(r), self.references.index(f)) for r, f in wanted]
        rows = [i for i, _ in index], [j for _, j in index]
        means = JointBootstrap(len(self.image_ids), n_boot, seed).means(self.correct[rows], self.scored[rows])
        return {cell: means[:, k] for k, cell in enumerate(wanted)}


@dataclass(frozen=True)
class ClassShiftRow:
    """One class of the original label: top-1 under the first reference (a) and under the other (b) on its
    images in common, the difference b − a and its 95 % paired bootstrap interval (None: not computed)."""

    class_index: int
    name: str
    n_images: int
    accuracy_a: float
    accuracy_b: float
    difference: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class LabelChange:
    """One run under one reference against the first reference (`baseline`) on their images in common."""

    run: str
    reference: str
    baseline: str
    parts: DifferenceParts
    baseline_by_construction: bool  # baseline top-1 is 0 or 100 % on these images, not on all of the run's
    n_classes: int  # classes of the original label with images in common
    gains: tuple[ClassShiftRow, ...] = ()  # largest differences first (positive only)
    losses: tuple[ClassShiftRow, ...] = ()  # most negative first


@dataclass(frozen=True)
class SensitivityRow:
    """One way of making the labels: `top1` in [0, 1] (expected over label draws, or plain against a source), its
    95 % interval (labels + images; a source's: Wilson), the labels-only interval (None for a source) and the
    images scored (per draw on average)."""

    labels: str  # a method name, "source:NAME", or "unrated certain" / "unrated at base error"
    kind: str  # AGGREGATION, SOURCE_KIND or UNRATED
    top1: float
    ci_low: float | None
    ci_high: float | None
    label_ci_low: float | None
    label_ci_high: float | None
    n_images: float


@dataclass(frozen=True)
class LabelSensitivity:
    """The rows of one run against one probabilistic snapshot; `n_unrated` images of the run rest on
    `base_source` alone, whose labels are wrong on a share `base_error_rate` of the rated images."""

    run: str
    reference: str
    rule: str  # the snapshot's own consensus rule
    n_unrated: int
    base_source: str | None
    base_error_rate: float
    rows: tuple[SensitivityRow, ...]
    note: str = ""  # why a method row is missing or may differ from the snapshot's own posteriors


@dataclass(frozen=True, eq=False)
class RobustnessOutcomes:
    """Per image and condition: errors (n_conditions, n_images) bool, and per reference name the scored and
    correct masks of the same shape. `image_ids` sorted ascending; `conditions` "clean", then "name/severity"."""

    image_ids: np.ndarray
    conditions: tuple[str, ...]
    errors: np.ndarray
    scored: dict[str, np.ndarray]
    correct: dict[str, np.ndarray]

    def to_json(self) -> dict[str, Any]:
        return {
            "image_ids": [int(i) for i in self.image_ids],
            "conditions": list(self.conditions),
            "encoding": ENCODING,
            "errors": _encode(self.errors),
            "references": {
                name: {"scored": _encode(self.scored[name]), "correct": _encode(self.correct[name])}
                for name in self.scored
            },
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], expected: tuple[str, ...] | None = None) -> RobustnessOutcomes:
        """Outcomes back from `to_json`; InputError naming the part that is missing, unreadable or does not match
        the image ids, or (with `expected`) the conditions of the run's grid."""
        try:
            ids = np.asarray(d["image_ids"], dtype=np.int64)
            conditions = tuple(str(c) for c in d["conditions"])
            shape = (len(conditions), len(ids))
            refs = d.get("references") or {}
            if expected is not None and conditions != expected:
                raise InputError(f"robustness outcomes: conditions {list(conditions)} are not the grid's")
            return cls(
                ids,
                conditions,
                _decode(d["errors"], shape, "errors"),
                {name: _decode(m["scored"], shape, f"{name} scored") for name, m in refs.items()},
                {name: _decode(m["correct"], shape, f"{name} correct") for name, m in refs.items()},
            )
        except (KeyError, TypeError, ValueError, binascii.Error) as exc:
            raise InputError(f"robustness outcomes unreadable ({type(exc).__name__}: {exc})") from exc


def _encode(mask: np.ndarray) -> list[str]:
    return [base64.b64encode(np.packbits(row, bitorder="little").tobytes()).decode("ascii") for row in mask]


def _decode(rows: list[str], shape: tuple[int, int], what: str) -> np.ndarray:
    if len(rows) != shape[0]:
        raise InputError(f"robustness outcomes {what}: {len(rows)} conditions, expected {shape[0]}")
    out = np.zeros(shape, bool)
    for i, text in enumerate(rows):
        bits = np.unpackbits(np.frombuffer(base64.b64decode(text, validate=True), np.uint8), bitorder="little")
        if len(bits) != 8 * -(-shape[1] // 8) or bits[shape[1] :].any():
            raise InputError(f"robustness outcomes {what}, condition {i}: does not hold {shape[1]} images")
        out[i] = bits[: shape[1]].astype(bool)
    return out
