"""Importing model predictions: CSV, JSONL, NPY in a stated order; failures stay failures."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from db.enums import Role, SuggestionAction, Verdict
from db.models import Annotation, Image, Label, ModelRun, Prediction
from relabel.common.errors import ConflictError, InputError
from relabel.decisions.annotations import add_user, record_annotation
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.sources.predictions import import_predictions
from tests import images
from tests.conftest import shared


def small_dataset(engine, vocab, tmp_path: Path) -> Path:
    root = tmp_path / "r"
    for name in ("n01440764_a.jpg", "n01440764_b.jpg", "n02123045_c.jpg"):
        images.photo(root / name, color=(len(name) * 9, 3, 3))
    ingest_dataset(
        engine, plan_ingest(root, vocab), dataset="d", root=root, vocab=vocab, show_progress=False, workers=1
    )
    return root


def predictions(engine, run: str) -> dict[str, tuple[str, list[int], list[float] | None, str]]:
    with Session(engine) as s:
        rid = s.scalars(select(ModelRun.id).where(ModelRun.name == run)).one()
        rows = s.execute(
            select(Image.path, Prediction.status, Prediction.classes, Prediction.scores, Prediction.reason)
            .join(Image, Image.id == Prediction.image_id)
            .where(Prediction.run_id == rid)
        ).all()
    return {p: (st.value, c, sc, r) for p, st, c, sc, r in rows}


def test_csv_ranked_labels_scores_and_errors(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    (tmp_path / "p.csv").write_text(
        "image,labels,scores,status,reason\n"
        "n01440764_a.jpg,tench|goldfish,0.9|0.05,,\n"
        "n01440764_b,n02123045,0.7,ok,\n"
        "n02123045_c.jpg,,,error,HTTP 500 after 5 retries\n"
    )
    report = import_predictions(engine, tmp_path / "p.csv", run="m1", protocol="supervised")
    assert (report.ok, report.errors) == (2, 1)
    assert predictions(engine, "m1") == {
        "n01440764_a.jpg": ("ok", [0, 1], [0.9, 0.05], ""),
        "n01440764_b.jpg": ("ok", [281], [0.7], ""),
        "n02123045_c.jpg": ("error", [], None, "HTTP 500 after 5 retries"),
    }


def test_jsonl_keeps_raw_model_output(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    rows = [
        {"image": "n01440764_a.jpg", "label": "tench", "raw": "A tench (fish) held by an angler."},
        {"image": "n01440764_b.jpg", "labels": [0]},
        {"image": "n02123045_c.jpg", "label": 281},
    ]
    (tmp_path / "p.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    import_predictions(engine, tmp_path / "p.jsonl", run="vlm", protocol="ow")
    with Session(engine) as s:
        assert s.scalars(select(Prediction.raw_output).where(Prediction.raw_output != "")).one().startswith("A tench")


def test_npy_top1_and_score_matrix_in_sorted_order(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    np.save(tmp_path / "top1.npy", np.array([5, 6, 7]))
    import_predictions(engine, tmp_path / "top1.npy", run="top1", order="sorted")
    assert {k: v[1] for k, v in predictions(engine, "top1").items()} == {
        "n01440764_a.jpg": [5],
        "n01440764_b.jpg": [6],
        "n02123045_c.jpg": [7],
    }
    scores = np.zeros((3, 1000), dtype=np.float32)
    scores[:, 10], scores[:, 20], scores[0, 30] = 0.5, 0.25, 0.9  # row 0 is c.jpg in order.txt
    np.save(tmp_path / "logits.npy", scores)
    (tmp_path / "order.txt").write_text("n02123045_c.jpg\nn01440764_a.jpg\nn01440764_b.jpg\n")
    import_predictions(engine, tmp_path / "logits.npy", run="scores", order=str(tmp_path / "order.txt"))
    got = predictions(engine, "scores")
    assert got["n02123045_c.jpg"][1][:3] == [30, 10, 20] and got["n02123045_c.jpg"][2][:3] == pytest.approx(
        [0.9, 0.5, 0.25]
    )
    assert len(got["n01440764_a.jpg"][1]) == 5


def test_bad_prediction_files_write_nothing(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    np.save(tmp_path / "top1.npy", np.array([5, 6, 7]))
    with pytest.raises(InputError, match="--order"):
        import_predictions(engine, tmp_path / "top1.npy", run="x")
    np.save(tmp_path / "bad.npy", np.array([5, 1000, 7]))
    with pytest.raises(InputError, match=r"classes outside 0..999.*bad.npy row 1: \[1000\]"):
        import_predictions(engine, tmp_path / "bad.npy", run="x", order="sorted")
    (tmp_path / "p.csv").write_text("image,label\nn01440764_a.jpg,tench\nghost.jpg,tench\nother.jpg,tench\n")
    with pytest.raises(InputError, match=r"2 of 3 image\(s\) are not in the dataset: 'ghost.jpg', 'other.jpg'"):
        import_predictions(engine, tmp_path / "p.csv", run="x")
    (tmp_path / "e.csv").write_text("image,label\nn01440764_a.jpg,\n")
    with pytest.raises(InputError, match="needs status 'error' and a reason"):
        import_predictions(engine, tmp_path / "e.csv", run="x")
    with Session(engine) as s:
        assert s.execute(select(func.count()).select_from(ModelRun)).scalar_one() == 0
        assert s.execute(select(func.count()).select_from(Prediction)).scalar_one() == 0


def test_run_names_are_unique_unless_replaced(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    (tmp_path / "p.csv").write_text("image,label\nn01440764_a.jpg,tench\n")
    import_predictions(engine, tmp_path / "p.csv", run="m")
    with pytest.raises(ConflictError, match="--replace"):
        import_predictions(engine, tmp_path / "p.csv", run="m")
    import_predictions(engine, tmp_path / "p.csv", run="m", replace=True)
    assert len(predictions(engine, "m")) == 1


def test_npy_top1_in_the_order_of_a_json_list(engine, vocab, tmp_path: Path) -> None:
    """The layout of the published cleanlab predictions (N class indices, rows in the order of a JSON list of
    files), on three images: the golden test below reads the 50,000 published ones."""
    small_dataset(engine, vocab, tmp_path)
    np.save(tmp_path / "top1.npy", np.array([7, 5, 6]))
    (tmp_path / "order.json").write_text(json.dumps(["n02123045_c.jpg", "n01440764_a.jpg", "n01440764_b.jpg"]))
    report = import_predictions(engine, tmp_path / "top1.npy", run="cv", order=str(tmp_path / "order.json"))
    assert (report.ok, report.errors) == (3, 0)
    stored = {path: classes for path, (_, classes, _, _) in predictions(engine, "cv").items()}
    assert stored == {"n02123045_c.jpg": [7], "n01440764_a.jpg": [5], "n01440764_b.jpg": [6]}
    (tmp_path / "keyed.json").write_text('{"n01440764_a.jpg": 0}')
    with pytest.raises(InputError, match="expected a JSON list of image keys"):
        import_predictions(engine, tmp_path / "top1.npy", run="x", order=str(tmp_path / "keyed.json"))


@pytest.mark.slow
def test_cleanlab_cv_predictions_round_trip(sqlite_engine, vocab, tmp_path: Path) -> None:
    """The stored predictions reproduce the published 72.732 % top-1 against the original labels."""
    plan = plan_ingest(tmp_path / "none", vocab, "imagenet-val")
    ingest_dataset(sqlite_engine, plan, dataset="val", root=tmp_path / "none", vocab=vocab, show_progress=False)
    report = import_predictions(
        sqlite_engine,
        shared("imagenet-val", "cleanlab_cv_predicted_labels_by_index.npy"),
        run="cv",
        order=str(shared("imagenet-val", "index_to_filepath.json")),
    )
    assert report.ok == 50_000
    with Session(sqlite_engine) as s:
        pred = dict(s.execute(select(Prediction.image_id, Prediction.classes)).all())
        imgt = dict(s.execute(select(Label.image_id, Label.classes)).all())
    correct = sum(pred[i][0] == imgt[i][0] for i in pred)
    assert round(100 * correct / len(pred), 3) == 72.732


def test_keys_in_another_folder_do_not_match() -> None:
    from relabel.common.workspace import ImageIndex

    index = ImageIndex({"a/x.jpg": 1, "y.jpg": 2})
    assert index.lookup("zzz/x.jpg") is None  # same file name, other folder
    assert index.lookup("x.jpg") == 1 and index.lookup("x") == 1 and index.lookup("root/a/x.jpg") == 1
    assert index.lookup("val/n01440764/y.jpg") == 2  # a flat dataset matches keys from a class-folder layout


def test_float_top1_array_and_broken_order_file_are_refused(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    np.save(tmp_path / "f.npy", np.array([0.9, 1.99, 2.5]))
    with pytest.raises(InputError, match="must hold class indices"):
        import_predictions(engine, tmp_path / "f.npy", run="x", order="sorted")
    np.save(tmp_path / "i.npy", np.array([1.0, 2.0, 3.0]))
    (tmp_path / "o.json").write_text('["a", ')
    with pytest.raises(InputError, match="invalid JSON"):
        import_predictions(engine, tmp_path / "i.npy", run="x", order=str(tmp_path / "o.json"))
    assert import_predictions(engine, tmp_path / "i.npy", run="x", order="sorted").ok == 3


def test_format_option_wins_over_the_extension(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    (tmp_path / "p.json").write_text('{"image": "n01440764_a.jpg", "label": "tench"}\n')
    assert import_predictions(engine, tmp_path / "p.json", run="x", fmt="jsonl").ok == 1


@pytest.mark.parametrize("skip_unknown", [False, True])
def test_predictions_matching_no_image_are_refused_with_the_reason(
    engine, vocab, tmp_path: Path, skip_unknown: bool
) -> None:
    small_dataset(engine, vocab, tmp_path)
    (tmp_path / "val.csv").write_text(
        "image,label\nILSVRC2012_val_00000001.JPEG,tench\nILSVRC2012_val_00000002,tabby\n"
    )
    with pytest.raises(
        InputError,
        match=r"val.csv: none of its 2 row\(s\) matches an image of the dataset; nothing written: its rows are keyed "
        r"by ImageNet validation numbers \(ILSVRC2012_val_NNNNNNNN, e.g. 'ILSVRC2012_val_00000001.JPEG'\) and the "
        r"dataset's file names do not match \(e.g. 'n01440764_a.jpg'\)",
    ):
        import_predictions(engine, tmp_path / "val.csv", run="x", skip_unknown=skip_unknown)
    (tmp_path / "other.jsonl").write_text('{"image": "ghost.jpg", "label": "tench"}\n')
    with pytest.raises(InputError, match=r"none of its 1 row\(s\) matches.*e.g. key 'ghost.jpg', dataset file"):
        import_predictions(engine, tmp_path / "other.jsonl", run="x", skip_unknown=skip_unknown)
    with Session(engine) as s:
        assert s.execute(select(func.count()).select_from(ModelRun)).scalar_one() == 0


# --- non-finite scores, and --replace of a run that decisions cite ------------------------------------------------


def run_count(engine) -> tuple[int, int]:
    with Session(engine) as s:
        runs = s.execute(select(func.count()).select_from(ModelRun)).scalar_one()
        return runs, s.execute(select(func.count()).select_from(Prediction)).scalar_one()


def refused(call, pattern: str) -> None:
    """`call()` raises a one-line InputError that `pattern` finds (re.search)."""
    with pytest.raises(InputError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and re.search(pattern, message), message


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        (
            "p.csv",
            "image,label,score\nn01440764_a.jpg,tench,0.9\nn01440764_b.jpg,tench,nan\n",
            r"p\.csv:3: score 'nan'",
        ),
        ("p.csv", "image,labels,scores\nn01440764_a.jpg,tench|goldfish,0.9|inf\n", r"p\.csv:2: score 'inf' is not a"),
        ("p.csv", "image,label,score\nn01440764_a.jpg,tench,-Infinity\n", r"p\.csv:2: score '-Infinity' is not a"),
        ("p.jsonl", '{"image": "n01440764_a.jpg", "label": 0, "score": NaN}', r"p\.jsonl:1: NaN is not a number JSON"),
        ("p.jsonl", '{"image": "n01440764_a.jpg", "label": 0, "score": 1e999}', r"p\.jsonl:1: '1e999' is beyond"),
        ("p.jsonl", '{"image": "n01440764_a.jpg", "labels": [0], "scores": ["nan"]}', r"p\.jsonl:1: score 'nan'"),
        ("p.jsonl", '{"image": "n01440764_a.jpg", "labels": [0], "scores": [true]}', r"p\.jsonl:1: score True"),
        ("p.csv", "image,lables\nn01440764_a.jpg,tench\n", r"p\.csv:1: the header has unknown column\(s\) 'lables'"),
        ("p.csv", "image,label,score\nn01440764_a.jpg,tench,1_0\n", r"p\.csv:2: score '1_0' is not a number; numbers "),
        (
            "p.csv",
            "image,label,score\nn01440764_a.jpg,tench,\uff10.\uff15\n",
            r"p\.csv:2: score '\uff10\.\uff15' is not",
        ),
        ("p.csv", "image,label,score\nn01440764_a.jpg,tench,0x1p-2\n", r"p\.csv:2: score '0x1p-2' is not a number"),
        (
            "p.csv",
            f"image,label,score\nn01440764_a.jpg,tench,{'9' * 21}.5\n",
            r"p\.csv:2: score 9{21}\.5 has 21 digits",
        ),
        (
            "p.jsonl",
            '{"image": "n01440764_a.jpg", "label": 0, "score": ' + "9" * 401 + "}",
            r"p\.jsonl:1: number 999999999999…\(401 chars\) has 401 digits before the point",
        ),
        (
            "p.jsonl",
            '{"image": "n01440764_a.jpg", "status": "error", "reason": "timeout \\ud800"}',
            r"p\.jsonl:1: column 68: the string escape \\ud800 is an unpaired surrogate \(half of a character\)",
        ),
    ],
    ids=[
        "nan",
        "inf",
        "-Infinity",
        "json-NaN",
        "json-1e999",
        "json-string-nan",
        "json-true",
        "header-typo",
        "underscore",
        "fullwidth",
        "hex-float",
        "21-digits",
        "json-401-digits",
        "reason-lone-surrogate",
    ],
)
def test_non_finite_scores_and_unknown_columns_write_nothing(
    engine, vocab, tmp_path: Path, name: str, content: str, pattern: str
) -> None:
    small_dataset(engine, vocab, tmp_path)
    (tmp_path / name).write_text(content)
    refused(lambda: import_predictions(engine, tmp_path / name, run="x"), pattern)
    assert run_count(engine) == (0, 0)


def test_scores_are_ascii_decimals_and_repeated_labels_keep_their_first_score(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    (tmp_path / "p.csv").write_text(
        "image,labels,scores\nn01440764_a.jpg,tench|goldfish|n01440764,.5|3e-1|0.2\nn01440764_b.jpg,tabby,+1\n"
    )
    import_predictions(engine, tmp_path / "p.csv", run="m")
    got = predictions(engine, "m")
    assert got["n01440764_a.jpg"][1:3] == ([0, 1], [0.5, 0.3]) and got["n01440764_b.jpg"][1:3] == ([281], [1.0])


def test_non_finite_and_non_numeric_arrays_write_nothing(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    scores = np.zeros((3, 1000), dtype=np.float32)
    scores[2, :] = np.nan  # an all-NaN row used to become class 0, scored as wrong
    np.save(tmp_path / "nan.npy", scores)
    refused(
        lambda: import_predictions(engine, tmp_path / "nan.npy", run="x", order="sorted"),
        r"nan\.npy row 2: value nan at \(2, 0\) is not a finite number",
    )
    np.save(tmp_path / "inf.npy", np.array([1.0, np.inf, 2.0]))  # inf == round(inf): it looked like an index
    refused(
        lambda: import_predictions(engine, tmp_path / "inf.npy", run="x", order="sorted"),
        r"inf\.npy row 1: value inf at \(1,\) is not a finite number",
    )
    np.save(tmp_path / "b.npy", np.array([True, False, True]))
    refused(
        lambda: import_predictions(engine, tmp_path / "b.npy", run="x", order="sorted"),
        r"b\.npy: holds bool values; expected class indices \(integers\) or scores \(floats\)",
    )
    np.save(tmp_path / "i.npy", np.array([1, 2, 3]))
    (tmp_path / "o.json").write_text('["n01440764_a.jpg", 7, "n02123045_c.jpg"]')
    refused(
        lambda: import_predictions(engine, tmp_path / "i.npy", run="x", order=str(tmp_path / "o.json")),
        r"o\.json: entry 1 is 7; an image key is a path",
    )
    assert run_count(engine) == (0, 0)


def cite_first_prediction(engine, run: str) -> int:
    """An annotator's decision that took the first prediction of `run` as its suggestion; returns its id."""
    add_user(engine, "ann", Role.annotator)
    with Session(engine) as s:
        image_id, prediction_id, classes = s.execute(
            select(Prediction.image_id, Prediction.id, Prediction.classes)
            .join(ModelRun, ModelRun.id == Prediction.run_id)
            .where(ModelRun.name == run)
            .order_by(Prediction.id)
        ).first()
    return record_annotation(
        engine,
        image_id=image_id,
        user="ann",
        verdict=Verdict.labels,
        classes=classes[:1],
        suggestion_id=prediction_id,
        suggestion_action=SuggestionAction.accepted,
    )


def test_replacing_a_run_that_decisions_cite_is_refused_and_changes_nothing(engine, vocab, tmp_path: Path) -> None:
    small_dataset(engine, vocab, tmp_path)
    (tmp_path / "p.csv").write_text("image,label\nn01440764_a.jpg,tench\nn01440764_b.jpg,goldfish\n")
    import_predictions(engine, tmp_path / "p.csv", run="m")
    decision = cite_first_prediction(engine, "m")
    before = predictions(engine, "m")
    (tmp_path / "p2.csv").write_text("image,label\nn01440764_a.jpg,goldfish\n")
    with pytest.raises(ConflictError) as caught:
        import_predictions(engine, tmp_path / "p2.csv", run="m", replace=True)
    assert str(caught.value) == (
        "run 'm' cannot be replaced: 1 annotator decision(s) cite its predictions as the suggestion they were "
        "shown, and decisions are never rewritten; import the file under another name (e.g. --run m-2); "
        "nothing written"
    )
    assert predictions(engine, "m") == before
    with Session(engine) as s:
        cited = s.execute(select(Annotation.suggestion_id).where(Annotation.id == decision)).scalar_one()
        assert s.get(Prediction, cited).classes == [0]
    assert import_predictions(engine, tmp_path / "p2.csv", run="m-2").ok == 1
    assert run_count(engine) == (2, 3)
