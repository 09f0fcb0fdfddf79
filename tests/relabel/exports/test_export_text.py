"""Exports written byte for byte as their plain definition writes them: the snapshot read through the ORM, each
JSONL record by `json.dumps(record, ensure_ascii=False)`, each CSV row by `csv.writer`, real.json by `json.dumps`.
The exporters read plain columns and reuse the text of repeated class lists; these tests hold them to that text on
snapshots with several labels, undecided (U) and excluded images, posteriors, and awkward strings."""

from __future__ import annotations

import csv
import io
import json
import os
from pathlib import Path

import pytest
from sqlmodel import Session, select

from db.enums import Verdict
from db.models import Dataset, Image, Snapshot, SnapshotLabel, SnapshotPosterior
from relabel.common.vocabulary import ClassInfo, Vocabulary
from relabel.exports.formats import JSONL_DIGITS, export_snapshot, render_snapshot, spreadsheet_safe
from relabel.snapshots.freeze import create_snapshot
from relabel.snapshots.reader import SnapshotRow
from tests.relabel.snapshots.test_snapshots_consensus import decide, ws  # noqa: F401  (ws: the seven-image fixture)


def orm_rows(engine, name: str) -> tuple[list[SnapshotRow], str | None]:
    """Snapshot `name` read through the ORM (JSON and enum columns decoded by their types), in file-name order,
    and the dataset's root."""
    with Session(engine) as s:
        snap = s.exec(select(Snapshot).where(Snapshot.name == name)).one()
        posteriors: dict[int, dict[int, float]] = {}
        for p in s.exec(select(SnapshotPosterior).where(SnapshotPosterior.snapshot_id == snap.id)):
            posteriors.setdefault(p.image_id, {})[p.class_index] = p.posterior
        voted = bool(snap.consensus) and snap.consensus.get("rule", "unanimous") != "unanimous"
        pairs = s.exec(
            select(Image, SnapshotLabel)
            .join(SnapshotLabel, SnapshotLabel.image_id == Image.id)
            .where(SnapshotLabel.snapshot_id == snap.id)
        ).all()
        rows = [
            SnapshotRow(i.path, i.stem, list(lab.classes), lab.category.value, lab.origin,
                        posteriors.get(i.id, {}) if voted else None)
            for i, lab in sorted(pairs, key=lambda pair: (pair[0].stem, pair[0].path))
        ]  # fmt: skip
        return rows, s.exec(select(Dataset.root)).one()


def plain_jsonl(rows: list[SnapshotRow], vocab: Vocabulary, root: str | None) -> str:
    lines = []
    for r in rows:
        record: dict[str, object] = {
            "image": r.path,
            "path": os.path.join(root, r.path) if root else r.path,
            "labels": r.classes,
            "wnids": [vocab.classes[c].wnid for c in r.classes],
            "names": [vocab.classes[c].name for c in r.classes],
            "category": r.category,
            "origin": r.origin,
        }
        if r.posteriors is not None:
            record["posteriors"] = {str(c): round(p, JSONL_DIGITS) for c, p in sorted(r.posteriors.items())}
        lines.append(json.dumps(record, ensure_ascii=False))
    return "\n".join(lines) + "\n"


def plain_csv(rows: list[SnapshotRow], vocab: Vocabulary, root: str | None) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    with_posteriors = any(r.posteriors is not None for r in rows)
    writer.writerow(
        ["image", "labels", "wnids", "names", "path", "category", "origin"] + ["posteriors"] * with_posteriors
    )
    for r in rows:
        cells = [
            r.path,
            "|".join(str(c) for c in r.classes),
            "|".join(vocab.classes[c].wnid or "" for c in r.classes),
            "|".join(vocab.classes[c].name for c in r.classes),
            os.path.join(root, r.path) if root else r.path,
            r.category,
            r.origin,
        ]
        if with_posteriors:
            cells.append("|".join(f"{c}:{p:.4f}" for c, p in sorted((r.posteriors or {}).items())))
        writer.writerow([spreadsheet_safe(c) for c in cells])
    return buf.getvalue()


PLAIN = {
    "jsonl": plain_jsonl,
    "csv": plain_csv,
    "real": lambda rows, vocab, root: json.dumps([r.classes for r in rows]),
}


@pytest.mark.parametrize(
    ("name", "options"),
    [
        ("keep", {}),
        ("exclude", {"undecided": "exclude"}),
        ("ds", {"consensus": "ds", "studio_votes": False}),
        ("ds-exclude", {"consensus": "ds", "undecided": "exclude"}),
    ],
)
def test_exports_are_what_their_plain_definition_writes(ws, vocab, tmp_path: Path, name: str, options: dict) -> None:  # noqa: F811
    engine, ids = ws
    decide(engine, ids["a_cup.jpg"], "ann", Verdict.labels, [967, 968])  # several labels, from a decision
    decide(engine, ids["b_cat.jpg"], "ann", Verdict.none_fit)  # no class fits: an empty set
    create_snapshot(engine, name, **options)
    rows, root = orm_rows(engine, name)
    categories = {r.category for r in rows}
    assert "U" in categories and any(len(r.classes) > 1 for r in rows) and any(not r.classes for r in rows)
    for fmt, plain in PLAIN.items():
        out = tmp_path / f"{name}.{fmt}"
        export_snapshot(engine, name, fmt=fmt, out=out, allow_partial=True, warn=lambda _: None)
        assert out.read_text(encoding="utf-8") == plain(rows, vocab, root), fmt


def test_awkward_strings_and_numbers_are_written_as_json_and_csv_write_them() -> None:
    vocab = Vocabulary(
        "odd",
        [
            ClassInfo(0, "tench", "n01440764"),
            ClassInfo(1, 'say "cheese"', None),  # no wnid: null in JSON, empty in CSV
            ClassInfo(2, "=SUM(A1)", "n2"),
            ClassInfo(3, "café, crème", "n3"),
        ],
    )
    rows = [
        SnapshotRow("été/Ünïcode \u2028 photo.jpg", "a", [3, 1], "M", "consensus", {3: 0.1 + 0.2, 1: 1e-7, 0: 0.5}),
        SnapshotRow("-x.jpg", "b", [], "Z", "consensus", {}),
        SnapshotRow('quote".jpg', "c", [2], "U", "uncertain", {2: 0.4999995, 0: 1.0, 1: 0.0}),
        SnapshotRow("tab\there.jpg", "d", [0, 2, 1], "U", "base", {}),
        SnapshotRow("ints.jpg", "e", [1, 0], "M", "base", {1: 2.5e-12}),
        SnapshotRow("bools.jpg", "f", [True, 0], "M", "base", {}),  # equal to (1, 0) as a key, but not as JSON
    ]
    for root in (None, "/data/été"):
        assert render_snapshot("jsonl", rows, vocab, dataset_root=root) == plain_jsonl(rows, vocab, root)
        assert render_snapshot("csv", rows, vocab, dataset_root=root) == plain_csv(rows, vocab, root)
    unvoted = [SnapshotRow(r.path, r.stem, r.classes, r.category, r.origin) for r in rows]
    assert render_snapshot("jsonl", unvoted, vocab) == plain_jsonl(unvoted, vocab, None)
    assert render_snapshot("csv", unvoted, vocab) == plain_csv(unvoted, vocab, None)
    assert '"labels": [true, 0]' in render_snapshot("jsonl", rows, vocab)
