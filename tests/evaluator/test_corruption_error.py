"""Corruption error against AlexNet (Hendrycks & Dietterich 2019): a hand-computed example, AlexNet scoring itself,
the shipped constants, and what is refused."""

from __future__ import annotations

import math

import pytest

from evaluator import EvaluationError
from evaluator.corruption_error import AlexNetBaseline, alexnet_baseline, corruption_errors
from evaluator.perturbations import BENCHMARK_CORRUPTIONS, PERTURBATIONS

TOY = AlexNetBaseline(corruption_errors={"fog": 0.8, "snow": 0.5}, clean_error=0.4)


def by_severity(*values: float) -> dict[int, float]:
    return dict(zip((1, 2, 3, 4, 5), values))


class TestHandComputed:
    """fog: Σ E = 2.0 → CE 2.0 / (5 · 0.8) = 0.5, relative (2.0 − 5 · 0.1) / (5 · (0.8 − 0.4)) = 0.75;
    snow: Σ E = 1.0 → CE 1.0 / 2.5 = 0.4, relative (1.0 − 0.5) / (5 · 0.1) = 1.0; means 0.45 and 0.875."""

    ERRORS = {"fog": by_severity(0.2, 0.3, 0.4, 0.5, 0.6), "snow": by_severity(0.1, 0.1, 0.2, 0.3, 0.3)}

    def test_ce_and_relative_ce(self) -> None:
        out = corruption_errors(self.ERRORS, 0.1, TOY)
        assert out.ce == pytest.approx({"fog": 0.5, "snow": 0.4})
        assert out.relative_ce == pytest.approx({"fog": 0.75, "snow": 1.0})
        assert (out.mce, out.relative_mce, out.missing) == (pytest.approx(0.45), pytest.approx(0.875), ())

    def test_a_missing_severity_leaves_no_ce_and_no_mean(self) -> None:
        errors = {"fog": self.ERRORS["fog"], "snow": {1: 0.1, 3: 0.2, 5: 0.3}}
        out = corruption_errors(errors, 0.1, TOY)
        assert out.ce == pytest.approx({"fog": 0.5}) and out.missing == ("snow",)
        assert out.mce is None and out.relative_mce is None

    def test_an_absent_corruption_is_missing(self) -> None:
        out = corruption_errors({"snow": self.ERRORS["snow"]}, 0.1, TOY)
        assert out.missing == ("fog",) and out.mce is None and out.ce == pytest.approx({"snow": 0.4})

    def test_an_unscored_pass_gives_nan(self) -> None:
        errors = {"fog": by_severity(0.2, 0.3, math.nan, 0.5, 0.6), "snow": self.ERRORS["snow"]}
        out = corruption_errors(errors, 0.1, TOY)
        assert math.isnan(out.ce["fog"]) and out.mce is not None and math.isnan(out.mce)


class TestAlexNet:
    def test_alexnet_scores_one_against_itself(self) -> None:
        base = alexnet_baseline()
        errors = {name: by_severity(*[e] * 5) for name, e in base.corruption_errors.items()}
        out = corruption_errors(errors, base.clean_error)
        assert out.mce == pytest.approx(1.0) and out.relative_mce == pytest.approx(1.0) and out.missing == ()

    def test_the_shipped_errors_are_the_published_ones(self) -> None:
        base = alexnet_baseline()
        assert list(base.corruption_errors) == [PERTURBATIONS[n].imagenet_c_name for n in BENCHMARK_CORRUPTIONS]
        assert base.corruption_errors["gaussian_noise"] == 0.886428
        assert base.corruption_errors["jpeg_compression"] == 0.606500
        assert sum(base.corruption_errors.values()) == pytest.approx(11.834896, abs=1e-9)
        assert base.clean_error == 0.4345

    def test_a_model_half_as_wrong_has_mce_one_half(self) -> None:
        base = alexnet_baseline()
        errors = {name: by_severity(*[e / 2] * 5) for name, e in base.corruption_errors.items()}
        out = corruption_errors(errors, base.clean_error / 2)
        assert out.mce == pytest.approx(0.5)
        # relative: (e/2 − c/2) / (e − c) = 1/2 for every corruption
        assert out.relative_mce == pytest.approx(0.5)


class TestRefused:
    def test_unknown_corruption_lists_the_known(self) -> None:
        with pytest.raises(EvaluationError, match=r"unknown ImageNet-C corruption 'jpeg'; known: .*jpeg_compression"):
            corruption_errors({"jpeg": by_severity(0.1, 0.1, 0.1, 0.1, 0.1)}, 0.2)

    @pytest.mark.parametrize(("severity", "value"), [(6, 0.1), (0, 0.1), (1, 1.5), (1, -0.1), (1, "0.3")])
    def test_bad_severity_or_error(self, severity: int, value: object) -> None:
        with pytest.raises(EvaluationError, match="snow"):
            corruption_errors({"snow": {severity: value}}, 0.2)  # type: ignore[dict-item]

    def test_bad_clean_error(self) -> None:
        with pytest.raises(EvaluationError, match="clean_error: a top-1 error must be a fraction in"):
            corruption_errors({}, 43.5)
