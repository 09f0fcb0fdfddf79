"""mCE and relative mCE beside RR in a robustness run's summary and report (Hendrycks & Dietterich 2019)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from evaluator.corruption_error import alexnet_baseline
from evaluator.perturbations import BENCHMARK_CORRUPTIONS, PERTURBATIONS
from evaluator.scoring import Score
from relabel.evaluation.corruption_errors import corruption_error_line, corruption_error_table, run_corruption_errors
from relabel.evaluation.report import robustness_markdown
from relabel.evaluation.results import EfficiencyReport, RobustnessResult
from relabel.evaluation.robustness_summary import build_robustness_summary
from relabel.evaluation.text import render_robustness

MEASURED = EfficiencyReport(
    device="cpu", batch_size=8, n_images=100, latency_p50_s=None, latency_p95_s=None, latency_mean_s=None,
    throughput_per_s=None, peak_rss_bytes=None, peak_rss_scope="this run", cuda_peak_bytes=None, n_parameters=None,
    flops_per_image=None,
)  # fmt: skip


def result(
    names: tuple[str, ...], severities: tuple[int, ...], errors: list[list[float]], clean: float
) -> RobustnessResult:
    """A stored-looking run with the given top-1 errors (perturbations × severities) against imgt."""
    grid = [[1 - e for e in row] for row in errors]
    return RobustnessResult(
        model="m", dataset="five", n_images=100, perturbations=names, severities=severities, seed=0, references=(),
        clean={"imgt": Score(1 - clean, 100, round(100 * (1 - clean)), 0, 0)}, grid={"imgt": grid},
        retention={"imgt": 0.9}, errors=0, efficiency=MEASURED, seconds=1.0, created_at=datetime.now(timezone.utc),
        tool_version="0.1.0",
    )  # fmt: skip


def half_as_wrong_as_alexnet() -> RobustnessResult:
    """Every corruption's error at every severity half AlexNet's mean, the clean error half AlexNet's: mCE 50 %,
    relative mCE (e/2 − c/2) / (e − c) = 50 % as well."""
    base = alexnet_baseline()
    errors = [[base.corruption_errors[PERTURBATIONS[n].imagenet_c_name] / 2] * 5 for n in BENCHMARK_CORRUPTIONS]
    return result(BENCHMARK_CORRUPTIONS, (1, 2, 3, 4, 5), errors, base.clean_error / 2)


class TestFullRun:
    def test_mce_and_relative_mce(self) -> None:
        ce = run_corruption_errors(half_as_wrong_as_alexnet(), "imgt")
        assert ce is not None and ce.mce == pytest.approx(0.5) and ce.relative_mce == pytest.approx(0.5)
        assert corruption_error_line(half_as_wrong_as_alexnet(), "imgt") == "mCE 50.00 %, relative mCE 50.00 %"

    def test_beside_rr_in_the_summary_and_the_report(self) -> None:
        r = half_as_wrong_as_alexnet()
        assert "(RR 0.900; mCE 50.00 %, relative mCE 50.00 %)" in render_robustness(build_robustness_summary(r))
        report = robustness_markdown(build_robustness_summary(r), set())
        assert "RR 0.900 (the interval resamples the images, clean and perturbed alike); mCE 50.00 %" in report
        assert "| jpeg | 50.0 | 50.0 |" in report and "| (mean of 15) | 50.0 | 50.0 |" in report

    def test_a_gaussian_blur_row_is_no_imagenet_c_corruption(self) -> None:
        r = half_as_wrong_as_alexnet()
        names = (*r.perturbations, "gaussian_blur")
        with_blur = result(names, r.severities, [[1 - v for v in row] for row in r.grid["imgt"]] + [[0.9] * 5],
                           1 - r.clean["imgt"].accuracy)  # fmt: skip
        table = corruption_error_table(with_blur, "imgt")
        assert table is not None and "gaussian_blur" not in [row[0] for row in table[1]]
        assert corruption_error_line(with_blur, "imgt") == "mCE 50.00 %, relative mCE 50.00 %"


class TestPartialRun:
    def test_ce_per_corruption_and_a_note(self) -> None:
        """jpeg: E = 0.3 at every severity, clean 0.2 → CE 0.3 / 0.6065, relative 0.1 / (0.6065 − 0.4345)."""
        r = result(("jpeg", "fog"), (1, 2, 3, 4, 5), [[0.3] * 5, [0.5] * 5], 0.2)
        line = corruption_error_line(r, "imgt")
        assert line == (
            "CE per corruption only: mCE needs all 15 ImageNet-C corruptions at severities 1-5; "
            "this run has 2 of them at all five"
        )
        assert corruption_error_table(r, "imgt") == (
            ["corruption", "CE %", "relative CE %"],
            [["jpeg", f"{100 * 0.3 / 0.6065:.1f}", f"{100 * 0.1 / (0.6065 - 0.4345):.1f}"],
             ["fog", f"{100 * 0.5 / 0.819324:.1f}", f"{100 * 0.3 / (0.819324 - 0.4345):.1f}"]],
        )  # fmt: skip
        assert line in render_robustness(build_robustness_summary(r))

    def test_without_all_five_severities_no_ce(self) -> None:
        r = result(("jpeg",), (1, 3), [[0.3, 0.4]], 0.2)
        assert corruption_error_table(r, "imgt") == (["corruption", "CE %", "relative CE %"], [["jpeg", "—", "—"]])
        assert corruption_error_line(r, "imgt").endswith("this run has 0 of them at all five")

    def test_nothing_for_a_run_without_imagenet_c_corruptions(self) -> None:
        r = result(("gaussian_blur",), (1,), [[0.3]], 0.2)
        assert corruption_error_line(r, "imgt") == "" and corruption_error_table(r, "imgt") is None
        summary = build_robustness_summary(r)
        assert "mCE" not in render_robustness(summary)
        assert "Corruption error against AlexNet" not in robustness_markdown(summary, set())
