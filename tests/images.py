"""Small image files for tests, good and bad, written with PIL into a temporary folder."""

from __future__ import annotations

import io
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image


def photo(
    path: Path, size: tuple[int, int] = (64, 48), color: tuple[int, int, int] = (200, 120, 40), fmt: str | None = None
) -> Path:
    """A small RGB image with some texture, so JPEG data is not trivially short."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(abs(hash((path.name, color))) % 2**32)
    arr = np.clip(np.array(color)[None, None, :] + rng.integers(-30, 30, (size[1], size[0], 3)), 0, 255)
    Image.fromarray(arr.astype(np.uint8), "RGB").save(path, format=fmt)
    return path


def truncated_jpeg(path: Path) -> Path:
    photo(path, (256, 256))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def html_named_jpeg(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("<!DOCTYPE html><html><body>403 Forbidden</body></html>")
    return path


def zero_bytes(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def png_bomb(path: Path, width: int = 30_000, height: int = 30_000) -> Path:
    """A valid PNG header claiming width×height pixels, with almost no data: a decompression bomb."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 64)) + chunk(b"IEND", b"")
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def cmyk_jpeg(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("CMYK", (40, 30), (10, 200, 30, 5)).save(path, "JPEG")
    return path


def png_16bit(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.arange(40 * 30, dtype=np.uint16).reshape(30, 40) * 50).save(path)
    return path


def palette_alpha_png(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("P", (40, 30), 1)
    im.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    im.save(path, transparency=0)
    return path


def exif_rotated_jpeg(path: Path, orientation: int = 6) -> Path:
    """A 60×20 JPEG whose EXIF says to show it rotated (orientation 6: 90° clockwise -> 20×60)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("RGB", (60, 20), (0, 128, 255))
    exif = Image.Exif()
    exif[0x0112] = orientation
    im.save(path, "JPEG", exif=exif.tobytes())
    return path


def jpeg_bytes(size: tuple[int, int] = (32, 32)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (1, 2, 3)).save(buf, "JPEG")
    return buf.getvalue()


def ingest_photos(engine: Any, vocab: Any, root: Path, names: Sequence[str], dataset: str = "d") -> Any:
    """A workspace dataset of one small photo per file name (its class in the name, a colour per position);
    returns `engine`."""
    from relabel.ingest import ingest_dataset, plan_ingest

    for i, name in enumerate(names):
        photo(root / name, color=(i * 50, 20, 20))
    ingest_dataset(
        engine, plan_ingest(root, vocab), dataset=dataset, root=root, vocab=vocab, show_progress=False, workers=1
    )
    return engine
