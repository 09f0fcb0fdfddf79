"""The ARGUS table: hand-computed parts, unknown parts, weights, and the two rankings."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone

import pytest

from evaluator.scoring import Score
from relabel.errors import InputError
from relabel.evaluation.argus import build_argus, parse_weights
from relabel.evaluation.results import EfficiencyReport, RobustnessResult, RunScore
from relabel.evaluation.runs import RunInfo


def run(name: str, model: str, protocol: str = "topk") -> RunInfo:
    return RunInfo(0, name, model, protocol, 100, 0, 5, None)


def score(run_name: str, reference: str, accuracy: float) -> RunScore:
    top1 = Score(accuracy, 100, round(100 * accuracy), 0, 0)
    return RunScore(run_name, reference, 100, 100, top1, None, accuracy, None)


def robustness(model: str, rr: float, p50_s: float, parameters: int) -> RobustnessResult:
    efficiency = EfficiencyReport("cpu", 8, 100, p50_s, None, None, None, None, "this run", None, parameters, None)
    return RobustnessResult(
        model, "photos", 100, ("jpeg",), (1,), 0, (), {"imgt": Score(0.9, 100, 90, 0, 0)}, {"imgt": [[0.9 * rr]]},
        {"imgt": rr}, 0, efficiency, 1.0, datetime.now(timezone.utc), "0.1.0",
    )  # fmt: skip


# Model A: two protocols over references r1, r2: P = mean(.8, .6, .7, .5) = .65; per reference .75, .55, so
# CDC = 1 − .1 / .65. Model B: one protocol, .95 and .45: P = .70, CDC = 1 − .25 / .70. Model C has no
# robustness run. E over the two measures both have: A 10 ms and 4 M parameters, B 20 ms and 8 M, so
# E_A = mean(1, 1) = 1 and E_B = mean(.5, .5) = .5.
RUNS = [run("a-mc", "A", "mc"), run("a-ow", "A", "ow"), run("b", "B"), run("c", "C")]
SCORES = [
    score("a-mc", "r1", 0.8), score("a-mc", "r2", 0.6), score("a-ow", "r1", 0.7), score("a-ow", "r2", 0.5),
    score("b", "r1", 0.95), score("b", "r2", 0.45), score("c", "r1", 0.5), score("c", "r2", 0.5),
]  # fmt: skip
ROBUST = {"A": robustness("A", 0.9, 0.010, 4_000_000), "B": robustness("B", 0.6, 0.020, 8_000_000)}
CDC_A, CDC_B = 1 - 0.1 / 0.65, 1 - 0.25 / 0.70


def test_parts_overall_and_the_two_rankings() -> None:
    table = build_argus(RUNS, SCORES, ROBUST)

    rows = {r.model: r for r in table.rows}
    assert rows["A"].capability == pytest.approx(0.65) and rows["A"].consistency == pytest.approx(CDC_A)
    assert rows["B"].capability == pytest.approx(0.70) and rows["B"].consistency == pytest.approx(CDC_B)
    assert (rows["A"].robustness, rows["B"].robustness) == (0.9, 0.6)
    assert (rows["A"].efficiency, rows["B"].efficiency) == (pytest.approx(1.0), pytest.approx(0.5))
    assert rows["A"].overall == pytest.approx((0.65 + CDC_A + 0.9 + 1.0) / 4)
    assert rows["B"].overall == pytest.approx((0.70 + CDC_B + 0.6 + 0.5) / 4)
    # B is more capable, A more reliable: the two rankings disagree.
    assert (rows["B"].rank_by_capability, rows["B"].rank_by_overall) == (1, 2)
    assert (rows["A"].rank_by_capability, rows["A"].rank_by_overall) == (2, 1)
    assert [r.model for r in table.rows] == ["A", "B", "C"]  # by overall rank; unranked last
    assert table.kendall_tau == pytest.approx(-1.0)


def test_an_unknown_part_gives_no_overall_score_unless_its_weight_is_zero() -> None:
    table = build_argus(RUNS, SCORES, ROBUST)
    c = next(r for r in table.rows if r.model == "C")
    assert (c.robustness, c.efficiency, c.overall, c.rank_by_overall) == (None, None, None, None)
    assert any("no overall score for C" in n for n in table.notes)

    table = build_argus(RUNS, SCORES, ROBUST, parse_weights("RR=0,E=0"))
    c = next(r for r in table.rows if r.model == "C")
    assert c.overall == pytest.approx((0.5 + 1.0) / 2)  # P and CDC only
    assert {r.model: r.rank_by_overall for r in table.rows} == {"A": 2, "B": 3, "C": 1}


def test_without_robustness_runs_only_capability_and_consistency_are_known() -> None:
    table = build_argus(RUNS, SCORES, {})
    assert all(r.robustness is None and r.efficiency is None and r.overall is None for r in table.rows)
    assert "no model of this evaluation has a robustness run" in table.notes[0]


def test_weights() -> None:
    assert parse_weights("P=2, cdc=1,RR=0.5") == {"P": 2.0, "CDC": 1.0, "RR": 0.5, "E": 1.0}
    for bad, message in [
        ("X=1", "NAME one of P, CDC, RR, E"),
        ("P=high", "'high' is not a number"),
        ("P=-1", "finite number ≥ 0"),
        ("P=0,CDC=0,RR=0,E=0", "all 0"),
    ]:
        with pytest.raises(InputError, match=message):
            parse_weights(bad)


def test_rr_over_different_grids_is_noted() -> None:
    assert not any("different grids" in n for n in build_argus(RUNS, SCORES, ROBUST).notes)
    typo = replace(ROBUST["B"], perturbations=("jpeg", "typo"), text_perturbations=("typo",))
    notes = build_argus(RUNS, SCORES, {"A": ROBUST["A"], "B": typo}).notes
    [note] = [n for n in notes if "different grids" in n]
    assert "A: jpeg at severities 1 on 100 images" in note and "B: jpeg, typo" in note
