"""Snapshots: categories, policies, immutability, content hash, exports and diff."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
from pathlib import Path

import pytest
from sqlalchemy import select, text
from sqlalchemy.exc import DatabaseError
from sqlmodel import Session

from db.enums import Role, Verdict
from db.models import Image
from relabel.common.errors import ConflictError, InputError, NotFoundError, OutputError
from relabel.decisions.annotations import add_user, record_annotation
from relabel.exports.formats import export_snapshot, spreadsheet_safe
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.ingest.layouts import LayoutOptions
from relabel.snapshots.diff import diff_snapshots
from relabel.snapshots.freeze import create_snapshot, list_snapshots
from relabel.sources.labels import import_source
from tests import images
from tests.conftest import shared

NAMES = ["a_cup.jpg", "b_cat.jpg", "c_fish.jpg", "d_rocket.jpg", "e_blur.jpg", "f_dog.jpg", "g_new.jpg"]


@pytest.fixture
def ws(engine, vocab, tmp_path: Path):
    """Seven images with ImGT espresso, tabby, tench, missile, tench, Labrador, and one unlabeled."""
    root = tmp_path / "r"
    labels = ["espresso", "tabby", "tench", "missile", "tench", "Labrador retriever", ""]
    for i, name in enumerate(NAMES):
        images.photo(root / name, color=(i * 30, 10, 10))
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,label\n" + "".join(f"{n},{lab}\n" for n, lab in zip(NAMES, labels)))
    plan = plan_ingest(root, vocab, "manifest", LayoutOptions(manifest=manifest))
    ingest_dataset(engine, plan, dataset="d", root=root, vocab=vocab, show_progress=False, workers=1)
    for user, role in (("ann", Role.annotator), ("bob", Role.annotator), ("lead", Role.lead)):
        add_user(engine, user, role)
    with Session(engine) as s:
        ids = {p: i for p, i in s.execute(select(Image.path, Image.id))}
    return engine, ids


def decide(engine, image_id: int, user: str, verdict: Verdict, classes=(), adjudicate: bool = False) -> None:
    record_annotation(engine, image_id=image_id, user=user, verdict=verdict, classes=classes, adjudicate=adjudicate)


def rows_by_image(path: Path) -> dict[str, dict]:
    return {r["image"]: r for r in map(json.loads, path.read_text().splitlines())}


def test_categories_and_undecided_policies(ws, tmp_path: Path) -> None:
    engine, ids = ws
    decide(engine, ids["a_cup.jpg"], "ann", Verdict.labels, [968, 967])  # cup and espresso: M
    decide(engine, ids["b_cat.jpg"], "ann", Verdict.labels, [281])  # tabby confirmed: A
    decide(engine, ids["c_fish.jpg"], "ann", Verdict.labels, [1])  # goldfish, not tench: B
    decide(engine, ids["d_rocket.jpg"], "ann", Verdict.none_fit)  # Z
    decide(engine, ids["e_blur.jpg"], "ann", Verdict.unclear)  # X
    decide(engine, ids["f_dog.jpg"], "ann", Verdict.labels, [208])
    decide(engine, ids["f_dog.jpg"], "bob", Verdict.labels, [207])  # disputed -> undecided
    keep = create_snapshot(engine, "keep")
    assert keep.counts == {"A": 1, "B": 1, "M": 1, "U": 2, "X": 1, "Z": 1}
    assert keep.origins == {"base": 1, "consensus": 5, "disputed": 1}
    export_snapshot(engine, "keep", fmt="jsonl", out=tmp_path / "keep.jsonl")
    got = rows_by_image(tmp_path / "keep.jsonl")
    assert got["a_cup.jpg"]["labels"] == [968, 967] and got["a_cup.jpg"]["names"] == ["cup", "espresso"]
    assert got["f_dog.jpg"]["labels"] == [208] and got["f_dog.jpg"]["category"] == "U"
    assert got["g_new.jpg"]["labels"] == [] and got["d_rocket.jpg"]["labels"] == []
    create_snapshot(engine, "excl", undecided="exclude")
    export_snapshot(engine, "excl", fmt="jsonl", out=tmp_path / "excl.jsonl")
    assert rows_by_image(tmp_path / "excl.jsonl")["f_dog.jpg"]["labels"] == []


def test_adjudication_settles_a_dispute_and_diff_shows_it(ws) -> None:
    engine, ids = ws
    decide(engine, ids["f_dog.jpg"], "ann", Verdict.labels, [208])
    decide(engine, ids["f_dog.jpg"], "bob", Verdict.labels, [207])
    create_snapshot(engine, "r1")
    decide(engine, ids["f_dog.jpg"], "lead", Verdict.labels, [207, 208], adjudicate=True)
    r2 = create_snapshot(engine, "r2")
    assert r2.origins["adjudication"] == 1 and r2.counts["M"] == 1
    diff = diff_snapshots(engine, "r1", "r2")
    assert diff.transitions == {"U->M": 1} and diff.unchanged == 6
    assert diff.changed == [("f_dog.jpg", [208], [207, 208], "U", "M")]


def test_snapshots_are_immutable_and_content_hashed(ws, engine) -> None:
    engine, ids = ws
    s1 = create_snapshot(engine, "one")
    s2 = create_snapshot(engine, "two")
    assert s1.content_hash == s2.content_hash  # same labels, same hash
    with pytest.raises(ConflictError, match="immutable"):
        create_snapshot(engine, "one")
    with pytest.raises(DatabaseError, match="immutable"), engine.begin() as conn:
        conn.execute(text("update snapshot_labels set classes = '[1]'"))
    decide(engine, ids["b_cat.jpg"], "ann", Verdict.labels, [285])
    assert create_snapshot(engine, "three").content_hash != s1.content_hash
    assert [s.name for s in list_snapshots(engine)] == ["one", "two", "three"]


def test_bad_snapshot_requests(ws, tmp_path: Path) -> None:
    engine, _ = ws
    with pytest.raises(NotFoundError, match="unknown label source of dataset 'd' 'real'; known: imgt"):
        create_snapshot(engine, "x", base="real")
    with pytest.raises(InputError, match="policy"):
        create_snapshot(engine, "x", undecided="maybe")
    with pytest.raises(NotFoundError, match="unknown snapshot"):
        export_snapshot(engine, "nope", fmt="real", out=tmp_path / "o.json")
    create_snapshot(engine, "s")
    with pytest.raises(NotFoundError, match=r"unknown export format 'xml'; known: csv, .*jsonl, .*real"):
        export_snapshot(engine, "s", fmt="xml", out=tmp_path / "o.xml")
    assert not (tmp_path / "o.json").exists()


def test_csv_export_cannot_run_formulas(engine, tmp_path: Path) -> None:
    from relabel.common.vocabulary import load_vocabulary_file

    (tmp_path / "v.txt").write_text('=HYPERLINK("http://x"),evil\n+cmd\n@sum\nplain\n')
    vocab = load_vocabulary_file(tmp_path / "v.txt")
    root = tmp_path / "r"
    images.photo(root / "-1.jpg")
    (tmp_path / "m.csv").write_text('path,labels\n-1.jpg,"=HYPERLINK(""http://x"")|+cmd|@sum|plain"\n')
    plan = plan_ingest(root, vocab, "manifest", LayoutOptions(manifest=tmp_path / "m.csv"))
    ingest_dataset(engine, plan, dataset="d", root=root, vocab=vocab, show_progress=False, workers=1)
    create_snapshot(engine, "s")
    export_snapshot(engine, "s", fmt="csv", out=tmp_path / "s.csv")
    rows = list(csv.reader((tmp_path / "s.csv").open()))
    assert rows[1][0] == "'-1.jpg" and rows[1][3].startswith("'=HYPERLINK")
    assert not any(cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)
    assert spreadsheet_safe("tabby") == "tabby"


@pytest.mark.slow
def test_real_json_round_trip_is_byte_identical(engine, vocab, tmp_path: Path) -> None:
    plan = plan_ingest(tmp_path / "none", vocab, "imagenet-val")
    ingest_dataset(engine, plan, dataset="val", root=tmp_path / "none", vocab=vocab, show_progress=False)
    real = shared("imagenet-val", "real.json")
    import_source(engine, real, fmt="real")
    summary = create_snapshot(engine, "real-baseline", base="real")
    assert summary.n_images == 50_000 and summary.counts == {"U": 50_000}
    export_snapshot(engine, "real-baseline", fmt="real", out=tmp_path / "out.json")
    assert (tmp_path / "out.json").read_bytes() == real.read_bytes()


def test_exports_get_the_usual_file_mode(ws, tmp_path: Path) -> None:
    engine, _ = ws
    create_snapshot(engine, "s")
    old = os.umask(0o022)
    try:
        export_snapshot(engine, "s", fmt="csv", out=tmp_path / "s.csv")
    finally:
        os.umask(old)
    assert (tmp_path / "s.csv").stat().st_mode & 0o777 == 0o644


class _FullDisk(io.BytesIO):
    """A file whose writes fail as on a full disk."""

    def write(self, data) -> int:  # type: ignore[override]
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_an_export_to_a_full_disk_is_one_line_and_leaves_the_old_file(ws, tmp_path: Path, monkeypatch) -> None:
    from relabel.common import atomic

    engine, _ = ws
    create_snapshot(engine, "s")
    out = tmp_path / "out" / "s.csv"
    out.parent.mkdir()
    out.write_text("the previous export\n")

    def full_disk(fd: int, mode: str) -> io.BytesIO:
        os.close(fd)
        return _FullDisk()

    monkeypatch.setattr(atomic.os, "fdopen", full_disk)
    with pytest.raises(OutputError) as caught:
        export_snapshot(engine, "s", fmt="csv", out=out)
    assert str(caught.value) == f"cannot write {str(out)!r}: No space left on device, ENOSPC; nothing written"
    assert caught.value.exit_code == 6
    assert [p.name for p in out.parent.iterdir()] == ["s.csv"]  # no temporary file left behind
    assert out.read_text() == "the previous export\n"


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("out", ["/proc/regt.csv", "/proc/self/regt.csv", "/proc/no-such/dir/regt.csv"])
def test_an_export_under_proc_is_one_line(ws, out: str) -> None:
    engine, _ = ws
    create_snapshot(engine, "s")
    with pytest.raises(OutputError, match=rf"^cannot write '{out}': .+; nothing written$"):
        export_snapshot(engine, "s", fmt="csv", out=Path(out))
    assert not Path(out).exists()
