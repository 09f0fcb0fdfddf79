"""Images as the studio shows them: upright (EXIF), RGB, scaled to fit the screen, cached as JPEG files.

Only images recorded in the workspace are served, and only from inside their dataset root. The path is resolved
afresh every time an image is served, so a link planted in the dataset folder after an image was first shown is
refused from then on (`source_path`). The cache is made only from bytes that match the sha256 ingest recorded for
the image: the resolved file is opened (never through a link), copied into the cache while it is hashed, and the
copy is kept only when the hash matches, so whatever lies in the dataset folder later, the cache holds the image
ingest saw or nothing (`DisplayCache`). A file a browser shows correctly as it is (JPEG, PNG or WebP, RGB or grey,
not rotated by EXIF, within the display size) is served as that copy; others are rendered from it. The studio
serves files from the cache only, each under an image suffix, and never a dataset root. Cached files are named by
content hash and size, so two datasets holding the same photo share one.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from PIL import Image

from relabel.common.atomic import atomic_writer
from relabel.common.errors import InputError, NotFoundError
from relabel.common.imaging import load_rgb

DISPLAY_SIDE = 1024  # the longer side of the on-screen image; "full resolution" keeps the original size
FULL = 0
COPY_CHUNK = 1 << 20  # bytes read at a time when copying an original into the cache


BROWSER_FORMATS = {"JPEG", "PNG", "WEBP"}
SUFFIXES = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp"}  # of originals linked into the cache
BROWSER_MODES = {"RGB", "L"}


@dataclass(frozen=True)
class StoredImage:
    """What the display cache needs to know about one workspace image (as ingest recorded it)."""

    image_id: int
    root: str | None
    path: str
    sha256: str | None
    format: str | None = None
    mode: str | None = None
    width: int | None = None
    height: int | None = None
    exif_orientation: int | None = None
    size: int | None = None  # bytes, as ingest recorded them

    def shows_as_is(self, side: int) -> bool:
        """True when a browser shows the file itself correctly within `side` (0: any size): a common format, RGB
        or grey, no EXIF rotation to apply. Most ImageNet photos qualify and are then served without re-encoding."""
        fits = side == 0 or (
            self.width is not None and self.height is not None and max(self.width, self.height) <= side
        )
        return (
            fits
            and self.format in BROWSER_FORMATS
            and self.mode in BROWSER_MODES
            and self.exif_orientation in (None, 1)
        )


def source_path(image: StoredImage) -> Path:
    """The image file on disk, resolved now (links and all); refuses anything that resolves outside its dataset
    root."""
    if not image.root:
        raise NotFoundError(f"image {image.image_id} has no dataset root on this machine")
    root = Path(image.root).resolve()
    full = (root / image.path).resolve()
    if not full.is_relative_to(root):
        raise InputError(f"image {image.image_id}: {image.path!r} resolves outside the dataset root {str(root)!r}")
    if not full.is_file():
        raise NotFoundError(f"image {image.image_id}: {image.path!r} is not on disk under {str(root)!r}")
    return full


def copy_verified(image: StoredImage, out: BinaryIO) -> None:
    """Write the image's file to `out` while hashing it; raise InputError naming the image when its bytes are not
    those ingest recorded (the caller then discards what was written). The resolved file is opened without
    following a link, and the bytes hashed are the bytes written, so a file swapped meanwhile is caught too."""
    source = source_path(image)
    if not image.sha256:
        raise InputError(f"image {image.image_id}: {image.path!r} has no checksum from ingest; re-ingest to show it")
    try:
        fd = os.open(source, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError as exc:  # ELOOP: the file became a link after it was resolved
        raise InputError(f"image {image.image_id}: cannot open {image.path!r}: {exc.strerror or exc}") from exc
    found = os.fstat(fd).st_size
    if image.size is not None and found != image.size:  # refused before a byte is copied, however large the file
        os.close(fd)
        raise InputError(
            f"image {image.image_id}: {image.path!r} has changed since ingest ({found} bytes, ingest recorded "
            f"{image.size}); re-ingest the dataset to show it"
        )
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as src:
        while chunk := src.read(COPY_CHUNK):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != image.sha256:
        raise InputError(
            f"image {image.image_id}: {image.path!r} has changed since ingest (sha256 {digest.hexdigest()[:12]}…, "
            f"ingest recorded {image.sha256[:12]}…); re-ingest the dataset to show it"
        )


class DisplayCache:
    """Resized, upright JPEG copies of workspace images under `folder`."""

    def __init__(self, folder: Path, side: int = DISPLAY_SIDE, quality: int = 88) -> None:
        self.folder, self.side, self.quality = folder, side, quality
        folder.mkdir(parents=True, exist_ok=True)

    def path_for(self, image: StoredImage, side: int | None = None) -> Path:
        """The cached copy of `image` (longer side at most `side`, 0 = full size), made on first use. The image's
        path is checked on every call: once its file resolves outside the dataset root, the image is refused even
        though its copy is cached."""
        side = self.side if side is None else side
        source_path(image)
        target = self._target(image, side)
        if not target.exists():
            if image.shows_as_is(side):  # the checked copy of the file itself: the dataset root is never served
                self._copy(image, target)
            else:
                self._render(image, side, target)
        return target

    def ready_path(self, image: StoredImage, side: int | None = None) -> Path | None:
        """The cached copy when it exists or costs only a copy; None when it would have to be rendered first."""
        side = self.side if side is None else side
        source_path(image)
        target = self._target(image, side)
        if target.exists():
            return target
        return self.path_for(image, side) if image.shows_as_is(side) else None

    def _target(self, image: StoredImage, side: int) -> Path:
        key = image.sha256 or f"id{image.image_id}"
        if image.shows_as_is(side):
            return self.folder / key[:2] / f"{key}_orig{SUFFIXES[image.format or '']}"
        return self.folder / key[:2] / f"{key}_{side or 'full'}.jpg"

    def _copy(self, image: StoredImage, target: Path) -> None:
        """The checked original in the cache, under an image suffix."""
        with atomic_writer(target, private=True) as out:  # concurrent copies of one image both write whole files
            copy_verified(image, out)

    def _render(self, image: StoredImage, side: int, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, src = tempfile.mkstemp(dir=target.parent, prefix=".", suffix=".src")
        try:
            with os.fdopen(fd, "wb") as out:
                copy_verified(image, out)
            img = load_rgb(src, min_side=side // 2 if side else None)  # decoded from the checked copy
        except InputError as exc:  # a decoding error names the image's own path, not the temporary copy
            raise InputError(str(exc).replace(src, image.path)) from exc
        finally:
            Path(src).unlink(missing_ok=True)
        if side and max(img.size) > side:
            scale = side / max(img.size)
            size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
            img = img.resize(size, Image.Resampling.LANCZOS, reducing_gap=2.0)
        with atomic_writer(target, private=True) as out:  # concurrent renders of one image both write whole files
            img.save(out, "JPEG", quality=self.quality)
