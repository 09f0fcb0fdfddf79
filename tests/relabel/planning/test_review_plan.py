"""The review-budget planner (relabel.planning.plan) and `relabel plan`: half-widths, the ranking's stability, the
forecast on a toy pool whose answer is worked out by hand, and the command's help and one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from db import create_db_engine, init_db
from evaluator.label_uncertainty import Posteriors, uncertain_accuracy
from relabel.cli import cli, main
from relabel.common.errors import InputError
from relabel.planning.plan import REVIEW_RESIDUAL, expected_top1, forecast, halfwidths, ranking_stability
from relabel.review.active import NO_RUN, correct_probability
from tests import evaluation_workspace as ws
from tests import images
from tests.relabel.evaluation.test_label_sensitivity import VOTES


def phi(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


# -- half-widths ---------------------------------------------------------------------------------------------------


def test_halfwidths_are_the_normal_approximation_computed_directly():
    rng = np.random.default_rng(3)
    q = rng.random((3, 400)) * (rng.random((3, 400)) < 0.3)
    n = np.array([400, 350, 200])
    expected = [100 * 1.96 * math.sqrt(sum(x * (1 - x) for x in row)) / k for row, k in zip(q.tolist(), n)]
    assert halfwidths(q, n) == pytest.approx(expected)
    assert expected_top1(q, n) == pytest.approx(100 * q.sum(axis=1) / n)
    assert np.isnan(halfwidths(q[:1], np.array([0])))[0]


def test_halfwidth_matches_the_evaluators_label_interval():
    # 3,000 images; the run's top-1 (class 0) is present with q, and a certain class 1 keeps every image scored in
    # every draw, so the evaluator's label interval is the spread of a sum of independent coins
    rng = np.random.default_rng(0)
    n = 3000
    q = np.where(rng.random(n) < 0.5, rng.uniform(0.1, 0.9, n), 1.0)
    rows, classes = np.repeat(np.arange(n), 2), np.tile([0, 1], n)
    probs = np.stack([q, np.ones(n)], axis=1).ravel()
    score = uncertain_accuracy(np.zeros(n, np.int64), Posteriors(rows, classes, probs, n, 10), n_draws=4000, seed=1)
    evaluator_half = 100 * (score.label_ci_high - score.label_ci_low) / 2
    (planned,) = halfwidths(correct_probability(rows, classes, probs, n, np.zeros((1, n), np.int64)), np.array([n]))
    assert planned == pytest.approx(evaluator_half, rel=0.1)
    assert 100 * score.expected_accuracy == pytest.approx(expected_top1(q[None], np.array([n]))[0], abs=0.2)


# -- the ranking ---------------------------------------------------------------------------------------------------


def test_a_shared_top1_is_one_coin_and_different_top1s_add_their_variances():
    # 100 images; images 0..19 uncertain (q = 0.5); run A is right for sure on 20..29, run B wrong there
    n = 100
    q_uncertain = np.full(20, 0.5)
    q_a = np.r_[q_uncertain, np.ones(10), np.zeros(70)]
    q_b = np.r_[q_uncertain, np.zeros(80)]
    q = np.stack([q_b, q_a])
    counts = np.array([n, n])
    shared = np.stack([np.r_[np.zeros(20, int), np.full(80, 7)], np.r_[np.zeros(20, int), np.full(80, 8)]])
    apart = shared.copy()
    apart[0, :20] = 1  # B's top-1 on the uncertain images is another class, with the same q
    same = ranking_stability(q, shared, counts)
    assert same.order.tolist() == [1, 0] and same.stability == 1.0  # the difference is certain: 10 images
    differ = ranking_stability(q, apart, counts)
    sd = math.sqrt(20 * 2 * 0.25) / n
    assert differ.probability[0] == pytest.approx(phi(0.10 / sd)) and differ.stability < 1
    assert not differ.tied.any()


def test_the_shared_coin_matches_label_draws():
    # two runs sharing their top-1 on some uncertain images and not on others: Φ(Δ/sd) against drawn label sets
    rng = np.random.default_rng(5)
    n = 400
    p = np.where(rng.random(n) < 0.4, rng.uniform(0.2, 0.8, n), 1.0)
    other = np.where(rng.random(n) < 0.5, rng.uniform(0.2, 0.8, n), 0.0)
    rows, classes = np.repeat(np.arange(n), 2), np.tile([0, 1], n)
    probs = np.stack([p, other], axis=1).ravel()
    top1 = np.zeros((2, n), np.int64)
    top1[1, rng.random(n) < 0.3] = 1  # B predicts class 1 on about 30 % of the images
    q = correct_probability(rows, classes, probs, n, top1)
    ranking = ranking_stability(q, top1, np.array([n, n]))
    draws = rng.random((20000, n, 1)) < np.stack([p, other], axis=1)[None]  # (draw, image, class) present
    right = np.take_along_axis(draws, top1.T[None], axis=2)  # (draw, image, run)
    upper, lower = ranking.order
    held = (right[..., upper].sum(axis=1) > right[..., lower].sum(axis=1)).mean()
    assert ranking.stability == pytest.approx(held, abs=0.03)


def test_runs_with_the_same_top1_are_tied():
    q = np.array([[0.5, 1.0], [1.0, 0.5]])
    r = ranking_stability(q, np.array([[1, 2], [3, 4]]), np.array([2, 2]))
    assert r.tied.tolist() == [True] and r.probability.tolist() == [0.5]


# -- the forecast on a toy pool ------------------------------------------------------------------------------------

N = 100


def toy_pool() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """100 images. 0..9: class 0 and class 1 each at 0.5; 10..19: class 0 at 0.9; 20..21: class 0 certain;
    the rest: class 0 certain. Run A always says class 0; run B says class 1 on 0..9, class 2 (absent) on 20..21.

    A and B have the same q (0.5) on 0..9 but different classes (independent coins); on 10..19 they share class 0.
    Each run's variance: 10 · 0.25 + 10 · 0.09 = 3.4. Δ = 2 / 100 (images 20, 21). The active order serves 0..9
    first (benefit 1.0 + 2 · 0.5), then 10..19 (0.1 + 2 · 0.1), the certain images last."""
    rows = np.r_[np.repeat(np.arange(10), 2), np.arange(10, N)]
    classes = np.r_[np.tile([0, 1], 10), np.zeros(N - 10, int)]
    probs = np.r_[np.full(20, 0.5), np.full(10, 0.9), np.ones(N - 20)]
    top1 = np.zeros((2, N), np.int64)
    top1[1, :10], top1[1, 20:22] = 1, 2
    return rows, classes, probs, top1


def test_forecast_counts_the_reviews_in_the_active_order():
    rows, classes, probs, top1 = toy_pool()
    # half-width 1.96 · sqrt(V) for n = 100: V ≤ 0.5 needs all ten 0.5-images (V = 0.9), then five 0.9-images
    plan = forecast(rows, classes, probs, N, top1, target_halfwidth=1.96 * math.sqrt(0.5))
    assert plan.halfwidth_now == pytest.approx([1.96 * math.sqrt(3.4)] * 2)
    assert plan.top1_now == pytest.approx([10 * 0.5 + 10 * 0.9 + 80, 10 * 0.5 + 10 * 0.9 + 78])
    assert plan.reviews_per_run == [15, 15] and plan.reviews_halfwidth == 15
    assert set(plan.order[:10].tolist()) == set(range(10)) and set(plan.order[10:20].tolist()) == set(range(10, 20))
    # Var(D) after k reviews: (10 - k) · 0.5 / 100²; Φ(2 / sqrt(0.5 (10 - k))) ≥ 0.95 first at k = 8
    assert plan.ranking.order.tolist() == [0, 1]
    assert plan.ranking.stability == pytest.approx(phi(2 / math.sqrt(5)))
    assert plan.reviews_ranking == 8 and plan.reviews == 15 and plan.pool == N


def test_forecast_says_when_the_pool_cannot_get_there():
    rows, classes, probs, top1 = toy_pool()
    reviewed = np.zeros(N, bool)
    reviewed[:5] = True  # reviewed already, still uncertain: never served again, their variance stays
    plan = forecast(rows, classes, probs, N, top1, exclude=reviewed, target_halfwidth=1.96 * math.sqrt(0.5))
    assert plan.reviews_per_run == [None, None] and plan.reviews_halfwidth is None and plan.reviews is None
    assert plan.pool == N - 5
    # Φ(2 / sqrt(0.5 · 5)) < 0.95 even with every other image settled
    assert plan.reviews_ranking is None
    assert plan.after_pool == pytest.approx([phi(2 / math.sqrt(0.5 * 5))])
    # with nothing excluded every pair settles: the difference is exact once the pool is reviewed
    assert forecast(rows, classes, probs, N, top1).after_pool.tolist() == [1.0]
    tied = top1.copy()
    tied[1, 20:22] = 0  # B now right where A is: the same expected top-1
    assert forecast(rows, classes, probs, N, tied).reviews_ranking is None


def test_forecast_refuses_a_run_scored_on_no_image():
    rows, classes, probs, top1 = toy_pool()
    top1[1] = NO_RUN
    with pytest.raises(InputError, match="run 1 is scored on no image"):
        forecast(rows, classes, probs, N, top1)
    with pytest.raises(InputError, match="stability"):
        forecast(rows, classes, probs, N, toy_pool()[3], stability=1.0)


# -- relabel plan ----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The five-image workspace (runs m5, m1) with three raters' votes on a, b, d and the snapshot raters-ds."""
    tmp = tmp_path_factory.mktemp("plan")
    folder = tmp / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ws.build(engine, tmp)
    engine.dispose()
    (tmp / "votes.csv").write_text(VOTES)
    base = ["--workspace", str(folder)]
    main([*base, "snapshot", "create", "round-0"])  # unanimous: no posteriors
    main([*base, "votes", "import", str(tmp / "votes.csv"), "--format", "long", "--name", "raters", "--quiet"])
    main([*base, "snapshot", "create", "raters-ds", "--consensus", "ds", "--no-studio-votes", "--quiet"])
    return folder


def invoke(folder: Path, *args: str):  # noqa: ANN201
    return CliRunner().invoke(cli, ["--workspace", str(folder), "plan", *args])


def test_plan_help_shows_an_example():
    result = CliRunner().invoke(cli, ["plan", "--help"])
    assert result.exit_code == 0 and "relabel plan --snapshot" in result.output


def test_plan_prints_each_run_and_the_ranking(workspace: Path) -> None:
    result = invoke(workspace)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("snapshot 'raters-ds' (ds): 5 images, 2 nobody rated left out")
    assert [line.split()[0] for line in lines[2:4]] == ["m1", "m5"]
    assert lines[-2].startswith("ranking m5 > m1: holds with")
    # three raters on six pairs: their reliabilities are a guess, and the forecast says so
    assert lines[-1].startswith("caution: the workers share few pairs (the median worker answered 6 pair(s) ")
    assert lines[-1].endswith("; until then this forecast can be far off either way")
    data = json.loads(invoke(workspace, "--json", "--residual", "0").output)
    assert data["caution"] == lines[-1].removeprefix("caution: ")
    assert [set(p) for p in data["ranking_pairs"]] == [{"above", "below", "probability", "tied", "after_pool"}]
    # a, b, d are rated; c and e are not: left out (m1 failed on d: scored, wrong; m5 never answered c)
    assert [r["n_scored"] for r in data["runs"]] == [3, 3] and data["n_unrated"] == 2
    assert data["reviews"] == max(data["reviews_until_halfwidth"], data["reviews_until_stable_ranking"])
    # by default a review leaves REVIEW_RESIDUAL of its variance: three images cannot bring ±0.25
    default = json.loads(invoke(workspace, "--json").output)
    assert default["residual"] == REVIEW_RESIDUAL and default["reviews_until_halfwidth"] is None
    one = json.loads(invoke(workspace, "--json", "--run", "m5", "--target", "50", "--residual", "0").output)
    assert one["runs"][0]["run"] == "m5" and one["reviews_until_halfwidth"] == 0 and one["ranking_pairs"] == []


def test_a_ranking_out_of_reach_names_the_pair_that_stays_level() -> None:
    from relabel.cli.plan import plan_lines

    runs = [
        {"run": name, "n_scored": 100, "top1": t, "halfwidth": 0.2, "reviews_until_target": 0}
        for name, t in (("a", 71.0), ("b", 70.0), ("c", 69.98))
    ]
    pairs = [
        {"above": "a", "below": "b", "probability": 0.999, "tied": False, "after_pool": 1.0},
        {"above": "b", "below": "c", "probability": 0.6, "tied": False, "after_pool": 0.81},
    ]
    d = {
        "snapshot": "s", "rule": "ds", "n_images": 100, "n_unrated": 0, "pool": 100, "residual": 0.35,
        "target_halfwidth": 0.25, "stability": 0.95, "runs": runs, "ranking": ["a", "b", "c"],
        "ranking_pairs": pairs, "ranking_stability": 0.5994, "reviews_until_halfwidth": 0,
        "reviews_until_stable_ranking": None, "caution": None,
    }  # fmt: skip
    assert plan_lines(d)[-1] == (
        "ranking a > b > c: holds with 59.9 % now; reaches 95 % not within the pool: b and c are 0.02 points apart "
        "and would keep their order with 81.0 % after every review: on these images the two are level"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--snapshot", "round-0"], "snapshot 'round-0' was made by the unanimous rule"),
        (["--snapshot", "nope"], "unknown snapshot of dataset 'five' 'nope'"),
        (["--run", "nope"], "unknown model run of dataset 'five' 'nope'; known: m1, m5"),
        (["--stability", "1.5"], "stability must lie in (0.5, 1)"),
        (["--residual", "1"], "residual share of a reviewed image's variance must lie in [0, 1)"),
    ],
)
def test_plan_errors_are_one_line(workspace: Path, args: list[str], expected: str) -> None:
    result = invoke(workspace, *args)
    assert result.exit_code != 0
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and expected in result.stderr


def test_plan_without_a_vote_based_snapshot_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ws.build(engine, tmp_path)
    engine.dispose()
    result = invoke(folder)
    assert result.exit_code != 0 and result.stderr.count("\n") == 1
    assert "dataset 'five' has no snapshot whose consensus read votes" in result.stderr


def test_plan_without_runs_is_one_line(tmp_path: Path) -> None:
    root, folder = tmp_path / "photos", tmp_path / "ws"
    for i, name in enumerate(ws.FILES):
        images.photo(root / name, color=(40 * i, 90, 200 - 40 * i))
    (tmp_path / "votes.csv").write_text(VOTES)
    base = ["--workspace", str(folder)]
    main([*base, "ingest", str(root), "--dataset", "five", "--workers", "1", "--quiet"])
    main([*base, "votes", "import", str(tmp_path / "votes.csv"), "--format", "long", "--name", "raters", "--quiet"])
    main([*base, "snapshot", "create", "raters-ds", "--consensus", "ds", "--no-studio-votes", "--quiet"])
    result = invoke(folder)
    assert result.exit_code != 0 and result.stderr.count("\n") == 1
    assert "dataset 'five' has no model runs" in result.stderr


def test_a_residual_leaves_part_of_each_reviewed_images_variance():
    rows, classes, probs, top1 = toy_pool()
    # ρ = 0.2: after k ≤ 10 reviews each run keeps 3.4 - 0.8 · 0.25 k; V ≤ 1.5 first at k = 10 (1.6 at k = 9)
    plan = forecast(rows, classes, probs, N, top1, target_halfwidth=1.96 * math.sqrt(1.5), residual=0.2)
    assert plan.reviews_per_run == [10, 10]
    # every image reviewed still leaves 0.2 · 3.4 = 0.68
    assert (
        forecast(rows, classes, probs, N, top1, target_halfwidth=1.96 * math.sqrt(0.6), residual=0.2).reviews_halfwidth
        is None
    )


def test_plan_reads_the_same_from_sqlite_and_postgres(db_url: str, tmp_path: Path) -> None:
    """Each run's first class is read in SQL (a JSON index): both backends give the runs' scored images and
    the snapshot's posteriors as `relabel evaluate` reads them."""
    from relabel.planning.budget import plan_reviews

    engine = create_db_engine(db_url)
    init_db(engine)
    ws.build(engine, tmp_path)
    (tmp_path / "votes.csv").write_text(VOTES)
    base = ["--db", db_url]
    main([*base, "votes", "import", str(tmp_path / "votes.csv"), "--format", "long", "--name", "raters", "--quiet"])
    main([*base, "snapshot", "create", "raters-ds", "--consensus", "ds", "--no-studio-votes", "--quiet"])
    report = plan_reviews(engine, residual=0.0)
    assert report.run_names == ["m1", "m5"] and report.n_scored == [3, 3] and report.n_unrated == 2
    # the expected top-1 of m1 and m5 on a, b, d (the same on both backends; pinned from the SQLite run)
    assert report.plan.top1_now == pytest.approx([32.80, 98.68], abs=0.01)
    engine.dispose()
