"""A run's row is a function of its own predictions and the named references, whatever else is in the workspace.

On dataset "five" (tests.evaluation_workspace; see test_reliability_table for the models R and S) run r is
evaluated, then a partial run (two images) is imported and the evaluation repeated: every number of r's row, its
scores and its paired differences stay bit for bit the same; only the ranks move to the common images, whose
count is printed. A snapshot the command did not name never enters a table.
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import pytest

from db.enums import Verdict
from relabel.evaluation import evaluate, write_report
from relabel.evaluation.reliability import parse_weights
from relabel.evaluation.results import Evaluation, ReliabilityRow
from relabel.evaluation.text import render_evaluation
from relabel.snapshots.freeze import create_snapshot
from tests import evaluation_workspace as ws
from tests.evaluation_workspace import GOLDFISH, TABBY, TENCH
from tests.relabel.evaluation.test_reliability_table import (
    R_FIVE,
    S_FIVE,
    TEAM,
    add_dataset_two,
    answers,
)

NO_RR_E = parse_weights("RR=0,E=0")
# compared across rows, so they may move when a run is added; everything else is the row's own
RANKING = ("rank_by_capability", "rank_by_overall", "rank_by_capability_ci", "rank_by_overall_ci", "shift_ci",
           "capability_common")  # fmt: skip


@pytest.fixture
def five(sqlite_engine, tmp_path: Path) -> dict[str, int]:
    """Dataset "five" with runs r (model R) and s (model S), both read by ranked scores."""
    ids = ws.build(sqlite_engine, tmp_path)
    ws.add_run(sqlite_engine, "r", "R", "topk", answers(R_FIVE), ids)
    ws.add_run(sqlite_engine, "s", "S", "topk", answers(S_FIVE), ids)
    return ids


def row(ev: Evaluation, run: str) -> ReliabilityRow:
    assert ev.reliability is not None
    return next(r for r in ev.reliability.rows if r.run == run)


def own(r: ReliabilityRow) -> ReliabilityRow:
    return replace(r, rank_by_capability=None, rank_by_overall=None, rank_by_capability_ci=None,
                   rank_by_overall_ci=None, shift_ci=None, capability_common=None)  # fmt: skip


class TestARowStandsAlone:
    def test_importing_a_partial_run_leaves_the_first_runs_row_bit_identical(
        self, sqlite_engine, five, tmp_path: Path
    ) -> None:
        add_dataset_two(sqlite_engine, tmp_path)  # CDC known: P, CDC and the overall score all computed
        before = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=NO_RR_E, n_boot=200,
                          store=False)  # fmt: skip
        # cleanlab-style: the same model's predictions for the images where it disagrees with ImGT only
        ws.add_run(sqlite_engine, "r-part", "R", "topk", answers({k: R_FIVE[k] for k in "be"}), five)

        after = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s", "r-part"], weights=NO_RR_E,
                         n_boot=200, store=False)  # fmt: skip

        for run in ("r", "s"):
            b, a = row(before, run), row(after, run)
            assert own(a) == own(b)  # P, its CI, CDC and its CI, each dataset's top-1, noise Δ and CI, overall, CI
            assert a.capability is not None and a.consistency is not None and a.overall is not None
            assert a.noise is not None and a.noise.ci_low is not None and a.overall_ci is not None
            for name, values in b.resampled.items():
                assert np.array_equal(a.resampled[name], values, equal_nan=True)
            for ref in ("imgt", "team"):
                assert after.score(run, ref) == before.score(run, ref)  # top-1, Wilson CI, paired Δ and its CI
        part = row(after, "r-part")
        # R-part is right on b and e, where ImGT is wrong: 100 % against team, +100 points of label noise
        assert (part.capability, part.n_images, part.noise.difference) == (1.0, 2, 1.0)  # type: ignore[union-attr]
        # the ranks moved to b, e, the images all three runs scored, and say so
        [common] = after.reliability.common  # type: ignore[union-attr]
        assert (common.n_images, common.same_images, common.runs) == (2, False, ("r", "s", "r-part"))
        assert row(after, "s").capability_common == 0.0 and row(before, "s").capability_common == 0.5

    def test_the_fields_left_out_of_the_comparison_are_exactly_the_ranking_ones(self) -> None:
        # a new comparison field must be named in RANKING (and set aside by `own`), every other field is compared
        names = {f.name for f in fields(ReliabilityRow)}
        assert {n for n in names if n.startswith(("rank", "shift")) or n.endswith("_common")} == set(RANKING)
        blank = own(ReliabilityRow("r", "R", "topk", "classes", 0.5, None, None, None, rank_by_capability=1,
                                   rank_by_overall=1, capability_common=0.5))  # fmt: skip
        assert all(getattr(blank, n) is None for n in RANKING) and blank.capability == 0.5


class TestOnlyNamedReferences:
    def test_an_unnamed_newer_snapshot_enters_no_table(self, sqlite_engine, five, tmp_path: Path) -> None:
        ws.add_run(sqlite_engine, "mc", "V", "mc", answers(S_FIVE), five)
        ws.decide(sqlite_engine, five, {"a": (Verdict.labels, [TENCH, GOLDFISH]), "e": (Verdict.labels, [TABBY])})
        create_snapshot(sqlite_engine, "round-a")
        named = ["imgt", "snapshot:round-a"]
        before = evaluate(sqlite_engine, "five", references=named, n_boot=50, store=False)
        ws.decide(sqlite_engine, five, {"b": (Verdict.none_fit, [])})
        create_snapshot(sqlite_engine, "round-b")  # newer, and cleaner by the old rule

        ev = evaluate(sqlite_engine, "five", references=named, n_boot=50)

        assert ev.reliability is not None
        assert {r.reference for r in ev.reliability.rows if r.task == "classes"} == {"round-a"}
        assert {r.reference for r in ev.reliability.rows if r.task == "mc"} == {"imgt"}
        assert {d.reference for r in ev.reliability.rows for d in r.datasets} <= {"round-a", "imgt"}
        assert {r.noise.reference for r in ev.reliability.rows if r.noise} == {"round-a"}
        assert [r.name for r in ev.references] == ["imgt", "round-a"]
        assert own(row(ev, "r")) == own(row(before, "r"))
        files = write_report(ev, tmp_path / "out")
        for shown in (render_evaluation(ev), files.markdown.read_text(), files.data.read_text()):
            assert "round-b" not in shown and "round-a" in shown
        assert "scored against round-a, the cleanest of the named references" in render_evaluation(ev)

    def test_the_default_is_imgt_and_the_newest_snapshot(self, sqlite_engine, five) -> None:
        ws.decide(sqlite_engine, five, {"a": (Verdict.labels, [TENCH, GOLDFISH])})
        create_snapshot(sqlite_engine, "round-a")
        create_snapshot(sqlite_engine, "round-b")

        ev = evaluate(sqlite_engine, "five", runs=["r", "s"], n_boot=0, store=False)

        assert [r.name for r in ev.references] == ["imgt", "round-b"]
        assert {r.reference for r in ev.reliability.rows} == {"round-b"}  # type: ignore[union-attr]

    def test_a_prior_not_named_is_not_used(self, sqlite_engine, five) -> None:
        ev = evaluate(sqlite_engine, "five", runs=["r", "s"], n_boot=100, store=False)  # default: imgt only

        assert {r.reference for r in ev.reliability.rows} == {"imgt"}  # type: ignore[union-attr]
        assert all(r.noise is None for r in ev.reliability.rows)  # type: ignore[union-attr]
        notes = ev.reliability.notes  # type: ignore[union-attr]
        assert any("label-noise sensitivity unknown" in n and "no named reference is cleaner" in n for n in notes)


class TestCommonImagesAreReported:
    @pytest.mark.parametrize("partial", [False, True])
    def test_the_common_n_is_printed_beside_the_table(self, sqlite_engine, five, tmp_path: Path, partial: bool) -> None:
        runs = ["r", "s"]
        if partial:
            ws.add_run(sqlite_engine, "r-part", "R-part", "topk", answers({k: R_FIVE[k] for k in "ab"}), five)
            runs.append("r-part")
        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=runs, weights=parse_weights("CDC=0,RR=0,E=0"),
                      n_boot=0)  # fmt: skip

        n = 2 if partial else 4
        [common] = ev.reliability.common  # type: ignore[union-attr]
        assert (common.reference, common.n_images) == ("team", n)
        line = f"ranks on the {n} common images every ranked run scored"
        files = write_report(ev, tmp_path / "out")
        assert line in render_evaluation(ev) and line in files.markdown.read_text()
        data = json.loads(files.data.read_text())["reliability"]
        assert data["common"][0]["n_images"] == n and data["common"][0]["reference"] == "team"
        assert "ranks" in data["definitions"]
        differ = [note for note in data["notes"] if "cover different images" in note]
        assert len(differ) == (1 if partial else 0)
