"""The expected benefit of one more review and the active order (relabel.review.active)."""

import numpy as np
import pytest

from relabel.common.errors import InputError
from relabel.review.active import (
    FLIP_FEATURES,
    NO_RUN,
    active_order,
    change_probability,
    correct_probability,
    fit_flip_model,
    flip_features,
    flip_probability,
    learned_benefit,
    reason,
    review_benefit,
    score_variance,
    settled_chance,
)

# image 0: a settled class; image 1: one class at 0.55; image 2: two classes at 0.7 / 0.3; image 3: no pairs
ROWS = np.array([0, 1, 2, 2])
CLASSES = np.array([3, 4, 5, 6])
PROBS = np.array([0.99, 0.55, 0.7, 0.3])


def test_label_errors_are_the_expected_wrong_decisions():
    b = review_benefit(ROWS, CLASSES, PROBS, 4)
    assert b.label_errors == pytest.approx([0.01, 0.45, 0.6, 0.0])
    assert b.focus.tolist() == [3, 4, 5, -1]  # 0.7 and 0.3 tie on doubt: the lower class index
    assert np.isnan(b.focus_prob[3])


def test_runs_at_stake_raise_an_image_and_absent_pairs_are_certain():
    # run A's top-1 on image 1 is the uncertain class; run B's top-1 there is not a listed pair (q = 0), so certain
    top1 = np.array([[3, 4, 9, NO_RUN], [3, 8, 9, NO_RUN]])
    q = correct_probability(ROWS, CLASSES, PROBS, 4, top1)
    assert q.tolist() == [[0.99, 0.55, 0.0, 0.0], [0.99, 0.0, 0.0, 0.0]]
    b = review_benefit(ROWS, CLASSES, PROBS, 4, top1=top1)
    assert b.run_risk == pytest.approx([0.02, 0.45, 0.0, 0.0])
    assert b.runs_at_stake.tolist() == [0, 1, 0, 0]
    assert b.score == pytest.approx(b.label_errors + b.run_risk)
    assert active_order(b).tolist() == [1, 2, 0, 3]
    assert score_variance(q).tolist() == pytest.approx([0.99 * 0.01 + 0.55 * 0.45, 0.99 * 0.01])


def test_order_is_seeded_on_ties_and_excludes_reviewed():
    b = review_benefit(np.array([0, 1, 2]), np.array([0, 0, 0]), np.array([0.5, 0.5, 0.5]), 3)
    assert active_order(b, seed=1).tolist() == active_order(b, seed=1).tolist()
    assert sorted(active_order(b, seed=1).tolist()) == [0, 1, 2]
    assert 1 not in active_order(b, exclude=np.array([False, True, False])).tolist()


def test_reason_line():
    top1 = np.array([[3, 4, 5, NO_RUN]] * 3)
    b = review_benefit(ROWS, CLASSES, PROBS, 4, top1=top1)
    names = {4: "tabby cat", 5: "tiger cat", 3: "egyptian cat"}.__getitem__
    assert reason(b, 1, names) == "P(tabby cat) = 0.55; changes 3 runs' top-1"
    no_runs = review_benefit(ROWS, CLASSES, PROBS, 4)
    assert reason(no_runs, 2, names) == "P(tiger cat) = 0.70; 0.60 expected label errors"
    assert reason(b, 3, names) == "no votes yet"


def test_bad_input_is_refused():
    with pytest.raises(InputError, match="rows must lie"):
        review_benefit(np.array([5]), np.array([0]), np.array([0.5]), 2)
    with pytest.raises(InputError, match="one column per image"):
        correct_probability(ROWS, CLASSES, PROBS, 4, np.array([[1, 2]]))
    with pytest.raises(InputError, match=r"\[0, 1\]"):
        review_benefit(np.array([0]), np.array([0]), np.array([1.5]), 1)


def _features(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """n items over n // 4 images; (features, answer codes)."""
    answer = rng.integers(0, 3, n)
    rows = np.arange(n) // 4
    f = flip_features(
        rng.random(n), rng.random(n) < 0.5, rng.random(n) < 0.2, answer, rng.random(n) < 0.1, np.full(n, 4),
        rng.uniform(0.6, 0.9, n), rows,
    )  # fmt: skip
    return f, answer


def test_a_flip_model_learns_which_items_flip():
    """Items answered maybe flip with chance 0.6, the others with 0.05: the fitted model says so."""
    rng = np.random.default_rng(0)
    f, answer = _features(rng, 4000)
    assert f.shape == (4000, len(FLIP_FEATURES))
    flipped = rng.random(4000) < np.where(answer == 1, 0.6, 0.05)
    model = fit_flip_model(f, flipped)
    test, test_answer = _features(rng, 2000)
    p = flip_probability(model, test)
    assert p[test_answer == 1].mean() == pytest.approx(0.6, abs=0.05)
    assert p[test_answer != 1].mean() == pytest.approx(0.05, abs=0.02)
    none = fit_flip_model(f[:10], np.zeros(10, bool))  # nothing flipped yet: finite, low
    assert np.isfinite(none.weights).all() and flip_probability(none, test).max() < 0.1
    with pytest.raises(InputError, match="flip model"):
        fit_flip_model(f[:0], np.zeros(0, bool))


def test_an_image_changes_unless_none_of_its_items_flips():
    change = change_probability(np.array([0, 0, 1, 3]), np.array([0.5, 0.5, 0.1, 1.0]), 4)
    assert change == pytest.approx([0.75, 0.1, 0.0, 1.0])


def test_a_reviewed_set_is_less_sure_with_more_candidates():
    # images 0, 1 reviewed: one item at 0.9; two items at 0.9 and 0.8. Image 2 (one item) takes image 0's
    # chance; image 3 (three items, none reviewed) the lowest seen
    rows = np.array([0, 1, 1, 2, 3, 3, 3])
    probs = np.array([0.9, 0.9, 0.2, 0.5, 0.5, 0.5, 0.5])
    settled = settled_chance(rows, probs, np.array([True, True, False, False]))
    assert settled == pytest.approx([0.9, 0.72, 0.9, 0.72])
    assert settled_chance(rows, probs, np.zeros(4, bool)) == pytest.approx(np.ones(4))
    assert learned_benefit(np.array([0.5, 1.0]), np.array([0.5, 0.2])) == pytest.approx([0.25, 0.2])
