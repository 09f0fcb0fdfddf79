"""Class vocabularies: the built-in ImageNet-1k list and custom lists read from a file.

A class is addressed by its 0-based index, its wnid, its unique display name or an unambiguous synonym;
`Vocabulary.resolve` turns any of these into the index that the workspace stores. A number that is one class's
index and another class's name (digits listed 1..9, 0) is refused rather than read either way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from sqlmodel import Session, col, select

from db.models import VocabClass
from db.models import Vocabulary as VocabularyRow
from relabel.common.errors import InputError, brief, examples
from relabel.common.tables import TableSchema, read_records
from relabel.common.textfiles import read_json, read_lines

BUILTIN = {"imagenet-1k": "imagenet1k.json"}
INDEX = re.compile(r"-?[0-9]+")  # ASCII digits only: int() also reads "٣", and "²".isdigit() is True
MAX_REMEMBERED = 100_000  # resolved tokens a vocabulary keeps (see Vocabulary._resolved)


class UnknownClassError(InputError):
    """A token names no class of the vocabulary (as opposed to naming two): readers collect these per file."""


@dataclass(frozen=True)
class ClassInfo:
    index: int
    name: str
    wnid: str | None = None
    synonyms: tuple[str, ...] = ()
    gloss: str = ""


@dataclass
class Vocabulary:
    name: str
    classes: list[ClassInfo]
    _lookup: dict[str, list[int]] = field(default_factory=dict, repr=False)
    _names: dict[str, int] = field(default_factory=dict, repr=False)
    # Tokens resolved before: a file names the same few thousand classes 250,000 times. Only answers are kept
    # (a refused token is refused anew, with its message), and at most MAX_REMEMBERED of them.
    _resolved: dict[str | int, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for i, c in enumerate(self.classes):
            if c.index != i:
                raise InputError(f"vocabulary {self.name!r}: class {c.name!r} has index {c.index}, expected {i}")
        # Counter, not list.count in a loop: 100,000 classes must not take minutes to refuse.
        dup = sorted(n for n, k in Counter(c.name.casefold() for c in self.classes).items() if k > 1)
        if dup:
            raise InputError(f"vocabulary {self.name!r}: display names must be unique; repeated: {examples(dup)}")
        self._names = {c.name.casefold(): c.index for c in self.classes}
        for c in self.classes:
            keys = {c.name.casefold(), *(s.casefold() for s in c.synonyms)}
            if c.wnid:
                keys.add(c.wnid.casefold())
            for k in keys:
                self._lookup.setdefault(k, []).append(c.index)

    def __len__(self) -> int:
        return len(self.classes)

    @property
    def content_hash(self) -> str:
        canon = [[c.index, c.wnid, c.name, list(c.synonyms)] for c in self.classes]
        return hashlib.sha256(json.dumps(canon, ensure_ascii=False).encode()).hexdigest()

    def resolve(self, token: str | int) -> int:
        """Index of the class named by `token`: a 0-based index, a wnid, a display name or an unambiguous synonym.

        A number that is a valid index and also the name (or synonym) of another class, as in a digits vocabulary
        listed 1..9, 0, is refused naming both readings: either guess would mislabel silently. When both readings
        give the same class, or the number is no valid index, the one reading that exists is used.
        """
        if type(token) is not str and type(token) is not int:  # True == 1 as a dict key, but names no class 1
            return self._resolve(token)
        index = self._resolved.get(token)
        if index is None:
            index = self._resolve(token)
            if len(self._resolved) >= MAX_REMEMBERED:
                self._resolved.clear()
            self._resolved[token] = index
        return index

    def _resolve(self, token: str | int) -> int:
        text = str(token).strip()
        by_name = self._name_hits(text)
        if not INDEX.fullmatch(text):
            return self._one_named(token, by_name)
        index = int(text) if len(text) <= 18 else -1  # int() refuses over 4,300 digits; all are out of range
        in_range = 0 <= index < len(self.classes)
        if in_range and (not by_name or by_name == [index]):
            return index
        if not in_range and by_name:
            return self._one_named(token, by_name)
        if not in_range:
            shown = text if len(text) <= 18 else f"{text[:12]}…({len(text):,} digits)"
            raise UnknownClassError(f"class index {shown} is out of range 0..{len(self.classes) - 1}")
        named = " or ".join(f"class {i} {self.classes[i].name!r}" for i in by_name)
        raise InputError(
            f"class {text!r} is ambiguous in vocabulary {self.name!r}: as an index it is class {index} "
            f"{self.classes[index].name!r}, as a name it is {named}; write a name that is not a number (the wnid, "
            "if the classes have one), or rename the classes so no name is another class's index (e.g. 'digit 0')"
        )

    def _name_hits(self, text: str) -> list[int]:
        """Classes whose display name is `text` (at most one), else those with it as wnid or synonym."""
        key = text.casefold()
        exact = self._names.get(key)
        return [exact] if exact is not None else self._lookup.get(key, [])

    def _one_named(self, token: str | int, hits: list[int]) -> int:
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise UnknownClassError(
                f"unknown class {brief(token)} in vocabulary {self.name!r} (use an index, wnid or name)"
            )
        options = ", ".join(f"{i} {self.classes[i].name!r}" for i in hits)
        raise InputError(f"class {brief(token)} is ambiguous in vocabulary {self.name!r}: {options}")

    def try_resolve(self, token: str | int) -> int | None:
        try:
            return self.resolve(token)
        except InputError:
            return None

    def describe(self, index: int) -> str:
        c = self.classes[index]
        return f"{c.name} ({c.wnid})" if c.wnid else c.name


@cache
def load_builtin(name: str = "imagenet-1k") -> Vocabulary:
    if name not in BUILTIN:
        raise InputError(f"unknown built-in vocabulary {name!r}; known: {', '.join(BUILTIN)}")
    text = resources.files("relabel.resources").joinpath(BUILTIN[name]).read_text(encoding="utf-8")
    return _from_json(name, json.loads(text), f"built-in vocabulary {name!r}")


CLASS_FIELDS = "a name, or an object with 'name' and optional 'wnid', 'synonyms' (a list of names), 'gloss'"


def _text_field(row: dict[str, Any], key: str, where: str) -> str | None:
    """The string `row[key]`, or None when absent or null; any other type is refused."""
    value = row.get(key)
    if value is not None and not isinstance(value, str):
        raise InputError(f"{where}: {key} is {brief(value, 40)}; a class is {CLASS_FIELDS}")
    return value


def _class_info(i: int, row: object, where: str) -> ClassInfo:
    """Class `i` from a JSON entry: a name or {"name", "wnid", "synonyms", "gloss"}; anything else is refused."""
    where = f"{where}: class {i}"
    if isinstance(row, str):
        row = {"name": row}
    if not isinstance(row, dict):
        raise InputError(f"{where} is {brief(row, 40)}; a class is {CLASS_FIELDS}")
    unknown = sorted(set(row) - {"index", "name", "wnid", "synonyms", "gloss"})
    if unknown:
        raise InputError(f"{where} has unknown field(s) {examples(unknown)}; a class is {CLASS_FIELDS}")
    if "index" in row and (row["index"] != i or isinstance(row["index"], bool)):
        raise InputError(f"{where} has index {brief(row['index'], 40)}; classes must be listed in index order")
    name = (_text_field(row, "name", where) or "").strip()
    if not name:
        raise InputError(f"{where} has no name; a class is {CLASS_FIELDS}")
    synonyms = row.get("synonyms") or [name]
    if not isinstance(synonyms, list) or not all(isinstance(x, str) and x.strip() for x in synonyms):
        raise InputError(f"{where}: synonyms is {brief(synonyms, 40)}; expected a list of names")
    wnid = _text_field(row, "wnid", where) or None
    return ClassInfo(i, name, wnid, tuple(synonyms), _text_field(row, "gloss", where) or "")


def _from_json(name: str, payload: object, where: str) -> Vocabulary:
    """A vocabulary from a JSON list of classes or {"classes": [...]}; `where` names the file in errors."""
    rows = payload.get("classes") if isinstance(payload, dict) else payload
    if not isinstance(rows, list):
        raise InputError(f"{where}: expected a JSON list of classes or {{'classes': [...]}}")
    if not rows:
        raise InputError(f"{where}: the list of classes is empty; a vocabulary has at least one class")
    try:
        return Vocabulary(name, [_class_info(i, row, where) for i, row in enumerate(rows)])
    except InputError as exc:
        if str(exc).startswith(where):
            raise
        raise InputError(f"{where}: {exc}") from None


VOCABULARY_TABLE = TableSchema(
    "a CSV vocabulary", required=(("name",),), optional=(("wnid",), ("synonyms",), ("gloss",))
)


def load_vocabulary_file(path: str | Path) -> Vocabulary:
    """Read a custom vocabulary: .json (list or {"classes": [...]}), .csv (name[,wnid,synonyms,gloss]) or .txt.

    In a .txt file each line is one class; commas separate synonyms and the first is the display name.
    The line (or row) order gives the class index.
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix == ".json":
        return _from_json(p.stem, read_json(p), str(p))
    if suffix == ".csv":
        rows = [row for _, row in read_records(p, VOCABULARY_TABLE, fmt="csv")]
        if not rows:
            raise InputError(f"{p}: has a header but no class rows; a CSV vocabulary has one class per row")
        return _from_json(p.stem, [_csv_class(r) for r in rows], str(p))
    classes = _txt_classes(p)
    if not classes:
        raise InputError(
            f"{p}: the file is empty (blank lines and '#' comments aside); a .txt vocabulary has one class per line: "
            "'name[, synonym, ...]'"
        )
    return _from_json(p.stem, classes, str(p))


def _txt_classes(path: Path) -> list[dict[str, Any]]:
    """One class per line (blank lines and '#' comments skipped): comma-separated synonyms, the first one shown."""
    classes = []
    for lineno, line in read_lines(path):
        if line.startswith("#"):
            continue
        synonyms = [s.strip() for s in line.split(",") if s.strip()]
        if not synonyms:
            raise InputError(f"{path}:{lineno}: {brief(line, 40)} names no class; a line is 'name[, synonym, ...]'")
        classes.append({"name": synonyms[0], "synonyms": synonyms})
    return classes


def _csv_class(row: dict[str, str]) -> dict[str, Any]:
    return {
        "name": row["name"],
        "wnid": row.get("wnid") or None,
        "synonyms": [s.strip() for s in (row.get("synonyms") or row["name"]).split(",") if s.strip()],
        "gloss": row.get("gloss") or "",
    }


def ensure_vocabulary(session: Session, vocab: Vocabulary) -> VocabularyRow:
    """The stored vocabulary with the same content, created if needed."""
    digest = vocab.content_hash
    row = session.exec(select(VocabularyRow).where(VocabularyRow.content_hash == digest)).first()
    if row is not None:
        return row
    name = vocab.name
    if session.exec(select(VocabularyRow).where(VocabularyRow.name == name)).first() is not None:
        name = f"{vocab.name}-{digest[:8]}"
    row = VocabularyRow(name=name, content_hash=digest, n_classes=len(vocab))
    session.add(row)
    session.flush()
    assert row.id is not None  # numbered by the flush
    session.add_all(
        VocabClass(
            vocabulary_id=row.id, index=c.index, wnid=c.wnid, name=c.name, synonyms=list(c.synonyms), gloss=c.gloss
        )
        for c in vocab.classes
    )
    session.flush()
    return row


def vocabulary_from_db(session: Session, vocabulary_id: int) -> Vocabulary:
    row = session.get(VocabularyRow, vocabulary_id)
    if row is None:
        raise InputError(f"vocabulary id {vocabulary_id} does not exist")
    if row.name in BUILTIN and load_builtin(row.name).content_hash == row.content_hash:
        return load_builtin(row.name)
    classes = session.exec(
        select(VocabClass).where(col(VocabClass.vocabulary_id) == vocabulary_id).order_by(col(VocabClass.index))
    ).all()
    return Vocabulary(row.name, [ClassInfo(c.index, c.name, c.wnid, tuple(c.synonyms), c.gloss) for c in classes])
