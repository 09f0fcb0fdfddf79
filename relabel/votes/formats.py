"""Readers of vote files: each turns one file into `ParsedVotes`, columns of (image key, class, worker, answer).

Formats (`VOTE_FORMATS`, the only place that knows their names; each a `relabel.common.import_formats.ImportFormat`):

* ``real-raters``: ReaL's raw rater answers as published (`real_raters.npz`: `tensor` raters x pairs x 3 one-hot
  no/maybe/yes, `info` (file name, class index) per pair, `ids` rater ids); an all-zero answer is no vote. Each
  member's .npy header and inflated size are checked before it is read (`relabel.common.arrays.read_npz`); the tensor is
  inflated by zlib-ng a megabyte at a time, keeping its non-zero entries (`relabel.votes.rater_file`).
* ``mturk``: cleanlab's `mturk_label_errors.json`; each record's five votes (given / guessed / both / neither)
  become five anonymous ballots, each a yes or no on the given and on the guessed class.
* ``long``: a CSV or JSON Lines table, one row per answer (worker, image, label, answer yes/no/maybe), or one row
  per worker and image with a `labels` set (yes to those classes, no to the other classes any worker of the file
  named on that image). An image is a path, file name, stem or ImageNet val number; a label an index, wnid or name.

Readers are strict: a cut, malformed or out-of-domain record is one InputError naming the file, the record and
the value. Matching images and refusing duplicates is `relabel.votes.importing`'s job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from relabel.common.errors import InputError, brief
from relabel.common.import_formats import ImportFormat
from relabel.common.tables import TableSchema, read_records
from relabel.common.vocabulary import Vocabulary
from relabel.sources.labels import MTURK_VOTES, parse_mturk
from relabel.sources.rows import LabelRow, is_integer, resolve_labels, val_key
from relabel.votes.aggregation import ANSWERS, NO, YES
from relabel.votes.rater_file import RaterArrays, read_rater_file


@dataclass
class ParsedVotes:
    """The answers of one file, one entry per answer: `key_of` (N,) indexes `keys` (image keys), `classes` (N,)
    vocabulary indices, `worker_of` (N,) indexes `worker_names`, `answers` (N,) codes of `ANSWERS`.
    `where(i)` names the record of answer i; `originals` are rows stating an image's original label (MTurk's
    given label), checked against ImGT."""

    keys: list[str]
    key_of: np.ndarray
    classes: np.ndarray
    worker_names: list[str]
    worker_of: np.ndarray
    answers: np.ndarray
    where: Callable[[int], str]
    workers_identified: bool = True
    originals: list[LabelRow] | None = None

    def __len__(self) -> int:
        return len(self.answers)


def _check_rater_shapes(path: Path, raters: RaterArrays) -> None:
    shape, info, ids = raters.shape, raters.info, raters.ids
    if len(shape) != 3 or shape[2] != 3 or raters.dtype.kind not in "iuf":
        raise InputError(f"{path}: tensor is {raters.dtype} {shape}; expected raters x pairs x 3 numbers")
    if info.shape != (shape[1], 2) or info.dtype.kind != "U":
        raise InputError(
            f"{path}: info is {info.dtype} {info.shape}; expected ({shape[1]}, 2) (file name, class) strings"
        )
    if ids.shape != (shape[0],):
        raise InputError(f"{path}: ids has shape {ids.shape}; expected one id per rater ({shape[0]})")
    if len(set(ids.tolist())) != len(ids):
        raise InputError(f"{path}: ids repeat a rater id; each of the {len(ids)} raters needs its own")


RATER_FILE = re.compile(r"(ILSVRC2012_val_(\d{8}))(\.JPEG)?")


def parse_real_raters(path: Path, vocab: Vocabulary) -> ParsedVotes:
    """ReaL's `real_raters.npz` (see the module docstring): one vote per rater and pair whose answer is one-hot."""
    raters = read_rater_file(path)
    _check_rater_shapes(path, raters)
    info, ids = raters.info, raters.ids
    rater, pair, answers = one_hot_answers(path, raters)
    keys, key_of = distinct_codes(info[:, 0])
    labels, label_of = distinct_codes(info[:, 1])
    classes = np.array([_rater_class(t, path, info[:, 1], vocab) for t in labels], dtype=np.int64)
    return ParsedVotes(
        keys=[_rater_key(k) for k in keys],
        key_of=key_of[pair],
        classes=classes[label_of[pair]],
        worker_names=[str(i) for i in ids.tolist()],
        worker_of=rater,
        answers=answers,
        where=lambda i: f"{path.name} pair {pair[i]} rater {ids[rater[i]]}",
    )


def distinct_codes(column: np.ndarray) -> tuple[list[str], np.ndarray]:
    """The distinct strings of `column` (N,), sorted, and (N,) the index of each entry among them: what
    `np.unique(column, return_inverse=True)` answers, through a dict, which sorts only the distinct strings (24,889
    file names among ReaL's 184,962 pairs): both columns of ReaL's info in 0.13 CPU s, against numpy's 0.28."""
    values = column.tolist()
    distinct = sorted(set(values))
    code = {value: i for i, value in enumerate(distinct)}
    return distinct, np.fromiter(map(code.__getitem__, values), dtype=np.int64, count=len(values))


def one_hot_answers(path: Path, raters: RaterArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rater, pair, answer code) of each vote of the raters x pairs x 3 tensor, pair-major (a pair's votes
    together, its raters in file order): the one 1 of each answer that is not all zero. An answer holding anything
    but 0 and 1, or more than one 1, is an InputError naming the first and counting them.

    Only the non-zero entries are looked at (2 % of ReaL's 47 million): an answer is refused exactly when one of
    its non-zero entries is not 1 or it has more than one, which is "a value outside 0/1, or a sum above 1"."""
    pairs = raters.shape[1]
    hot, values = raters.nonzero()  # C order: rater, pair, answer
    cell = hot // 3  # rater * pairs + pair, ascending
    alone = np.ones(len(cell), dtype=bool)
    alone[1:] = cell[1:] != cell[:-1]
    alone[:-1] &= cell[:-1] != cell[1:]
    refused = np.unique(cell[(values != 1) | ~alone])
    if len(refused):
        r, p = divmod(int(refused[0]), pairs)
        raise InputError(
            f"{path.name} pair {p} rater {raters.ids[r]}: answer {raters.answer(path, r, p)} is not one-hot "
            f"no/maybe/yes ({len(refused)} such answers)"
        )
    order = np.argsort(cell % pairs, kind="stable")  # by pair; raters stay in order within one
    rater, pair = np.divmod(cell[order], pairs)
    return rater, pair, hot[order] % 3


def _rater_key(name: str) -> str:
    """The image key of a ReaL file name: its ILSVRC2012_val_ stem, found the way ReaL's real.json is matched."""
    m = RATER_FILE.fullmatch(name.strip())
    return val_key(int(m.group(2))) if m else name


def _rater_class(text: str, path: Path, column: np.ndarray, vocab: Vocabulary) -> int:
    if not text.isascii() or not text.strip().isdigit() or int(text) >= len(vocab):
        pair = int(np.flatnonzero(column == text)[0])
        raise InputError(f"{path.name} pair {pair}: class {brief(text, 40)} is not a class index 0..{len(vocab) - 1}")
    return int(text)


MTURK_BALLOTS = {  # a vote's answer on (the given class, the guessed class)
    "given": (YES, NO),
    "guessed": (NO, YES),
    "both": (YES, YES),
    "neither": (NO, NO),
}


def parse_mturk_votes(path: Path, vocab: Vocabulary) -> ParsedVotes:
    """`mturk_label_errors.json` (checked as `relabel labels import --format mturk` checks it): each record's five
    votes as ballots "1".."5" on its image, in the order given, guessed, both, neither."""
    rows = list(parse_mturk(path, vocab))
    key_of, classes, worker_of, answers, where = [], [], [], [], []
    for k, row in enumerate(rows):
        extra: dict[str, Any] = row.extra or {}
        ballot = 0
        for outcome in MTURK_VOTES:
            for _ in range(extra["votes"][outcome]):
                for cls, answer in zip((extra["given"], extra["guessed"]), MTURK_BALLOTS[outcome]):
                    key_of.append(k)
                    classes.append(cls)
                    worker_of.append(ballot)
                    answers.append(answer)
                    where.append(row.where)
                ballot += 1
    return ParsedVotes(
        keys=[r.key for r in rows],
        key_of=np.array(key_of, dtype=np.int64),
        classes=np.array(classes, dtype=np.int64),
        worker_names=[str(b + 1) for b in range(max(worker_of, default=-1) + 1)],
        worker_of=np.array(worker_of, dtype=np.int64),
        answers=np.array(answers, dtype=np.int64),
        where=where.__getitem__,
        workers_identified=False,
        originals=rows,
    )


LONG_TABLE = TableSchema(
    "a vote table",
    required=(("worker",), ("image",)),
    optional=(("label", "class"), ("answer",), ("labels",)),
)
ANSWER_WORDS = {word: code for code, word in enumerate(ANSWERS)}


def parse_long(path: Path, vocab: Vocabulary) -> ParsedVotes:
    """A long CSV or JSONL vote table (see the module docstring); the file extension says which."""
    out = _LongTable()
    shape = None
    for where, row in read_records(path, LONG_TABLE):
        has = ("label" in row or "class" in row, "answer" in row, "labels" in row)
        if shape is None:
            if has not in ((True, True, False), (False, False, True)):
                raise InputError(
                    f"{where}: a vote table has worker, image and either label and answer, or labels; found "
                    f"{', '.join(row)}"
                )
            shape = has
        elif has != shape:
            raise InputError(f"{where}: columns {', '.join(row)} differ from the first record's")
        worker, key = _text(row, "worker", where), _image(row, where)
        if shape[2]:
            out.add_set(worker, key, resolve_labels(row["labels"], vocab, where), where)
        else:
            classes = resolve_labels(row.get("label", row.get("class")), vocab, where)
            if len(classes) != 1:
                raise InputError(f"{where}: label names {len(classes)} classes; a row answers about one class")
            out.add(worker, key, classes[0], _answer(row["answer"], where), where)
    return out.parsed(path)


def _text(row: dict[str, Any], column: str, where: str) -> str:
    value = row.get(column)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{where}: {column} is {brief(value, 40)}; expected a non-empty name")
    return value.strip()


def _image(row: dict[str, Any], where: str) -> str:
    """An image key; an ImageNet validation number (41207, as an integer or digits) names ILSVRC2012_val_00041207."""
    value = row.get("image")
    if is_integer(value) or (isinstance(value, str) and value.strip().isascii() and value.strip().isdigit()):
        number = int(value) if is_integer(value) or len(str(value).strip()) <= 9 else 0
        if not 1 <= number <= 99_999_999:
            raise InputError(f"{where}: image number {brief(value, 40)} is outside 1..99999999")
        return val_key(number)
    return _text(row, "image", where)


def _answer(value: object, where: str) -> int:
    word = value.strip().casefold() if isinstance(value, str) else None
    if word not in ANSWER_WORDS:
        raise InputError(f"{where}: answer {brief(value, 40)} is not one of {', '.join(ANSWERS)}")
    return ANSWER_WORDS[word]


class _LongTable:
    """Rows of a long table gathered into `ParsedVotes`; label sets become answers once every row is read."""

    def __init__(self) -> None:
        self.keys: dict[str, int] = {}
        self.workers: dict[str, int] = {}
        self.rows: list[tuple[int, int, int, int]] = []  # key, class, worker, answer
        self.where: list[str] = []
        self.sets: list[tuple[int, set[int], int, str]] = []  # key, classes, worker, where
        self.named: dict[int, set[int]] = {}  # key -> every class named on it

    def _ids(self, worker: str, key: str) -> tuple[int, int]:
        return self.keys.setdefault(key, len(self.keys)), self.workers.setdefault(worker, len(self.workers))

    def add(self, worker: str, key: str, cls: int, answer: int, where: str) -> None:
        k, w = self._ids(worker, key)
        self.add_index(k, cls, w, answer, where)

    def add_set(self, worker: str, key: str, classes: list[int], where: str) -> None:
        k, w = self._ids(worker, key)
        self.sets.append((k, set(classes), w, where))
        self.named.setdefault(k, set()).update(classes)

    def parsed(self, path: Path) -> ParsedVotes:
        for k, picked, w, where in self.sets:
            if not self.named[k]:
                raise InputError(
                    f"{where}: no worker names a class for image {list(self.keys)[k]!r}; nothing to vote on"
                )
            for c in sorted(self.named[k]):
                self.add_index(k, c, w, YES if c in picked else NO, where)
        if not self.rows:
            raise InputError(f"{path}: holds no votes")
        key_of, classes, worker_of, answers = (np.array(col, dtype=np.int64) for col in zip(*self.rows))
        return ParsedVotes(
            list(self.keys), key_of, classes, list(self.workers), worker_of, answers, self.where.__getitem__
        )

    def add_index(self, k: int, cls: int, w: int, answer: int, where: str) -> None:
        self.rows.append((k, cls, w, answer))
        self.where.append(where)


VoteReader = Callable[[Path, Vocabulary], ParsedVotes]
VOTE_FORMATS: dict[str, ImportFormat[VoteReader]] = {
    "real-raters": ImportFormat(parse_real_raters, "ReaL's real_raters.npz: its raters' no/maybe/yes answers"),
    "mturk": ImportFormat(parse_mturk_votes, "cleanlab's mturk_label_errors.json: five anonymous ballots per image"),
    "long": ImportFormat(parse_long, "CSV/JSONL of worker,image,label,answer or worker,image,labels"),
}
