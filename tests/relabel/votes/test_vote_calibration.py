"""`relabel votes aggregate --calibrate`: the calibration a snapshot makes, its in-sample figure flagged and an
out-of-sample figure beside it; and one check of the threshold for `votes aggregate` and `snapshot create`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relabel.cli import cli
from relabel.common.errors import InputError
from relabel.snapshots.freeze import create_snapshot
from relabel.votes.aggregation import aggregate
from relabel.votes.fit import calibrate_items, calibrate_out_of_fold
from relabel.votes.report import OUT_OF_FOLD, VoteChoice, aggregate_dataset
from relabel.votes.table import collect_votes
from tests.relabel.snapshots.test_snapshot_best_estimate import add_absent_classes, import_trusted
from tests.relabel.snapshots.test_snapshots_consensus import ws  # noqa: F401

RATERS_ONLY = VoteChoice(studio=False)


class TestAggregateCalibrated:
    def test_the_same_calibration_as_a_snapshot(self, ws, tmp_path: Path) -> None:  # noqa: F811
        engine, ids = ws
        add_absent_classes(engine, ids)
        import_trusted(engine, tmp_path)
        s = create_snapshot(engine, "cal", consensus="ds", studio_votes=False, calibrate="trusted", threshold=0.75,
                            keep_original=None)  # fmt: skip
        r = aggregate_dataset(engine, threshold=0.75, keep_original=None, choice=RATERS_ONLY, calibrate="trusted")
        assert r.calibration == s.consensus["calibration"]
        assert r.uncertain_images == s.uncertain and r.reference is None and r.agreement == []
        plain = aggregate_dataset(engine, threshold=0.75, keep_original=None, choice=RATERS_ONLY)
        assert plain.calibration is None and plain.uncertain_images != r.uncertain_images  # the split image settles

    def test_compared_on_its_own_reference_the_figure_is_in_sample_and_an_out_of_fold_row_follows(
        self,
        ws,  # noqa: F811
        tmp_path: Path,
    ) -> None:
        engine, ids = ws
        add_absent_classes(engine, ids)
        import_trusted(engine, tmp_path)
        r = aggregate_dataset(engine, threshold=0.75, keep_original=None, choice=RATERS_ONLY, calibrate="trusted",
                              compare="trusted")  # fmt: skip
        assert r.in_sample and [a.method for a in r.agreement] == ["ds", f"ds, {OUT_OF_FOLD}", "majority"]
        assert r.agreement[0].images == r.agreement[1].images == 5
        other = aggregate_dataset(engine, choice=RATERS_ONLY, calibrate="trusted", compare="imgt", threshold=0.75)
        assert not other.in_sample and [a.method for a in other.agreement] == ["ds", "majority"]

    def test_out_of_fold_posteriors_never_read_their_own_images_reference(self, ws, tmp_path: Path) -> None:  # noqa: F811
        engine, ids = ws
        add_absent_classes(engine, ids)
        with engine.connect() as conn:
            table = collect_votes(conn, 1, studio=False)
        result = aggregate(table.votes, "ds")
        original = np.zeros(len(table.pairs), bool)
        reference = {i: set() for i in np.unique(table.pairs[:, 0]).tolist()}
        blur = ids["e_blur.jpg"]
        changed = {**reference, blur: {0, 1, 391}}  # only the blurred image's labels differ
        items = table.pairs[:, 0] == blur
        a = calibrate_out_of_fold(table, result, reference, original, "r").posterior
        b = calibrate_out_of_fold(table, result, changed, original, "r").posterior
        np.testing.assert_array_equal(a[items], b[items])
        assert not np.array_equal(a, b)  # the image's labels do move the other half's calibration
        in_sample_a = calibrate_items(table, result, reference, original, "r")[0].posterior
        in_sample_b = calibrate_items(table, result, changed, original, "r")[0].posterior
        assert not np.array_equal(in_sample_a[items], in_sample_b[items])  # the in-sample calibration does read it


class TestOneThresholdCheck:
    @pytest.mark.parametrize("threshold", [0.3, 1.5, float("nan")])
    def test_votes_aggregate_refuses_what_snapshot_create_refuses_with_the_same_message(
        self,
        ws,  # noqa: F811
        threshold: float,
    ) -> None:
        engine, _ = ws
        with pytest.raises(InputError) as snapshot_error:
            create_snapshot(engine, "t", consensus="ds", threshold=threshold)
        with pytest.raises(InputError) as aggregate_error:
            aggregate_dataset(engine, threshold=threshold)
        assert str(aggregate_error.value) == str(snapshot_error.value) and "--threshold" in str(snapshot_error.value)
        assert "\n" not in str(snapshot_error.value)


class TestCommand:
    def test_votes_aggregate_prints_the_calibration_and_both_figures(self, ws, tmp_path: Path) -> None:  # noqa: F811
        engine, ids = ws
        if engine.url.get_backend_name() != "sqlite":
            pytest.skip("the command line opens the workspace's SQLite file")
        add_absent_classes(engine, ids)
        import_trusted(engine, tmp_path)
        base = ["--workspace", str(Path(engine.url.database).parent)]
        args = [*base, "votes", "aggregate", "--no-studio", "--calibrate", "trusted", "--compare", "trusted"]
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, result.output
        assert "method ds (threshold 0.75) on sources" in result.output  # the calibrated defaults, as snapshot create
        assert "calibrated against trusted (isotonic, original and other classes apart) on 35 other and 5 original " \
               "pairs of 5 images" in result.output  # fmt: skip
        lines = result.output.splitlines()
        in_sample = next(line for line in lines if "vs trusted [ds]" in line)
        assert in_sample.endswith("(in-sample: the posteriors were calibrated on it)")
        assert any(f"vs trusted [ds, {OUT_OF_FOLD}]" in line for line in lines)
        snapshot = ["snapshot", "create", "cal", "--consensus", "ds", "--no-studio-votes", "--calibrate", "trusted"]
        created = CliRunner().invoke(cli, [*base, *snapshot, "--quiet"])
        calibrated = next(line for line in lines if "calibrated against trusted (isotonic" in line)
        assert created.exit_code == 0 and calibrated in created.output.splitlines()  # printed the same way
        low = CliRunner().invoke(cli, [*base, "votes", "aggregate", "--threshold", "0.3"])
        snap = CliRunner().invoke(cli, [*base, "snapshot", "create", "x", "--consensus", "ds", "--threshold", "0.3"])
        assert low.exit_code == snap.exit_code != 0 and low.output == snap.output and low.output.count("\n") == 1
        majority = CliRunner().invoke(
            cli, [*base, "votes", "aggregate", "--method", "majority", "--calibrate", "trusted"]
        )
        assert majority.exit_code != 0 and "--calibrate needs a probabilistic consensus" in majority.output
