"""Ingest: every layout, bad images, missing images, path safety, idempotence, resume."""

from __future__ import annotations

import codecs
import json
import os
import re
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat
from sqlalchemy import func, select
from sqlmodel import Session

from db.enums import ImageStatus
from db.models import Image, Label
from relabel.common.errors import InputError
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.ingest import service as ingest_service
from relabel.ingest.layouts import LayoutOptions
from tests import images


def run_ingest(engine, root: Path, vocab, layout: str = "auto", name: str = "ds", **opts):
    plan = plan_ingest(root, vocab, layout, LayoutOptions(**opts))
    return ingest_dataset(engine, plan, dataset=name, root=root, vocab=vocab, show_progress=False, workers=1)


def stored(engine) -> dict[str, tuple[str, list[int] | None]]:
    """path -> (status, ImGT classes)."""
    with Session(engine) as s:
        labels = dict(s.execute(select(Label.image_id, Label.classes)).all())
        return {i.path: (i.status.value, labels.get(i.id)) for i in s.scalars(select(Image))}


def count_rows(engine, table) -> int:
    with Session(engine) as s:
        return s.execute(select(func.count()).select_from(table)).scalar_one()


def make_val_folder(root: Path, numbers: list[int]) -> None:
    for n in numbers:
        images.photo(root / f"ILSVRC2012_val_{n:08d}.JPEG", color=(n * 40 % 255, 80, 120))


def test_imagenet_val_with_loc_solution_records_missing_images(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "val"
    make_val_folder(root, [1, 2])
    csv_path = tmp_path / "LOC_val_solution.csv"
    csv_path.write_text(
        "ImageId,PredictionString\n"
        "ILSVRC2012_val_00000001,n01751748 1 2 3 4 n01751748 5 6 7 8\n"
        "ILSVRC2012_val_00000002,n09193705 1 2 3 4\n"
        "ILSVRC2012_val_00000003,n02105855 1 2 3 4\n"
    )
    report = run_ingest(engine, root, vocab, labels_file=csv_path)
    assert report.layout == "imagenet-val"
    assert any("1 image(s) named by the labels are not on disk" in w for w in report.warnings)
    assert stored(engine) == {
        "ILSVRC2012_val_00000001.JPEG": ("ok", [vocab.resolve("n01751748")]),
        "ILSVRC2012_val_00000002.JPEG": ("ok", [vocab.resolve("n09193705")]),
        "ILSVRC2012_val_00000003.JPEG": ("missing", [vocab.resolve("n02105855")]),
    }


def devkit_meta(path: Path, vocab, changes: dict[int, tuple[object, object]] | None = None) -> Path:
    """A devkit data/meta.mat like the real one: the 1000 leaf synsets as ILSVRC2012_ID 1..1000 (not in
    sorted-wnid order: id 1 is n02119789, kit fox; id 2 is n02100735) and one inner synset, id 1001.
    `changes` replaces (ILSVRC2012_ID, WNID) of the entry at a position."""
    first = ["n02119789", "n02100735"]
    wnids = first + [c.wnid for c in vocab.classes if c.wnid not in first]
    rows: list[tuple[object, object, int]] = [(i + 1, w, 0) for i, w in enumerate(wnids)]
    rows.append((1001, "n00001740", 2))
    for at, (ilsvrc_id, wnid) in (changes or {}).items():
        rows[at] = (ilsvrc_id, wnid, rows[at][2])
    dtype = [("ILSVRC2012_ID", "O"), ("WNID", "O"), ("num_children", "O")]
    path.parent.mkdir(parents=True, exist_ok=True)
    savemat(str(path), {"synsets": np.array(rows, dtype=dtype)})
    return path


def test_devkit_ground_truth_is_converted_through_meta(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "val"
    make_val_folder(root, [1, 2])
    data = tmp_path / "devkit" / "data"
    devkit_meta(data / "meta.mat", vocab)
    (data / "ILSVRC2012_validation_ground_truth.txt").write_text("2\n1\n")
    run_ingest(engine, root, vocab, labels_file=data / "ILSVRC2012_validation_ground_truth.txt")
    got = stored(engine)
    assert got["ILSVRC2012_val_00000001.JPEG"][1] == [vocab.resolve("n02100735")]
    assert got["ILSVRC2012_val_00000002.JPEG"][1] == [vocab.resolve("n02119789")] == [278]


def test_devkit_without_meta_is_refused(vocab, tmp_path: Path) -> None:
    gt = tmp_path / "ILSVRC2012_validation_ground_truth.txt"
    gt.write_text("1\n")
    with pytest.raises(InputError, match="--devkit-meta"):
        plan_ingest(tmp_path, vocab, "imagenet-val", LayoutOptions(labels_file=gt))


@pytest.mark.slow  # all 50,000 val images
def test_imagenet_val_builtin_labels_without_pixels(sqlite_engine, vocab, tmp_path: Path) -> None:
    """A lead can register all 50,000 val images before the pixels are mounted."""
    report = run_ingest(sqlite_engine, tmp_path / "not-mounted", vocab, "imagenet-val")
    assert report.status_counts == {"missing": 50_000}
    with Session(sqlite_engine) as s:
        first = s.scalars(select(Image).where(Image.stem == "ILSVRC2012_val_00000001")).one()
        assert s.execute(select(Label.classes).where(Label.image_id == first.id)).scalar_one() == [65]


def test_class_folders_by_wnid_and_by_name(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "train"
    images.photo(root / "n01440764" / "a.jpg")
    images.photo(root / "n01440764" / "deep" / "b.png")
    images.photo(root / "tabby" / "c.jpg")
    images.photo(root / "tiger_cat" / "d.jpg")
    report = run_ingest(engine, root, vocab)
    assert report.layout == "folders"
    assert {p: c for p, (_, c) in stored(engine).items()} == {
        "n01440764/a.jpg": [0],
        "n01440764/deep/b.png": [0],
        "tabby/c.jpg": [281],
        "tiger_cat/d.jpg": [282],
    }


def test_unknown_class_folder_stops_before_writing(engine, vocab, tmp_path: Path) -> None:
    images.photo(tmp_path / "r" / "tabby" / "a.jpg")
    images.photo(tmp_path / "r" / "unicorn" / "b.jpg")
    with pytest.raises(InputError, match="1 unknown class label.*'unicorn'"):
        run_ingest(engine, tmp_path / "r", vocab)
    assert count_rows(engine, Image) == 0


def test_wnid_prefixed_flat_folder(engine, vocab, tmp_path: Path) -> None:
    images.photo(tmp_path / "s" / "n01440764_tench.JPEG")
    images.photo(tmp_path / "s" / "n02123045_tabby.JPEG")
    assert run_ingest(engine, tmp_path / "s", vocab).layout == "wnid-prefix"
    assert {p: c for p, (_, c) in stored(engine).items()} == {
        "n01440764_tench.JPEG": [0],
        "n02123045_tabby.JPEG": [281],
    }


@pytest.mark.parametrize("kind", ["csv", "jsonl"])
def test_manifest_with_multi_labels_and_missing_files(engine, vocab, tmp_path: Path, kind: str) -> None:
    root = tmp_path / "photos"
    images.photo(root / "cup.jpg")
    images.photo(root / "sub" / "cat.jpg")
    if kind == "csv":
        manifest = tmp_path / "m.csv"
        manifest.write_text("path,labels\ncup.jpg,espresso|cup\nsub/cat.jpg,tabby\nlater.jpg,n01440764\nnolabel.jpg,\n")
    else:
        manifest = tmp_path / "m.jsonl"
        rows = [
            {"path": "cup.jpg", "labels": ["espresso", "cup"]},
            {"path": "sub/cat.jpg", "label": "tabby"},
            {"path": "later.jpg", "label": 0},
            {"path": "nolabel.jpg"},
        ]
        manifest.write_text("\n".join(json.dumps(r) for r in rows))
    run_ingest(engine, root, vocab, manifest=manifest)
    assert stored(engine) == {
        "cup.jpg": ("ok", [967, 968]),
        "sub/cat.jpg": ("ok", [281]),
        "later.jpg": ("missing", [0]),
        "nolabel.jpg": ("missing", None),
    }


@pytest.mark.parametrize("bad_path", ["../outside.jpg", "sub/../../outside.jpg", "/etc/passwd"])
def test_manifest_paths_escaping_the_root_are_refused(engine, vocab, tmp_path: Path, bad_path: str) -> None:
    root = tmp_path / "photos"
    images.photo(root / "ok.jpg")
    manifest = tmp_path / "m.csv"
    manifest.write_text(f"path,label\nok.jpg,tabby\n{bad_path},tabby\n")
    with pytest.raises(InputError, match=r"m\.csv:3: path .* (escapes|is outside) the dataset root"):
        run_ingest(engine, root, vocab, manifest=manifest)
    assert count_rows(engine, Image) == 0


def test_broken_manifest_names_the_line(vocab, tmp_path: Path) -> None:
    (tmp_path / "m.jsonl").write_text('{"path": "a.jpg", "label": "tabby"}\n{"path": "b.jpg", label}\n')
    with pytest.raises(InputError, match=r"m\.jsonl:2: invalid JSON"):
        plan_ingest(tmp_path, vocab, "manifest", LayoutOptions(manifest=tmp_path / "m.jsonl"))
    (tmp_path / "m.csv").write_text("file,label\na.jpg,tabby\n")
    with pytest.raises(InputError, match=r"m\.csv:1: the header lacks 'path'; found: 'file', 'label'; a manifest has"):
        plan_ingest(tmp_path, vocab, "manifest", LayoutOptions(manifest=tmp_path / "m.csv"))


def test_symlink_leading_outside_is_refused(engine, vocab, tmp_path: Path) -> None:
    secret = images.photo(tmp_path / "secret" / "s.jpg")
    images.photo(tmp_path / "r" / "n01440764_a.jpg")
    os.symlink(secret, tmp_path / "r" / "n01440764_link.jpg")
    report = run_ingest(engine, tmp_path / "r", vocab)
    assert list(stored(engine)) == ["n01440764_a.jpg"]
    assert any("refused 1 link" in w for w in report.warnings)


def test_bad_images_get_a_status_and_ingest_continues(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "r"
    images.photo(root / "n01440764_good.jpg")
    images.zero_bytes(root / "n01440764_empty.JPEG")
    images.truncated_jpeg(root / "n01440764_cut.JPEG")
    images.html_named_jpeg(root / "n01440764_page.JPEG")
    images.png_bomb(root / "n01440764_bomb.png")
    images.cmyk_jpeg(root / "n01440764_cmyk.jpg")
    images.exif_rotated_jpeg(root / "n01440764_rot.jpg")
    report = run_ingest(engine, root, vocab)
    assert report.status_counts == {"ok": 3, "unreadable": 4}
    reasons = dict(report.problems)
    assert "empty file" in reasons["n01440764_empty.JPEG"]
    assert "HTML" in reasons["n01440764_page.JPEG"]
    assert "truncated" in reasons["n01440764_cut.JPEG"]
    assert "decompression bomb" in reasons["n01440764_bomb.png"]
    with Session(engine) as s:
        rot = s.scalars(select(Image).where(Image.path == "n01440764_rot.jpg")).one()
        assert (rot.width, rot.height, rot.exif_orientation) == (20, 60, 6)


def test_reingest_is_idempotent_and_reports_duplicates(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "r"
    images.photo(root / "n01440764_a.jpg")
    (root / "n01440764_copy.jpg").write_bytes((root / "n01440764_a.jpg").read_bytes())
    images.photo(root / "n02123045_b.jpg")
    first = run_ingest(engine, root, vocab)
    assert first.duplicate_groups == [["n01440764_a.jpg", "n01440764_copy.jpg"]]
    before = stored(engine)
    again = run_ingest(engine, root, vocab)
    assert (again.checked, again.unchanged, again.labels_written) == (0, 3, 0)
    assert stored(engine) == before and count_rows(engine, Image) == 3 and count_rows(engine, Label) == 3


def test_changed_file_is_checked_again(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "r"
    images.photo(root / "n01440764_a.jpg")
    run_ingest(engine, root, vocab)
    images.zero_bytes(root / "n01440764_a.jpg")
    report = run_ingest(engine, root, vocab)
    assert report.checked == 1 and stored(engine)["n01440764_a.jpg"][0] == "unreadable"


def test_interrupted_ingest_resumes_without_redoing_work(engine, vocab, tmp_path: Path, monkeypatch) -> None:
    root = tmp_path / "r"
    for i in range(10):
        images.photo(root / f"n01440764_{i}.jpg", color=(i * 20, 0, 0))
    plan = plan_ingest(root, vocab)
    real_check = ingest_service.check_image
    calls: list[Path] = []

    def flaky_check(path, **kw):
        calls.append(Path(path))
        if len(calls) == 7:
            raise KeyboardInterrupt
        return real_check(path, **kw)

    monkeypatch.setattr(ingest_service, "check_image", flaky_check)
    with pytest.raises(KeyboardInterrupt):
        ingest_dataset(engine, plan, dataset="ds", root=root, vocab=vocab, show_progress=False, workers=1, batch_size=3)
    assert count_rows(engine, Image) == 6  # two whole batches were committed
    calls.clear()
    report = ingest_dataset(
        engine, plan, dataset="ds", root=root, vocab=vocab, show_progress=False, workers=1, batch_size=3
    )
    assert (report.unchanged, report.checked) == (6, 4) and len(calls) == 4
    assert count_rows(engine, Image) == 10 and count_rows(engine, Label) == 10


def test_parallel_checks_give_the_same_result(sqlite_engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "r"
    for i in range(70):
        images.photo(root / f"n01440764_{i:02d}.jpg", color=(i, 10, 10))
    images.zero_bytes(root / "n01440764_zz.jpg")
    plan = plan_ingest(root, vocab)
    report = ingest_dataset(sqlite_engine, plan, dataset="ds", root=root, vocab=vocab, show_progress=False, workers=2)
    assert report.status_counts == {"ok": 70, "unreadable": 1}


def test_missing_images_are_checked_once_mounted(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "val"
    make_val_folder(root, [1])
    (tmp_path / "loc.csv").write_text(
        "ImageId,PredictionString\n"
        "ILSVRC2012_val_00000001,n01751748 1 2 3 4\n"
        "ILSVRC2012_val_00000002,n01751748 1 2 3 4\n"
    )
    first = run_ingest(engine, root, vocab, labels_file=tmp_path / "loc.csv")
    again = run_ingest(engine, root, vocab, labels_file=tmp_path / "loc.csv")
    assert (first.checked, again.checked, again.unchanged) == (2, 0, 2)
    make_val_folder(root, [2])  # the pixels arrive
    mounted = run_ingest(engine, root, vocab, labels_file=tmp_path / "loc.csv")
    assert mounted.checked == 1 and stored(engine)["ILSVRC2012_val_00000002.JPEG"][0] == "ok"


def test_reingest_drops_labels_the_new_file_no_longer_gives(engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "photos"
    images.photo(root / "x.jpg")
    (tmp_path / "m1.csv").write_text("path,label\nx.jpg,tench\n")
    (tmp_path / "m2.csv").write_text("path,label\nx.jpg,\n")
    run_ingest(engine, root, vocab, manifest=tmp_path / "m1.csv")
    report = run_ingest(engine, root, vocab, manifest=tmp_path / "m2.csv")
    assert report.labels_written == 1 and stored(engine) == {"x.jpg": ("ok", None)}


def test_same_val_name_with_two_extensions_is_refused(engine, vocab, tmp_path: Path) -> None:
    make_val_folder(tmp_path / "val", [1])
    images.photo(tmp_path / "val" / "ILSVRC2012_val_00000001.png")
    with pytest.raises(InputError, match="share a name with another extension"):
        run_ingest(engine, tmp_path / "val", vocab, "imagenet-val")


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        (
            "m.jsonl",
            '{"path": "a\\u0000.jpg", "label": "tabby"}\n',
            r"m\.jsonl:1: column 12: the string escape \\u0000 is a NUL character, which text cannot hold",
        ),
        (
            "m.jsonl",
            '{"path": "\\ud800.jpg", "label": "tabby"}\n',
            r"m\.jsonl:1: column 11: the string escape \\ud800 is an unpaired surrogate",
        ),
        (
            "m.csv",
            "path,labels\nok.jpg," + "|".join(["tabby"] * 1001) + "\n",
            r"m\.csv:2: a label set of 1,001 entries",
        ),
        ("m.csv", b"path,label\na\x00.jpg,tabby\n", r"m\.csv: byte offset 12 \(line 2\) is a NUL character"),
        ("m.csv", f"path,label\n{'x' * 300}.jpg,tabby\n", r"m\.csv:2: path 'x{20,}.*is too long \(304 bytes, longest"),
        ("m.csv", f"path,label\n{'d/' * 3000}a.jpg,tabby\n", r"m\.csv:2: path .*is too long \(6,005 bytes"),
        ("m.csv", 'path,label\n"ok.jpg,tabby\n', r"m\.csv:2: a quoted field is not closed before the file ends"),
        ("m.jsonl", '{"path": ["ok.jpg"], "label": "tabby"}\n', r"m\.jsonl:1: path is \['ok\.jpg'\]; expected a path"),
        ("m.jsonl", '{"path": "ok.jpg", "label": true}\n', r"m\.jsonl:1: label True is not a class"),
    ],
    ids=[
        "nul-escaped",
        "lone-surrogate",
        "1001-labels",
        "nul-byte",
        "long-name",
        "long-path",
        "cut-quote",
        "path-list",
        "label-true",
    ],
)
def test_hostile_manifests_are_one_line_and_write_nothing(
    engine, vocab, tmp_path: Path, name: str, content: str | bytes, pattern: str
) -> None:
    root = tmp_path / "photos"
    images.photo(root / "ok.jpg")
    manifest = tmp_path / name
    manifest.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(InputError) as caught:
        run_ingest(engine, root, vocab, manifest=manifest)
    assert "\n" not in str(caught.value) and re.search(pattern, str(caught.value)), str(caught.value)
    assert count_rows(engine, Image) == 0


@pytest.mark.parametrize("content", [b"", b"not a mat file at all\n" * 8, bytes(range(256)) * 4])
def test_a_devkit_meta_that_is_not_a_mat_file_is_refused(vocab, tmp_path: Path, content: bytes) -> None:
    make_val_folder(tmp_path / "val", [1])
    (tmp_path / "gt.txt").write_text("1\n")
    (tmp_path / "meta.mat").write_bytes(content)
    opts = LayoutOptions(labels_file=tmp_path / "gt.txt", devkit_meta=tmp_path / "meta.mat")
    with pytest.raises(InputError, match=r"meta\.mat: not a readable ILSVRC2012 devkit meta\.mat \(.+\); pass") as c:
        plan_ingest(tmp_path / "val", vocab, "imagenet-val", opts)
    assert "\n" not in str(c.value)


def test_label_files_of_the_val_layout_use_the_shared_reader(vocab, tmp_path: Path) -> None:
    make_val_folder(tmp_path / "val", [1])
    loc = tmp_path / "loc.csv"
    loc.write_bytes(
        codecs.BOM_UTF16_LE
        + "ImageId,PredictionString\nILSVRC2012_val_00000001,n01440764 0 0 1 1\n".encode("utf-16-le")
    )
    plan = plan_ingest(tmp_path / "val", vocab, "imagenet-val", LayoutOptions(labels_file=loc))
    assert [e.labels for e in plan.entries] == [[0]]
    loc.write_bytes(b"ImageId,PredictionString\nILSVRC2012_val_00000001,n01440764 \xff\n")
    with pytest.raises(InputError, match=r"loc\.csv: not UTF-8 text: byte offset 59 \(line 2\) holds 0xff"):
        plan_ingest(tmp_path / "val", vocab, "imagenet-val", LayoutOptions(labels_file=loc))
    meta = devkit_meta(tmp_path / "meta.mat", vocab)
    (tmp_path / "gt.txt").write_text("\u0661\n")  # an Arabic-Indic one: int() reads it, the devkit never writes it
    with pytest.raises(InputError, match=r"gt\.txt:1: expected an ILSVRC2012 id 1\.\.1000, got '\u0661'"):
        plan_ingest(tmp_path / "val", vocab, "imagenet-val", LayoutOptions(tmp_path / "gt.txt", meta))


@pytest.mark.parametrize(
    ("changes", "pattern"),
    [
        ({i: (i + 1, 5) for i in range(3)} | {i: (2000 + i, "n00000000") for i in range(3, 1000)}, r"lacks ids 4, 5"),
        ({0: (1, 5)}, r"id 1 has WNID 5, not a wnid like 'n01440764'"),
        ({0: (1, "tench")}, r"id 1 has WNID 'tench', not a wnid"),
        ({1: (2, "n02119789")}, r"ids 1 and 2 share the WNID n02119789"),
        ({1: (1, "n02100735")}, r"lacks ids 2 and repeats ids 1 among ILSVRC2012_ID 1\.\.1000"),
        ({0: (1, "n99999999")}, r"id 1 has WNID n99999999, which is no class of vocabulary 'imagenet-1k'"),
        ({0: (1.5, "n02119789")}, r"lacks ids 1 among"),
    ],
    ids=["three-synsets-wnid-5", "wnid-number", "wnid-name", "wnid-twice", "id-twice", "unknown-wnid", "id-fraction"],
)
def test_a_bogus_devkit_meta_is_refused(
    engine, vocab, tmp_path: Path, changes: dict[int, tuple[object, object]], pattern: str
) -> None:
    """The tester's meta.mat: 3 synsets whose WNID is the number 5 labelled both images [5] (5 read as an index)."""
    make_val_folder(tmp_path / "val", [1, 2])
    (tmp_path / "gt.txt").write_text("1\n2\n")
    meta = devkit_meta(tmp_path / "meta.mat", vocab, changes)
    with pytest.raises(InputError) as caught:
        run_ingest(engine, tmp_path / "val", vocab, labels_file=tmp_path / "gt.txt", devkit_meta=meta)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{meta}: ") and re.search(pattern, message), message
    assert "data/meta.mat" in message or "imagenet-1k" in message
    assert count_rows(engine, Image) == 0


def test_a_loc_solution_names_classes_by_wnid_only(vocab, tmp_path: Path) -> None:
    make_val_folder(tmp_path / "val", [1])
    (tmp_path / "loc.csv").write_text("ImageId,PredictionString\nILSVRC2012_val_00000001,5 0 0 1 1\n")
    with pytest.raises(InputError, match=r"loc\.csv: 1 unknown class label\(s\) not in vocabulary 'imagenet-1k': '5'"):
        plan_ingest(tmp_path / "val", vocab, "imagenet-val", LayoutOptions(labels_file=tmp_path / "loc.csv"))


DIGITS_1_TO_0 = json.dumps([str(d) for d in (1, 2, 3, 4, 5, 6, 7, 8, 9, 0)])  # SVHN-style: class 9 is "0"


def test_a_number_that_is_one_class_index_and_another_class_name_is_refused(engine, tmp_path: Path) -> None:
    """With the classes listed 1..9, 0 the manifest's `0` could mean index 0 (the class "1") or the class "0":
    the old reader stored the index reading, shifting every label silently."""
    from relabel.common.vocabulary import load_vocabulary_file

    (tmp_path / "digits.json").write_text(DIGITS_1_TO_0)
    digits = load_vocabulary_file(tmp_path / "digits.json")
    root = tmp_path / "photos"
    images.photo(root / "a.jpg")
    images.photo(root / "b.jpg", color=(5, 5, 5))
    (tmp_path / "m.csv").write_text("path,label\na.jpg,0\nb.jpg,1\n")
    with pytest.raises(InputError) as caught:
        run_ingest(engine, root, digits, manifest=tmp_path / "m.csv")
    assert str(caught.value).startswith("m.csv:2: class '0' is ambiguous in vocabulary 'digits': as an index it is ")
    assert "class 0 '1', as a name it is class 9 '0'" in str(caught.value) and "'digit 0'" in str(caught.value)
    assert count_rows(engine, Image) == 0
    folders = tmp_path / "by-folder"
    images.photo(folders / "0" / "a.jpg")
    with pytest.raises(InputError, match=rf"{re.escape(str(folders))}: class folder '0': class '0' is ambiguous"):
        plan_ingest(folders, digits, "folders")
    (tmp_path / "digits.json").write_text(json.dumps([str(d) for d in range(10)]))  # index and name agree
    same = load_vocabulary_file(tmp_path / "digits.json")
    run_ingest(engine, root, same, manifest=tmp_path / "m.csv")
    assert stored(engine) == {"a.jpg": ("ok", [0]), "b.jpg": ("ok", [1])}


def test_a_file_name_that_is_not_utf8_is_refused_before_anything_is_written(engine, vocab, tmp_path: Path) -> None:
    """os.walk hands such a name over with lone surrogates, which the database refused with a traceback."""
    root = tmp_path / "r"
    images.photo(root / "n01440764_ok.jpg")
    (root / "n01440764_b.jpg").write_bytes((root / "n01440764_ok.jpg").read_bytes())
    os.rename(root / "n01440764_b.jpg", os.fsencode(root) + b"/n01440764_\xff.jpg")
    with pytest.raises(InputError) as caught:
        run_ingest(engine, root, vocab)
    assert str(caught.value) == (
        f"{root}: 1 image path(s) are not UTF-8 text, which the workspace cannot store: 'n01440764_\\udcff.jpg' "
        "(each \\udcXX is a byte that does not decode); rename them"
    )
    assert count_rows(engine, Image) == 0


@pytest.mark.parametrize(
    "path",
    [
        "a.jpg",
        "sub/b.tar.gz",
        ".hidden",
        "sub/.hidden",
        "noext",
        "dots.",
        "x/y/z..JPEG",
        "a..b",
        ".",
        "./c.png",
        "s//d.e",
    ],
)
def test_the_stored_stem_is_pathlibs(path: str) -> None:
    assert ingest_service.path_stem(path) == Path(path).stem


def test_new_images_store_what_an_update_stores(engine, vocab, tmp_path: Path) -> None:
    """The driver-level insert of new images writes each column as the ORM's update of a changed image would."""
    root = tmp_path / "photos"
    images.photo(root / "ok.jpg")
    images.exif_rotated_jpeg(root / "sub" / "rot.jpg")
    images.truncated_jpeg(root / "cut.JPEG")
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,label\nok.jpg,0\nsub/rot.jpg,1\ncut.JPEG,2\nlater.jpg,3\n")
    plan = plan_ingest(root, vocab, "manifest", LayoutOptions(manifest=manifest))
    ingest_dataset(engine, plan, dataset="ds", root=root, vocab=vocab, show_progress=False, workers=1)
    columns = ("dataset_id", "path", "stem", *ingest_service.CHECK_FIELDS)
    with Session(engine) as s:
        rows = {i.path: i for i in s.scalars(select(Image))}
        for entry in plan.entries:
            check = ingest_service.ImageCheck(ImageStatus.missing) if entry.missing_reason else None
            check = check or ingest_service.check_image(root / entry.path)
            expected = ingest_service._image_values(rows[entry.path].dataset_id, entry, check)
            assert {c: getattr(rows[entry.path], c) for c in columns} == expected
            assert isinstance(rows[entry.path].ingested_at, datetime)
    assert {p: r.status.value for p, r in rows.items()} == {
        "ok.jpg": "ok",
        "sub/rot.jpg": "ok",
        "cut.JPEG": "unreadable",
        "later.jpg": "missing",
    }
    assert stored(engine)["sub/rot.jpg"] == ("ok", [1])
