"""The counts the report's notes on ReaL and the MTurk review state, re-derived from the released files."""

from __future__ import annotations

import json

import numpy as np

from relabel.evaluation.report import SOURCE_NOTES
from tests.conftest import shared
from tests.evaluator.test_scoring import val_in_real_order


def test_real_rated_and_never_rated_images() -> None:
    info = np.load(shared("imagenet-val", "real_raters.npz"), allow_pickle=True)["info"]
    rated = {int(str(name).split("_val_")[1][:8]) for name, _ in info}
    pred, original, real = val_in_real_order()
    never = np.setdiff1d(np.arange(1, 50_001), sorted(rated))
    sets = real.to_lists()

    assert (len(rated), len(never)) == (24_889, 25_111)
    assert all(sets[i - 1] == [int(original[i - 1])] for i in never)  # unrated images keep the original label
    assert "24,889" in SOURCE_NOTES["real"] and "25,111" in SOURCE_NOTES["real"]


def test_mturk_images_are_part_of_where_the_prediction_differs() -> None:
    pred, original, _ = val_in_real_order()
    records = json.loads(shared("imagenet-val", "mturk_label_errors.json").read_text())
    ids = np.array([r["id"] for r in records])

    assert int((pred != original).sum()) == 13_634 and len(ids) == 5_440
    assert (pred[ids - 1] != original[ids - 1]).all()  # every candidate is where the prediction differs
    assert "5,440" in SOURCE_NOTES["mturk"] and "13,634" in SOURCE_NOTES["mturk"]
