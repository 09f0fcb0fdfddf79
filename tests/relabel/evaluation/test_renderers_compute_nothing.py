"""Renderers only format: every number of an evaluation's and a robustness run's text, report and figures is
computed before rendering (`evaluate`, `build_robustness_summary`, `analyze_protocols`), so rendering a finished
result works with every bootstrap and computing function replaced by one that raises."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import evaluator.corruption_error
import evaluator.model_reliability
import evaluator.paired
import evaluator.ranking
import relabel.evaluation.corruption_errors
import relabel.evaluation.protocol_analysis
import relabel.evaluation.reliability_intervals
import relabel.evaluation.robustness_summary
from relabel.evaluation import evaluate, plots, text
from relabel.evaluation.protocol_analysis import analyze_protocols
from relabel.evaluation.protocol_analysis_text import protocol_markdown, render_protocol_analysis
from relabel.evaluation.report import robustness_markdown, scores_markdown, write_report, write_robustness_report
from relabel.evaluation.robustness import run_robustness
from relabel.evaluation.robustness_summary import build_robustness_summaries, build_robustness_summary
from relabel.suggest.types import ImageRef, ModelOutput
from tests import evaluation_workspace as ws

TRUTH = {"a": ws.TENCH, "b": ws.TENCH, "c": ws.GOLDFISH, "d": ws.TABBY, "e": ws.TABBY}

COMPUTING: tuple[Callable[..., Any], ...] = (  # the bootstraps, RR, CE and the analyses
    evaluator.model_reliability.resampled_retention,
    evaluator.model_reliability.robustness_retention,
    evaluator.model_reliability.retention_of_resamples,
    evaluator.model_reliability.overall_of_resamples,
    evaluator.paired.paired_difference,
    evaluator.paired.paired_many,
    evaluator.paired.percentile_interval,
    evaluator.ranking.ranking_shift,
    evaluator.ranking.rank_intervals,
    evaluator.corruption_error.corruption_errors,
    relabel.evaluation.reliability_intervals.robustness_resamples,
    relabel.evaluation.reliability_intervals.retention_of,
    relabel.evaluation.corruption_errors.run_corruption_errors,
    relabel.evaluation.robustness_summary.build_robustness_summary,
    relabel.evaluation.robustness_summary.build_robustness_summaries,
    relabel.evaluation.protocol_analysis.analyze_protocols,
)


class Computed(AssertionError):
    """Raised by a computing function called while rendering."""


def forbid_computing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replace each of `COMPUTING` by a function that raises, wherever a loaded module holds it by name."""
    originals = {id(f): f for f in COMPUTING}
    for module in [m for name, m in sys.modules.items() if name.startswith(("evaluator", "relabel"))]:
        for attr, value in list(vars(module).items()):
            if id(value) in originals and value is originals[id(value)]:
                monkeypatch.setattr(module, attr, _raiser(f"{module.__name__}.{attr}"))


def _raiser(name: str) -> Callable[..., Any]:
    def computed(*args: Any, **kwargs: Any) -> Any:
        raise Computed(f"{name} was called while rendering")

    return computed


class Guesser:
    """An image classifier right on the images of `right` (by letter), whatever the perturbation."""

    kind = "efficientnet-lite0"

    def __init__(self, name: str, right: str) -> None:
        self.name, self.right = name, right

    def describe(self) -> dict[str, Any]:
        return {"kind": "fake", "device": "cpu"}

    def check(self) -> None:
        pass

    def score(self, refs: list[ImageRef], class_names: list[str]) -> list[ModelOutput]:
        outputs = []
        for r in refs:
            letter = r.key.split("_")[1][0]
            scores = np.zeros(len(class_names), np.float32)
            scores[TRUTH[letter] if letter in self.right else 999] = 1.0
            outputs.append(ModelOutput(scores=scores, latency_s=0.01))
        return outputs


@pytest.fixture
def five(sqlite_engine, tmp_path: Path) -> None:
    """The five-image workspace with a robustness run of model "ranker" (run m5's model) against imgt and team."""
    ws.build(sqlite_engine, tmp_path)
    run_robustness(sqlite_engine, adapter=Guesser("ranker", "abcd"), references=("imgt", "team"),
                   perturbations=("jpeg", "contrast"), severities=(1, 2), show_progress=False)  # fmt: skip


def test_the_trap_catches_a_computation(sqlite_engine, five, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without this, the tests below could not fail: building a summary under the trap raises."""
    ev = evaluate(sqlite_engine, references=("imgt", "team"), n_boot=50, store=False)
    forbid_computing(monkeypatch)
    with pytest.raises(Computed, match="was called while rendering"):
        build_robustness_summary(ev.robustness[0])
    with pytest.raises(Computed):
        write_report(ev, tmp_path / "out")  # the edge that summarises, then renders


def test_a_robustness_run_renders_from_its_summary(
    sqlite_engine, five, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    ev = evaluate(sqlite_engine, references=("imgt", "team"), n_boot=50, store=False)
    summary = build_robustness_summary(ev.robustness[0])
    forbid_computing(monkeypatch)

    shown = text.render_robustness(summary)
    report = robustness_markdown(summary, {"robustness.png"})
    files = write_robustness_report(summary, tmp_path / "robustness")

    for ref in ("imgt", "team"):
        rr = summary.references[ref].retention
        assert rr.ci is not None  # the bootstrap ran before, once
        line = f"RR {rr.value:.3f}, 95 % CI {rr.ci[0]:.3f} to {rr.ci[1]:.3f}"
        assert line in shown and line in report
    assert summary.references["imgt"].per_perturbation == (pytest.approx(1.0), pytest.approx(1.0))
    assert files.markdown.read_text(encoding="utf-8") == report


def test_an_evaluation_renders_from_the_finished_result(sqlite_engine, five, monkeypatch: pytest.MonkeyPatch) -> None:
    ev = evaluate(sqlite_engine, references=("imgt", "team"), n_boot=50, store=False)
    robustness = build_robustness_summaries(ev.robustness, n_boot=0)
    analysis = analyze_protocols(sqlite_engine, ev, n_boot=50)
    assert ev.reliability is not None and ev.robustness and ev.ranking is not None
    forbid_computing(monkeypatch)

    shown = text.render_evaluation(ev)
    report = scores_markdown(ev, {"robustness.png"}, robustness)
    render_protocol_analysis(analysis)
    protocol_markdown(analysis, set())
    figures = [plots.accuracy_by_reference(ev), plots.paired_differences(ev), plots.protocol_comparison(ev),
               plots.robustness_curves(ev.robustness), plots.reliability_parts(ev.reliability)]  # fmt: skip

    assert "ranking imgt -> team" in shown and "measured in the latest robustness runs" in shown
    assert "## Robustness and efficiency" in report and "### ranker on five" in report
    assert "| jpeg | 80.00 | 80.00 | 80.00 | 1.000 |" in report  # RR per perturbation, from the summary
    assert all(png is None or png.startswith(b"\x89PNG") for png in figures)


def test_a_report_without_the_summaries_of_its_robustness_runs_is_refused(sqlite_engine, five) -> None:
    ev = evaluate(sqlite_engine, references=("imgt", "team"), n_boot=0, store=False)
    with pytest.raises(ValueError, match=r"needs the summaries of its 1 robustness run\(s\) in order, got 0"):
        scores_markdown(ev, set())
