"""Reference photos: for each class, a few readable images of the dataset whose original label is that class,
shown on a card beside the original and the suggested class ("what does a `tiger cat` look like here?")."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.enums import ImageStatus
from db.models import Image, Label, LabelSource
from relabel.common.workspace import IMGT
from relabel.review.cards import IMAGE_COLUMNS
from relabel.review.display import StoredImage

PER_CLASS = 2  # one to show, and one more for when the card is the first one itself


def load_examples(
    conn: Connection, dataset_id: int, root: str | None, per_class: int = PER_CLASS
) -> dict[int, tuple[StoredImage, ...]]:
    """Up to `per_class` reference images per original class: the first readable images (by id) labelled with it."""
    rows = conn.execute(
        select(col(Label.classes), *IMAGE_COLUMNS)
        .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
        .join(Image, col(Image.id) == col(Label.image_id))
        .where(col(LabelSource.dataset_id) == dataset_id, col(LabelSource.name) == IMGT)
        .where(col(Image.status) == ImageStatus.ok)
        .order_by(col(Label.image_id))
    )
    out: dict[int, list[StoredImage]] = {}
    for classes, *image in rows:
        if classes and len(found := out.setdefault(classes[0], [])) < per_class:
            found.append(StoredImage(image[0], root, *image[1:]))
    return {index: tuple(images) for index, images in out.items()}


def pick_example(examples: dict[int, tuple[StoredImage, ...]], index: int | None, exclude: int) -> StoredImage | None:
    """A reference image of class `index` other than image `exclude` (the card's own), if the dataset has one."""
    if index is None:
        return None
    return next((e for e in examples.get(index, ()) if e.image_id != exclude), None)
