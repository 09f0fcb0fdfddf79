"""Exports other tools read: a Hugging Face datasets folder, image paths in JSONL and CSV, real.json by position."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import PIL.Image
import pytest
from click.testing import CliRunner

from relabel.common.errors import InputError
from relabel.exports.formats import export_snapshot, val_order_problem
from relabel.snapshots.freeze import create_snapshot
from relabel.snapshots.reader import SnapshotRow
from tests.relabel.snapshots.test_snapshots_consensus import EXPECTED, NAMES, jsonl_rows, stored_posteriors, ws  # noqa: F401

datasets = pytest.importorskip("datasets")

IMGT = {  # the fixture's original labels: espresso, tabby, tench, missile, tench, Labrador, none
    "a_cup.jpg": 967,
    "b_cat.jpg": 281,
    "c_fish.jpg": 0,
    "d_rocket.jpg": 657,
    "e_blur.jpg": 0,
    "f_dog.jpg": 208,
    "g_new.jpg": -1,
}


@pytest.fixture
def voted(engine, request: pytest.FixtureRequest) -> tuple:
    """test_snapshots_consensus's workspace (`ws`, on `engine`): seven images, five raters' votes, one
    adjudication."""
    return request.getfixturevalue("ws")


def root_of(tmp_path: Path) -> Path:
    return (tmp_path / "r").resolve()  # where the `ws` fixture writes its images


def load_rows(folder: Path) -> tuple[object, dict[str, dict]]:
    """The dataset read back with datasets.load_from_disk, and its rows by file name (images left undecoded)."""
    loaded = datasets.load_from_disk(str(folder))
    raw = loaded.cast_column("image", datasets.Image(decode=False))
    return loaded, {Path(r["path"]).name: r for r in raw}


class TestHuggingFace:
    def test_a_voted_snapshot_reads_back_with_labels_originals_images_and_posteriors(
        self,
        voted,
        vocab,
        tmp_path: Path,
    ) -> None:
        engine, ids = voted
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        out = tmp_path / "hf" / "round-1"
        assert export_snapshot(engine, "ds", fmt="hf", out=out) == 7
        loaded, rows = load_rows(out)
        names = [c.name for c in vocab.classes]
        assert loaded.features["labels"].feature.names == names and loaded.features["imgt"].names == names
        assert sorted(rows) == NAMES and [Path(p).name for p in loaded["path"]] == NAMES  # file-name order
        stored = stored_posteriors(engine, "ds")
        for name, row in rows.items():
            labels, category, origin = EXPECTED[name]
            assert (sorted(row["labels"]), row["category"], row["origin"]) == (labels, category, origin), name
            assert row["imgt"] == IMGT[name], name
            assert row["path"] == str(root_of(tmp_path) / name)
            assert row["image"]["bytes"] == (root_of(tmp_path) / name).read_bytes()  # the file itself, copied in
            posteriors = dict(zip(row["posterior_classes"], row["posteriors"], strict=True))
            assert posteriors == pytest.approx({c: p for (i, c), p in stored.items() if i == ids[name]}), name
        assert len(rows["e_blur.jpg"]["posteriors"]) == 3 and rows["g_new.jpg"]["posteriors"] == []
        decoded = loaded[NAMES.index("b_cat.jpg")]["image"]  # a PIL image, decoded when the row is read
        with PIL.Image.open(root_of(tmp_path) / "b_cat.jpg") as original:
            assert decoded.size == original.size and decoded.getpixel((0, 0)) == original.convert("RGB").getpixel(
                (0, 0)
            )
        assert loaded.features["labels"].feature.int2str(rows["c_fish.jpg"]["labels"]) == ["goldfish"]

    def test_a_unanimous_snapshot_has_no_posterior_columns(self, voted, tmp_path: Path) -> None:
        engine, _ = voted
        create_snapshot(engine, "plain")
        export_snapshot(engine, "plain", fmt="hf", out=tmp_path / "plain")
        loaded, rows = load_rows(tmp_path / "plain")
        assert loaded.column_names == ["image", "path", "labels", "imgt", "category", "origin"]
        assert rows["b_cat.jpg"]["labels"] == [281] and rows["g_new.jpg"]["imgt"] == -1

    def test_a_missing_image_file_is_written_as_none_with_a_warning(self, voted, tmp_path: Path) -> None:
        engine, _ = voted
        create_snapshot(engine, "plain")
        (root_of(tmp_path) / "d_rocket.jpg").unlink()
        notes: list[str] = []
        export_snapshot(engine, "plain", fmt="hf", out=tmp_path / "plain", warn=notes.append)
        _, rows = load_rows(tmp_path / "plain")
        assert rows["d_rocket.jpg"]["image"] is None and rows["d_rocket.jpg"]["imgt"] == 657
        assert rows["a_cup.jpg"]["image"]["bytes"] == (root_of(tmp_path) / "a_cup.jpg").read_bytes()
        assert len(notes) == 1 and notes[0].startswith("1 image file(s) not found, e.g. ") and "d_rocket" in notes[0]

    def test_an_existing_folder_is_refused_unless_forced_and_only_an_earlier_export_is_replaced(
        self,
        voted,
        tmp_path: Path,
    ) -> None:
        engine, _ = voted
        create_snapshot(engine, "plain")
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        (tmp_path / "empty").mkdir()
        export_snapshot(engine, "plain", fmt="hf", out=tmp_path / "empty")  # an empty folder is taken
        with pytest.raises(InputError, match=r"is a folder that is not empty; give a new folder, or --force"):
            export_snapshot(engine, "ds", fmt="hf", out=tmp_path / "empty")
        export_snapshot(engine, "ds", fmt="hf", out=tmp_path / "empty", replace=True)
        assert "posteriors" in datasets.load_from_disk(str(tmp_path / "empty")).column_names
        (tmp_path / "home").mkdir()
        (tmp_path / "home" / "thesis.tex").write_text("years of work")
        with pytest.raises(InputError, match=r"holds files but no dataset_info.json, so it is not an earlier export"):
            export_snapshot(engine, "ds", fmt="hf", out=tmp_path / "home", replace=True)
        assert [p.name for p in (tmp_path / "home").iterdir()] == ["thesis.tex"]
        (tmp_path / "file").write_text("x")
        with pytest.raises(InputError, match=r"is not a folder; give the path of a new or empty folder"):
            export_snapshot(engine, "ds", fmt="hf", out=tmp_path / "file", replace=True)
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary left

    def test_a_failed_write_leaves_nothing(self, voted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        engine, _ = voted
        create_snapshot(engine, "plain")

        def fail(self, *args, **kwargs) -> None:
            (Path(args[0]) / "data-00000-of-00001.arrow").write_bytes(b"half")
            raise KeyboardInterrupt

        monkeypatch.setattr(datasets.Dataset, "save_to_disk", fail)
        with pytest.raises(KeyboardInterrupt):
            export_snapshot(engine, "plain", fmt="hf", out=tmp_path / "out")
        assert not (tmp_path / "out").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]

    def test_without_datasets_the_export_says_how_to_install_it(
        self,
        voted,
        tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        engine, _ = voted
        create_snapshot(engine, "plain")
        monkeypatch.setitem(sys.modules, "datasets", None)  # `import datasets` now raises ImportError
        with pytest.raises(InputError) as caught:
            export_snapshot(engine, "plain", fmt="hf", out=tmp_path / "out")
        assert str(caught.value) == (
            "--format hf needs the datasets package, which is not installed: pip install 'relabel[hf]'"
        )
        assert not (tmp_path / "out").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


class TestImagePaths:
    def test_jsonl_and_csv_give_each_image_its_absolute_path(self, voted, tmp_path: Path) -> None:
        engine, _ = voted
        create_snapshot(engine, "plain")
        export_snapshot(engine, "plain", fmt="jsonl", out=tmp_path / "p.jsonl")
        export_snapshot(engine, "plain", fmt="csv", out=tmp_path / "p.csv")
        rows = jsonl_rows(tmp_path / "p.jsonl")
        table = {r["image"]: r for r in csv.DictReader((tmp_path / "p.csv").open())}
        for name in NAMES:
            assert rows[name]["path"] == table[name]["path"] == str(root_of(tmp_path) / name)
            assert Path(rows[name]["path"]).read_bytes()[:2] == b"\xff\xd8"  # the JPEG the studio ingested
        header = next(csv.reader((tmp_path / "p.csv").open()))
        assert header == ["image", "labels", "wnids", "names", "path", "category", "origin"]


def val_rows(n: int = 50_000) -> list[SnapshotRow]:
    return [
        SnapshotRow(f"ILSVRC2012_val_{i:08d}.JPEG", f"ILSVRC2012_val_{i:08d}", [], "U", "base") for i in range(1, n + 1)
    ]


class TestRealPositions:
    def test_only_the_full_val_set_in_order_is_val(self) -> None:
        assert val_order_problem(val_rows()) is None
        assert val_order_problem(val_rows(49_999)) == "it has 49,999 images, not 50,000"
        rows = val_rows()
        rows[41] = SnapshotRow("x/holiday.jpg", "holiday", [], "U", "base")
        assert val_order_problem(rows) == "its image 42 in file-name order is 'holiday', not ILSVRC2012_val_00000042"

    def test_a_small_dataset_is_refused_unless_partial_is_allowed(self, voted, tmp_path: Path) -> None:
        engine, _ = voted
        create_snapshot(engine, "plain")
        out = tmp_path / "real.json"
        with pytest.raises(InputError) as caught:
            export_snapshot(engine, "plain", fmt="real", out=out)
        assert str(caught.value) == (
            "snapshot 'plain' not exported as real: real.json gives labels by position in ILSVRC-2012 val and "
            "dataset 'd' is not the full val set (it has 7 images, not 50,000); export jsonl or csv, which name "
            "each image, or pass --allow-partial to number this dataset's images in file-name order"
        )
        assert not out.exists()
        notes: list[str] = []
        assert export_snapshot(engine, "plain", fmt="real", out=out, allow_partial=True, warn=notes.append) == 7
        assert json.loads(out.read_text()) == [[967], [281], [0], [657], [0], [207], []]  # file-name order
        assert notes == [
            "dataset 'd' is not the full ILSVRC-2012 val set (it has 7 images, not 50,000): list i of the real.json "
            "written is its i-th image in file-name order, not val image i"
        ]

    def test_the_command_line_refuses_in_one_line_and_warns_on_stderr(self, voted, tmp_path: Path) -> None:
        from relabel.cli import cli

        engine, _ = voted
        if engine.url.get_backend_name() != "sqlite":
            pytest.skip("the command line opens the workspace's SQLite file")
        create_snapshot(engine, "plain")
        base = ["--workspace", str(tmp_path / "ws"), "snapshot", "export", "plain", "--format", "real"]
        refused = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "a.json")])
        assert refused.exit_code == 2 and refused.stdout == "" and not (tmp_path / "a.json").exists()
        assert refused.stderr.count("\n") == 1 and "not the full val set (it has 7 images" in refused.stderr
        done = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "a.json"), "--allow-partial"])
        assert done.exit_code == 0 and done.stdout == f"wrote 7 image(s) to {tmp_path / 'a.json'}\n"
        assert done.stderr.startswith("warning: dataset 'd' is not the full ILSVRC-2012 val set (it has 7 images")
        assert json.loads((tmp_path / "a.json").read_text())[1] == [281]
        hf = CliRunner().invoke(cli, [*base[:-1], "hf", "--out", str(tmp_path / "hf")])
        assert hf.exit_code == 0, hf.output
        assert datasets.load_from_disk(str(tmp_path / "hf"))["imgt"] == list(IMGT.values())
