"""Stored labels and predictions read as columns: the rows as the database driver returns them, JSON class lists
decoded in one call, label sets packed once per distinct list.

A 50,000-image reference is 50,000 label rows, a probabilistic snapshot some 185,000 posteriors and a run 50,000
predictions. Read through SQLAlchemy's result rows and the columns' JSON and enum types, that cost more than
scoring them; here each query runs on the driver's cursor, a JSON column is selected as its text and the texts are
joined and decoded by one `json.loads`, and a reference's label sets (a few thousand distinct lists on ImageNet) are
deduplicated and checked once per distinct list.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluator import LabelSets


def json_values(texts: Sequence[str | None]) -> list[Any]:
    """The JSON texts of a column decoded in one call (SQL NULL: None): a decode per row costs more than the query."""
    return json.loads("[" + ",".join("null" if t is None else t for t in texts) + "]")


def pack_label_sets(texts: Sequence[str], n_classes: int) -> LabelSets:
    """The label sets of class lists stored as JSON text, one per image; a class listed twice is kept once.

    Each distinct text is decoded once; the full (n_images, width) array is then checked by `LabelSets`, so an
    error names the image's row. Raises EvaluationError for a class outside 0..n_classes-1."""
    index: dict[str, int] = {}
    rows = np.fromiter((index.setdefault(t, len(index)) for t in texts), dtype=np.int64, count=len(texts))
    distinct = [list(dict.fromkeys(classes)) for classes in json_values(list(index))]
    width = max((len(classes) for classes in distinct), default=0)
    table = np.full((len(distinct), max(width, 1)), -1, dtype=np.int64)
    for i, classes in enumerate(distinct):
        table[i, : len(classes)] = classes
    return LabelSets(table[rows], n_classes)
