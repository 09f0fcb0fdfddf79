"""Class vocabularies: the built-in ImageNet-1k list and custom lists read from a file.

A class is addressed by its 0-based index, its wnid, its unique display name or an unambiguous synonym;
`Vocabulary.resolve` turns any of these into the index that the workspace stores.
"""

from __future__ import annotations

import csv
import hashlib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path

from sqlmodel import Session, select

from db.models import VocabClass
from db.models import Vocabulary as VocabularyRow
from relabel.errors import InputError, examples

BUILTIN = {"imagenet-1k": "imagenet1k.json"}


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

    def __post_init__(self) -> None:
        for i, c in enumerate(self.classes):
            if c.index != i:
                raise InputError(f"vocabulary {self.name!r}: class {c.name!r} has index {c.index}, expected {i}")
        names = [c.name.casefold() for c in self.classes]
        dup = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) != len(names) else []
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
        """Index of the class named by `token` (index, wnid, display name or unambiguous synonym)."""
        if isinstance(token, int) or (isinstance(token, str) and token.strip().lstrip("-").isdigit()):
            index = int(token)
            if not 0 <= index < len(self.classes):
                raise InputError(f"class index {index} is out of range 0..{len(self.classes) - 1}")
            return index
        key = token.strip().casefold()
        exact = self._names.get(key)
        hits = [exact] if exact is not None else self._lookup.get(key, [])
        if len(hits) == 1:
            return hits[0]
        if not hits:
            raise InputError(f"unknown class {token!r} in vocabulary {self.name!r} (use an index, wnid or name)")
        options = ", ".join(f"{i} {self.classes[i].name!r}" for i in hits)
        raise InputError(f"class {token!r} is ambiguous in vocabulary {self.name!r}: {options}")

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
    return _from_json(name, json.loads(text))


def _from_json(name: str, payload: object) -> Vocabulary:
    rows = payload.get("classes") if isinstance(payload, dict) else payload
    if not isinstance(rows, list) or not rows:
        raise InputError(f"vocabulary {name!r}: expected a JSON list of classes or {{'classes': [...]}}")
    classes = []
    for i, row in enumerate(rows):
        if isinstance(row, str):
            row = {"name": row}
        if not isinstance(row, dict) or not str(row.get("name", "")).strip():
            raise InputError(f"vocabulary {name!r}: class {i} has no name")
        synonyms = row.get("synonyms") or [row["name"]]
        classes.append(
            ClassInfo(i, str(row["name"]).strip(), row.get("wnid") or None, tuple(synonyms), row.get("gloss", ""))
        )
    return Vocabulary(name, classes)


def load_vocabulary_file(path: str | Path) -> Vocabulary:
    """Read a custom vocabulary: .json (list or {"classes": [...]}), .csv (name[,wnid,synonyms,gloss]) or .txt.

    In a .txt file each line is one class; commas separate synonyms and the first is the display name.
    The line (or row) order gives the class index.
    """
    p = Path(path)
    name = p.stem
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"vocabulary file {str(p)!r}: cannot read ({exc})") from exc
    if p.suffix.lower() == ".json":
        try:
            return _from_json(name, json.loads(text))
        except json.JSONDecodeError as exc:
            raise InputError(f"vocabulary file {str(p)!r}: invalid JSON at line {exc.lineno}") from exc
    if p.suffix.lower() == ".csv":
        rows = list(csv.DictReader(text.splitlines()))
        if not rows or "name" not in rows[0]:
            raise InputError(f"vocabulary file {str(p)!r}: a CSV vocabulary needs a 'name' column")
        return _from_json(
            name,
            [
                {
                    "name": r["name"],
                    "wnid": r.get("wnid"),
                    "synonyms": [s.strip() for s in (r.get("synonyms") or r["name"]).split(",") if s.strip()],
                    "gloss": r.get("gloss") or "",
                }
                for r in rows
            ],
        )
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    rows_txt = [[s.strip() for s in ln.split(",") if s.strip()] for ln in lines]
    return _from_json(name, [{"name": syn[0], "synonyms": syn} for syn in rows_txt])


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
        select(VocabClass).where(VocabClass.vocabulary_id == vocabulary_id).order_by(VocabClass.index)  # type: ignore[arg-type]
    ).all()
    return Vocabulary(row.name, [ClassInfo(c.index, c.name, c.wnid, tuple(c.synonyms), c.gloss) for c in classes])
