"""Full score vectors of an imported run (`relabel predictions import FILE --keep-scores`): the N x C matrix comes
back exactly, in the dataset's image order, with the ImGT labels beside it; a bad file is one line and writes
nothing (no run, no score file)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select
from sqlmodel import Session

from db.models import Image, ModelRun, Prediction
from relabel.cli import cli
from relabel.common.errors import InputError
from relabel.sources.predictions import import_predictions
from relabel.sources.score_vectors import run_scores, top_k
from tests.relabel.sources.test_predictions import predictions, small_dataset

KEYS = ["n02123045_c.jpg", "n01440764_a", "n01440764_b.jpg"]  # not the dataset's order


def score_matrix(n: int = 3, c: int = 1000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, c))
    p = np.exp(logits)
    return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)


def write_npz(path: Path, scores: np.ndarray, ids: list[str], **extra: np.ndarray) -> Path:
    np.savez(path, scores=scores, ids=np.array(ids), **extra)
    return path


def stored_files(workspace: Path) -> list[Path]:
    return sorted((workspace / "scores").glob("*")) if (workspace / "scores").exists() else []


def runs(engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(ModelRun)) or 0


def test_npz_round_trip_in_image_order(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    scores = score_matrix()
    ws = tmp_path / "ws"
    report = import_predictions(engine, write_npz(tmp_path / "p.npz", scores, KEYS), run="vit", keep_scores=ws)
    assert report.ok == 3
    got = run_scores(engine, ws, "vit")
    with Session(engine) as s:
        ids = dict(s.execute(select(Image.path, Image.id)).all())
    assert got.image_ids.tolist() == sorted(ids.values())  # the dataset's order, not the file's
    by_path = {p: i for i, p in enumerate(got.paths)}
    for row, key in enumerate(KEYS):
        path = next(p for p in ids if p.startswith(key.removesuffix(".jpg")))
        np.testing.assert_array_equal(got.scores[by_path[path]], scores[row])  # exactly the floats given
    assert got.scores.dtype == np.float32 and got.scores.shape == (3, 1000)
    assert got.classes[0] == vocab.classes[0].wnid
    # the database holds each image's top-5, as for any score matrix
    top, top_scores = top_k(scores, 5)
    np.testing.assert_array_equal(top, np.argsort(-scores, axis=1, kind="stable")[:, :5])  # the best first
    assert (np.diff(top_scores, axis=1) <= 0).all()
    stored = predictions(engine, "vit")
    assert stored["n02123045_c.jpg"][1] == top[0].tolist()


def test_classes_reorder_columns(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    scores = score_matrix()
    wnids = [c.wnid for c in vocab.classes]
    flipped = write_npz(tmp_path / "f.npz", scores[:, ::-1], KEYS, classes=np.array(wnids[::-1]))
    import_predictions(engine, flipped, run="vit", keep_scores=tmp_path / "ws")
    got = run_scores(engine, tmp_path / "ws", "vit")
    np.testing.assert_array_equal(np.sort(got.scores, axis=0), np.sort(scores, axis=0))
    assert got.scores[got.paths.index("n02123045_c.jpg")].tolist() == scores[0].tolist()


def test_npy_with_order(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    scores = score_matrix().astype(np.float64)
    np.save(tmp_path / "p.npy", scores)
    import_predictions(engine, tmp_path / "p.npy", run="vit", order="sorted", keep_scores=tmp_path / "ws")
    got = run_scores(engine, tmp_path / "ws", "vit")
    assert got.paths == sorted(got.paths)  # sorted paths are also the ingest order here
    np.testing.assert_allclose(got.scores, scores.astype(np.float32))


@pytest.mark.parametrize(
    ("scores", "ids", "message"),
    [
        (score_matrix(c=999), KEYS, "999 columns; the vocabulary has 1000 classes"),
        (score_matrix()[:, :1].ravel(), KEYS, "shape (3,)"),
        (np.where(np.eye(3, 1000) > 0, np.nan, score_matrix()), KEYS, "row 0: score nan in column 0 is not a finite"),
        (score_matrix().astype(np.int32), KEYS, "holds int32 values"),
        (np.where(np.eye(3, 1000)[:, ::-1] > 0, 1e39, score_matrix().astype(float)), KEYS, "column 999 is beyond"),
        (score_matrix(), KEYS[:2], "2 ids for 3 rows"),
        (score_matrix(), [*KEYS[:2], "n09999999_nowhere.jpg"], "nowhere"),
    ],
)
def test_bad_files_are_refused_and_write_nothing(engine, vocab, tmp_path: Path, scores, ids, message) -> None:
    small_dataset(engine, vocab, tmp_path)
    ws = tmp_path / "ws"
    path = write_npz(tmp_path / "bad.npz", scores, ids)
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")) as caught:
        import_predictions(engine, path, run="vit", keep_scores=ws)
    assert "\n" not in str(caught.value)
    assert runs(engine) == 0 and stored_files(ws) == []


def test_header_checked_before_allocation(engine, vocab, tmp_path: Path) -> None:
    """A member whose header announces 2 TB is refused from its header, before anything is allocated."""
    import io
    import zipfile

    from numpy.lib import format as npy

    small_dataset(engine, vocab, tmp_path)
    header = io.BytesIO()
    npy.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (549_755_813, 1000)})
    huge = tmp_path / "huge.npz"
    with zipfile.ZipFile(huge, "w") as z:
        z.writestr("scores.npy", header.getvalue() + b"\0" * 64)
        buffer = io.BytesIO()
        np.save(buffer, np.array(KEYS))
        z.writestr("ids.npy", buffer.getvalue())
    with pytest.raises(InputError, match="announces"):
        import_predictions(engine, huge, run="vit", keep_scores=tmp_path / "ws")
    assert runs(engine) == 0 and stored_files(tmp_path / "ws") == []


def test_a_failing_store_removes_the_new_score_file(engine, vocab, tmp_path: Path) -> None:
    """The run exists already (no --replace): refused after the file was read; the score file is not left behind."""
    small_dataset(engine, vocab, tmp_path)
    ws = tmp_path / "ws"
    import_predictions(engine, write_npz(tmp_path / "a.npz", score_matrix(seed=1), KEYS), run="vit", keep_scores=ws)
    before = stored_files(ws)
    with pytest.raises(Exception, match="already has a run"):
        import_predictions(engine, write_npz(tmp_path / "b.npz", score_matrix(seed=2), KEYS), run="vit", keep_scores=ws)
    assert stored_files(ws) == before and len(before) == 1


def test_replace_swaps_the_score_file(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    ws = tmp_path / "ws"
    import_predictions(engine, write_npz(tmp_path / "a.npz", score_matrix(seed=1), KEYS), run="vit", keep_scores=ws)
    new = score_matrix(seed=2)
    b = write_npz(tmp_path / "b.npz", new, KEYS)
    import_predictions(engine, b, run="vit", keep_scores=ws, replace=True)
    assert len(stored_files(ws)) == 1
    assert sorted(run_scores(engine, ws, "vit").scores.sum(axis=1).round(3).tolist()) == [1.0, 1.0, 1.0]
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(Prediction)) == 3


def test_cli_import_and_export_for_cleanlab(tmp_path: Path, vocab) -> None:
    """Through the command line: the exported file's labels and scores give what a cleanlab-style self-confidence
    ranking needs (numpy reference: the score of the given label, lowest first)."""
    from db import create_db_engine, init_db

    ws = tmp_path / "ws"
    engine = create_db_engine(f"sqlite:///{ws / 'relabel.db'}")
    init_db(engine)
    small_dataset(engine, vocab, tmp_path)
    scores = score_matrix()
    path = write_npz(tmp_path / "p.npz", scores, KEYS)
    result = CliRunner().invoke(cli, ["--workspace", str(ws), "predictions", "import", str(path), "--run", "vit",
                                      "--keep-scores"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "every class's score kept" in result.output
    out = tmp_path / "vit.npz"
    result = CliRunner().invoke(cli, ["--workspace", str(ws), "predictions", "scores", "vit", "--out", str(out)])
    assert result.exit_code == 0, result.output
    data = np.load(out)
    assert data["scores"].shape == (3, 1000) and len(data["classes"]) == 1000
    assert sorted(data["labels"].tolist()) == [0, 0, 281]
    confidence = data["scores"][np.arange(3), data["labels"]]
    by_path = dict(zip(data["ids"].tolist(), confidence.tolist()))
    assert by_path["n02123045_c.jpg"] == pytest.approx(float(scores[0, 281]))
    missing = CliRunner().invoke(cli, ["--workspace", str(ws), "predictions", "scores", "nope", "--out", str(out)])
    assert missing.exit_code != 0 and "nope" in missing.output
    engine.dispose()


def test_keep_scores_refused_for_a_table(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    (tmp_path / "p.csv").write_text("image,label\nn01440764_a.jpg,tench\n")
    with pytest.raises(InputError, match="npy or .npz score matrix"):
        import_predictions(engine, tmp_path / "p.csv", run="m", keep_scores=tmp_path / "ws")
    assert runs(engine) == 0


def test_top_k_breaks_ties_by_class_index() -> None:
    """The stored top-5 is the stable ranking: tied scores across the 5th place go to the lower class index."""
    rng = np.random.default_rng(3)
    scores = rng.random((50, 7)).astype(np.float32)
    scores[:, 1:4] = 0.5
    scores[0] = 0.25  # every class tied
    top, top_scores = top_k(scores, 5)
    np.testing.assert_array_equal(top, np.argsort(-scores, axis=1, kind="stable")[:, :5])
    assert top[0].tolist() == [0, 1, 2, 3, 4] and top_scores.shape == (50, 5)
