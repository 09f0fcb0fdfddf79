"""Export a snapshot: ReaL-style real.json, JSONL, CSV, or Label Studio tasks. Files are written whole or not at all.

A snapshot whose consensus read votes (`relabel snapshot create --consensus ds`) carries its posteriors: each JSONL
row gains "posteriors" {class index: P(class present)} and the CSV a `posteriors` column ("207:0.9731|208:0.0412",
4 decimals), for every (image, class) pair the votes asked about; pairs not listed count as absent, or as present
when they are the image's labels taken from a decision or the base source. A counting rule (majority,
set-majority) stores the share of yes answers (of ballots holding the class) instead of a probability. ReaL's
format stays label sets: an uncertain image (category U, origin "uncertain") is written with its best estimate, the
classes the votes make more likely present than absent (`relabel.posteriors`), as the snapshot stores it."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from db.engine import session_scope
from db.models import stored_id
from relabel.atomic import write_atomic
from relabel.errors import InputError, unknown_name
from relabel.interop.label_studio import render_label_studio, run_suggestions
from relabel.posteriors import format_posteriors
from relabel.snapshots import SnapshotRow, check_classes, get_snapshot, snapshot_rows
from relabel.vocabulary import Vocabulary
from relabel.workspace import dataset_vocabulary, get_dataset

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
JSONL_DIGITS = 6  # posteriors in JSONL; the CSV cell has 4 (relabel.posteriors.format_posteriors)


def spreadsheet_safe(cell: str) -> str:
    """Prefix a quote to a cell a spreadsheet would run as a formula (OWASP CSV-injection advice)."""
    return "'" + cell if cell.startswith(FORMULA_PREFIXES) else cell


def render_real(rows: list[SnapshotRow], vocab: Vocabulary) -> str:
    """ReaL's format: a JSON list of label lists, one per image in file-name order; [] = excluded."""
    return json.dumps([r.classes for r in rows])


def render_jsonl(rows: list[SnapshotRow], vocab: Vocabulary) -> str:
    lines = []
    for r in rows:
        record: dict[str, object] = {
            "image": r.path,
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


def render_csv(rows: list[SnapshotRow], vocab: Vocabulary) -> str:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    with_posteriors = any(r.posteriors is not None for r in rows)
    writer.writerow(["image", "labels", "wnids", "names", "category", "origin"] + ["posteriors"] * with_posteriors)
    for r in rows:
        cells = [
            r.path,
            "|".join(str(c) for c in r.classes),
            "|".join(vocab.classes[c].wnid or "" for c in r.classes),
            "|".join(vocab.classes[c].name for c in r.classes),
            r.category,
            r.origin,
        ]
        if with_posteriors:
            cells.append(format_posteriors(r.posteriors or {}))
        writer.writerow([spreadsheet_safe(c) for c in cells])
    return buf.getvalue()


# (rows, vocabulary, **options) -> the file's content; a renderer takes the options its format declares
Renderer = Callable[..., str | bytes]
OPTIONS = {"image_root": "--image-root", "run": "--run"}  # what an export may be asked for beyond its rows


@dataclass(frozen=True)
class ExportFormat:
    """One way to write a snapshot, and all the rest of the code needs to know about it: the CLI's `--format`
    and the studio's format radio list the registry's names, the studio names its files `NAME-TIME.FORMAT.SUFFIX`
    (`NAME-TIME.SUFFIX` where the format's name is its suffix)."""

    render: Renderer  # text (str, written as UTF-8) or, for a binary format, bytes written as they are
    suffix: str  # file suffix, without the dot
    summary: str = ""  # a few words for the CLI's help
    binary: bool = False
    # keywords of OPTIONS the renderer takes, each with a default: image_root (a folder or URL prefix of the image
    # paths), run (a stored run whose suggestions it writes, given as `run` and `suggestions` by image path)
    options: tuple[str, ...] = ()


EXPORT_FORMATS: dict[str, ExportFormat] = {
    "real": ExportFormat(render_real, "json", "ReaL-style real.json (lists in file-name order)"),
    "jsonl": ExportFormat(render_jsonl, "jsonl", "one JSON record per image"),
    "csv": ExportFormat(render_csv, "csv", "one row per image"),
    "label-studio": ExportFormat(
        render_label_studio, "json", "Label Studio tasks (with --image-root, --run)", options=("image_root", "run")
    ),
}


def export_format(name: str) -> ExportFormat:
    """The registered format `name`; an unknown name is an InputError listing the known ones."""
    if name not in EXPORT_FORMATS:
        raise unknown_name("export format", name, list(EXPORT_FORMATS))
    return EXPORT_FORMATS[name]


def export_summaries() -> dict[str, str]:
    """Each format's name and summary, in the registry's order (the CLI's choices and help)."""
    return {name: f.summary for name, f in EXPORT_FORMATS.items()}


def render_snapshot(name: str, rows: list[SnapshotRow], vocab: Vocabulary, **options: Any) -> str | bytes:
    """The content of an export in format `name`: text for a text format, bytes for a binary one (a renderer that
    returns the other kind is a programming error, raised as TypeError). `options` go to a renderer that takes
    them (`ExportFormat.options`)."""
    fmt = export_format(name)
    content = fmt.render(rows, vocab, **options)
    if isinstance(content, bytes) != fmt.binary:
        raise TypeError(f"export format {name!r} must render {'bytes' if fmt.binary else 'text'}")
    return content


def export_snapshot(
    engine: Engine,
    name: str,
    *,
    fmt: str,
    out: Path,
    dataset: str | None = None,
    image_root: str | None = None,
    run: str | None = None,
) -> int:
    """Write snapshot `name` to `out` in format `fmt`; returns the number of images written. `image_root` and
    `run` are for a format that takes them (`ExportFormat.options`); another format refuses them."""
    asked = {k: v for k, v in (("image_root", image_root), ("run", run)) if v is not None}
    refused = [k for k in asked if k not in export_format(fmt).options]
    if refused:
        takers = [n for n, f in EXPORT_FORMATS.items() if set(refused) <= set(f.options)]
        raise InputError(
            f"export format {fmt!r} takes no {' or '.join(OPTIONS[k] for k in refused)}; formats that do: "
            f"{', '.join(takers) or 'none'}"
        )
    with suppress(OSError):  # a path the system refuses: write_atomic says why
        if out.is_dir():
            raise InputError(f"--out {str(out)!r} is a directory; give a file path")
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        conn = s.connection()
        rows = snapshot_rows(conn, stored_id(get_snapshot(s, ds, name)))
        vocab = dataset_vocabulary(s, ds)
        options: dict[str, Any] = dict(asked)
        if run is not None:
            options["suggestions"] = run_suggestions(conn, stored_id(ds), run)
    labelled = ((r.path, r.classes, r.origin) for r in rows)
    check_classes(labelled, len(vocab), f"snapshot {name!r} not exported (frozen before classes were checked)")
    write_atomic(out, render_snapshot(fmt, rows, vocab, **options))
    return len(rows)
