"""`score_uncertain_runs`: every run against one set of label draws per set of images, number for number what
`score_uncertain` gives the run alone."""

from __future__ import annotations

from dataclasses import asdict, replace

import numpy as np
import pytest

from evaluator.label_uncertainty import Posteriors
from evaluator.scoring import Score
from relabel.evaluation.references import Reference, ReferenceInfo
from relabel.evaluation.results import RunScore
from relabel.evaluation.runs import Aligned
from relabel.evaluation.scoring import score_uncertain, score_uncertain_runs
from relabel.evaluation.text import uncertainty_table
from tests.evaluator.test_label_uncertainty_unrated import mixed_case


def snapshot(post: Posteriors, unrated: np.ndarray) -> Reference:
    info = ReferenceInfo("snap", "snapshot", "h", post.n_images, post.n_images, False, consensus={"rule": "ds"})
    return Reference(info, np.arange(post.n_images), post.label_sets(), posteriors=post, unrated=unrated)


def runs(pred: np.ndarray, ok: np.ndarray, failed: np.ndarray) -> list[Aligned]:
    """Two runs over every image and one over the even images only (a group of its own)."""
    n = len(pred)
    every, even = np.arange(n), np.arange(0, n, 2)
    return [
        Aligned(every, pred[:, None], ok, failed),
        Aligned(every, ((pred + 1) % 40)[:, None], np.ones(n, bool), np.zeros(n, bool)),
        Aligned(even, pred[even, None], ok[even], failed[even]),
    ]


@pytest.mark.parametrize("other", [False, True])
@pytest.mark.parametrize("noise", [None, 0.3])
def test_shared_draws_give_each_run_its_own_numbers(other: bool, noise: float | None) -> None:
    pred, post, ok, failed, unrated = mixed_case(n=600)
    ref = snapshot(post, unrated)
    given = Posteriors(post.rows, post.classes, post.probs**2, post.n_images, post.n_classes) if other else None
    aligned = runs(pred, ok, failed)
    kw = {"n_boot": 150, "seed": 3, "posteriors": given, "unrated_noise": noise}
    shared = score_uncertain_runs(aligned, ref, **kw)  # type: ignore[arg-type]
    alone = [score_uncertain(a, ref, **kw) for a in aligned]  # type: ignore[arg-type]
    assert [asdict(s) for s in shared if s] == [asdict(s) for s in alone if s] and len(shared) == 3
    assert shared[0] and shared[2] and shared[0].expected_scored != shared[2].expected_scored  # two groups


def test_no_draws_no_scores() -> None:
    pred, post, ok, failed, unrated = mixed_case(n=60)
    assert score_uncertain_runs(runs(pred, ok, failed), snapshot(post, unrated), n_boot=0, seed=0) == [None] * 3


def test_the_uncertain_column_counts_voted_u_images_not_the_unrated_ones() -> None:
    pred, post, ok, failed, unrated = mixed_case(n=300)
    ref = snapshot(post, unrated)
    aligned = Aligned(np.arange(300), pred[:, None], ok, failed)
    u = score_uncertain(aligned, ref, n_boot=20, seed=0)
    assert u is not None and u.n_unrated > 0
    # category U: 7 voted images whose votes settle nothing (one excluded: an empty set) and the unrated ones
    u_category = Score(0.5, 6 + u.n_unrated, 3, 0, 1)
    score = RunScore("m", "snap", 300, 300, u_category, None, 0.5, {"A": u_category, "U": u_category}, uncertain=u)
    table = uncertainty_table(type("Ev", (), {"scores": [score]})())  # type: ignore[arg-type]
    assert table is not None and table[1][0][table[0].index("uncertain images")] == "7"
    no_draws = replace(score, uncertain=None)
    assert uncertainty_table(type("Ev", (), {"scores": [no_draws]})()) is None  # type: ignore[arg-type]
