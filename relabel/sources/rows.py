"""Rows of an imported label or prediction file, matched to the dataset's images: shared by both importers.

A parser yields `LabelRow`s keyed by image path, file name or stem; `resolve_rows` finds each row's image and
checks its label set, so a label source and a model run refuse the same mistakes with the same one-line errors.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, TypeGuard

from db.enums import PredictionStatus
from relabel.common.errors import InputError, brief, examples
from relabel.common.tables import check_label_count, label_tokens
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import ImageIndex


@dataclass
class LabelRow:
    key: str  # image path, file name or stem
    classes: list[int]
    certainty: list[float] | None = None  # one per class: a prior's certainty, a prediction's score
    category: str | None = None
    extra: dict[str, Any] | None = None
    where: str = ""  # file:line, for error messages
    original: int | None = None  # the image's original label as the file states it; checked against ImGT


@dataclass
class PredictionRow(LabelRow):
    """A row of a prediction file: its top classes (`certainty`: their scores), and whether the model answered."""

    status: PredictionStatus = PredictionStatus.ok
    reason: str = ""  # why a prediction failed (status error)
    raw_output: str = ""


VAL_PREFIX = "ILSVRC2012_val_"
VAL_KEY = re.compile(rf"{VAL_PREFIX}\d{{8}}")  # the stem `val_key` writes


def val_key(number: int) -> str:
    """File stem of ImageNet validation image `number` (1-based)."""
    return f"{VAL_PREFIX}{number:08d}"


def is_integer(value: object) -> TypeGuard[int]:
    """True for a JSON integer; not for true/false (Python bools are ints), 1.0 or "1"."""
    return isinstance(value, int) and not isinstance(value, bool)


def image_key(row: dict[str, Any], where: str, column: str = "image") -> str:
    """The image named by a table row: a non-empty string (a path, file name or stem)."""
    key = row.get(column)
    if not isinstance(key, str) or not key.strip():
        raise InputError(f"{where}: {column} is {brief(key, 40)}; expected an image path, file name or stem")
    return key.strip()


def resolve_labels(value: object, vocab: Vocabulary, where: str) -> list[int]:
    """Class indices of a label cell (see `label_tokens`); an unknown or ambiguous class names the row."""
    if type(value) is list and len(value) <= len(vocab) and all(type(x) is int for x in value):
        try:  # a JSON list of indices: the tokens label_tokens would give, as numbers (`Vocabulary.resolve`)
            return [vocab.resolve(x) for x in value]
        except InputError:
            pass  # said below, as for any other cell
    tokens = label_tokens(value, where)
    check_label_count(len(tokens), len(vocab), where)
    try:
        return [vocab.resolve(t) for t in tokens]
    except InputError as exc:
        if str(exc).startswith(where):
            raise
        raise InputError(f"{where}: {exc}") from None


def distinct_classes(row: LabelRow, n_classes: int) -> None:
    """Drop repeated classes of `row` in place, keeping the first (and its certainty); a set with more entries
    than the vocabulary has classes (43,000 copies of one class) is refused rather than shrunk."""
    check_label_count(len(row.classes), n_classes, row.where)
    if len(set(row.classes)) == len(row.classes):
        return
    first: dict[int, int] = {}  # class -> position of its first mention, in order
    for i, c in enumerate(row.classes):
        first.setdefault(c, i)
    keep = list(first.values())
    if len(keep) == len(row.classes):
        return
    if row.certainty is not None and len(row.certainty) == len(row.classes):
        row.certainty = [row.certainty[i] for i in keep]
    row.classes = [row.classes[i] for i in keep]


def resolve_rows(
    rows: Sequence[LabelRow], index: ImageIndex, n_classes: int, *, skip_unknown: bool, what: str
) -> tuple[list[int], int]:
    """Image ids for `rows` (-1 for an unknown image) and the number of unknown images; label sets lose repeats.

    Raises one InputError: naming the keys that match two or more images (even with `skip_unknown`: those images
    are in the dataset); else why no row matches an image at all (even with `skip_unknown`: an import of nothing
    is never what was meant, and a file keyed for another dataset is the usual cause); else one that counts every
    bad class; else, without `skip_unknown`, one that counts the unknown images.
    """
    for r in rows:
        # the usual row (a set of distinct classes) passes at the cost of one set; the rest `distinct_classes` mends
        if len(r.classes) > n_classes or len(set(r.classes)) != len(r.classes):
            distinct_classes(r, n_classes)
    found = [index.lookup(r.key) for r in rows]
    unresolved = [i for i, image_id in enumerate(found) if image_id is None]
    ambiguous = []
    if unresolved:
        candidates = KeyCandidates(index)
        for i in unresolved:
            paths = candidates.paths(rows[i].key)
            if len(paths) == 1:  # a shared file name, told apart by the key's folders
                found[i] = index.ids_by_path[paths[0]]
            elif paths:
                ambiguous.append(f"{rows[i].where}: {rows[i].key!r} matches {examples(paths, 4)}")
    if ambiguous:
        raise InputError(
            f"{what}: {len(ambiguous)} row key(s) are ambiguous, each matching several images: "
            f"{'; '.join(ambiguous[:3])}{f'; … ({len(ambiguous) - 3} more)' if len(ambiguous) > 3 else ''}; "
            "write the image's relative path instead; nothing written"
        )
    unknown = [r.key for r, image_id in zip(rows, found) if image_id is None]
    if len(unknown) == len(rows):
        raise InputError(no_match_message(rows, index, what))
    bad_class = [f"{r.where}: {r.classes}" for r in rows if r.classes and not _within(r.classes, n_classes)]
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
    return [-1 if image_id is None else image_id for image_id in found], len(unknown)


def _within(classes: list[int], n_classes: int) -> bool:
    """Every class index of a non-empty list (ints, as the parsers give them) is in 0..n_classes - 1."""
    return min(classes) >= 0 and max(classes) < n_classes


class KeyCandidates:
    """Every image a key may mean by file name or stem, folders permitting; `ImageIndex.lookup` answers only
    when exactly one image has that name, so this tells "ambiguous" apart from "not in the dataset"."""

    def __init__(self, index: ImageIndex) -> None:
        self.by_alias: dict[str, list[str]] = {}
        for path in index.ids_by_path:
            pure = PurePosixPath(path)
            for alias in dict.fromkeys((pure.name, pure.stem)):
                self.by_alias.setdefault(alias, []).append(path)

    def paths(self, key: str) -> list[str]:
        pure = PurePosixPath(key.strip().replace("\\", "/"))
        folders = pure.parent.parts
        for alias in (pure.name, pure.stem):  # the file name first, as `ImageIndex.lookup` tries them
            hits = sorted(
                p for p in self.by_alias.get(alias, []) if _same_folders(folders, PurePosixPath(p).parent.parts)
            )
            if hits:
                return hits
        return []


def _same_folders(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """True when one folder path ends with the other, as `ImageIndex.lookup` compares them."""
    n = min(len(a), len(b))
    return n == 0 or a[-n:] == b[-n:]


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
