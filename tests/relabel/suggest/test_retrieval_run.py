"""`relabel suggest --protocol retrieval` with a tiny CLIP built from its config (offline), then `relabel evaluate`'s
retrieval rows against ImGT and the multi-label `team` prior, checked against a brute-force numpy reference.

The five-image workspace (tests/evaluation_workspace.py): ImGT a, b tench; c goldfish; d, e tabby. team: a {tench,
goldfish}, b {goldfish}, c {} (excluded), d {tabby, tiger cat}, e {tiger cat}.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select
from sqlmodel import Session, col

from db import create_db_engine, init_db
from db.enums import Verdict
from db.models import ModelRun
from relabel.cli import main
from relabel.snapshots.freeze import create_snapshot
from relabel.suggest import retrieval_run
from relabel.suggest.adapters.clip import ZeroShotAdapter
from relabel.suggest.retrieval_store import load_embeddings
from tests import evaluation_workspace as ws
from tests.images import truncated_jpeg
from tests.tiny_models import save_tiny_clip

IMGT = {"a": [ws.TENCH], "b": [ws.TENCH], "c": [ws.GOLDFISH], "d": [ws.TABBY], "e": [ws.TABBY]}
TEAM = {"a": [ws.TENCH, ws.GOLDFISH], "b": [ws.GOLDFISH], "d": [ws.TABBY, ws.TIGER_CAT], "e": [ws.TIGER_CAT]}


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("clip"))


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ws.build(engine, tmp_path)
    engine.dispose()
    return folder


def relabel(workspace: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(["--workspace", str(workspace), *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def retrieve(workspace: Path, capsys, clip: Path, *extra: str) -> tuple[int, str, str]:
    return relabel(workspace, capsys, "suggest", "--model", f"clip:{clip}", "--protocol", "retrieval", "--run",
                   "ret", "--quiet", *extra)  # fmt: skip


def stored(workspace: Path) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray]:
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    with Session(engine) as s:
        params = s.scalars(select(ModelRun).where(col(ModelRun.name) == "ret")).one().params
    engine.dispose()
    found = load_embeddings(Path(params["embeddings"]), "ret")
    return params, found.image_ids, found.images, found.texts


def brute_force(sim: np.ndarray, sets: list[list[int]]) -> tuple[list[float], float, list[float]]:
    """R@1/5/10 and mAP text → image, R@1/5/10 image → text, by sorting every row and column (no ties here)."""
    relevant = np.zeros(sim.shape, bool)
    for image, classes in enumerate(sets):
        relevant[classes, image] = True
    queries = np.flatnonzero(relevant.any(axis=1))
    t2i, aps = [], []
    for q in queries:
        order = np.argsort(-sim[q])
        hits = relevant[q, order]
        aps.append(np.mean([hits[: i + 1].mean() for i in np.flatnonzero(hits)]))
        t2i.append([hits[:k].any() for k in (1, 5, 10)])
    i2t = [[relevant[np.argsort(-sim[:, i])[:k], i].any() for k in (1, 5, 10)] for i in range(sim.shape[1])]
    return list(np.mean(t2i, axis=0) * 100), float(np.mean(aps) * 100), list(np.mean(i2t, axis=0) * 100)


def row(out: str, *first: str) -> list[str]:
    found = [line.split() for line in out.splitlines() if line.split()[: len(first)] == list(first)]
    assert len(found) == 1, (first, out)
    return found[0][len(first) :]


def test_embeds_the_photos_and_the_class_queries_with_the_model_itself(workspace: Path, tiny_clip: Path, capsys):
    code, out, err = retrieve(workspace, capsys, tiny_clip)
    assert code == 0, err
    assert "run 'ret': 5 image(s), 0 done before, now 5 embedded" in out
    params, ids, images, texts = stored(workspace)
    assert params["protocol"] == "retrieval" and params["template"] == "a photo of a {}."
    assert texts.shape == (1000, 16) and images.shape == (5, 16)
    adapter = ZeroShotAdapter(str(tiny_clip), device="cpu")
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    letters = ws.letter_ids(engine)
    engine.dispose()
    by_id = {v: k for k, v in letters.items()}
    from relabel.common.imaging import load_rgb

    photos = [load_rgb(workspace.parent / "photos" / next(f for f in ws.FILES if f"_{by_id[i]}" in f)) for i in ids]
    np.testing.assert_allclose(images, adapter.encode_images(photos), atol=1e-5)
    np.testing.assert_allclose(texts[ws.TABBY], adapter.encode_texts(["a photo of a tabby."])[0], atol=1e-5)
    again = retrieve(workspace, capsys, tiny_clip)
    assert again[0] == 0 and "5 done before, now 0 embedded" in again[1]


def test_evaluate_scores_retrieval_against_imgt_and_team(workspace: Path, tiny_clip: Path, tmp_path: Path, capsys):
    assert retrieve(workspace, capsys, tiny_clip)[0] == 0
    _, ids, images, texts = stored(workspace)
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    letters = {v: k for k, v in ws.letter_ids(engine).items()}
    engine.dispose()
    sim = texts @ images.T
    code, out, err = relabel(workspace, capsys, "evaluate", "--reference", "imgt", "--reference", "team", "--boot",
                             "200", "--out", str(tmp_path / "report"))  # fmt: skip
    assert code == 0, err
    t2i, mean_ap, i2t = brute_force(sim, [IMGT[letters[i]] for i in ids])
    expected = ["5", "3", *(f"{v:.2f}" for v in [*t2i, mean_ap, *i2t]), "0"]
    assert row(out, "ret", "imgt")[:10] == expected
    on_team = [i for i, image in enumerate(ids) if letters[image] in TEAM]  # c's empty set leaves the gallery
    t2i, mean_ap, i2t = brute_force(sim[:, on_team], [TEAM[letters[ids[i]]] for i in on_team])
    imgt_there = brute_force(sim[:, on_team], [IMGT[letters[ids[i]]] for i in on_team])[1]
    got = row(out, "ret", "team")
    assert got[:10] == ["4", "4", *(f"{v:.2f}" for v in [*t2i, mean_ap, *i2t]), "0"]
    assert got[10:12] == [f"{imgt_there:.2f}", f"{mean_ap - imgt_there:+.2f}"]
    low, high = float(got[12]), float(got[14])  # "-50.00 to +8.33": a bootstrap of the four classes
    assert got[13] == "to" and low <= mean_ap - imgt_there <= high and low < high
    assert "dataset 'five': 2 run(s)" in out  # the retrieval run is not scored as classes
    report = (tmp_path / "report" / "report.md").read_text()
    assert "### Retrieval" in report and "![Retrieval](retrieval.png)" in report
    assert (tmp_path / "report" / "retrieval.png").read_bytes()[:4] == b"\x89PNG"
    saved = json.loads((tmp_path / "report" / "evaluation.json").read_text())
    assert [r["reference"] for r in saved["tasks"]["retrieval"]] == ["imgt", "team"]


def test_evaluate_by_default_scores_against_imgt_and_the_newest_snapshot(workspace: Path, tiny_clip: Path, capsys):
    """The snapshot's sets: a {tench, goldfish} and d {tabby, tiger cat} decided by a lead, the others ImGT's."""
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    ids = ws.letter_ids(engine)
    ws.decide(engine, ids, {"a": (Verdict.labels, [ws.TENCH, ws.GOLDFISH]),
                            "d": (Verdict.labels, [ws.TABBY, ws.TIGER_CAT])})  # fmt: skip
    create_snapshot(engine, "round-1")
    engine.dispose()
    assert retrieve(workspace, capsys, tiny_clip)[0] == 0
    _, image_ids, images, texts = stored(workspace)
    letters = {v: k for k, v in ids.items()}
    code, out, err = relabel(workspace, capsys, "evaluate", "--boot", "0", "--no-report")
    assert code == 0, err
    snapshot = {**IMGT, "a": [ws.TENCH, ws.GOLDFISH], "d": [ws.TABBY, ws.TIGER_CAT]}
    t2i, mean_ap, i2t = brute_force(texts @ images.T, [snapshot[letters[i]] for i in image_ids])
    assert row(out, "ret", "round-1")[:10] == ["5", "4", *(f"{v:.2f}" for v in [*t2i, mean_ap, *i2t]), "0"]
    assert row(out, "ret", "imgt")[:2] == ["5", "3"]


def test_an_interrupted_run_resumes_where_it_stopped(workspace: Path, tiny_clip: Path, capsys, monkeypatch):
    monkeypatch.setattr(retrieval_run, "CHUNK", 2)
    calls = []
    real = ZeroShotAdapter.embed_images

    def failing_third(self, images):  # the third chunk never comes back
        calls.append(len(images))
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(self, images)

    monkeypatch.setattr(ZeroShotAdapter, "embed_images", failing_third)
    code, _, err = retrieve(workspace, capsys, tiny_clip)  # Ctrl-C during the third chunk
    assert code == 130 and "run the same command again to resume" in err
    assert len(stored(workspace)[1]) == 4
    monkeypatch.setattr(ZeroShotAdapter, "embed_images", real)
    code, out, _ = retrieve(workspace, capsys, tiny_clip)
    assert code == 0 and "4 done before, now 1 embedded" in out
    _, ids, images, _ = stored(workspace)
    assert len(ids) == 5 and len(set(ids.tolist())) == 5


def test_a_model_failure_stops_with_one_line_and_keeps_the_parts(workspace: Path, tiny_clip: Path, capsys, monkeypatch):
    monkeypatch.setattr(retrieval_run, "CHUNK", 2)
    real = ZeroShotAdapter.embed_images
    calls = []

    def out_of_memory_second(self, images):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB\nmore details")
        return real(self, images)

    monkeypatch.setattr(ZeroShotAdapter, "embed_images", out_of_memory_second)
    code, _, err = retrieve(workspace, capsys, tiny_clip)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "the model failed on" in err and "(CUDA out of memory. Tried to allocate 2.00 GiB)" in err
    assert "the 2 image(s) done are kept, run the same command again to resume" in err
    assert len(stored(workspace)[1]) == 2


def test_an_unreadable_photo_is_left_out_of_the_gallery(workspace: Path, tiny_clip: Path, capsys):
    truncated_jpeg(workspace.parent / "photos" / ws.FILES[0])  # a, broken after ingest
    code, out, err = retrieve(workspace, capsys, tiny_clip)
    assert code == 0, err
    assert "now 4 embedded, 1 unreadable (left out of the gallery)" in out
    assert len(stored(workspace)[1]) == 4
    code, out, err = relabel(workspace, capsys, "evaluate", "--reference", "imgt", "--boot", "0", "--no-report")
    assert code == 0, err
    assert row(out, "ret", "imgt")[:2] == ["4", "3"] and row(out, "ret", "imgt")[9] == "1"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--images-per-request", "2"], "--images-per-request is not read by the retrieval protocol"),
        (["--retry-errors"], "--retry-errors and --batch-api are not read by the retrieval protocol"),
    ],
)
def test_options_it_does_not_read_are_refused(workspace: Path, tiny_clip: Path, capsys, extra, message) -> None:
    code, _, err = retrieve(workspace, capsys, tiny_clip, *extra)
    assert code != 0 and message in err and len(err.strip().splitlines()) == 1


def test_a_model_without_a_text_tower_is_refused(workspace: Path, capsys) -> None:
    code, _, err = relabel(workspace, capsys, "suggest", "--model", "efficientnet-lite0", "--protocol", "retrieval")
    assert code != 0 and "the retrieval protocol needs a dual encoder" in err
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    with Session(engine) as s:
        assert s.scalars(select(ModelRun).where(col(ModelRun.protocol) == "retrieval")).first() is None
    engine.dispose()
