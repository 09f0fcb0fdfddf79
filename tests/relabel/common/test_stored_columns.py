"""Label sets packed from stored JSON text: the sets `LabelSets.from_lists` gives, a class listed twice kept once,
and an error that names the image's row."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evaluator import EvaluationError, LabelSets
from relabel.common.stored_columns import json_values, pack_label_sets


def test_packed_sets_equal_the_lists_deduplicated() -> None:
    lists = [[3, 1], [], [2], [3, 1], [4, 4, 0], [2], [1, 3]]
    packed = pack_label_sets([json.dumps(c) for c in lists], n_classes=5)
    expected = LabelSets.from_lists([list(dict.fromkeys(c)) for c in lists], n_classes=5)
    assert np.array_equal(packed.labels, expected.labels)
    assert packed.labels[4].tolist() == [4, 0]  # order kept, the repeat dropped


def test_no_rows_and_only_empty_sets() -> None:
    assert pack_label_sets([], 5).labels.shape == (0, 1)
    assert pack_label_sets(["[]", "[]"], 5).counts.tolist() == [0, 0]


def test_a_class_outside_the_vocabulary_names_its_row() -> None:
    with pytest.raises(EvaluationError, match="row 2"):
        pack_label_sets(["[1]", "[1]", "[9]"], n_classes=5)


def test_json_values_reads_null_and_text_alike() -> None:
    assert json_values(['{"oop": true}', None, "null", "[1, 2]"]) == [{"oop": True}, None, None, [1, 2]]
