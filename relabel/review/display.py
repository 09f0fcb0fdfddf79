"""Images as the studio shows them: upright (EXIF), RGB, scaled to fit the screen, cached as JPEG files.

Only images recorded in the workspace are served, and only from inside their dataset root: a path that resolves
outside it (a link planted after ingest) is refused. A file a browser shows correctly as it is (JPEG, PNG or WebP,
RGB or grey, not rotated by EXIF, within the display size) is hard-linked into the cache unchanged (copied across
file systems), so the studio serves files from the cache only, each under an image suffix, and never a dataset
root. Cached files are named by content hash and size, so an image that changes on disk gets a new file, and two
datasets holding the same photo share one. Resolved paths are remembered per process; `forget_resolved_paths`
(called when the studio refreshes) drops them.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from relabel.errors import InputError, NotFoundError
from relabel.suggest.adapters.imaging import load_rgb

DISPLAY_SIDE = 1024  # the longer side of the on-screen image; "full resolution" keeps the original size
FULL = 0


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


@functools.lru_cache(maxsize=8192)
def _resolved(root: str, path: str) -> tuple[Path, Path]:
    """The dataset root and the image's file with their links resolved (asked for on every card shown)."""
    real_root = Path(root).resolve()
    return real_root, (real_root / path).resolve()


def forget_resolved_paths() -> None:
    """Resolve dataset paths afresh from now on (after a dataset root or its links changed)."""
    _resolved.cache_clear()


def source_path(image: StoredImage) -> Path:
    """The image file on disk; refuses anything that resolves outside its dataset root."""
    if not image.root:
        raise NotFoundError(f"image {image.image_id} has no dataset root on this machine")
    root, full = _resolved(image.root, image.path)
    if not full.is_relative_to(root):
        raise InputError(f"image {image.image_id}: {image.path!r} resolves outside the dataset root {str(root)!r}")
    if not full.is_file():
        raise NotFoundError(f"image {image.image_id}: {image.path!r} is not on disk under {str(root)!r}")
    return full


class DisplayCache:
    """Resized, upright JPEG copies of workspace images under `folder`."""

    def __init__(self, folder: Path, side: int = DISPLAY_SIDE, quality: int = 88) -> None:
        self.folder, self.side, self.quality = folder, side, quality
        folder.mkdir(parents=True, exist_ok=True)

    def path_for(self, image: StoredImage, side: int | None = None) -> Path:
        """The cached copy of `image` (longer side at most `side`, 0 = full size), made on first use."""
        side = self.side if side is None else side
        target = self._target(image, side)
        if not target.exists():
            if image.shows_as_is(side):  # the file itself, linked in: the dataset root is never served
                self._link(image, target)
            else:
                self._render(image, side, target)
        return target

    def ready_path(self, image: StoredImage, side: int | None = None) -> Path | None:
        """The cached copy when it exists or costs only a link; None when it would have to be rendered first."""
        side = self.side if side is None else side
        target = self._target(image, side)
        if target.exists():
            return target
        return self.path_for(image, side) if image.shows_as_is(side) else None

    def _target(self, image: StoredImage, side: int) -> Path:
        key = image.sha256 or f"id{image.image_id}"
        if image.shows_as_is(side):
            return self.folder / key[:2] / f"{key}_orig{SUFFIXES[image.format or '']}"
        return self.folder / key[:2] / f"{key}_{side or 'full'}.jpg"

    def _link(self, image: StoredImage, target: Path) -> None:
        """A hard link to the original in the cache (a copy across file systems), under an image suffix."""
        source = source_path(image)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.part")
        try:
            try:
                os.link(source, tmp)
            except OSError:
                shutil.copyfile(source, tmp)
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise

    def _render(self, image: StoredImage, side: int, target: Path) -> None:
        img = load_rgb(source_path(image), min_side=side // 2 if side else None)
        if side and max(img.size) > side:
            scale = side / max(img.size)
            size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
            img = img.resize(size, Image.Resampling.LANCZOS, reducing_gap=2.0)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, suffix=".part")
        try:
            with os.fdopen(fd, "wb") as out:
                img.save(out, "JPEG", quality=self.quality)
            os.replace(tmp, target)  # concurrent renders of one image both write whole files
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
