"""An uncertain voted image exports its best estimate; a snapshot calibrated against a reference the user names."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from db.enums import Answer
from relabel.common.errors import InputError, NotFoundError
from relabel.exports.formats import export_snapshot
from relabel.snapshots.freeze import CALIBRATED_DEFAULTS, consensus_defaults, create_snapshot, list_snapshots
from relabel.sources.labels import import_source
from relabel.votes.aggregation import Aggregate
from relabel.votes.posteriors import voted_images
from tests.relabel.snapshots.test_snapshots_consensus import NAMES, import_votes, jsonl_rows, ws  # noqa: F401

BLUR = NAMES.index("e_blur.jpg")  # ImGT tench (0); raters: tench no, goldfish (1) 2 yes 2 no: about 0.79


class TestBestEstimate:
    def test_the_rule_takes_the_classes_at_one_half_and_the_original_at_keep_original(self) -> None:
        table = SimpleNamespace(pairs=np.array([[1, 5], [1, 6], [1, 7], [2, 5], [2, 8]]))  # 5 is original
        result = Aggregate("ds", np.array([0.45, 0.6, 0.3, 0.4, 0.02]))
        original = {1: [5], 2: [5]}
        plain = voted_images(table, result, 0.9, original=original, keep_original=None)
        assert (plain[1].uncertain, plain[1].classes, plain[1].best) == (True, (), (6,))
        assert (plain[2].uncertain, plain[2].best) == (True, ())  # more likely absent than present: no class
        kept = voted_images(table, result, 0.9, original=original, keep_original=0.4)
        assert kept[1].best == (5, 6) and kept[2].best == (5,) and kept[2].classes == (5,)

    def test_a_counting_method_without_a_majority_has_no_best_estimate(self) -> None:
        table = SimpleNamespace(pairs=np.array([[1, 5], [1, 6]]))
        result = Aggregate("set-majority", np.array([0.6, 0.2]), accepted=np.zeros(2, bool), undecided=np.ones(2, bool))
        assert voted_images(table, result, 0.9)[1].best is None

    def test_real_jsonl_and_csv_write_the_best_estimate_of_a_u_image(self, ws, tmp_path: Path) -> None:  # noqa: F811
        engine, _ = ws
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        for fmt in ("real", "jsonl", "csv"):
            export_snapshot(engine, "ds", fmt=fmt, out=tmp_path / f"ds.{fmt}", allow_partial=True, warn=print)
        assert json.loads((tmp_path / "ds.real").read_text())[BLUR] == [1]  # goldfish, not ImGT's tench
        row = jsonl_rows(tmp_path / "ds.jsonl")["e_blur.jpg"]
        assert (row["labels"], row["names"], row["category"], row["origin"]) == ([1], ["goldfish"], "U", "uncertain")
        assert set(row["posteriors"]) == {"0", "1", "391"} and 0.7 < row["posteriors"]["1"] < 0.85
        cells = {r["image"]: r for r in csv.DictReader((tmp_path / "ds.csv").open())}["e_blur.jpg"]
        assert (cells["labels"], cells["category"], cells["origin"]) == ("1", "U", "uncertain")
        assert "1:0.7" in cells["posteriors"] or "1:0.8" in cells["posteriors"]


def add_absent_classes(engine, ids: dict[str, int]) -> None:
    """Five more classes on each of the first five images that every rater answers no: 25 more voted pairs."""
    votes = {(ids[name], c): [Answer.no] * 5 for name in NAMES[:5] for c in range(900, 905)}
    import_votes(engine, "more", votes)


def import_trusted(engine, tmp_path: Path) -> None:
    """A reference that agrees with the raters, except that the blurred image shows neither tench nor goldfish."""
    trusted = {"a_cup.jpg": [967, 968], "b_cat.jpg": [281], "c_fish.jpg": [1], "d_rocket.jpg": [], "e_blur.jpg": []}
    path = tmp_path / "trusted.jsonl"
    path.write_text("".join(json.dumps({"image": k, "labels": v}) + "\n" for k, v in trusted.items()))
    import_source(engine, path, fmt="jsonl", name="trusted")


class TestCalibratedSnapshot:
    def test_the_reference_moves_the_split_pair_and_the_settings_say_so(self, ws, tmp_path: Path) -> None:  # noqa: F811
        engine, ids = ws
        add_absent_classes(engine, ids)
        import_trusted(engine, tmp_path)
        s = create_snapshot(engine, "cal", consensus="ds", studio_votes=False, calibrate="trusted", keep_original=None)
        export_snapshot(engine, "cal", fmt="jsonl", out=tmp_path / "cal.jsonl")
        rows = jsonl_rows(tmp_path / "cal.jsonl")
        blur = rows["e_blur.jpg"]
        assert (blur["labels"], blur["category"], blur["origin"]) == ([], "Z", "consensus")
        assert blur["posteriors"]["1"] == 0.0  # the reference never holds a pair that unsure
        assert rows["c_fish.jpg"]["labels"] == [1] and rows["a_cup.jpg"]["labels"] == [967, 968]
        calibration = s.consensus["calibration"]
        assert calibration["against"] == "trusted" and calibration["images"] == 5
        assert calibration["pairs"] == [35, 5]  # other and original classes of the five labelled images

    def test_too_few_reference_pairs_or_an_unknown_reference_are_refused(self, ws, tmp_path: Path) -> None:  # noqa: F811
        engine, _ = ws
        with pytest.raises(InputError, match=r"--calibrate adjudications: it labels 3 of the 18 .* at least 20"):
            create_snapshot(engine, "cal", consensus="ds", studio_votes=False, calibrate="adjudications")
        with pytest.raises(NotFoundError, match="unknown reference for --calibrate 'nope'; known: .*adjudications"):
            create_snapshot(engine, "cal", consensus="ds", studio_votes=False, calibrate="nope")
        with pytest.raises(InputError, match="--calibrate needs a probabilistic consensus"):
            create_snapshot(engine, "cal", consensus="majority", studio_votes=False, calibrate="adjudications")
        assert list_snapshots(engine) == []

    def test_calibrated_defaults_differ_from_the_uncalibrated_ones(self) -> None:
        assert consensus_defaults("real") == CALIBRATED_DEFAULTS != consensus_defaults(None) == (0.9, 0.5)


class TestOneDefinitionOfUncertain:
    def test_the_vote_report_and_the_snapshot_count_the_same_uncertain_images(self, ws) -> None:  # noqa: F811
        from relabel.votes.report import VoteChoice, aggregate_dataset

        engine, _ = ws
        for threshold, keep in ((0.9, 0.5), (0.9, None), (0.75, 0.5), (0.99, None)):
            name = f"ds-{threshold}-{keep}"
            s = create_snapshot(
                engine, name, consensus="ds", studio_votes=False, threshold=threshold, keep_original=keep
            )
            report = aggregate_dataset(engine, threshold=threshold, keep_original=keep, choice=VoteChoice(studio=False))
            assert report.uncertain_images == s.uncertain, name
        assert report.uncertain > 1  # at 0.99 more than the split pair is open
