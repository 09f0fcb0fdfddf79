"""Check one image file: hash, size, format, and whether it decodes, without decoding huge images fully.

Every outcome is a status with a reason a person can act on; nothing here raises for a bad file.
"""

from __future__ import annotations

import hashlib
import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from PIL import Image, UnidentifiedImageError

from db.enums import ImageStatus

DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's own decompression-bomb threshold (0.25 GiB of RGB pixels)
FULL_DECODE_MAX_PIXELS = 40_000_000  # above this, non-JPEG files are verified structurally, not decoded
IN_MEMORY_MAX_BYTES = 64 * 1024 * 1024
ROTATED_ORIENTATIONS = {5, 6, 7, 8}  # EXIF orientations that swap width and height
ORIENTATION_TEXT = {
    2: "mirrored",
    3: "rotated 180°",
    4: "flipped vertically",
    5: "mirrored and rotated 90°",
    6: "rotated 90° clockwise",
    7: "mirrored and rotated 270°",
    8: "rotated 90° counter-clockwise",
}
MODE_NOTES = {
    "CMYK": "CMYK colour, shown converted to RGB",
    "I;16": "16-bit, shown scaled to 8-bit",
    "I;16B": "16-bit, shown scaled to 8-bit",
    "I;16L": "16-bit, shown scaled to 8-bit",
    "I": "32-bit integer pixels, shown scaled to 8-bit",
    "F": "floating-point pixels, shown scaled to 8-bit",
    "LA": "grayscale with alpha, shown on white",
    "RGBA": "alpha channel, shown on white",
    "PA": "palette with alpha, shown on white",
}


@dataclass
class ImageCheck:
    status: ImageStatus
    reason: str = ""
    notes: str = ""
    sha256: str | None = None
    bytes: int | None = None
    mtime_ns: int | None = None
    width: int | None = None
    height: int | None = None
    format: str | None = None
    mode: str | None = None
    exif_orientation: int | None = None


class _FileStat(TypedDict):
    """What a check records of the file itself, whatever its status."""

    bytes: int
    mtime_ns: int


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _not_an_image_reason(head: bytes) -> str:
    start = head.lstrip()[:64].lower()
    if start.startswith((b"<!doctype html", b"<html", b"<head", b"<?xml", b"<")):
        return "not an image: the file is HTML/XML text (a saved web page?)"
    if start.startswith((b"{", b"[")):
        return "not an image: the file is JSON text"
    return f"not an image: unrecognised format (first bytes {head[:8].hex()})"


def _orientation(im: Image.Image) -> int | None:
    try:
        value = im.getexif().get(0x0112)
    except Exception:  # a broken EXIF block must not make a good image unreadable
        return None
    return int(value) if isinstance(value, int) and 1 <= value <= 8 else None


def _decode(im: Image.Image, width: int, height: int) -> None:
    """Decode enough to prove the pixel data is complete; raises OSError/SyntaxError/ValueError if not."""
    if im.format == "JPEG":
        # DCT scaling decodes every entropy-coded block at 1/8 size: truncation still shows, at a fraction of the cost.
        im.draft("RGB", (max(1, width // 8), max(1, height // 8)))
        im.load()
    elif width * height <= FULL_DECODE_MAX_PIXELS:
        im.load()
    else:
        im.verify()


def check_image(path: str | Path, *, max_pixels: int = DEFAULT_MAX_PIXELS, decode: bool = True) -> ImageCheck:
    """Inspect `path`. `decode=False` checks only the hash and header (fast, misses truncated pixel data)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        return ImageCheck(ImageStatus.missing, "file not found")
    except OSError as exc:
        return ImageCheck(ImageStatus.unreadable, f"cannot stat file: {exc.strerror or exc}")
    base: _FileStat = {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}
    if st.st_size == 0:
        return ImageCheck(ImageStatus.unreadable, "empty file (0 bytes)", **base)
    try:
        if st.st_size <= IN_MEMORY_MAX_BYTES:
            data = p.read_bytes()
            digest = hashlib.sha256(data).hexdigest()
            source: io.BytesIO | Path = io.BytesIO(data)
            head = data[:64]
        else:
            digest = _sha256_file(p)
            source = p
            with p.open("rb") as f:
                head = f.read(64)
    except OSError as exc:
        return ImageCheck(ImageStatus.unreadable, f"cannot read file: {exc.strerror or exc}", **base)
    result = ImageCheck(ImageStatus.ok, sha256=digest, **base)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            with Image.open(source) as im:
                return _inspect_open_image(im, result, max_pixels, decode)
        except UnidentifiedImageError:
            result.status, result.reason = ImageStatus.unreadable, _not_an_image_reason(head)
        except Image.DecompressionBombError as exc:
            result.status, result.reason = ImageStatus.unreadable, f"decompression bomb: {exc}"
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            result.status, result.reason = ImageStatus.unreadable, f"corrupt or truncated image: {exc}"
    return result


def _inspect_open_image(im: Image.Image, result: ImageCheck, max_pixels: int, decode: bool) -> ImageCheck:
    width, height = im.size
    result.format, result.mode = im.format, im.mode
    pixels = width * height
    if pixels > max_pixels:
        result.status = ImageStatus.unreadable
        result.reason = (
            f"decompression bomb: {width}×{height} = {pixels / 1e6:.1f} MP exceeds the {max_pixels / 1e6:.1f} MP limit"
        )
        return result
    orientation = _orientation(im)
    notes = []
    if im.mode in MODE_NOTES:
        notes.append(MODE_NOTES[im.mode])
    if im.mode == "P" and "transparency" in im.info:
        notes.append("palette with transparency, shown on white")
    frames = getattr(im, "n_frames", 1)
    if frames > 1:
        notes.append(f"{frames} frames, the first is shown")
    if orientation and orientation != 1:
        result.exif_orientation = orientation
        notes.append(f"EXIF orientation {orientation} ({ORIENTATION_TEXT[orientation]}), shown upright")
    if orientation in ROTATED_ORIENTATIONS:
        width, height = height, width
    result.width, result.height, result.notes = width, height, "; ".join(notes)
    if decode:
        _decode(im, *im.size)
    return result


def file_signature(path: Path) -> tuple[int, int] | None:
    """(size, mtime_ns) of a file, or None if it does not exist: lets a re-ingest skip unchanged files."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns
