"""`evaluate`: hand-computed scores on a five-image workspace, storage and history, and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import inspect, select, text
from sqlmodel import Session

from db import SCHEMA_VERSION, create_db_engine, init_db
from db.enums import Verdict
from db.migrations import MIGRATIONS
from db.models import EvaluationRecord
from relabel.common.errors import InputError, NotFoundError
from relabel.evaluation import evaluate, evaluation_history
from relabel.evaluation.text import render_history
from relabel.snapshots.freeze import create_snapshot
from relabel.sources.labels import import_source
from tests import evaluation_workspace as ws
from tests.evaluation_workspace import GOLDFISH, TABBY, TENCH, TIGER_CAT


@pytest.fixture
def five(engine, tmp_path: Path) -> dict[str, int]:
    return ws.build(engine, tmp_path)


class TestScores:
    def test_hand_computed_scores_against_imgt_and_a_prior(self, engine, five) -> None:
        ev = evaluate(engine, references=["imgt", "team"], n_boot=200)

        m5, m1 = ev.score("m5", "imgt"), ev.score("m1", "imgt")
        assert (m5.top1.accuracy, m5.top1.n_scored, m5.top1.n_errors) == (0.5, 4, 1)  # c: HTTP 503, left out
        assert m5.top5 is not None and m5.top5.accuracy == 1.0
        assert m1.top5 is None  # m1 ranks one class only
        # the OOP answer is wrong, and so is d's broken reply, which is also counted as a failure
        assert (m1.top1.accuracy, m1.top1.n_scored, m1.top1.n_failed, m1.top1.n_errors) == (0.4, 5, 1, 0)
        assert m1.top1.accuracy_excluding_failures == 0.5
        team5, team1 = ev.score("m5", "team"), ev.score("m1", "team")
        assert (team5.top1.accuracy, team5.top5.accuracy, team5.top1.n_excluded) == (0.5, 0.75, 0)  # c is an error
        assert (team1.top1.accuracy, team1.top1.n_excluded, team1.top1.accuracy_excluding_failures) == (
            0.5, 1, pytest.approx(2 / 3))  # fmt: skip
        assert team5.top1.ci_low < 0.5 < team5.top1.ci_high
        assert [r.name for r in ev.references] == ["imgt", "team"]
        assert ev.references[1].multi_label and ev.references[1].n_labelled == 4

    def test_oop_rate_and_error_counts_per_run(self, engine, five) -> None:
        ev = evaluate(engine, references=["imgt"], n_boot=0)

        runs = {r.name: r for r in ev.runs}
        assert runs["m1"].oop is not None and (runs["m1"].oop.n_oop, runs["m1"].oop.n_answered) == (1, 4)
        assert runs["m1"].oop.rate == 0.25 and (runs["m1"].n_errors, runs["m1"].n_failed) == (1, 1)
        assert runs["m5"].oop is None and runs["m5"].width == 5
        assert (runs["m5"].n_errors, runs["m5"].n_failed, runs["m5"].n_infrastructure_errors) == (1, 0, 1)

    def test_ranking_shift_on_the_images_every_run_scored_under_both(self, engine, five) -> None:
        ev = evaluate(engine, references=["imgt", "team"], n_boot=200)

        # common: a, b, d, e (c is m5's infrastructure error and excluded by team). imgt: m5 b, e (0.5), m1 a (0.25,
        # d's broken reply is wrong); team: m5 a, d, m1 a, e (0.5 each): m1 moves up to the tie.
        assert ev.ranking is not None and ev.ranking_images == 4
        assert [(r.name, r.score_a, r.score_b) for r in ev.ranking.rows] == [("m5", 0.5, 0.5), ("m1", 0.25, 0.5)]
        assert [(r.name, r.rank_a, r.rank_b, r.shift) for r in ev.ranking.rows] == [("m5", 1, 1, 0), ("m1", 2, 1, 1)]
        intervals = {i.name: i for i in ev.rank_intervals}
        assert intervals["m1"].rank_a == (1, 2) and intervals["m1"].moved_share > 0

    def test_every_reference_is_paired_with_the_first_on_common_images(self, engine, five) -> None:
        ev = evaluate(engine, references=["imgt", "team"], n_boot=200)

        assert ev.score("m5", "imgt").paired is None
        m1 = ev.score("m1", "team").paired
        # images m1 scored under both: a, b, d, e. imgt right: a; team right: a, e.
        assert m1 is not None and (m1.n_common, m1.n_correct_a, m1.n_correct_b, m1.n_only_a, m1.n_only_b) == (
            4, 1, 2, 0, 1)  # fmt: skip
        assert m1.difference == 0.25 and m1.ci_low <= 0 < 0.25 <= m1.ci_high
        m5 = ev.score("m5", "team").paired
        assert m5 is not None and (m5.n_common, m5.accuracy_a, m5.accuracy_b) == (4, 0.5, 0.5)

    def test_the_joint_bootstrap_of_every_cell_is_exposed(self, engine, five) -> None:
        ev = evaluate(engine, references=["imgt", "team"], n_boot=0, store=False)
        assert ev.outcomes is not None and "outcomes" not in ev.to_dict()  # per image: kept out of the JSON

        resampled = ev.outcomes.resampled_top1(400, seed=1)

        assert set(resampled) == {("m1", "imgt"), ("m1", "team"), ("m5", "imgt"), ("m5", "team")}
        assert np.nanmean(resampled[("m1", "imgt")]) == pytest.approx(0.4, abs=0.05)  # m1's top-1 under imgt
        correct, scored = ev.outcomes.cell("m5", "team")
        assert (int(correct.sum()), int(scored.sum())) == (2, 4)

    def test_runs_on_different_images_are_warned_about(self, engine, five) -> None:
        ws.add_run(engine, "subset", "ranker", "topk", {"b": ([TENCH], "ok", None), "e": ([TIGER_CAT], "ok", None)},
                   five)  # fmt: skip

        ev = evaluate(engine, references=["imgt"], n_boot=0)

        coverage = [w for w in ev.warnings if not w.startswith("run 'm5'")]  # m5's HTTP 503 is warned apart
        assert len(coverage) == 1
        assert coverage[0].startswith("under imgt, the runs are scored on different images (m1 5, m5 4, subset 2 "
                                      "of the 5 it labels; 2 in common)")  # fmt: skip
        assert ev.ranking is None  # one reference: no shift

    def test_a_subset_chosen_by_disagreement_is_explained(self, engine, five) -> None:
        ws.add_run(engine, "disagrees", "ranker", "topk", {"a": ([GOLDFISH], "ok", None), "d": ([TIGER_CAT], "ok",
                   None)}, five)  # fmt: skip

        ev = evaluate(engine, runs=["disagrees"], references=["imgt"], n_boot=0)

        score = ev.score("disagrees", "imgt").top1
        assert score.accuracy == 0 and score.ci_low == 0 and score.ci_high > 0.5  # Wilson: no "0.00–0.00"
        assert ev.warnings[0] == "under imgt, disagrees scored 2 of the 5 images it labels (the rest were not " \
            "predicted, or failed for reasons of the infrastructure)"  # fmt: skip
        assert ev.warnings[1].startswith("disagrees is never right under imgt on its 2 images: images chosen by")

    def test_snapshot_reference_has_a_per_category_breakdown(self, engine, five) -> None:
        ws.decide(engine, five, {"a": (Verdict.labels, [TENCH, GOLDFISH]), "b": (Verdict.none_fit, [])})
        create_snapshot(engine, "round-1")

        ev = evaluate(engine, runs=["m5"], n_boot=0)  # default references: imgt and the newest snapshot

        assert [r.name for r in ev.references] == ["imgt", "round-1"]
        assert ev.references[1].categories == {"M": 1, "U": 3, "Z": 1}
        score = ev.score("m5", "round-1")
        assert score.top1.accuracy == pytest.approx(2 / 3)  # a right (M), b excluded (Z), c error, d wrong, e right
        cats = score.per_category
        assert cats is not None and cats["M"].accuracy == 1.0 and cats["U"].accuracy == 0.5
        assert cats["Z"].n_scored == 0 and math.isnan(cats["Z"].accuracy)

    def test_a_run_that_covers_part_of_the_reference_is_scored_on_that_part(self, engine, five) -> None:
        rows = {"a": ([TENCH], "ok", None), "d": ([TIGER_CAT], "ok", None)}
        ws.add_run(engine, "partial", "ranker", "topk", rows, five)

        score = evaluate(engine, runs=["partial"], references=["imgt"], n_boot=0).score("partial", "imgt")

        assert (score.n_images, score.n_predicted, score.top1.n_scored, score.top1.accuracy) == (5, 2, 2, 0.5)


class TestStorage:
    def test_every_evaluation_is_stored_with_hashes_runs_and_version(self, engine, five) -> None:
        ev = evaluate(engine, references=["imgt", "team"], n_boot=0)

        with Session(engine) as s:
            row = s.scalars(select(EvaluationRecord)).one()
        assert row.id == ev.id and row.kind == "scores" and row.tool_version == ev.tool_version
        assert row.reference_hashes == {r.name: r.content_hash for r in ev.references}
        assert {r["name"] for r in row.runs} == {"m1", "m5"}
        assert row.result["definitions"]["top1"].startswith("share of scored images")
        json.dumps(row.result, allow_nan=False)  # strict JSON: NaN is stored as null

    def test_nothing_scored_is_null_not_nan(self, engine, five) -> None:
        down = {"retryable": True, "reason": "connection error: ConnectError: refused"}
        ws.add_run(engine, "down", "api", "cw", {"a": ([], "error", down), "b": ([], "error", down)}, five)

        ev = evaluate(engine, runs=["down"], references=["imgt"], n_boot=0)

        assert math.isnan(ev.score("down", "imgt").top1.accuracy)
        with Session(engine) as s:
            stored = s.scalars(select(EvaluationRecord.result)).one()
        assert stored["scores"][0]["top1"]["accuracy"] is None and stored["scores"][0]["top1"]["n_errors"] == 2

    def test_history_across_two_snapshots(self, engine, five) -> None:
        ws.decide(engine, five, {"a": (Verdict.labels, [TENCH, GOLDFISH]), "b": (Verdict.none_fit, [])})
        first = create_snapshot(engine, "round-1")
        evaluate(engine, runs=["m5"], n_boot=0)
        ws.decide(engine, five, {"d": (Verdict.labels, [TIGER_CAT])})  # round 2: d is a tiger cat after all
        second = create_snapshot(engine, "round-2")
        evaluate(engine, runs=["m5"], n_boot=0)

        history = evaluation_history(engine)

        assert [e.reference_hashes for e in history] == [
            {"imgt": history[0].reference_hashes["imgt"], "round-1": first.content_hash},
            {"imgt": history[0].reference_hashes["imgt"], "round-2": second.content_hash},
        ]
        assert history[0].top1[("m5", "round-1")] == pytest.approx(2 / 3)
        assert history[1].top1[("m5", "round-2")] == 1.0
        shown = render_history(history)
        assert f"round-1@{first.content_hash[:8]}" in shown and f"round-2@{second.content_hash[:8]}" in shown
        m5_line = next(line for line in shown.splitlines() if line.strip().startswith("m5"))
        assert m5_line.split()[1:] == ["50.00", "66.67", "100.00"]  # imgt, then round-1 -> round-2

    def test_evaluations_table_is_added_to_a_version_2_workspace(self, tmp_path: Path) -> None:
        engine = create_db_engine(f"sqlite:///{tmp_path / 'v2.db'}")
        init_db(engine, MIGRATIONS[:2])
        with engine.begin() as conn:
            conn.execute(text("drop table evaluations"))

        assert init_db(engine) == SCHEMA_VERSION == len(MIGRATIONS)  # every later migration applied too
        assert "evaluations" in inspect(engine).get_table_names()


class TestBadInput:
    def test_an_empty_reference_is_refused_and_nothing_stored(self, engine, five, tmp_path: Path) -> None:
        (tmp_path / "empty.csv").write_text("image,labels\nn01440764_a.jpg,\nn01440764_b.jpg,\n")
        import_source(engine, tmp_path / "empty.csv", fmt="csv", name="empty")

        with pytest.raises(InputError, match=r"reference 'empty' labels none of the 2 image\(s\)"):
            evaluate(engine, references=["imgt", "empty"])
        assert ws.stored_evaluations(engine) == 0

    def test_a_run_without_predictions_on_the_reference_is_refused(self, engine, five) -> None:
        ws.add_run(engine, "only-c", "ranker", "topk", {"c": ([GOLDFISH], "ok", None)}, five)  # c is excluded by team

        with pytest.raises(InputError, match=r"run 'only-c' has no prediction for any of the 4 labelled image\(s\) of "
                           r"reference 'team'"):  # fmt: skip
            evaluate(engine, references=["imgt", "team"])
        assert ws.stored_evaluations(engine) == 0

    @pytest.mark.parametrize(
        ("kwargs", "error", "message"),
        [
            ({"runs": ["nope"]}, NotFoundError, r"unknown model run of dataset 'five' 'nope'; known: m1, m5"),
            ({"references": ["nope"]}, NotFoundError, r"label source of dataset 'five' 'nope'; known: imgt, team"),
            ({"references": ["snapshot:x"]}, NotFoundError, r"unknown snapshot of dataset 'five' 'x'; known: \(none\)"),
            ({"references": ["latest"]}, NotFoundError, "has no snapshot yet"),
            ({"n_boot": -1}, InputError, "--boot must be ≥ 0"),
        ],
    )
    def test_unknown_names_list_the_known_ones(self, engine, five, kwargs, error, message) -> None:
        with pytest.raises(error, match=message):
            evaluate(engine, **kwargs)
        assert ws.stored_evaluations(engine) == 0

    def test_a_name_that_is_a_source_and_a_snapshot_must_be_qualified(self, engine, five, tmp_path: Path) -> None:
        create_snapshot(engine, "team")

        with pytest.raises(InputError, match="write source:team or snapshot:team"):
            evaluate(engine, references=["team"])
        ev = evaluate(engine, references=["source:team", "imgt"], n_boot=0)
        assert ev.score("m5", "team").top1.accuracy == 0.5

    def test_a_dataset_without_runs(self, engine, tmp_path: Path) -> None:
        from relabel.common.vocabulary import load_builtin
        from relabel.ingest import ingest_dataset, plan_ingest
        from tests import images

        vocab = load_builtin()
        images.photo(tmp_path / "p" / "n01440764_a.jpg")
        plan = plan_ingest(tmp_path / "p", vocab)
        ingest_dataset(engine, plan, dataset="p", root=tmp_path / "p", vocab=vocab, show_progress=False, workers=1)
        with pytest.raises(InputError, match="has no model runs; `relabel predictions import`"):
            evaluate(engine)


SHANKAR_CSV = (
    "id,category,original_label,proposed_labels,manually_validated,unclear_multi_labels,wrong_multi_labels,"
    "is_problematic\n"
    'n01440764_a.jpg,A,0,0,True,,,False\nn01440764_b.jpg,M,0,"0, 1",True,,,False\n'
    f"n01443537_c.jpg,Z,1,,True,{TIGER_CAT},,False\nn02123045_d.jpg,A,281,281,True,,,True\n"
    f"n02123045_e.jpg,B,281,{TIGER_CAT},True,{TABBY},,False\n"
)


class TestPublishedMetrics:
    def test_shankar_metric_beside_the_regt_reading(self, engine, five, tmp_path: Path) -> None:
        (tmp_path / "shankar.csv").write_text(SHANKAR_CSV)
        import_source(engine, tmp_path / "shankar.csv", fmt="shankar")

        ev = evaluate(engine, references=["imgt", "shankar"], metrics=["shankar"], n_boot=50)

        by_run = {p.run: p for p in ev.published}
        m5 = by_run["m5"]
        # m5 (c: infrastructure error, d: problematic, skipped): class 0: a wrong (goldfish is not tench), b right
        # -> 0.5; class 281 (tabby): e's tabby is right through its unclear label -> 1.0; mean 0.75.
        assert (m5.accuracy, m5.n_scored, m5.n_skipped, m5.n_errors, m5.n_classes) == (0.75, 3, 1, 1, 2)
        assert m5.ci_low is not None and m5.ci_low <= 0.75 <= m5.ci_high
        # ReGT-style: proposed labels, d scored, unclear never counts, c excluded (empty set): of a, b, d, e only b
        assert m5.regt_style is not None and (m5.regt_style.accuracy, m5.regt_style.n_scored) == (0.25, 4)
        assert ev.score("m5", "shankar").top1.accuracy == 0.25
        assert by_run["m1"].metric == "shankar" and by_run["m1"].title.startswith("Shankar et al. (2020)")

    def test_a_source_of_another_format_is_refused(self, engine, five) -> None:
        with pytest.raises(InputError, match="source 'team' was imported as 'csv'; the metric reads a source "
                           "imported with --format shankar"):  # fmt: skip
            evaluate(engine, references=["imgt"], metrics=["shankar:team"])
        assert ws.stored_evaluations(engine) == 0
