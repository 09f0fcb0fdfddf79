"""Risk and coverage of a vote-based consensus (relabel.votes.risk_coverage), pure and through a snapshot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relabel.common.errors import InputError
from relabel.snapshots.freeze import create_snapshot
from relabel.votes.aggregation import Aggregate
from relabel.votes.risk_coverage import CoveragePoint, coverage_lines, reference_truth, risk_coverage
from tests.relabel.snapshots.test_snapshot_best_estimate import import_trusted
from tests.relabel.snapshots.test_snapshots_consensus import ws  # noqa: F401

PAIRS = np.array([[1, 5], [1, 6], [2, 5], [2, 7], [3, 8]])
RESULT = Aggregate("ds", np.array([0.95, 0.02, 0.8, 0.05, 0.6]))
REFERENCE = {1: [5], 2: [7]}  # image 3 is not labelled


class TestRiskCoverage:
    def test_a_hand_computed_curve(self) -> None:
        truth = reference_truth(PAIRS, REFERENCE)
        assert truth[0].tolist() == [True, False, False, True, False] and truth[1].tolist() == [1, 1, 1, 1, 0]
        points = risk_coverage(PAIRS, RESULT, truth, [0.9, 0.75, 0.55])
        assert [(p.threshold, p.voted, p.settled, p.checked, p.agreeing) for p in points] == [
            (0.55, 3, 3, 2, 1),  # image 2 settled on class 5, which the reference does not hold
            (0.75, 3, 2, 2, 1),  # image 3 (0.6) uncertain
            (0.9, 3, 1, 1, 1),  # image 2 (0.8) uncertain too
        ]
        assert points[1].coverage == pytest.approx(2 / 3) and points[1].agreement == 0.5

    def test_the_original_rule_settles_an_original_class(self) -> None:
        truth = reference_truth(PAIRS, REFERENCE)
        original = np.array([False, False, True, False, False])
        [point] = risk_coverage(PAIRS, RESULT, truth, [0.9], original=original, keep_original=0.5)
        assert (point.settled, point.checked, point.agreeing) == (2, 2, 1)

    def test_lines_name_the_chosen_threshold_and_an_in_sample_reference(self) -> None:
        points = [CoveragePoint(0.8, 10, 8, 6, 6).__dict__, CoveragePoint(0.9, 10, 5, 4, 4).__dict__]
        lines = coverage_lines({"reference": "real", "in_sample": True, "points": points}, 0.9)
        assert lines[0].startswith("settled by the votes: 5 of 10 voted images (50.0%); 4 of the 4 that real")
        assert "in-sample" in lines[0]
        assert lines[1].endswith("0.8: 80.0% settled, 100.00% agree; 0.9: 50.0% settled, 100.00% agree")


class TestThroughASnapshot:
    def test_the_snapshot_records_its_risk_and_coverage(self, ws, tmp_path) -> None:  # noqa: F811
        engine, _ = ws
        import_trusted(engine, tmp_path)  # agrees with the raters but says the blurred image shows no fish
        s = create_snapshot(engine, "ds", consensus="ds", studio_votes=False, reference="trusted")
        recorded = s.consensus["risk_coverage"]
        at = {p["threshold"]: p for p in recorded["points"]}
        assert recorded["reference"] == "trusted" and not recorded["in_sample"]
        assert (at[0.9]["voted"], at[0.9]["settled"], at[0.9]["checked"], at[0.9]["agreeing"]) == (6, 5, 4, 4)
        assert (at[0.75]["settled"], at[0.75]["checked"], at[0.75]["agreeing"]) == (6, 5, 4)  # goldfish accepted

    def test_unanimous_refuses_a_reference(self, ws) -> None:  # noqa: F811
        engine, _ = ws
        with pytest.raises(InputError, match="--reference needs a consensus that reads votes"):
            create_snapshot(engine, "plain", reference="imgt")


class TestCommand:
    def test_snapshot_create_prints_the_calibration_and_the_curve(self, ws, tmp_path) -> None:  # noqa: F811
        from click.testing import CliRunner

        from relabel.cli import cli
        from tests.relabel.snapshots.test_snapshot_best_estimate import add_absent_classes

        engine, ids = ws
        if engine.url.get_backend_name() != "sqlite":
            pytest.skip("the command line opens the workspace's SQLite file")
        add_absent_classes(engine, ids)
        import_trusted(engine, tmp_path)
        folder = str(Path(engine.url.database).parent)
        args = ["--workspace", folder, "snapshot", "create", "cal", "--consensus", "ds", "--no-studio-votes"]
        result = CliRunner().invoke(cli, [*args, "--calibrate", "trusted", "--reference", "trusted", "--quiet"])
        assert result.exit_code == 0, result.output
        assert "threshold 0.75, votes more + raters, calibrated against trusted (40 pairs)" in result.output
        assert "settled by the votes: 6 of 6 voted images (100.0%); 5 of the 5 that trusted labels" in result.output
        assert "(in-sample: the posteriors were calibrated on it)" in result.output


class TestDashboardLines:
    def test_the_newest_vote_snapshot_shows_its_uncertain_images_and_curve(self, ws, tmp_path) -> None:  # noqa: F811
        from relabel.snapshots.freeze import vote_snapshot_lines

        engine, _ = ws
        create_snapshot(engine, "plain")
        assert vote_snapshot_lines(engine) == []  # a unanimous snapshot reads no votes
        import_trusted(engine, tmp_path)
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False, reference="trusted")
        create_snapshot(engine, "plain-2")
        lines = vote_snapshot_lines(engine)
        assert lines[0] == "snapshot 'ds' (ds): 1 uncertain images, reviewed first"
        assert lines[1].startswith("settled by the votes: 5 of 6 voted images (83.3%); 4 of the 4 that trusted")
        assert lines[2].startswith("risk-coverage vs trusted")
