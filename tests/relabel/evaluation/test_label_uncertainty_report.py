"""`relabel evaluate` against a probabilistic snapshot: the expected top-1 over label sets sampled from its
posteriors and the interval with label uncertainty, beside the thresholded top-1, in the console, report.md and
evaluation.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import insert
from sqlmodel import Session

from db import create_db_engine, init_db
from db.enums import Category
from db.models import Snapshot, SnapshotLabel, SnapshotPosterior
from relabel.cli import main
from relabel.common.workspace import get_dataset
from tests import evaluation_workspace as ws
from tests.evaluation_workspace import GOLDFISH, TABBY, TENCH, TIGER_CAT
from tests.evaluator.test_label_uncertainty import exact_expected_accuracy

# letter -> (labels, category, origin, stored posteriors). b is uncertain (TENCH at 0.6: U) and keeps its ImGT label
# (policy keep), which the posteriors leave at 0.6; c was adjudicated: no posterior, its label counts as certain.
DS_SNAPSHOT: dict[str, tuple[list[int], Category, str, dict[int, float]]] = {
    "a": ([TENCH], Category.A, "consensus", {TENCH: 0.95, GOLDFISH: 0.4}),
    "b": ([TENCH], Category.U, "uncertain", {TENCH: 0.6, GOLDFISH: 0.1}),
    "c": ([GOLDFISH], Category.A, "adjudication", {}),
    "d": ([TABBY, TIGER_CAT], Category.M, "consensus", {TABBY: 0.99, TIGER_CAT: 0.92}),
    "e": ([TABBY], Category.A, "consensus", {TABBY: 1.0, TIGER_CAT: 0.2}),
}
# Run m5's top-1 (its call on c failed on the server: never scored); against the labels a is wrong, b, d, e right
# (at 0.9 on the posteriors alone b would be excluded).
M5_TOP1 = {"a": GOLDFISH, "b": TENCH, "d": TIGER_CAT, "e": TABBY}


def add_ds_snapshot(engine, ids: dict[str, int], name: str = "ds-1") -> None:
    """The snapshot as a Dawid-Skene consensus stores it: labels, categories and per-(image, class) posteriors."""
    with Session(engine) as s:
        counts: dict[str, int] = {}
        for _, category, _, _ in DS_SNAPSHOT.values():
            counts[category.value] = counts.get(category.value, 0) + 1
        snap = Snapshot(
            dataset_id=get_dataset(s, "five").id, name=name, content_hash="f" * 64, base_source="imgt",
            undecided_policy="keep", n_images=len(DS_SNAPSHOT), counts=counts,
            consensus={"rule": "ds", "threshold": 0.9},
        )  # fmt: skip
        s.add(snap)
        s.flush()
        labels = [{"snapshot_id": snap.id, "image_id": ids[k], "classes": c, "category": cat, "origin": origin}
                  for k, (c, cat, origin, _) in DS_SNAPSHOT.items()]  # fmt: skip
        posteriors = [{"snapshot_id": snap.id, "image_id": ids[k], "class_index": c, "posterior": p}
                      for k, (_, _, _, post) in DS_SNAPSHOT.items() for c, p in post.items()]  # fmt: skip
        s.execute(insert(SnapshotLabel), labels)
        s.execute(insert(SnapshotPosterior), posteriors)
        s.commit()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    add_ds_snapshot(engine, ws.build(engine, tmp_path))
    engine.dispose()
    return folder


def evaluate(workspace: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str, dict]:
    """Console text, report.md and evaluation.json of one `relabel evaluate` run."""
    main(["--workspace", str(workspace), "evaluate", "--run", "m5", *args, "--out", str(workspace / "report")])
    out = capsys.readouterr().out
    folder = workspace / "report"
    return out, (folder / "report.md").read_text(), json.loads((folder / "evaluation.json").read_text())


def test_the_expected_top1_and_its_interval_are_in_every_output(workspace: Path, capsys) -> None:
    out, report, data = evaluate(workspace, capsys, "--reference", "imgt", "--reference", "ds-1", "--boot", "2000")

    score = next(s for s in data["scores"] if s["reference"] == "ds-1")
    u = score["uncertain"]
    certain = {k: post or dict.fromkeys(DS_SNAPSHOT[k][0], 1.0) for k, (_, _, _, post) in DS_SNAPSHOT.items()}
    exact = exact_expected_accuracy(list(M5_TOP1.values()), [certain[k] for k in M5_TOP1])
    assert u["threshold"] == 0.9 and u["n_draws"] == 2000 and u["n_uncertain"] == 3  # a, b, e (d: 0.99, 0.92)
    assert u["thresholded"]["accuracy"] == pytest.approx(3 / 4) == score["top1"]["accuracy"]  # the labels
    assert u["expected_accuracy"] == pytest.approx(exact, abs=0.03)  # well over 4 standard errors of 2,000 draws
    assert u["ci_low"] <= u["expected_accuracy"] <= u["ci_high"]
    assert u["ci_high"] - u["ci_low"] >= u["label_ci_high"] - u["label_ci_low"] > 0
    assert "Stutz et al. (2023)" in data["definitions"]["uncertain"]
    assert next(s for s in data["scores"] if s["reference"] == "imgt")["uncertain"] is None

    row = next(line.split() for line in out.splitlines() if line.split()[:2] == ["m5", "ds-1"] and "0.9" in line)
    assert row[2:5] == ["0.9", "4", "75.00"] and row[5] == f"{100 * u['expected_accuracy']:.2f}"
    assert row[6] == f"{100 * u['ci_low']:.2f}–{100 * u['ci_high']:.2f}"
    assert "label uncertainty (after Stutz et al. 2023)" in out and "samples their labels in every draw" in out

    assert "## Label uncertainty" in report and "Evaluating AI systems under uncertain ground truth" in report
    assert "| expected % | 95 % CI (labels + images) | 95 % CI (labels only) |" in report
    assert "probabilistic (ds consensus): 8 (image, class) posteriors" in report


def test_a_snapshot_without_posteriors_or_no_draws_shows_none(workspace: Path, capsys) -> None:
    out, report, data = evaluate(workspace, capsys, "--reference", "ds-1", "--boot", "0")
    assert data["scores"][0]["uncertain"] is None and "## Label uncertainty" not in report
    assert "differences, ranks and label uncertainty: none (--boot 0)" in report

    out, report, data = evaluate(workspace, capsys, "--reference", "imgt", "--boot", "50")
    assert data["scores"][0]["uncertain"] is None and "## Label uncertainty" not in report
    assert "label uncertainty (after" not in out
