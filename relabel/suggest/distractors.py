"""Hard distractors for multiple choice, from a confusion source: class groups or a confusion matrix."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from relabel.arrays import load_array
from relabel.errors import InputError
from relabel.textfiles import read_json


class DistractorSource:
    """For each class, its most confusable classes, best first."""

    def __init__(self, neighbours: dict[int, list[int]], origin: str) -> None:
        self.neighbours, self.origin = neighbours, origin

    def describe(self) -> str:
        return f"hard:{self.origin}"

    def hard(self, true: int, k: int, exclude: set[int], rng: np.random.Generator) -> list[int]:
        """Up to `k` confusable classes (ties in order broken by the caller's seeded generator)."""
        candidates = [c for c in self.neighbours.get(true, []) if c not in exclude]
        if len(candidates) > k:
            candidates = [int(c) for c in rng.permutation(candidates[: 2 * k])[:k]]
        return candidates[:k]


def load_confusion(path: Path, n_classes: int) -> DistractorSource:
    """Class groups as JSON (`[{"classes": {"72": "...", ...}}, ...]`, like confusion_clusters.json) or a (C, C) .npy
    confusion matrix of counts (rows: true class, columns: predicted)."""
    if not path.is_file():
        raise InputError(f"confusion source {str(path)!r} does not exist")
    if path.suffix.lower() == ".npy":
        return _from_matrix(load_array(path), n_classes, path.name)
    try:
        groups = read_json(path)
        neighbours: dict[int, list[int]] = {}
        for group in groups:
            members = [int(c) for c in group["classes"]]
            for c in members:
                neighbours.setdefault(c, []).extend(m for m in members if m != c and m not in neighbours.get(c, []))
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: expected a JSON list of {{'classes': {{index: name}}}} groups ({exc})") from exc
    bad = [c for c in neighbours if not 0 <= c < n_classes]
    if bad:
        raise InputError(f"{path}: class indices {bad[:3]} are outside 0..{n_classes - 1}")
    return DistractorSource(neighbours, path.name)


def _from_matrix(matrix: np.ndarray, n_classes: int, origin: str) -> DistractorSource:
    if matrix.shape != (n_classes, n_classes):
        raise InputError(f"{origin}: a confusion matrix must be {n_classes}×{n_classes}, got {matrix.shape}")
    sym = matrix + matrix.T
    np.fill_diagonal(sym, 0)
    order = np.argsort(-sym, axis=1, kind="stable")
    neighbours = {c: [int(j) for j in order[c] if sym[c, j] > 0][:20] for c in range(n_classes)}
    return DistractorSource(neighbours, origin)


def confusion_from_predictions(true: np.ndarray, pred: np.ndarray, n_classes: int, origin: str) -> DistractorSource:
    """Confusion of a supervised model's top-1 predictions against reference labels."""
    matrix = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(matrix, (true, pred), 1)
    return _from_matrix(matrix, n_classes, origin)
