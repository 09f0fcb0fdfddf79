"""The golden numbers of ../shared/data/imagenet-val/README.md, through the tool's own ingest, import and evaluate
commands: cleanlab's cross-validated predictions score 72.732 % against the original labels and 77.614 % under
the ReaL rule on 46,837 images."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from db import create_db_engine
from relabel.cli import main
from relabel.evaluation import evaluation_history
from relabel.vocabulary import load_builtin
from tests.conftest import shared


def write_loc_solution(folder: Path) -> Path:
    """Kaggle's LOC_val_solution.csv for the 50,000 val images, from the shared original labels (no pixels)."""
    vocab = load_builtin()
    paths = json.loads(shared("imagenet-val", "index_to_filepath.json").read_text())
    labels = np.load(shared("imagenet-val", "original_labels_by_index.npy"))
    lines = ["ImageId,PredictionString"]
    lines += [f"{Path(p).stem},{vocab.classes[int(c)].wnid} 10 20 30 40" for p, c in zip(paths, labels)]
    path = folder / "LOC_val_solution.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.slow
def test_cleanlab_cv_predictions_through_import_and_evaluate(tmp_path: Path, capsys) -> None:
    """Images are recorded as missing (label-only); predictions made elsewhere are imported for them and scored."""
    val = shared("imagenet-val")
    (tmp_path / "no-pixels").mkdir()
    base = ["--workspace", str(tmp_path / "ws")]
    steps = [
        ["ingest", str(tmp_path / "no-pixels"), "--labels", str(write_loc_solution(tmp_path)), "--dataset", "val",
         "--quiet"],
        ["labels", "import", str(val / "real.json"), "--format", "real"],
        ["predictions", "import", str(val / "cleanlab_cv_predicted_labels_by_index.npy"), "--run", "cleanlab-cv",
         "--order", str(val / "index_to_filepath.json")],
        ["evaluate", "--reference", "imgt", "--reference", "real", "--out", str(tmp_path / "report")],
    ]  # fmt: skip
    for args in steps:
        main([*base, *args])
    out = capsys.readouterr().out

    data = json.loads((tmp_path / "report" / "evaluation.json").read_text())
    imgt, real = (s["top1"] for s in data["scores"])
    assert (round(100 * imgt["accuracy"], 3), imgt["n_scored"], imgt["n_excluded"]) == (72.732, 50_000, 0)
    assert (round(100 * real["accuracy"], 3), real["n_scored"], real["n_excluded"]) == (77.614, 46_837, 3_163)
    assert real["ci_low"] < real["accuracy"] < real["ci_high"]
    shown = [line.split() for line in out.splitlines() if line.split()[:2] == ["cleanlab-cv", "imported"]]
    assert [row[2:6] for row in shown] == [["imgt", "50000", "50000", "72.73"], ["real", "50000", "46837", "77.61"]]
    history = evaluation_history(create_db_engine(f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}"))
    assert history[0].top1[("cleanlab-cv", "real")] == pytest.approx(0.77614, abs=5e-6)
