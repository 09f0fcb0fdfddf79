"""Export a snapshot: ReaL-style real.json, JSONL, CSV, Label Studio tasks, or a Hugging Face dataset folder
(`relabel.exports.hf`). Files and folders are written whole or not at all.

JSONL and CSV give each image's absolute path when exported ("path": the dataset's root joined with "image", the
path relative to that root), so a file read elsewhere still says where its images were. real.json has no names:
its i-th list belongs to ILSVRC-2012 val image i, so it is written only for the full val set (50,000 images named
ILSVRC2012_val_00000001 ... in order) unless a partial export is allowed; its i-th list is then the i-th image of
the dataset in file-name order.

A snapshot whose consensus read votes (`relabel snapshot create --consensus ds`) carries its posteriors: each JSONL
row gains "posteriors" {class index: P(class present)} and the CSV a `posteriors` column ("207:0.9731|208:0.0412",
4 decimals), for every (image, class) pair the votes asked about; pairs not listed count as absent, or as present
when they are the image's labels taken from a decision or the base source. A counting rule (majority,
set-majority) stores the share of yes answers (of ballots holding the class) instead of a probability. ReaL's
format stays label sets: an uncertain image (category U, origin "uncertain") is written with its best estimate, the
classes the votes make more likely present than absent (`relabel.votes.posteriors`), as the snapshot stores it."""

from __future__ import annotations

import csv
import io
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.engine import session_scope
from db.models import Dataset, Image, pk, stored_id
from relabel.common.atomic import write_atomic
from relabel.common.atomic_folder import check_folder_target, write_folder_atomic
from relabel.common.errors import InputError, brief, unknown_name
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import IMGT, dataset_vocabulary, get_dataset, get_source
from relabel.exports.hf import MARKER as HF_MARKER
from relabel.exports.hf import image_path
from relabel.snapshots.reader import SnapshotRow, check_classes, get_snapshot, snapshot_rows, source_labels

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
JSONL_DIGITS = 6  # posteriors in JSONL; the CSV cell has 4 (format_posteriors)
# json.dumps(record, ensure_ascii=False) builds an encoder for every call; one serves every line, with the same text
_JSONL = json.JSONEncoder(ensure_ascii=False)


def spreadsheet_safe(cell: str) -> str:
    """Prefix a quote to a cell a spreadsheet would run as a formula (OWASP CSV-injection advice)."""
    return "'" + cell if cell.startswith(FORMULA_PREFIXES) else cell


def render_real(rows: list[SnapshotRow], vocab: Vocabulary) -> str:
    """ReaL's format: a JSON list of label lists, one per image in file-name order; [] = excluded."""
    return json.dumps([r.classes for r in rows])


def render_jsonl(rows: list[SnapshotRow], vocab: Vocabulary, dataset_root: str | None = None) -> str:
    """One JSON object per image: image, path, labels, wnids, names, category, origin and, for a snapshot that
    stores them, posteriors (class index -> P, rounded to `JSONL_DIGITS`). The wnids and names of a class list
    are looked up once per distinct list."""
    named = _ClassCells(vocab, _class_lists)
    lines = []
    for r in rows:
        labels, wnids, names = named(r.classes)
        record: dict[str, object] = {
            "image": r.path,
            "path": image_path(dataset_root, r.path),
            "labels": labels,
            "wnids": wnids,
            "names": names,
            "category": r.category,
            "origin": r.origin,
        }
        if r.posteriors is not None:
            record["posteriors"] = {str(c): round(p, JSONL_DIGITS) for c, p in sorted(r.posteriors.items())}
        lines.append(_JSONL.encode(record))
    return "\n".join(lines) + "\n"


def render_csv(rows: list[SnapshotRow], vocab: Vocabulary, dataset_root: str | None = None) -> str:
    """One row per image under a header: image, labels, wnids, names, path, category, origin and, for a snapshot
    that stores them, posteriors; every cell spreadsheet-safe. The cells of a class list are made once per list."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    with_posteriors = any(r.posteriors is not None for r in rows)
    header = ["image", "labels", "wnids", "names", "path", "category", "origin"] + ["posteriors"] * with_posteriors
    writer.writerow(header)
    cells = _ClassCells(vocab, _csv_class_cells)
    safe = spreadsheet_safe
    writer.writerows(
        [
            safe(r.path),
            *cells(r.classes),
            safe(image_path(dataset_root, r.path)),
            safe(r.category),
            safe(r.origin),
            *([safe(format_posteriors(r.posteriors or {}))] if with_posteriors else []),
        ]
        for r in rows
    )
    return buf.getvalue()


def format_posteriors(posteriors: Mapping[int, float], digits: int = 4) -> str:
    """ "207:0.9731|208:0.0412": class index and posterior pairs in class order, the CSV export's cell."""
    return "|".join(f"{c}:{posteriors[c]:.{digits}f}" for c in sorted(posteriors))


class _ClassCells(dict[tuple[int, ...], Any]):
    """What `make` writes for a class list, made once per distinct list (a snapshot of 50,000 images has a few
    thousand). A list of anything but plain ints (a bool would equal 1 as a key) is made afresh each time."""

    def __init__(self, vocab: Vocabulary, make: Callable[[Sequence[int], Vocabulary], Any]) -> None:
        super().__init__()
        self.vocab, self.make = vocab, make

    def __call__(self, classes: Sequence[int]) -> Any:
        key = tuple(classes)
        if not all(type(c) is int for c in key):
            return self.make(classes, self.vocab)
        made = self.get(key)
        if made is None:
            made = self[key] = self.make(classes, self.vocab)
        return made


def _class_lists(classes: Sequence[int], vocab: Vocabulary) -> tuple[list[int], list[str | None], list[str]]:
    """The labels, wnids and names of a JSONL record."""
    return list(classes), [vocab.classes[c].wnid for c in classes], [vocab.classes[c].name for c in classes]


def _csv_class_cells(classes: Sequence[int], vocab: Vocabulary) -> tuple[str, str, str]:
    """The labels, wnids and names cells of a CSV row, spreadsheet-safe."""
    return (
        spreadsheet_safe("|".join(str(c) for c in classes)),
        spreadsheet_safe("|".join(vocab.classes[c].wnid or "" for c in classes)),
        spreadsheet_safe("|".join(vocab.classes[c].name for c in classes)),
    )


def render_label_studio(rows: list[SnapshotRow], vocab: Vocabulary, **options: Any) -> str:
    """Label Studio tasks (`relabel.interop.label_studio`, imported only when this format is asked for)."""
    from relabel.interop.label_studio import render_label_studio as render

    return render(rows, vocab, **options)


# (rows, vocabulary, **options) -> the file's content; a renderer takes the options its format declares
Renderer = Callable[..., str | bytes]
OPTIONS = {"image_root": "--image-root", "run": "--run"}  # what an export may be asked for beyond its rows


@dataclass(frozen=True)
class ExportInput:
    """What a folder format writes: the snapshot's rows in file-name order, and what they refer to."""

    rows: list[SnapshotRow]
    vocab: Vocabulary
    root: str | None  # the dataset's image folder, absolute; image paths are relative to it
    originals: dict[str, tuple[int, ...]]  # relative image path -> its original (ImGT) classes


# writes an ExportInput into a new, empty folder; returns warnings for the user, one line each
FolderWriter = Callable[[ExportInput, Path], list[str]]


@dataclass(frozen=True)
class ExportFormat:
    """One way to write a snapshot, and all the rest of the code needs to know about it: the CLI's `--format`
    and the studio's format radio list the registry's names, the studio names its files `NAME-TIME.FORMAT.SUFFIX`
    (`NAME-TIME.SUFFIX` where the format's name is its suffix)."""

    render: Renderer | None  # text (str, written as UTF-8) or, for a binary format, bytes; None: a folder format
    suffix: str  # file suffix, without the dot
    summary: str = ""  # a few words for the CLI's help
    binary: bool = False
    # keywords of OPTIONS the renderer takes, each with a default: image_root (a folder or URL prefix of the image
    # paths), run (a stored run whose suggestions it writes, given as `run` and `suggestions` by image path)
    options: tuple[str, ...] = ()
    records_root: bool = False  # the renderer takes dataset_root: the dataset's folder, for absolute image paths
    positional: bool = False  # item i stands for ILSVRC-2012 val image i (see val_order_problem)
    folder: FolderWriter | None = None  # writes a folder, not a file
    folder_marker: str = ""  # a file every such folder holds: --force replaces only a folder that has it


def write_hf(data: ExportInput, folder: Path) -> list[str]:
    """The `hf` format (relabel.exports.hf, whose optional `datasets` is imported only when it is used)."""
    from relabel.exports.hf import write_hf_dataset

    return write_hf_dataset(data.rows, data.vocab, folder, root=data.root, originals=data.originals)


EXPORT_FORMATS: dict[str, ExportFormat] = {
    "real": ExportFormat(render_real, "json", "ReaL-style real.json (lists in val order)", positional=True),
    "jsonl": ExportFormat(render_jsonl, "jsonl", "one JSON record per image", records_root=True),
    "csv": ExportFormat(render_csv, "csv", "one row per image", records_root=True),
    "label-studio": ExportFormat(
        render_label_studio, "json", "Label Studio tasks (with --image-root, --run)", options=("image_root", "run")
    ),
    "hf": ExportFormat(None, "hf", "Hugging Face datasets folder", folder=write_hf, folder_marker=HF_MARKER),
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
    if fmt.render is None:
        raise TypeError(f"export format {name!r} writes a folder, not a file")
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
    allow_partial: bool = False,
    replace: bool = False,
    warn: Callable[[str], None] | None = None,
) -> int:
    """Write snapshot `name` to `out` in format `fmt`; returns the number of images written. `image_root` and
    `run` are for a format that takes them (`ExportFormat.options`); another format refuses them.

    A positional format (real) of a dataset that is not the full ILSVRC-2012 val set is an InputError, or with
    `allow_partial` a warning. A folder format (hf) refuses an `out` that is not a new or empty folder, or with
    `replace` an earlier export of its kind. Warnings go to `warn` (default: Python's warnings module)."""
    asked = {k: v for k, v in (("image_root", image_root), ("run", run)) if v is not None}
    refused = [k for k in asked if k not in export_format(fmt).options]
    if refused:
        takers = [n for n, f in EXPORT_FORMATS.items() if set(refused) <= set(f.options)]
        raise InputError(
            f"export format {fmt!r} takes no {' or '.join(OPTIONS[k] for k in refused)}; formats that do: "
            f"{', '.join(takers) or 'none'}"
        )
    kind = export_format(fmt)
    if kind.folder is not None:
        check_folder_target(out, marker=kind.folder_marker, replace=replace)
    with suppress(OSError):  # a path the system refuses: write_atomic says why
        if kind.folder is None and out.is_dir():
            raise InputError(f"--out {str(out)!r} is a directory; give a file path")
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        conn = s.connection()
        rows = snapshot_rows(conn, stored_id(get_snapshot(s, ds, name)))
        vocab = dataset_vocabulary(s, ds)
        options: dict[str, Any] = dict(asked)
        if run is not None:
            from relabel.interop.label_studio import run_suggestions

            options["suggestions"] = run_suggestions(conn, stored_id(ds), run)
        if kind.records_root:
            options["dataset_root"] = ds.root
        data = ExportInput(rows, vocab, ds.root, original_labels(s, ds) if kind.folder else {})
        dataset_name = ds.name
    labelled = ((r.path, r.classes, r.origin) for r in rows)
    check_classes(labelled, len(vocab), f"snapshot {name!r} not exported (frozen before classes were checked)")
    notes = check_positions(rows, name, dataset_name, allow_partial) if kind.positional else []
    if kind.folder is not None:
        notes += write_folder(kind.folder, data, out, marker=kind.folder_marker, replace=replace)
    else:
        write_atomic(out, render_snapshot(fmt, rows, vocab, **options))
    for note in notes:
        (warn or _python_warning)(note)
    return len(rows)


def original_labels(s: Session, ds: Dataset) -> dict[str, tuple[int, ...]]:
    """Relative image path -> the image's original (ImGT) classes, () where it has none."""
    conn = s.connection()
    labels = source_labels(conn, stored_id(get_source(s, ds, IMGT)))
    images = conn.execute(select(pk(Image.id), col(Image.path)).where(col(Image.dataset_id) == ds.id))
    return {path: labels.get(image_id, ()) for image_id, path in images}


VAL_IMAGES = 50_000  # ILSVRC-2012 val: the set whose order real.json's positions follow


def val_order_problem(rows: list[SnapshotRow]) -> str | None:
    """Why `rows` (in file-name order) are not ILSVRC-2012 val image by image; None when they are: 50,000 images,
    the i-th named ILSVRC2012_val_{i:08d}."""
    if len(rows) != VAL_IMAGES:
        return f"it has {len(rows):,} images, not {VAL_IMAGES:,}"
    for i, r in enumerate(rows, 1):
        if r.stem != f"ILSVRC2012_val_{i:08d}":
            return f"its image {i:,} in file-name order is {brief(r.stem, 60)}, not ILSVRC2012_val_{i:08d}"
    return None


def check_positions(rows: list[SnapshotRow], snapshot: str, dataset: str, allow_partial: bool) -> list[str]:
    """Refuse (InputError) a positional export of a dataset that is not ILSVRC-2012 val, or with `allow_partial`
    return the warning to give."""
    problem = val_order_problem(rows)
    if problem is None:
        return []
    if not allow_partial:
        raise InputError(
            f"snapshot {snapshot!r} not exported as real: real.json gives labels by position in ILSVRC-2012 val and "
            f"dataset {dataset!r} is not the full val set ({problem}); export jsonl or csv, which name each image, "
            "or pass --allow-partial to number this dataset's images in file-name order"
        )
    return [
        f"dataset {dataset!r} is not the full ILSVRC-2012 val set ({problem}): list i of the real.json written is "
        "its i-th image in file-name order, not val image i"
    ]


def write_folder(writer: FolderWriter, data: ExportInput, out: Path, *, marker: str, replace: bool) -> list[str]:
    """Write a folder format whole or not at all (relabel.common.atomic_folder); returns the writer's warnings."""
    notes: list[str] = []
    write_folder_atomic(out, lambda folder: notes.extend(writer(data, folder)), marker=marker, replace=replace)
    return notes


def _python_warning(message: str) -> None:
    warnings.warn(message, stacklevel=3)
