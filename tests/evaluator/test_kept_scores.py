"""Expected top-1 scores kept by content (`evaluator.kept_scores`): within `resamples_kept(folder)` a call with
the same arguments reads the numbers it computed before, bit for bit; any other argument, damaged file or changed
code computes them again."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evaluator import cache_files, kept_scores, label_uncertainty
from evaluator.label_uncertainty import uncertain_accuracies
from evaluator.paired import resamples_kept
from tests.evaluator.test_label_uncertainty_unrated import mixed_case


@pytest.fixture
def computed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many runs were computed (not read) while the test runs."""
    made: list[int] = []
    compute = label_uncertainty._uncertain_accuracies

    def counted(preds: Any, *rest: Any) -> Any:
        made.append(len(preds))
        return compute(preds, *rest)

    monkeypatch.setattr(label_uncertainty, "_uncertain_accuracies", counted)
    return made


def scores(folder: Path | None, **changed: Any) -> list[dict]:
    pred, post, ok, failed, unrated = mixed_case(n=300)
    args: dict[str, Any] = {"n_draws": 40, "seed": 5, "unrated": unrated, "unrated_noise": 0.25, **changed}
    with resamples_kept(folder):
        return [asdict(s) for s in uncertain_accuracies([pred, (pred + 1) % 40], post, [ok, None], **args)]


def test_the_same_arguments_read_the_same_numbers(tmp_path: Path, computed: list[int]) -> None:
    plain = scores(None)
    first, again = scores(tmp_path), scores(tmp_path)
    assert computed == [2, 2]  # without a folder, then the first with one: the second is read
    assert first == plain and again == plain  # NaN-free here, so == compares every number exactly
    assert len(list(tmp_path.glob("uncertain-scores-*.json"))) == 1


@pytest.mark.parametrize("changed", [{"seed": 6}, {"n_draws": 41}, {"unrated_noise": 0.3}, {"threshold": 0.8}])
def test_another_argument_is_computed_again(tmp_path: Path, computed: list[int], changed: dict) -> None:
    scores(tmp_path)
    assert scores(tmp_path, **changed) == scores(None, **changed)
    assert computed == [2, 2, 2]


def test_a_damaged_file_is_computed_again_and_replaced(tmp_path: Path, computed: list[int]) -> None:
    first = scores(tmp_path)
    (path,) = tmp_path.glob("uncertain-scores-*.json")
    path.write_text('[{"threshold": 0.9}]')  # parses, but holds no score
    assert scores(tmp_path) == first
    path.write_text("not json")
    assert scores(tmp_path) == first and scores(tmp_path) == first
    assert computed == [2, 2, 2]  # the last read the rewritten file


def test_changed_code_is_another_digest(tmp_path: Path, computed: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    scores(tmp_path)
    cache_files.source_digest.cache_clear()
    monkeypatch.setattr(kept_scores, "MODULES", (*kept_scores.MODULES, "kept_scores"))
    scores(tmp_path)
    cache_files.source_digest.cache_clear()
    assert computed == [2, 2]


def test_arrays_of_objects_are_never_kept(tmp_path: Path) -> None:
    assert kept_scores.digest(np.array([1, 2])) != kept_scores.digest(np.array([1, 3]))
    assert kept_scores.digest(np.array([1, 2])) != kept_scores.digest(np.array([1, 2], np.int32))
    assert kept_scores.digest(np.array([object()])) is None
