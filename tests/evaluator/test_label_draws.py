"""Many runs against one set of label draws (`uncertain_accuracies`): number for number what each run gets alone,
whatever the other runs predict."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from evaluator import EvaluationError
from evaluator.label_draws import sampled_images
from evaluator.label_uncertainty import Posteriors, uncertain_accuracies, uncertain_accuracy
from tests.evaluator.test_label_uncertainty_unrated import mixed_case


def other_runs(pred: np.ndarray, ok: np.ndarray, failed: np.ndarray) -> tuple[list, list, list]:
    """Three runs over the same images: the case's, one that is right on other images, and one with other
    failures and infrastructure errors."""
    rng = np.random.default_rng(9)
    second = np.where(rng.random(len(pred)) < 0.5, (pred + 1) % 40, pred)
    ok3 = rng.random(len(pred)) > 0.2
    failed3 = ~ok3 & (rng.random(len(pred)) < 0.3)
    return [pred, second, (pred + 3) % 40], [ok, None, ok3], [failed, None, failed3]


@pytest.mark.parametrize("noise", [None, 0.0, 0.25, 1.0])
def test_each_run_gets_the_numbers_it_gets_alone(noise: float | None) -> None:
    pred, post, ok, failed, unrated = mixed_case(n=1500)
    preds, oks, fails = other_runs(pred, ok, failed)
    shared = uncertain_accuracies(preds, post, oks, failed=fails, n_draws=250, seed=5, unrated=unrated,
                                  unrated_noise=noise)  # fmt: skip
    alone = [
        uncertain_accuracy(p, post, o, failed=f, n_draws=250, seed=5, unrated=unrated, unrated_noise=noise)
        for p, o, f in zip(preds, oks, fails)
    ]
    assert [asdict(s) for s in shared] == [asdict(s) for s in alone]
    assert len({s.expected_accuracy for s in shared}) == 3  # the runs differ, so the test can tell them apart


def test_a_run_scored_beside_others_or_in_another_order_keeps_its_numbers() -> None:
    pred, post, ok, failed, unrated = mixed_case(n=800)
    preds, oks, fails = other_runs(pred, ok, failed)
    together = uncertain_accuracies(preds, post, oks, failed=fails, n_draws=200, seed=2, unrated=unrated)
    reversed_ = uncertain_accuracies(preds[::-1], post, oks[::-1], failed=fails[::-1], n_draws=200, seed=2,
                                     unrated=unrated)  # fmt: skip
    assert [asdict(s) for s in together] == [asdict(s) for s in reversed_[::-1]]


def test_only_images_with_an_unsettled_posterior_are_sampled() -> None:
    post = Posteriors.from_dicts([{1: 1.0}, {1: 0.4, 2: 1.0}, {}, {3: 0.0}, {4: 1.0}], 10)
    unrated = np.array([False, False, False, False, True])
    assert sampled_images(post, unrated, None).tolist() == [False, True, False, False, False]
    assert sampled_images(post, unrated, 0.2).tolist() == [False, True, False, False, True]
    assert sampled_images(post, unrated, 1.0).tolist() == [False, True, False, False, False]  # drawn absent always


def test_no_runs_no_scores_and_masks_one_per_run() -> None:
    pred, post, ok, failed, _ = mixed_case(n=50)
    assert uncertain_accuracies([], post, n_draws=10) == []
    with pytest.raises(EvaluationError, match="2 masks for 1 runs"):
        uncertain_accuracies([pred], post, [ok, ok], n_draws=10)
