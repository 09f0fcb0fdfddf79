"""Label sources: import the labels of earlier relabeling efforts (priors) next to the original ImGT labels.

Each import format is an entry of `SOURCE_FORMATS` (`relabel.common.import_formats.ImportFormat`: a reader and a
summary) whose reader yields `LabelRow`s keyed by image file name; `import_source` validates every row against the
dataset (known images, classes in range, stated original labels equal to ImGT; see `relabel.sources.rows`) and writes
all or nothing.

Parsers are strict, because a wrong label set is worse than a refused file (an empty set excludes the image): a
row cut short, an unknown or missing column, a list that does not parse whole, an id that is not an integer, a
category or vote count outside its domain is one InputError naming the file, the line or record, and the value.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import delete
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.engine import session_scope
from db.enums import Category, SourceKind
from db.models import Dataset, Label, LabelSource, stored_id
from relabel.common.errors import ConflictError, InputError, brief, examples, unknown_name
from relabel.common.import_formats import ImportFormat
from relabel.common.tables import TableSchema, check_label_count, read_records
from relabel.common.textfiles import read_json
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import IMGT, dataset_vocabulary, get_dataset, image_index
from relabel.sources.bulk import matched_rows, replace_existing
from relabel.sources.row_store import store_labels
from relabel.sources.rows import (
    LabelRow,
    image_key,
    is_integer,
    resolve_labels,
    resolve_rows,
    val_key,
)


def parse_real(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """ReaL `real.json`: a list of 50,000 lists of class indices in val-number order; [] excludes the image."""
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of lists of class indices (ReaL real.json)")
    for i, labels in enumerate(data):
        if not isinstance(labels, list) or not all(is_integer(c) for c in labels):
            raise InputError(
                f"{path}: entry {i} is {brief(labels)}, expected a list of class indices (integers, not true/false)"
            )
        yield LabelRow(val_key(i + 1), labels, where=f"{path.name} entry {i}")


SHANKAR_CATEGORIES = ("A", "B", "M", "Z")  # the four the published file holds
SHANKAR_TABLE = TableSchema(
    "the Shankar multi-label CSV",
    required=(("id",), ("category",), ("proposed_labels",)),
    optional=(
        ("original_label",),
        ("manually_validated",),
        ("unclear_multi_labels",),
        ("wrong_multi_labels",),
        ("is_problematic",),
    ),
)
INDEX_LIST = re.compile(r"\s*[0-9]+(\s*,\s*[0-9]+)*\s*")


def index_list(row: dict[str, str], column: str, where: str, n_classes: int) -> list[int]:
    """Class indices of a Shankar list cell ("415, 813, 868"; empty: none), repeats dropped in order. A cell that
    is not a complete list of integers in 0..n_classes-1 ("415, 813," or "415, x") is an InputError, and so is one
    with more entries than there are classes."""
    text = row.get(column) or ""
    if not text.strip():
        return []
    if not INDEX_LIST.fullmatch(text):
        raise InputError(f"{where}: {column} {brief(text)} is not a list of class indices like '415, 813, 868'")
    tokens = [t.strip() for t in text.split(",")]
    check_label_count(len(tokens), n_classes, f"{where}: {column}")
    values = [int(t) if len(t) <= 9 else n_classes for t in tokens]  # int() refuses 4,300 digits: all too big
    if any(v >= n_classes for v in values):
        raise InputError(f"{where}: {column} {brief(text)} has a class outside 0..{n_classes - 1}")
    return list(dict.fromkeys(values))


def shankar_flag(row: dict[str, str], column: str, where: str) -> bool:
    """A True/False cell; an absent column reads False."""
    value = row.get(column)
    if value is None:
        return False
    if value.strip().casefold() not in {"true", "false"}:
        raise InputError(f"{where}: {column} is {brief(value)}, expected True or False")
    return value.strip().casefold() == "true"


def parse_shankar(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """Shankar et al. (2020) multi-label CSV: id, category (A/B/M/Z), proposed_labels, unclear and wrong labels.

    A row whose proposed labels contradict its category is refused (see `check_shankar_category`); its
    original_label must be the dataset's ImGT label (checked by `import_source`).
    """
    n = len(vocab)
    for where, row in read_records(path, SHANKAR_TABLE, fmt="csv"):
        key, category = row["id"].strip(), row["category"].strip()
        if not key:
            raise InputError(f"{where}: empty id; expected an image file name such as ILSVRC2012_val_00000001.JPEG")
        if category not in SHANKAR_CATEGORIES:
            raise InputError(f"{where}: category {brief(category)} is not one of {', '.join(SHANKAR_CATEGORIES)}")
        listed = index_list(row, "original_label", where, n)
        if len(listed) > 1:
            raise InputError(f"{where}: original_label {brief(row['original_label'])} is not one class index")
        original = listed[0] if listed else None
        classes = index_list(row, "proposed_labels", where, n)
        check_shankar_category(category, original, classes, where)
        extra = {
            "original_label": original,
            "unclear": index_list(row, "unclear_multi_labels", where, n),
            "wrong": index_list(row, "wrong_multi_labels", where, n),
            "validated": shankar_flag(row, "manually_validated", where),
            "problematic": shankar_flag(row, "is_problematic", where),
        }
        yield LabelRow(key, classes, category=category, extra=extra, where=where, original=original)


SHANKAR_MEANING = {  # category: (what it says, what proposed_labels must then be)
    "A": ("the original label is the one correct label", "the original label alone"),
    "B": ("one correct label, not the original", "one class other than the original"),
    "M": ("several correct labels", "two or more classes"),
    "Z": ("no correct label", "empty"),
}


def check_shankar_category(category: str, original: int | None, classes: list[int], where: str) -> None:
    """Refuse a row whose proposed labels (repeats dropped) contradict its category; see SHANKAR_MEANING. The
    published file holds no such row: one that does is damaged or from another release, and guessing which of
    the two columns is right would store a wrong label set."""
    ok = {
        "A": len(classes) == 1 and original in (None, classes[0]),
        "B": len(classes) == 1 and classes[0] != original,
        "M": len(classes) >= 2,
        "Z": not classes,
    }[category]
    if not ok:
        says, needs = SHANKAR_MEANING[category]
        stated = f", original_label {original}" if original is not None else ""
        raise InputError(
            f"{where}: category {category} ({says}) needs proposed_labels {needs}, got {classes}{stated}; the row "
            "contradicts itself"
        )


MTURK_VOTES = ("given", "guessed", "both", "neither")
MTURK_CATEGORY = {"given": Category.A, "guessed": Category.B, "both": Category.M, "neither": Category.Z}


MTURK_WORKERS = 5  # every record of the published file holds exactly five votes


def mturk_majority(votes: dict[str, int]) -> str | None:
    """The outcome that a strict majority of the votes chose (at least 3 of the 5 workers), or None."""
    total = sum(votes.get(k, 0) for k in MTURK_VOTES)
    best = max(MTURK_VOTES, key=lambda k: votes.get(k, 0))
    return best if total and votes.get(best, 0) * 2 > total else None


def mturk_field(rec: dict[str, Any], key: str, where: str, low: int, high: int | None = None) -> int:
    """The integer `rec[key]`, in low..high; anything else (missing, 1.9, "7", true, out of range) is refused."""
    if key not in rec:
        raise InputError(f"{where}: lacks {key!r}; a record has id, given_original_label, our_guessed_label, mturk")
    value = rec[key]
    if not is_integer(value) or value < low or (high is not None and value > high):
        span = f"{low}..{high}" if high is not None else f">= {low}"
        raise InputError(f"{where}: {key} is {brief(value, 40)}; expected an integer {span}")
    return int(value)


def mturk_votes(rec: dict[str, Any], where: str) -> dict[str, int]:
    """The workers' vote counts: an object with some of given/guessed/both/neither, each a count >= 0, adding up
    to the five votes each record holds (a missing outcome counts 0)."""
    votes = rec.get("mturk")
    if not isinstance(votes, dict):
        raise InputError(
            f"{where}: mturk is {brief(votes, 40)}; expected an object of vote counts: {', '.join(MTURK_VOTES)}"
        )
    unknown = sorted(set(votes) - set(MTURK_VOTES))
    if unknown:
        raise InputError(f"{where}: mturk has unknown key(s) {examples(unknown)}; expected {', '.join(MTURK_VOTES)}")
    counts = {k: mturk_field(votes, k, f"{where} mturk", 0) if k in votes else 0 for k in MTURK_VOTES}
    if sum(counts.values()) != MTURK_WORKERS:
        raise InputError(
            f"{where}: mturk votes add up to {sum(counts.values())} "
            f"({', '.join(f'{k} {v}' for k, v in counts.items())}); each record holds the votes of {MTURK_WORKERS} "
            "workers"
        )
    return counts


def parse_mturk(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """cleanlab's `mturk_label_errors.json`: given/guessed labels and 5 workers' votes per candidate error.

    Labels follow the strict majority (3 of 5): given -> [given] (A), guessed -> [guessed] (B), both ->
    [given, guessed] (M), neither -> [] (Z), no majority -> [] (X). Certainty is the share of votes that accept
    each label. A record whose votes do not add up to 5, or whose guessed label is its given one, is refused;
    the given label must be the dataset's ImGT label (checked by `import_source`).
    """
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(f"{path}: expected a JSON list of label-error records")
    top = len(vocab) - 1
    for i, rec in enumerate(data):
        where = f"{path.name} record {i}"
        if not isinstance(rec, dict):
            raise InputError(f"{where}: is {brief(rec, 40)}; expected an object with id, labels and mturk votes")
        number = mturk_field(rec, "id", where, 1)
        given = mturk_field(rec, "given_original_label", where, 0, top)
        guessed = mturk_field(rec, "our_guessed_label", where, 0, top)
        if guessed == given:
            raise InputError(
                f"{where}: given_original_label and our_guessed_label are both {given}; a candidate label error "
                "proposes a class other than the given one"
            )
        counts = mturk_votes(rec, where)
        n = MTURK_WORKERS
        outcome = mturk_majority(counts)
        classes = {"given": [given], "guessed": [guessed], "both": [given, guessed]}.get(outcome or "", [])
        share = {given: (counts["given"] + counts["both"]) / n, guessed: (counts["guessed"] + counts["both"]) / n}
        yield LabelRow(
            val_key(number),
            classes,
            certainty=[round(share[c], 4) for c in classes],
            category=(MTURK_CATEGORY[outcome] if outcome else Category.X).value,
            extra={"votes": counts, "given": given, "guessed": guessed},
            where=where,
            original=given,
        )


# A snapshot export (`relabel snapshot export --format csv|jsonl`) reads back as a label table: its wnids, names
# and origin columns are known and ignored (labels is what counts).
LABEL_TABLE = TableSchema(
    "a label table",
    required=(("image",), ("labels", "label")),
    optional=(("category",), ("wnids",), ("names",), ("origin",)),
)


def parse_csv(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """Generic CSV: image, label or labels (names, wnids or indices; '|' or ';' between several)."""
    for where, row in read_records(path, LABEL_TABLE, fmt="csv"):
        yield _table_row(row, vocab, where)


def parse_jsonl(path: Path, vocab: Vocabulary) -> Iterable[LabelRow]:
    """Generic JSON Lines: {"image": ..., "labels": [...]} per line; "labels": [] excludes the image."""
    for where, row in read_records(path, LABEL_TABLE, fmt="jsonl"):
        yield _table_row(row, vocab, where)


def _table_row(row: dict[str, Any], vocab: Vocabulary, where: str) -> LabelRow:
    key = image_key(row, where)
    classes = resolve_labels(row.get("labels", row.get("label")), vocab, where)
    category = row.get("category")
    if category is not None and not isinstance(category, str):
        raise InputError(f"{where}: category is {brief(category, 40)}; expected text")
    return LabelRow(key, classes, category=category or None, where=where)


LabelReader = Callable[[Path, Vocabulary], Iterable[LabelRow]]
SOURCE_FORMATS: dict[str, ImportFormat[LabelReader]] = {
    "real": ImportFormat(parse_real, "ReaL's real.json: a list of class indices per val image, in val order"),
    "shankar": ImportFormat(parse_shankar, "Shankar et al.'s multi-label CSV: categories A/B/M/Z, proposed labels"),
    "mturk": ImportFormat(parse_mturk, "cleanlab's mturk_label_errors.json: five votes, given/guessed/both/neither"),
    "csv": ImportFormat(parse_csv, "a CSV of image,labels ('|' or ';' between classes; optional category)"),
    "jsonl": ImportFormat(parse_jsonl, "JSON Lines of image, labels (a list; optional category)"),
}


def check_stated_originals(session: Session, dataset: Dataset, rows: list[LabelRow], ids: list[int], what: str) -> None:
    """Refuse a file whose rows state an image's original label (Shankar's original_label, MTurk's given label)
    other than the dataset's ImGT label of that image, counting every such row.

    Such a file was made for another dataset (or another version of its labels): its relabeling answers a
    question about different labels, so storing it beside this ImGT would be wrong. Images without an ImGT label
    are not checked.
    """
    stated = [(r, image_id) for r, image_id in zip(rows, ids) if image_id >= 0 and r.original is not None]
    if not stated:
        return
    imgt = dict(
        session.exec(
            select(col(Label.image_id), col(Label.classes))
            .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
            .where(col(LabelSource.dataset_id) == dataset.id, col(LabelSource.name) == IMGT)
        ).all()
    )
    bad = [
        f"{r.where}: {r.key} states {r.original}, ImGT is {imgt[image_id]}"
        for r, image_id in stated
        if image_id in imgt and r.original not in imgt[image_id]
    ]
    if bad:
        raise InputError(
            f"{what}: {len(bad)} row(s) state an original label other than the dataset's ImGT label: "
            f"{examples(bad)}; the file belongs to another dataset or label version; nothing written"
        )


@dataclass
class SourceReport:
    source: str
    written: int
    skipped_unknown: int
    categories: dict[str, int]


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
        assert ds.id is not None  # a stored dataset
        vocab = dataset_vocabulary(s, ds)
        rows = list(SOURCE_FORMATS[fmt].read(path, vocab))
        ids, skipped = resolve_rows(rows, image_index(s, ds), len(vocab), skip_unknown=skip_unknown, what=str(path))
        check_stated_originals(s, ds, rows, ids, str(path))
        old = s.exec(
            select(LabelSource).where(col(LabelSource.dataset_id) == ds.id, col(LabelSource.name) == name)
        ).first()
        if old is not None:
            what = f"dataset {ds.name!r} already has a label source {name!r}"
            replace_existing(s, old, delete(Label).where(col(Label.source_id) == old.id), what, replace)
        source = LabelSource(
            dataset_id=ds.id,
            name=name,
            kind=SourceKind.prior,
            format=fmt,
            origin=str(path.resolve()),
            sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        )
        s.add(source)
        s.flush()
        matched = list(matched_rows(rows, ids, path.name))
        source.n_labels = store_labels(s, stored_id(source), matched)
    categories = Counter(r.category for r, _ in matched if r.category)
    return SourceReport(name, len(matched), skipped, dict(categories))
