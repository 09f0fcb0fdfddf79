"""Label sources: import the labels of earlier relabeling efforts (priors) next to the original ImGT labels.

Each import format is a parser in `SOURCE_FORMATS` that yields `LabelRow`s keyed by image file name; `import_source`
validates every row against the dataset (known images, classes in range) and writes all or nothing.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from sqlalchemy import delete, insert
from sqlalchemy.engine import Engine
from sqlmodel import select

from db.engine import session_scope
from db.enums import Category, SourceKind
from db.models import Label, LabelSource
from relabel.errors import ConflictError, InputError, examples, unknown_name
from relabel.ingest.layouts import LABEL_SEPARATORS
from relabel.tables import read_records
from relabel.vocabulary import Vocabulary
from relabel.workspace import IMGT, ImageIndex, dataset_vocabulary, get_dataset, image_index


@dataclass
class LabelRow:
    key: str  # image path, file name or stem
    classes: list[int]
    certainty: list[float] | None = None
    category: str | None = None
    extra: dict[str, Any] | None = None
    where: str = ""  # file:line, for error messages


VAL_PREFIX = "ILSVRC2012_val_"
VAL_KEY = re.compile(rf"{VAL_PREFIX}\d{{8}}")  # the stem `val_key` writes


def val_key(number: int) -> str:
    """File stem of ImageNet validation image `number` (1-based)."""
    return f"{VAL_PREFIX}{number:08d}"


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read ({exc})") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc


def parse_real(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """ReaL `real.json`: a list of 50,000 lists of class indices in val-number order; [] excludes the image."""
    data = _read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of lists of class indices (ReaL real.json)")
    for i, labels in enumerate(data):
        if not isinstance(labels, list) or not all(isinstance(c, int) for c in labels):
            raise InputError(f"{path}: entry {i} is {labels!r}, expected a list of class indices")
        yield LabelRow(val_key(i + 1), labels, where=f"{path.name} entry {i}")


def _int_list(text: str) -> list[int]:
    return [int(t) for t in text.replace(",", " ").split()] if text and text.strip() else []


def parse_shankar(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """Shankar et al. (2020) multi-label CSV: id, category (A/B/M/Z), proposed_labels, unclear and wrong labels."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        need = {"id", "category", "proposed_labels"}
        if not reader.fieldnames or not need <= set(reader.fieldnames):
            raise InputError(f"{path}: expected the columns {sorted(need)} of the Shankar multi-label CSV")
        for lineno, row in enumerate(reader, start=2):
            try:
                extra = {
                    "original_label": int(row["original_label"]) if row.get("original_label") else None,
                    "unclear": _int_list(row.get("unclear_multi_labels", "")),
                    "wrong": _int_list(row.get("wrong_multi_labels", "")),
                    "validated": row.get("manually_validated") == "True",
                    "problematic": row.get("is_problematic") == "True",
                }
                classes = _int_list(row["proposed_labels"])
            except ValueError as exc:
                raise InputError(f"{path}:{lineno}: class lists must be integers ({exc})") from exc
            yield LabelRow(
                row["id"], classes, category=row["category"] or None, extra=extra, where=f"{path.name}:{lineno}"
            )


MTURK_VOTES = ("given", "guessed", "both", "neither")
MTURK_CATEGORY = {"given": Category.A, "guessed": Category.B, "both": Category.M, "neither": Category.Z}


def mturk_majority(votes: dict[str, int]) -> str | None:
    """The outcome that at least 3 of the 5 workers chose (strict majority), or None."""
    total = sum(votes.get(k, 0) for k in MTURK_VOTES)
    best = max(MTURK_VOTES, key=lambda k: votes.get(k, 0))
    return best if total and votes.get(best, 0) * 2 > total else None


def parse_mturk(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """cleanlab's `mturk_label_errors.json`: given/guessed labels and 5 workers' votes per candidate error.

    Labels follow the strict majority: given -> [given] (A), guessed -> [guessed] (B), both -> [given, guessed]
    (M), neither -> [] (Z), no majority -> [] (X). Certainty is the share of votes that accept each label.
    """
    data = _read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of label-error records")
    for i, rec in enumerate(data):
        try:
            given, guessed, votes = int(rec["given_original_label"]), int(rec["our_guessed_label"]), rec["mturk"]
            number = int(rec["id"])
            counts = {k: int(votes.get(k, 0)) for k in MTURK_VOTES}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise InputError(
                f"{path}: record {i} lacks id/given_original_label/our_guessed_label/mturk ({exc})"
            ) from exc
        n = sum(counts.values()) or 1
        outcome = mturk_majority(counts)
        classes = {"given": [given], "guessed": [guessed], "both": [given, guessed]}.get(outcome or "", [])
        share = {given: (counts["given"] + counts["both"]) / n, guessed: (counts["guessed"] + counts["both"]) / n}
        yield LabelRow(
            val_key(number),
            classes,
            certainty=[round(share[c], 4) for c in classes],
            category=(MTURK_CATEGORY[outcome] if outcome else Category.X).value,
            extra={"votes": counts, "given": given, "guessed": guessed},
            where=f"{path.name} record {i}",
        )


def parse_csv(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """Generic CSV: image, label or labels (names, wnids or indices; '|' or ';' between several)."""
    for where, row in read_records(path, required="image", hint="and 'label' or 'labels'", fmt="csv"):
        yield _table_row(row, vocab, where)


def parse_jsonl(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """Generic JSON Lines: {"image": ..., "labels": [...]} per line."""
    for where, row in read_records(path, required="image", hint="and 'label' or 'labels'", fmt="jsonl"):
        yield _table_row(row, vocab, where)


def split_labels(value: Any) -> list[str]:
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v.strip() for v in LABEL_SEPARATORS.split(str(value)) if v.strip()]


def _table_row(row: dict, vocab: Vocabulary, where: str) -> LabelRow:
    if not isinstance(row, dict) or not row.get("image"):
        raise InputError(f"{where}: expected an object with 'image' and 'label' or 'labels'")
    tokens = split_labels(row.get("labels", row.get("label")))
    try:
        classes = [vocab.resolve(t) for t in tokens]
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    return LabelRow(str(row["image"]), classes, category=row.get("category") or None, where=where)


SOURCE_FORMATS: dict[str, Callable[[Path, Vocabulary], Iterable[LabelRow]]] = {
    "real": parse_real,
    "shankar": parse_shankar,
    "mturk": parse_mturk,
    "csv": parse_csv,
    "jsonl": parse_jsonl,
}


@dataclass
class SourceReport:
    source: str
    written: int
    skipped_unknown: int
    categories: dict[str, int]


def drop_for_reimport(s: Any, old: Any, children: Any, conflict: str, replace: bool) -> None:
    """Delete `old` (an imported source or run) and its rows (the `children` DELETE) before it is imported again;
    without `replace`, refuse with the one-line `conflict` and the flag that allows it."""
    if not replace:
        raise ConflictError(f"{conflict}; pass --replace to re-import")
    s.execute(children)
    s.delete(old)
    s.flush()


def resolve_rows(
    rows: list[LabelRow], index: ImageIndex, n_classes: int, *, skip_unknown: bool, what: str
) -> tuple[list[int], int]:
    """Image ids for `rows` (-1 for an unknown image) and the number of unknown images.

    Raises one InputError: why no row matches an image at all (even with `skip_unknown`: an import of nothing is
    never what was meant, and a file keyed for another dataset is the usual cause); else one that counts every
    bad class; else, without `skip_unknown`, one that counts the unknown images.
    """
    ids: list[int] = []
    unknown: list[str] = []
    bad_class: list[str] = []
    for r in rows:
        image_id = index.lookup(r.key)
        if image_id is None:
            unknown.append(r.key)
        if any(not 0 <= c < n_classes for c in r.classes):
            bad_class.append(f"{r.where}: {r.classes}")
        ids.append(image_id if image_id is not None else -1)
    if len(unknown) == len(rows):
        raise InputError(no_match_message(rows, index, what))
    if bad_class:
        raise InputError(
            f"{what}: {len(bad_class)} row(s) have classes outside 0..{n_classes - 1}: "
            f"{examples(bad_class)}; nothing written"
        )
    if unknown and not skip_unknown:
        raise InputError(
            f"{what}: {len(unknown)} of {len(rows)} image(s) are not in the dataset: {examples(unknown)}; "
            "nothing written (ingest them first, or pass --skip-unknown)"
        )
    return ids, len(unknown)


def no_match_message(rows: Sequence[LabelRow], index: ImageIndex, what: str) -> str:
    """Why none of `rows` matches an image of the dataset, one line with an example key and an example file of the
    dataset. Rows keyed by ImageNet validation numbers (ReaL, MTurk, Shankar) get their own explanation."""
    if not rows:
        return f"{what}: holds no rows; nothing written"
    paths = sorted(index.ids_by_path)
    if not paths:
        return f"{what}: the dataset has no images to match its {len(rows)} row(s); ingest them first; nothing written"
    head = f"{what}: none of its {len(rows)} row(s) matches an image of the dataset; nothing written"
    dataset_file, key = repr(paths[0]), rows[0].key
    if all(VAL_KEY.fullmatch(PurePosixPath(r.key).stem) for r in rows):
        return (
            f"{head}: its rows are keyed by ImageNet validation numbers ({VAL_PREFIX}NNNNNNNN, e.g. {key!r}) and "
            f"the dataset's file names do not match (e.g. {dataset_file}); import it into a dataset of the "
            f"{VAL_PREFIX}* images"
        )
    return (
        f"{head}: a key must be an image's relative path, file name or file stem (e.g. key {key!r}, "
        f"dataset file {dataset_file})"
    )


def import_source(
    engine: Engine,
    path: Path,
    *,
    fmt: str,
    dataset: str | None = None,
    name: str | None = None,
    skip_unknown: bool = False,
    replace: bool = False,
) -> SourceReport:
    """Import a label file as the prior source `name` (default: the format's name). All or nothing."""
    if fmt not in SOURCE_FORMATS:
        raise unknown_name("label format", fmt, list(SOURCE_FORMATS))
    if not path.is_file():
        raise InputError(f"label file {str(path)!r} does not exist")
    name = name or fmt
    if name == IMGT:
        raise ConflictError(f"{IMGT!r} is the original labels' source; `relabel ingest` writes it")
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        vocab = dataset_vocabulary(s, ds)
        rows = list(SOURCE_FORMATS[fmt](path, vocab))
        ids, skipped = resolve_rows(rows, image_index(s, ds), len(vocab), skip_unknown=skip_unknown, what=str(path))
        old = s.exec(select(LabelSource).where(LabelSource.dataset_id == ds.id, LabelSource.name == name)).first()
        if old is not None:
            what = f"dataset {ds.name!r} already has a label source {name!r}"
            drop_for_reimport(s, old, delete(Label).where(Label.source_id == old.id), what, replace)
        source = LabelSource(
            dataset_id=ds.id,
            name=name,
            kind=SourceKind.prior,
            format=fmt,
            origin=str(path.resolve()),  # type: ignore[arg-type]
            sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        )
        s.add(source)
        s.flush()
        values: list[dict[str, Any]] = []
        seen: set[int] = set()
        categories: dict[str, int] = {}
        for r, image_id in zip(rows, ids):
            if image_id < 0:
                continue
            if image_id in seen:
                raise InputError(f"{r.where}: image {r.key!r} appears twice in {path.name}; nothing written")
            seen.add(image_id)
            values.append(
                {
                    "source_id": source.id,
                    "image_id": image_id,
                    "classes": r.classes,
                    "certainty": r.certainty,
                    "category": r.category,
                    "extra": r.extra,
                }
            )
            if r.category:
                categories[r.category] = categories.get(r.category, 0) + 1
        for start in range(0, len(values), 5000):
            s.execute(insert(Label), values[start : start + 5000])
        source.n_labels = len(values)
    return SourceReport(name, len(values), skipped, categories)
