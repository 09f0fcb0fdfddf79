"""Many runs against one set of label draws (`uncertain_accuracies`): number for number what each run gets alone,
whatever the other runs predict."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import asdict

import numpy as np
import pytest

from evaluator import EvaluationError
from evaluator.label_draws import Coins, draw_accuracies, sampled_images
from evaluator.label_uncertainty import Posteriors, uncertain_accuracies, uncertain_accuracy
from evaluator.paired import JointBootstrap, resamples_kept
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


# The first run's numbers (expected, ci_low, ci_high, label_ci_low, label_ci_high, expected_scored) on
# `mixed_case(n=1500)` with 250 draws from seed 5, as the draws gave them before their sums left BLAS and the
# resample counts stopped being copied: the same seed must keep giving them bit for bit. Without a rate (None) the
# interval (second and third) is the one since unrated images stay among the images resampled; the rest as before.
PINNED = {
    None: ("0x1.5b50ea7ecf780p-1", "0x1.4883ff8000000p-1", "0x1.6f48b16666667p-1", "0x1.5258de9e32337p-1",
           "0x1.668cdc2f1d15ep-1", "0x1.400fdf3b645a2p+9"),
    0.25: ("0x1.36c22f28e2c73p-1", "0x1.27acda8000000p-1", "0x1.4487a9a666666p-1", "0x1.2eb70f91329dcp-1",
           "0x1.3fdf6dc27b8d2p-1", "0x1.510d0e5604189p+10"),
}  # fmt: skip


@pytest.mark.parametrize("noise", [None, 0.25])
def test_a_seed_gives_the_numbers_it_gave_before(noise: float | None) -> None:
    pred, post, ok, failed, unrated = mixed_case(n=1500)
    preds, oks, fails = other_runs(pred, ok, failed)
    first = uncertain_accuracies(preds, post, oks, failed=fails, n_draws=250, seed=5, unrated=unrated,
                                 unrated_noise=noise)[0]  # fmt: skip
    got = (first.expected_accuracy, first.ci_low, first.ci_high, first.label_ci_low, first.label_ci_high,
           first.expected_scored)  # fmt: skip
    assert tuple(float(x).hex() for x in got) == PINNED[noise]


def plain_draw_accuracies(runs: list[Coins], sampled: np.ndarray, n_draws: int, seed: int) -> list[tuple]:
    """The module docstring's accuracies computed the plain way: bool coins, BLAS products, the resample counts
    of the sampled images copied out, every sum in float32 as `JointBootstrap.means` takes it."""
    boot = JointBootstrap(len(sampled), n_draws, seed)
    cols = np.flatnonzero(sampled)
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    out: list[tuple[list, list, list]] = [([], [], []) for _ in runs]
    for counts in boot.counts():
        u = rng.random((len(counts), len(cols)), dtype=np.float32)
        v = rng.random((len(counts), len(cols)), dtype=np.float32)
        picked = counts[:, cols]
        for c, (label, resampled, scored_per_draw) in zip(runs, out):
            q, r = c.q[cols].astype(np.float32), c.r[cols].astype(np.float32)
            fixed = c.counted & ~sampled
            right_fixed = (fixed & (c.q >= 1)).astype(np.float32)
            seen_fixed = (fixed & ((c.q >= 1) | (c.r >= 1))).astype(np.float32)
            right = u < q
            seen = right | (v < r)
            n_seen = np.count_nonzero(seen, axis=1) + float(seen_fixed.sum())
            with np.errstate(invalid="ignore", divide="ignore"):
                label.append((np.count_nonzero(right, axis=1) + float(right_fixed.sum())) / n_seen)
                totals = (picked * right).sum(axis=1, dtype=np.float32) + counts @ right_fixed
                resampled.append(totals / ((picked * seen).sum(axis=1, dtype=np.float32) + counts @ seen_fixed))
            scored_per_draw.append(n_seen)
    return [tuple(np.concatenate(part).astype(np.float64) for part in parts) for parts in out]


@pytest.mark.parametrize("kept", [False, True])
@pytest.mark.parametrize("share", [1.0, 0.4, 0.0])
def test_the_draws_are_those_of_the_plain_computation(share: float, kept: bool) -> None:
    """Every image sampled (the resample counts read in place), some (the rest fixed in every draw), none; the
    resamples drawn for the pass, or kept as bytes (only the images a pass reads are widened)."""
    rng = np.random.default_rng(11)
    n = 20_000  # resamples in chunks of 400: 700 draws take two
    sampled = rng.random(n) < share
    runs = []
    for _ in range(3):
        q = np.where(sampled, rng.random(n), rng.random(n) < 0.6)
        r = np.where(sampled, rng.random(n) * (rng.random(n) < 0.8), rng.random(n) < 0.3)
        counted = rng.random(n) > 0.05
        runs.append(Coins(counted, np.where(counted, q, 0.0), np.where(counted, r, 0.0)))
    with resamples_kept() if kept else nullcontext():
        fast = draw_accuracies(runs, sampled, 700, 3)
    plain = plain_draw_accuracies(runs, sampled, 700, 3)
    for got, want in zip(fast, plain):
        for a, b in zip((got.label, got.boot, got.scored), want):
            np.testing.assert_array_equal(a, b)
    assert len({float(d.boot.mean()) for d in fast}) == 3  # the runs differ, so the test can tell them apart
