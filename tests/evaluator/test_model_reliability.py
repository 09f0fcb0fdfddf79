"""Reliability after ARGUS: the CDC worked example, hand-computed parts, E against budgets, weights, rankings."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evaluator import EvaluationError
from evaluator.model_reliability import (
    BUDGETS,
    EfficiencyBudgets,
    EfficiencyMeasurement,
    ReliabilityParts,
    capability,
    compare_rankings,
    consistency_of_resamples,
    cross_dataset_consistency,
    efficiency,
    overall,
    robustness_retention,
    summarize_latencies,
)


class TestCapability:
    def test_mean_over_datasets_and_protocols(self) -> None:
        assert capability([[0.8, 0.6], [0.5, 0.3]]) == pytest.approx(0.55)

    @pytest.mark.parametrize(
        ("scores", "message"),
        [
            ([[0.5, 1.2]], r"capability scores at \(0, 1\) is 1.2, outside \[0, 1\]"),
            ([0.5, float("nan")], "capability scores at 1 is nan"),
            ([], "capability scores are empty"),
            (["high"], "capability scores must be numbers"),
        ],
    )
    def test_invalid(self, scores: list, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            capability(scores)


class TestCrossDatasetConsistency:
    def test_worked_example(self) -> None:
        # ā = 0.74, mean |a_i − ā| = 0.092, CDC = 1 − 0.092 / 0.74
        assert round(cross_dataset_consistency([0.80, 0.75, 0.60, 0.90, 0.65]), 4) == 0.8757

    def test_equal_scores_are_fully_consistent(self) -> None:
        assert cross_dataset_consistency([0.7, 0.7, 0.7]) == pytest.approx(1.0)

    def test_one_dataset_has_no_cdc(self) -> None:
        # one score has no spread: CDC is unknown, never 1
        with pytest.raises(EvaluationError, match="CDC needs scores on at least 2 datasets, got 1"):
            cross_dataset_consistency([0.4])

    def test_zero_mean_is_zero(self) -> None:
        assert cross_dataset_consistency([0.0, 0.0]) == 0.0

    def test_clipped_at_zero(self) -> None:
        # ā = 0.25, mean deviation 0.375 -> 1 − 1.5 < 0
        assert cross_dataset_consistency([0.0, 0.0, 0.0, 1.0]) == 0.0

    def test_needs_one_score_per_dataset(self) -> None:
        with pytest.raises(EvaluationError, match=r"must be 1-D \(one per dataset\), got shape \(2, 2\)"):
            cross_dataset_consistency([[0.1, 0.2], [0.3, 0.4]])

    def test_resamples_row_by_row(self) -> None:
        resampled = [[0.80, 0.75, 0.60, 0.90, 0.65], [0.5, 0.5, 0.5, 0.5, 0.5], [0.5, np.nan, 0.5, 0.5, 0.5]]
        out = consistency_of_resamples(resampled)
        assert out[:2] == pytest.approx([0.8757, 1.0], abs=1e-4) and math.isnan(out[2])
        with pytest.raises(EvaluationError, match=r"\(n_boot, n_datasets ≥ 2\), got shape \(3, 1\)"):
            consistency_of_resamples([[0.5], [0.6], [0.7]])


class TestRobustnessRetention:
    def test_hand_computed_with_clipping(self) -> None:
        # terms 0.4/0.8, 0.8/0.8, min(0.9/0.8, 1), 0.2/0.8 = 0.5, 1, 1, 0.25
        assert robustness_retention(0.8, [[0.4, 0.8], [0.9, 0.2]]) == pytest.approx(0.6875)

    def test_zero_clean_score_retains_nothing(self) -> None:
        assert robustness_retention(0.0, [0.0, 0.1]) == 0.0

    def test_clean_per_dataset_broadcasts(self) -> None:
        # dataset 0 clean 0.5: 0.25, 0.5 -> 0.5, 1; dataset 1 clean 0.0 -> 0, 0
        assert robustness_retention([[0.5], [0.0]], [[0.25, 0.5], [0.0, 0.0]]) == pytest.approx(0.375)

    def test_shapes_that_do_not_broadcast(self) -> None:
        with pytest.raises(EvaluationError, match=r"clean scores \(2,\) do not broadcast against perturbed \(3,\)"):
            robustness_retention([0.5, 0.6], [0.1, 0.2, 0.3])

    def test_perturbed_out_of_range(self) -> None:
        with pytest.raises(EvaluationError, match="perturbed scores at 1 is -0.1"):
            robustness_retention(0.5, [0.1, -0.1])


class TestEfficiency:
    def test_hand_computed_against_the_budgets(self) -> None:
        # budgets 0.1 s, 4 GiB, 10 GFLOPs, 1 per 1k images; each term is B / (B + x)
        fast = EfficiencyMeasurement(latency_s=0.05, peak_memory_bytes=2**30, flops=10e9)
        score = efficiency(fast)
        assert score.terms == pytest.approx({"latency_s": 2 / 3, "peak_memory_bytes": 0.8, "flops": 0.5})
        assert score.value == pytest.approx((2 / 3 + 0.8 + 0.5) / 3)

    def test_a_measure_at_its_budget_scores_one_half(self) -> None:
        at_budget = EfficiencyMeasurement(**{name: getattr(BUDGETS, name) for name in BUDGETS.__dataclass_fields__})
        assert efficiency(at_budget).value == pytest.approx(0.5)

    def test_unknown_measures_enter_no_term(self) -> None:
        # a model behind an API: latency and cost are known, its memory and FLOPs are not
        api = efficiency(EfficiencyMeasurement(latency_s=1.0, cost_per_1k_images=2.0))
        assert set(api.terms) == {"latency_s", "cost_per_1k_images"}
        assert api.value == pytest.approx((0.1 / 1.1 + 1 / 3) / 2)
        assert efficiency(EfficiencyMeasurement()).value is None
        assert efficiency(EfficiencyMeasurement(cost_per_1k_images=0.0)).value == 1.0  # free

    def test_other_budgets(self) -> None:
        budgets = EfficiencyBudgets(latency_s=1.0)
        assert efficiency(EfficiencyMeasurement(latency_s=1.0), budgets).value == pytest.approx(0.5)
        with pytest.raises(EvaluationError, match="budget flops = 0; budgets must be finite numbers > 0"):
            efficiency(EfficiencyMeasurement(latency_s=1.0), EfficiencyBudgets(flops=0))

    @pytest.mark.parametrize("value", [-1.0, float("inf"), float("nan")])
    def test_measurements_must_be_finite_and_not_negative(self, value: float) -> None:
        with pytest.raises(EvaluationError, match="latency_s = .*; a measurement must be a finite number ≥ 0"):
            efficiency(EfficiencyMeasurement(latency_s=value))


class TestOverall:
    def test_equal_weights_by_default(self) -> None:
        assert overall(ReliabilityParts(0.8, 0.6, 0.4, 0.2)) == pytest.approx(0.5)

    def test_weights_are_normalised(self) -> None:
        weights = {"capability": 2, "consistency": 1, "robustness": 1, "efficiency": 0}
        assert overall(ReliabilityParts(0.8, 0.6, 0.4, 0.2), weights) == pytest.approx((1.6 + 0.6 + 0.4) / 4)

    @pytest.mark.parametrize(
        ("weights", "message"),
        [
            ({"capability": 1, "speed": 1}, "weights must name exactly capability, consistency, robustness, eff"),
            ({"capability": -1, "consistency": 1, "robustness": 1, "efficiency": 1}, "finite, ≥ 0 and not all 0"),
            ({"capability": 0, "consistency": 0, "robustness": 0, "efficiency": 0}, "not all 0"),
        ],
    )
    def test_bad_weights(self, weights: dict, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            overall(ReliabilityParts(0.5, 0.5, 0.5, 0.5), weights)

    def test_part_out_of_range(self) -> None:
        with pytest.raises(EvaluationError, match=r"robustness is 1.5, outside \[0, 1\]"):
            overall({"capability": 0.5, "consistency": 0.5, "robustness": 1.5, "efficiency": 0.5})


class TestCompareRankings:
    def test_capability_leader_falls_behind_on_overall(self) -> None:
        table = compare_rankings(
            {
                "a": ReliabilityParts(0.9, 0.5, 0.5, 0.2),  # overall 0.525
                "b": ReliabilityParts(0.8, 0.9, 0.9, 0.9),  # overall 0.875
                "c": ReliabilityParts(0.7, 0.7, 0.7, 0.7),  # overall 0.7
            }
        )

        assert [(r.name, r.rank_by_capability, r.rank_by_overall, r.shift) for r in table.rows] == [
            ("b", 2, 1, 1),
            ("c", 3, 2, 1),
            ("a", 1, 3, -2),
        ]
        assert [r.overall for r in table.rows] == pytest.approx([0.875, 0.7, 0.525])
        assert table.kendall_tau == pytest.approx(-1 / 3)
        assert table.as_records()[0] == {
            "name": "b", "capability": 0.8, "consistency": 0.9, "robustness": 0.9, "efficiency": 0.9,
            "overall": pytest.approx(0.875), "rank_by_capability": 2, "rank_by_overall": 1, "shift": 1,
        }  # fmt: skip

    def test_needs_two_models(self) -> None:
        with pytest.raises(EvaluationError, match="at least 2 models, got 1"):
            compare_rankings({"a": ReliabilityParts(0.5, 0.5, 0.5, 0.5)})

    def test_parts_are_validated(self) -> None:
        with pytest.raises(EvaluationError, match="efficiency is -0.1"):
            ReliabilityParts(0.5, 0.5, 0.5, -0.1)
        with pytest.raises(EvaluationError, match="model 'b': expected ReliabilityParts, got tuple"):
            compare_rankings({"a": ReliabilityParts(0.5, 0.5, 0.5, 0.5), "b": (0.5, 0.5, 0.5, 0.5)})


class TestSummarizeLatencies:
    def test_percentiles(self) -> None:
        seconds = [0.01 * i for i in range(1, 21)]
        summary = summarize_latencies(seconds)
        # linear interpolation: p50 between the 10th and 11th value, p95 at position 0.95 · 19 = 18.05
        assert (summary.n, summary.p50_s, summary.p95_s, summary.mean_s) == pytest.approx((20, 0.105, 0.1905, 0.105))

    def test_one_latency(self) -> None:
        assert summarize_latencies(np.array([0.2])).p95_s == 0.2

    @pytest.mark.parametrize(
        ("seconds", "message"),
        [([], "non-empty 1-D"), ([0.1, -0.2], "latency 1 is -0.2"), ([math.inf], "latency 0 is inf")],
    )
    def test_invalid(self, seconds: list, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            summarize_latencies(seconds)
