"""Look-ups shared by the services: datasets, label sources, runs, and image keys."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePosixPath

from sqlmodel import Session, col, select

from db.models import Dataset, Image, LabelSource
from relabel.common.errors import NotFoundError, unknown_name
from relabel.common.vocabulary import Vocabulary, vocabulary_from_db

IMGT = "imgt"  # the name of every dataset's original-label source


def get_dataset(session: Session, name: str | None) -> Dataset:
    """The dataset called `name`; with None, the only dataset of the workspace."""
    if name is None:
        rows = session.exec(select(Dataset)).all()
        if len(rows) == 1:
            return rows[0]
        if not rows:
            raise NotFoundError("the workspace has no dataset yet; run `relabel ingest` first")
        raise NotFoundError(
            f"the workspace has {len(rows)} datasets; pass --dataset ({', '.join(d.name for d in rows)})"
        )
    row = session.exec(select(Dataset).where(col(Dataset.name) == name)).first()
    if row is None:
        raise unknown_name("dataset", name, session.exec(select(col(Dataset.name))).all())
    return row


def dataset_vocabulary(session: Session, dataset: Dataset) -> Vocabulary:
    return vocabulary_from_db(session, dataset.vocabulary_id)


def get_source(session: Session, dataset: Dataset, name: str) -> LabelSource:
    row = session.exec(
        select(LabelSource).where(col(LabelSource.dataset_id) == dataset.id, col(LabelSource.name) == name)
    ).first()
    if row is None:
        known = session.exec(select(col(LabelSource.name)).where(col(LabelSource.dataset_id) == dataset.id)).all()
        raise unknown_name(f"label source of dataset {dataset.name!r}", name, known)
    return row


@dataclass
class ImageIndex:
    """Finds an image id from the keys files use: the relative path, the file name, or the file stem."""

    ids_by_path: dict[str, int]
    _by_alias: dict[str, int | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._paths = {image_id: path for path, image_id in self.ids_by_path.items()}
        for path, image_id in self.ids_by_path.items():
            for alias in set(name_and_stem(path)):
                # None marks an alias shared by two images: it must not silently pick one.
                self._by_alias[alias] = None if alias in self._by_alias else image_id

    def lookup(self, key: str) -> int | None:
        key = key.strip().replace("\\", "/")
        if key in self.ids_by_path:
            return self.ids_by_path[key]
        if "/" not in key:  # no folders to compare
            return next((hit for alias in name_and_stem(key) if (hit := self._by_alias.get(alias)) is not None), None)
        pure = PurePosixPath(key)
        for alias in (pure.name, pure.stem):
            hit = self._by_alias.get(alias)
            if hit is not None and _same_folders(pure.parent.parts, PurePosixPath(self._paths[hit]).parent.parts):
                return hit
        return None


def name_and_stem(path: str) -> tuple[str, str]:
    """`PurePosixPath(path)`'s name and stem, without building the path (50,000 of them take 0.3 s) unless the
    last part is one the two could read differently ("", ".", or a name ending with a dot)."""
    name = path.rpartition("/")[2]
    if not name or name.endswith("."):
        pure = PurePosixPath(path)
        return pure.name, pure.stem
    dot = name.rfind(".")
    return name, name[:dot] if dot > 0 else name


def _same_folders(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """True when one folder path ends with the other: 'val/n01440764' matches 'n01440764' and '', not 'train/x'."""
    n = min(len(a), len(b))
    return n == 0 or a[-n:] == b[-n:]


def image_index(session: Session, dataset: Dataset) -> ImageIndex:
    rows = session.exec(select(col(Image.path), col(Image.id)).where(col(Image.dataset_id) == dataset.id)).all()
    return ImageIndex({p: i for p, i in rows if i is not None})
