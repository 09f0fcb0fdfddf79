"""The review simulator (relabel.planning.simulation) on synthetic pools of known answers, and `relabel simulate
review` on a small workspace."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relabel.cli import cli
from relabel.common.errors import InputError, NotFoundError
from relabel.planning.simulation import (
    ALL_WEIGHTS,
    KEEP_ORIGINAL,
    SUGGESTION_WEIGHT,
    THRESHOLD,
    UNCERTAIN_WEIGHT,
    Pool,
    State,
    Step,
    disputed_priority,
    make_pool,
    reviews_to_reach,
    simulate,
)
from relabel.review.active import NO_RUN
from relabel.votes.aggregation import MAYBE, NO, YES, FitOptions, Votes, aggregate, make_votes


def pool_of(answers: list[list[list[int]]], present: list[list[bool]], **kwargs) -> Pool:
    """answers[image][item] lists one code per worker (worker w gives the w-th code); item k of an image is
    class k; the reference holds the items marked `present`."""
    item, worker, code, image, classes = [], [], [], [], []
    for i, items in enumerate(answers):
        for k, codes in enumerate(items):
            image.append(i)
            classes.append(k)
            for w, a in enumerate(codes):
                item.append(len(image) - 1)
                worker.append(w)
                code.append(a)
    votes = make_votes(*(np.array(x) for x in (item, worker, code, image)))
    reference = [[k for k, p in enumerate(ps) if p] for ps in present]
    kwargs.setdefault("original", [()] * len(answers))
    return make_pool(votes, np.array(classes), reference=reference, **kwargs)


def noisy_pool(rng: np.random.Generator, n_images: int = 60, workers: int = 5) -> Pool:
    """Two items per image, the first present; each worker is right with chance 0.7 on each item."""
    answers, present = [], []
    for _ in range(n_images):
        items = []
        for truth in (YES, NO):
            items.append([truth if rng.random() < 0.7 else YES + NO - truth for _ in range(workers)])
        answers.append(items)
        present.append([True, False])
    return pool_of(answers, present)


def set_correct(pool: Pool, state: State) -> np.ndarray:
    """(n_images,) bool: every item of the image agrees with the reference."""
    assert pool.reference is not None
    truth = np.array([c in pool.reference[i] for i, c in pool.pairs.tolist()])
    wrong = np.bincount(pool.pairs[:, 0], weights=state.accepted != truth, minlength=pool.n_images)
    return wrong == 0


class TestRandomOrder:
    def test_with_a_rule_that_reads_each_image_alone_each_review_adds_its_own_gain(self) -> None:
        """Majority decides every item from its own answers: after n reviews, agreement is the start's plus the
        gains (after a full review minus at the start) of exactly the reviewed images."""
        pool = noisy_pool(np.random.default_rng(1))
        states: list[State] = []
        steps = simulate(
            pool, "random", 7, pool.n_images, seed=3, method="majority", on_step=lambda s, st: states.append(st)
        )
        start, end = set_correct(pool, states[0]), set_correct(pool, states[-1])
        assert states[-1].reviewed.all() and steps[-1].reviews == pool.n_images
        for step, state in zip(steps, states):
            gain = (end.astype(int) - start)[state.reviewed].sum()
            assert step.set_agreement == pytest.approx(start.mean() + gain / pool.n_images)

    def test_averaged_over_seeds_agreement_grows_linearly_between_start_and_full_review(self) -> None:
        """E[A(n)] = A0 + n / M (A1 - A0): over 200 seeds (each draws its own first answers and permutation),
        the mean residual after n of M reviews is within four standard errors of 0."""
        pool = noisy_pool(np.random.default_rng(2))
        m, n = pool.n_images, 20
        residuals = []
        for seed in range(200):
            steps = simulate(pool, "random", n, m, seed=seed, method="majority")
            a0, an, a1 = steps[0].set_agreement, steps[1].set_agreement, steps[-1].set_agreement
            residuals.append(an - (a0 + n / m * (a1 - a0)))
        r = np.array(residuals)
        assert abs(r.mean()) < 4 * r.std(ddof=1) / np.sqrt(len(r))
        assert r.std() > 0  # the draws differ, so the test could fail

    def test_the_random_order_is_a_seeded_permutation(self) -> None:
        pool = noisy_pool(np.random.default_rng(4))
        seen: list[np.ndarray] = []
        simulate(pool, "random", 10, 30, seed=5, method="majority", on_step=lambda s, st: seen.append(st.reviewed))
        again: list[np.ndarray] = []
        simulate(pool, "random", 10, 30, seed=5, method="majority", on_step=lambda s, st: again.append(st.reviewed))
        assert all(np.array_equal(a, b) for a, b in zip(seen, again)) and seen[-1].sum() == 30


def ambiguous_pool(n_images: int = 300, ambiguous: int = 30, runs: bool = False) -> Pool:
    """Two items per image, the first present. Easy images: ten workers agree (yes / no). Ambiguous ones: half the
    workers say maybe on both items, the others yes to the present one and no to the other, so one answer often
    settles nothing while all ten do."""
    answers, present = [], []
    for i in range(n_images):
        if i % (n_images // ambiguous) == 0:
            answers.append([[YES] * 5 + [MAYBE] * 5, [NO] * 5 + [MAYBE] * 5])
        else:
            answers.append([[YES] * 10, [NO] * 10])
        present.append([True, False])
    top1 = np.zeros((1, n_images), np.int64) if runs else None
    return pool_of(answers, present, top1=top1, run_names=("model",) if runs else ())


class TestActiveOrder:
    def test_active_settles_the_ambiguous_images_first(self) -> None:
        pool = ambiguous_pool()
        curves = {o: simulate(pool, o, 10, 150, seed=0) for o in ("random", "active")}
        at = {o: {s.reviews: s.set_agreement for s in c} for o, c in curves.items()}
        assert at["random"][0] == at["active"][0] < 0.97  # the same start
        assert at["active"][30] == 1.0 and at["random"][30] < at["active"][30]
        assert at["active"][30] >= at["random"][150]
        goal = at["random"][150]
        assert reviews_to_reach(curves["active"], goal) <= 0.5 * 150

    def test_an_explore_share_of_one_is_the_random_order(self) -> None:
        pool = ambiguous_pool(n_images=60, ambiguous=6)
        picked: dict[str, list[np.ndarray]] = {"random": [], "active": []}
        simulate(pool, "random", 10, 40, seed=2, on_step=lambda s, st: picked["random"].append(st.reviewed))
        simulate(
            pool, "active", 10, 40, seed=2, explore=1.0, on_step=lambda s, st: picked["active"].append(st.reviewed)
        )
        assert all(np.array_equal(a, b) for a, b in zip(picked["random"], picked["active"]))
        with pytest.raises(InputError, match="explore"):
            simulate(pool, "active", 10, 40, explore=1.5)

    def test_runs_top1_and_its_halfwidth_follow_the_labels(self) -> None:
        pool = ambiguous_pool(runs=True)
        steps = simulate(pool, "active", 30, 30, seed=0)
        assert steps[-1].run_top1[0] == 100.0 and steps[-1].halfwidth[0] < 0.1 * steps[0].halfwidth[0]


class TestLearnedOrder:
    def test_beats_random_where_a_review_flips_predictably(self) -> None:
        """On ambiguous_pool an item whose one answer is maybe is the one a review changes: after one random step
        to learn from, the learned order settles the ambiguous images and reaches random's agreement after half
        the images within half of those reviews."""
        pool = ambiguous_pool(n_images=600, ambiguous=60)
        curves = {o: simulate(pool, o, 10, 300, seed=0) for o in ("random", "learned")}
        goal = curves["random"][-1].set_agreement
        assert curves["learned"][0].set_agreement == curves["random"][0].set_agreement < goal
        assert curves["learned"][1].set_agreement == curves["random"][1].set_agreement  # the first step is random
        reached = reviews_to_reach(curves["learned"], goal)
        assert reached is not None and reached <= 0.5 * 300
        assert curves["learned"][6].set_agreement == 1.0

    def test_the_order_never_reads_the_reference(self) -> None:
        pool = ambiguous_pool(n_images=200, ambiguous=20, runs=True)
        garbage = Pool(
            pool.votes, pool.pairs, pool.original, pool.n_images, [frozenset({7, i % 3}) for i in range(200)],
            pool.top1, pool.run_names,
        )  # fmt: skip
        picked: dict[str, list[np.ndarray]] = {"true": [], "garbage": []}
        for name, p in (("true", pool), ("garbage", garbage)):
            simulate(p, "learned", 10, 120, seed=3, on_step=lambda s, st, name=name: picked[name].append(st.reviewed))
        assert len(picked["true"]) == 13
        assert all(np.array_equal(a, b) for a, b in zip(picked["true"], picked["garbage"], strict=True))


class TestWarmStart:
    def test_a_warm_refit_lands_on_the_cold_fit(self) -> None:
        """Dawid-Skene on 400 items of 8 workers, first one answer per item then all: EM started from the first
        fit's posteriors converges to the cold fit on all answers, in fewer iterations."""
        rng = np.random.default_rng(0)
        truth = rng.random(400) < 0.3
        accuracy = rng.uniform(0.65, 0.95, 8)
        item = np.repeat(np.arange(400), 8)
        worker = np.tile(np.arange(8), 400)
        right = rng.random(len(item)) < accuracy[worker]
        answer = np.where(right == truth[item], YES, NO)
        votes = make_votes(item, worker, answer, np.arange(400))
        first = worker == item % 8  # one answer per item
        some = Votes(item[first], worker[first], answer[first], votes.item_image, 8)
        before = aggregate(some, "ds")
        cold = aggregate(votes, "ds")
        warm = aggregate(votes, "ds", FitOptions(initial=before.posterior))
        assert cold.converged and warm.converged
        assert np.abs(warm.posterior - cold.posterior).max() < 1e-4
        assert np.abs(before.posterior - cold.posterior).max() > 0.5  # the start was far off: the test can fail
        partly = np.where(np.arange(400) % 2 == 0, np.nan, before.posterior)  # NaN: that item starts cold
        assert np.abs(aggregate(votes, "ds", FitOptions(initial=partly)).posterior - cold.posterior).max() < 1e-4
        with pytest.raises(InputError, match="initial posterior has"):
            aggregate(votes, "ds", FitOptions(initial=np.full(3, 0.5)))
        with pytest.raises(InputError, match=r"must lie in \[0, 1\]"):
            aggregate(votes, "ds", FitOptions(initial=np.full(400, 1.5)))


class TestSteps:
    def test_on_step_gets_each_step_and_its_state(self) -> None:
        pool = ambiguous_pool(runs=True)
        got: list[tuple[Step, State]] = []
        steps = simulate(pool, "disputed", 40, 100, seed=1, on_step=lambda s, st: got.append((s, st)))
        assert [s.reviews for s in steps] == [0, 40, 80, 100] and [s for s, _ in got] == steps
        for s, st in got:
            assert st.reviews == s.reviews == st.reviewed.sum()
            assert st.rows.shape == st.classes.shape == st.probs.shape == st.accepted.shape == (pool.votes.n_items,)
            assert ((st.probs >= 0) & (st.probs <= 1)).all() and s.seconds >= 0
            assert s.run_top1.shape == s.halfwidth.shape == (1,)
            # the answers the fit read: one per item at the start, then every answer of each reviewed image
            v = pool.votes
            per_item = np.bincount(v.item[st.revealed], minlength=v.n_items)
            reviewed_items = st.reviewed[v.item_image]
            assert (per_item[~reviewed_items] == 1).all()
            assert (per_item[reviewed_items] == np.bincount(v.item, minlength=v.n_items)[reviewed_items]).all()

    def test_without_a_reference_agreement_is_nan_and_the_budget_stops_at_the_images(self) -> None:
        pool = ambiguous_pool(n_images=20, ambiguous=2)
        bare = Pool(pool.votes, pool.pairs, pool.original, pool.n_images, None, pool.top1, pool.run_names)
        steps = simulate(bare, "active", 8, 1000)
        assert np.isnan(steps[0].set_agreement) and steps[-1].reviews == 20

    def test_bad_arguments_are_named(self) -> None:
        pool = ambiguous_pool(n_images=20, ambiguous=2)
        known = "known: active, disputed, learned, random"
        with pytest.raises(NotFoundError, match=f"unknown review order 'smart'; {known}"):
            simulate(pool, "smart", 5, 10)
        with pytest.raises(InputError, match="step must be at least 1"):
            simulate(pool, "random", 0, 10)
        with pytest.raises(InputError, match="threshold 1.5"):
            simulate(pool, "random", 5, 10, threshold=1.5)
        with pytest.raises(InputError, match="top1"):
            Pool(pool.votes, pool.pairs, pool.original, pool.n_images, None, np.zeros((1, 3), np.int64), ())


class TestDisputedOrder:
    def test_the_weights_are_the_queues_and_the_defaults_a_snapshots(self) -> None:
        from relabel.review.ranking import UNCERTAIN_WEIGHT as QUEUE_UNCERTAIN
        from relabel.review.ranking import WEIGHTS
        from relabel.snapshots.freeze import UNCALIBRATED_DEFAULTS

        queue = (WEIGHTS["suggestion"], sum(WEIGHTS.values()), QUEUE_UNCERTAIN)
        assert queue == (SUGGESTION_WEIGHT, ALL_WEIGHTS, UNCERTAIN_WEIGHT)
        assert (THRESHOLD, KEEP_ORIGINAL) == UNCALIBRATED_DEFAULTS

    def test_uncertain_images_first_then_a_suggestion_that_differs_from_imgt(self) -> None:
        answers = [[[YES, YES]], [[YES, YES]], [[YES, YES]], [[YES, YES]]]
        top1 = np.array([[0, 5, NO_RUN, 5]])
        pool = pool_of(answers, [[True]] * 4, original=[(0,), (0,), (0,), ()], top1=top1, run_names=("m",))
        score = disputed_priority(pool, np.array([False, False, True, False]))
        # image 2 uncertain; image 1's suggestion (5) is not ImGT (0); image 3 has no original class
        assert score.tolist() == [0.0, SUGGESTION_WEIGHT, UNCERTAIN_WEIGHT, ALL_WEIGHTS]


# -- the command ---------------------------------------------------------------------------------------------------


def workspace_with_votes(engine, vocab, tmp_path: Path, workers: int) -> None:
    """30 val images, three candidate classes each (the first is the ImGT class and true), `workers` answers on
    each pair, and the truth imported as the label source `truth`."""
    from relabel.sources.labels import import_source
    from relabel.votes.importing import import_votes
    from tests.relabel.sources.test_sources import val_dataset

    numbers = list(range(1, 31))
    val_dataset(engine, vocab, tmp_path, numbers)
    rng = np.random.default_rng(0)
    lines = ["worker,image,label,answer"]
    for n in numbers:
        for k, c in enumerate((n % 1000, (n + 1) % 1000, (n + 2) % 1000)):
            for w in range(workers):
                right = rng.random() < 0.8
                lines.append(f"w{w},{n},{c},{'yes' if (k == 0) == right else 'no'}")
    (tmp_path / "round.csv").write_text("\n".join(lines) + "\n")
    import_votes(engine, tmp_path / "round.csv", fmt="long", name="round")
    (tmp_path / "truth.csv").write_text(
        "image,labels\n" + "".join(f"ILSVRC2012_val_{n:08d},{n % 1000}\n" for n in numbers)
    )
    import_source(engine, tmp_path / "truth.csv", fmt="csv", name="truth")


def invoke(engine, *args: str):
    return CliRunner().invoke(cli, ["--db", str(engine.url), "simulate", "review", *args])


class TestCommand:
    def test_help_has_an_example(self) -> None:
        out = CliRunner().invoke(cli, ["simulate", "review", "--help"])
        assert out.exit_code == 0 and "relabel simulate review --sources real-raters --reference real" in out.output

    def test_curves_are_printed_and_written(self, sqlite_engine, vocab, tmp_path: Path) -> None:
        workspace_with_votes(sqlite_engine, vocab, tmp_path, workers=4)
        out = invoke(sqlite_engine, "--reference", "truth", "--step", "5", "--budget", "10", "--quiet", "--json",
                     str(tmp_path / "c.json"))  # fmt: skip
        assert out.exit_code == 0, out.output
        assert "30 images (90 pairs, 360 answers of round) against truth; runs: none; 10 reviews" in out.output
        assert "| reviews | random: sets | disputed: sets | active: sets |" in out.output
        body = json.loads((tmp_path / "c.json").read_text())
        assert [s["reviews"] for s in body["curves"]["active"]] == [0, 5, 10]
        assert 0 <= body["curves"]["random"][0]["set_agreement"] <= 1

    def test_one_answer_per_pair_and_an_unknown_reference_are_one_line_errors(
        self, sqlite_engine, vocab, tmp_path: Path
    ) -> None:
        workspace_with_votes(sqlite_engine, vocab, tmp_path, workers=1)
        out = invoke(sqlite_engine, "--reference", "truth")
        assert out.exit_code != 0 and "give one answer per (image, class) pair" in out.output
        assert len(out.output.strip().splitlines()) == 1
        out = invoke(sqlite_engine, "--reference", "nope")
        assert out.exit_code != 0 and "unknown label source of dataset 'val' 'nope'; known:" in out.output
        assert len(out.output.strip().splitlines()) == 1
        out = invoke(sqlite_engine, "--reference", "truth", "--orders", "random,smart")
        assert out.exit_code != 0 and "unknown review order 'smart'" in out.output
