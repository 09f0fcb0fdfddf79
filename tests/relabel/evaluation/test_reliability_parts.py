"""The registry of reliability parts is the only place that knows them: a part registered there alone is weighted
on the command line, enters the overall score, its interval and the ranks' intervals, and is shown in the CLI's
help, the tables, the definitions and the plot; weights that leave a part out are filled (the command line's rule)
or refused naming it (the evaluator), never a KeyError.

The part added here is a worst-case retention in the manner of ARGUS: RR squared, a harsher reading of the same
robustness run, so its value and resamples are known from the rows of tests.relabel.evaluation
.test_reliability_table (R: RR 1.0, S: RR 0.5 on the run's 40 images; both E 0.5; P on "five" 1.0 and 0.5).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from evaluator import EvaluationError
from evaluator import reliability_parts as rp
from evaluator.model_reliability import ReliabilityParts, overall, overall_of_resamples
from evaluator.reliability_parts import ReliabilityPart
from relabel.cli import cli
from relabel.common.errors import InputError
from relabel.evaluation import evaluate, plots
from relabel.evaluation.reliability import parse_weights
from relabel.evaluation.reliability_text import reliability_table, render_reliability
from relabel.evaluation.results import ReliabilityRow
from tests import evaluation_workspace as ws
from tests.relabel.evaluation.test_reliability_table import (
    R_FIVE,
    S_FIVE,
    TEAM,
    answers,
    robustness,
    rows,
    store,
    with_outcomes,
)


def _squared(value: Any) -> Any:
    return None if value is None else value**2


WORST = ReliabilityPart(
    "worst",
    "W",
    "retention in the worst case, RR squared",
    "resampled",
    read=lambda row: _squared(row.robustness),
    resample=lambda row: _squared(row.resampled.get("robustness")),
)


@pytest.fixture
def five(sqlite_engine, tmp_path: Path) -> dict[str, int]:
    """Dataset "five" with runs r (model R) and s (model S), as in test_reliability_table."""
    ids = ws.build(sqlite_engine, tmp_path)
    ws.add_run(sqlite_engine, "r", "R", "topk", answers(R_FIVE), ids)
    ws.add_run(sqlite_engine, "s", "S", "topk", answers(S_FIVE), ids)
    return ids


@pytest.fixture
def worst(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(rp.RELIABILITY_PARTS, WORST.name, WORST)
    yield


def store_pair(engine) -> None:
    store(
        engine,
        with_outcomes(robustness("R", 1.0, latency_p50_s=0.1), 36, 36),
        with_outcomes(robustness("S", 0.5, latency_p50_s=0.1), 36, 18),
    )


def help_text(path: list[str]) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


class TestARegisteredPart:
    def test_is_named_in_the_cli_help_and_weighted_by_its_symbol(self, worst: None) -> None:
        assert "W: retention in the worst case, RR squared." in help_text(["evaluate"])
        assert parse_weights("w=2,CDC=0") == {"P": 1.0, "CDC": 0.0, "RR": 1.0, "E": 1.0, "W": 2.0}

    def test_enters_the_overall_score_its_interval_the_text_and_the_plot(
        self, sqlite_engine, five, worst: None, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store_pair(sqlite_engine)

        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=parse_weights("CDC=0"),
                      n_boot=200, seed=0, store=False)  # fmt: skip

        r, s = rows(ev)["r"], rows(ev)["s"]
        assert ev.reliability is not None and ev.reliability.weights["W"] == 1.0
        # P, RR, E, W at 1/4 each: r (1 + 1 + 0.5 + 1) / 4, s (0.5 + 0.5 + 0.5 + 0.25) / 4; without W 0.833, 0.5
        assert (r.overall, s.overall) == pytest.approx((0.875, 0.4375))
        # the interval draws W from its own resamples: RR² resampled, not a constant
        assert s.overall_ci is not None and s.overall_ci[0] < 0.4375 < s.overall_ci[1]
        assert (r.rank_by_overall_ci, s.rank_by_overall_ci) == ((1, 1), (2, 2))
        header, cells = reliability_table(ev.reliability, "classes")
        assert header[3:8] == ["P", "CDC", "RR", "E", "W"] and dict(zip(header, cells[1]))["W"] == "0.250"
        assert "W: retention in the worst case, RR squared" in ev.reliability.definitions["worst"]
        assert list(ev.reliability.definitions)[-2:] == ["overall", "ranks"]
        assert ev.reliability.definitions["overall"].startswith("weighted mean of the row's own P, CDC, RR, E and W ")
        assert any(" W " in line for line in render_reliability(ev.reliability))
        drawn: list[list[str]] = []
        original = plots._grouped_barh
        monkeypatch.setattr(plots, "_grouped_barh", lambda ax, groups, series, errors=None: (
            drawn.append(list(series)), original(ax, groups, series, errors)))  # fmt: skip
        assert plots.reliability_parts(ev.reliability).startswith(b"\x89PNG")
        assert drawn == [["P", "CDC", "RR", "E", "W", "overall"]]

    def test_a_row_without_its_resamples_has_no_interval_and_a_note_naming_it(
        self, sqlite_engine, five, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        only_r = ReliabilityPart("worst", "W", "worst-case retention", "resampled", read=WORST.read,
                                 resample=lambda row: WORST.resamples(row) if row.run == "r" else None)  # fmt: skip
        monkeypatch.setitem(rp.RELIABILITY_PARTS, "worst", only_r)
        store_pair(sqlite_engine)

        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=parse_weights("CDC=0"),
                      n_boot=100, seed=0, store=False)  # fmt: skip

        r, s = rows(ev)["r"], rows(ev)["s"]
        assert r.overall_ci is not None and s.overall_ci is None and s.overall == pytest.approx(0.4375)
        notes = ev.reliability.notes  # type: ignore[union-attr]
        assert "overall 95 % CI unknown for s (worst): a weighted part has no resamples" in notes
        assert "rank 95 % CIs unknown: s lack resamples of a weighted part" in notes

    def test_a_fixed_part_is_held_fixed_in_every_resample(self) -> None:
        part = ReliabilityPart("cost", "C", "cost against a budget", "fixed", read=lambda row: 0.25)
        row = ReliabilityRow("r", "R", "topk", "classes", 0.5, None, None, None,
                             resampled={"cost": np.ones(3)})  # fmt: skip
        assert part.value(row) == 0.25 and part.resamples(row) is None

    def test_a_name_or_symbol_in_use_is_refused(self, worst: None) -> None:
        with pytest.raises(EvaluationError, match="reliability part 'speed' \\(w\\) is taken by 'worst'"):
            rp.register_part(ReliabilityPart("speed", "w", "speed", "fixed"))
        with pytest.raises(EvaluationError, match="interval 'sometimes'; use resampled or fixed"):
            rp.register_part(ReliabilityPart("speed", "S", "speed", "sometimes"))  # type: ignore[arg-type]
        assert "speed" not in rp.RELIABILITY_PARTS


class TestPartialWeights:
    def test_the_evaluator_refuses_them_naming_the_missing_part(self, worst: None) -> None:
        values = ReliabilityParts(0.8, 0.6, 0.4, 0.2, 0.1)
        assert overall(values) == pytest.approx(0.42)
        with pytest.raises(EvaluationError, match=r"\(0 leaves a part out\); missing worst$"):
            overall(values, {"capability": 1, "consistency": 1, "robustness": 1, "efficiency": 1})
        with pytest.raises(EvaluationError, match="missing consistency, robustness, efficiency, worst; unknown P"):
            overall_of_resamples({"capability": [[0.5]]}, {"capability": 1, "P": 1})

    def test_a_part_with_weight_and_no_value_is_named(self) -> None:
        with pytest.raises(EvaluationError, match="parts efficiency have a non-zero weight and no value"):
            overall({"capability": 0.5, "consistency": 0.5, "robustness": 0.5})
        weights = {"capability": 1, "consistency": 1, "robustness": 1, "efficiency": 0}
        assert overall({"capability": 0.3, "consistency": 0.6, "robustness": 0.9}, weights) == pytest.approx(0.6)
        with pytest.raises(EvaluationError, match="parts speed: given twice or not registered"):
            ReliabilityParts(speed=0.5)

    def test_the_table_fills_them_with_weight_1_as_the_command_line_does(self, sqlite_engine, five) -> None:
        store_pair(sqlite_engine)
        given = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights={"CDC": 0.0}, n_boot=0,
                         store=False)  # fmt: skip
        parsed = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=parse_weights("CDC=0"),
                          n_boot=0, store=False)  # fmt: skip
        assert given.reliability is not None and parsed.reliability is not None
        assert given.reliability.weights == {"P": 1.0, "CDC": 0.0, "RR": 1.0, "E": 1.0}
        assert [r.overall for r in given.reliability.rows] == [r.overall for r in parsed.reliability.rows]
        assert rows(given)["r"].overall == pytest.approx((1 + 1 + 0.5) / 3)
        with pytest.raises(InputError, match="weight 'X': not a reliability part; parts: P, CDC, RR, E"):
            evaluate(sqlite_engine, "five", references=TEAM, runs=["r"], weights={"X": 1.0}, n_boot=0, store=False)
