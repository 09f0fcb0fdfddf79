"""Image decoding shared by every stage: ingest checks aside, whatever needs pixels (the suggestion adapters, the
studio's display cache, the evaluation's perturbed passes) decodes a file here, the same way everywhere.

Pillow only (no torchvision, no torch): importing this module is cheap.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageCms, ImageOps

from relabel.common.errors import InputError, RelabelError

WHITE = (255, 255, 255)
_ALPHA_MODES = {"RGBA", "LA", "PA", "RGBa", "La"}
_WIDE_GRAY_MODES = {"I", "I;16", "I;16B", "I;16L", "I;16N", "F"}


def load_rgb(path: str | Path, *, min_side: int | None = None) -> Image.Image:
    """Decode an image file as an 8-bit RGB image, upright according to its EXIF orientation.

    CMYK is converted through its embedded ICC profile when it has one; 16-bit and float grey images are scaled
    to 0..255 (not clipped); transparent pixels (RGBA, LA, palette with transparency) are composited on white.
    With `min_side`, a large JPEG is decoded at 1/2, 1/4 or 1/8 scale (in the DCT, several times faster) as long
    as its shorter side stays at least `min_side`. Raises InputError naming the file when it cannot be decoded.
    """
    try:
        with Image.open(path) as opened:
            if min_side and opened.format == "JPEG" and min(opened.size) >= 2 * min_side:
                scale = min_side / min(opened.size)
                opened.draft(None, (math.ceil(opened.width * scale), math.ceil(opened.height * scale)))
            opened.load()  # decode now, inside the try: a truncated file fails here
            upright = ImageOps.exif_transpose(opened) or opened
            return to_rgb(upright)
    except RelabelError:
        raise
    except Exception as exc:  # Pillow raises OSError, ValueError, SyntaxError, EOFError... for broken files
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"cannot decode image {str(path)!r}: {reason}") from exc


def to_rgb(img: Image.Image) -> Image.Image:
    """`img` of any Pillow mode as RGB (the same object when it is RGB already); see `load_rgb`."""
    if img.mode == "RGB":
        return img
    if img.mode == "CMYK":
        return _cmyk_to_rgb(img)
    if img.mode in _WIDE_GRAY_MODES:
        return _wide_gray_to_rgb(img)
    if img.mode == "P" and "transparency" in img.info:
        img = img.convert("RGBA")
    if img.mode in _ALPHA_MODES:
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, WHITE + (255,))
        return Image.alpha_composite(background, rgba).convert("RGB")
    return img.convert("RGB")


def _cmyk_to_rgb(img: Image.Image) -> Image.Image:
    icc = img.info.get("icc_profile")
    if icc:
        try:
            source = ImageCms.ImageCmsProfile(io.BytesIO(icc))
            converted = ImageCms.profileToProfile(img, source, ImageCms.createProfile("sRGB"), outputMode="RGB")
            if converted is not None:
                return converted
        except (ImageCms.PyCMSError, OSError, ValueError):
            pass  # a broken profile: the plain conversion below is still a usable picture
    return img.convert("RGB")


def _wide_gray_to_rgb(img: Image.Image) -> Image.Image:
    """16-bit ('I;16*', 'I') and float ('F') grey: Pillow's convert would clip everything above 255 to white."""
    arr = np.asarray(img).astype(np.float32)
    if img.mode == "F":
        scale = 255.0 if float(arr.max(initial=0.0)) <= 1.0 else 1.0
    else:
        scale = 1 / 257 if img.mode.startswith("I;16") or float(arr.max(initial=0.0)) > 255 else 1.0
    grey = np.clip(np.rint(arr * scale), 0, 255).astype(np.uint8)
    return Image.fromarray(grey, "L").convert("RGB")
