"""Seeded image corruptions (ImageNet-C style, severity 1-5) and text typos, for robustness retention runs.

`perturb(image, name, severity, seed)` takes a PIL RGB image or a uint8 (H, W, 3) array and returns the same type
and size. The same seed gives identical pixels. Only PIL, numpy and scipy are used (no OpenCV or ImageMagick),
so where ImageNet-C calls those, the operation is re-implemented as noted below.

Severity parameters follow Hendrycks & Dietterich (ICLR 2019), `make_imagenet_c.py` / `imagenet_c/corruptions.py`:

| name           | parameter                  | severity 1, 2, 3, 4, 5         | ImageNet-C uses                 |
|----------------|----------------------------|--------------------------------|---------------------------------|
| gaussian_noise | σ of N(0, σ) on x ∈ [0, 1] | .08 .12 .18 .26 .38            | same                            |
| shot_noise     | photons c: Poisson(c·x)/c  | 60 25 12 5 3                   | same                            |
| impulse_noise  | share of values set 0 or 1 | .03 .06 .09 .17 .27            | skimage random_noise('s&p')     |
| gaussian_blur  | σ in pixels                | 1 2 3 4 6                      | skimage gaussian (nearest edge) |
| defocus_blur   | disk radius, anti-alias σ  | 3,.1  4,.5  6,.5  8,.5  10,.5  | OpenCV filter2D (reflect-101)   |
| motion_blur    | radius, σ; angle U(±45°)   | 10,3  15,5  15,8  15,12  20,15 | ImageMagick MotionBlurImage     |
| jpeg           | JPEG quality               | 25 18 15 10 7                  | same (PIL)                      |
| contrast       | factor towards the mean    | .4 .3 .2 .1 .05                | same                            |
| brightness     | added to HSV value V       | .1 .2 .3 .4 .5                 | skimage HSV round trip          |
| pixelate       | BOX down/up-sampling scale | .6 .5 .4 .3 .25                | of 224 px; here of the own size |

Notes. Motion blur sums 2·radius + 1 copies of the image shifted by i pixels (i = 0 .. 2·radius) along the angle,
weighted by exp(−i² / 2σ²) and normalised: ImageMagick's one-sided kernel, with shifts rounded to whole pixels and
edge pixels repeated. The defocus disk is anti-aliased after it is normalised, as in ImageNet-C, so at severities 4
and 5 its weights sum to 1.013 and 1.011 (a flat image brightens by about 1 %). Brightness uses that RGB scales
linearly with V at fixed hue and saturation, so rgb ← rgb · min(V + c, 1) / V (grey c for black pixels), which
equals skimage's rgb→hsv→rgb. Float results are rounded to the nearest integer (ImageNet-C truncates). The noise
corruptions and motion blur's angle use `numpy.random.default_rng(seed)`; the others ignore the seed.

`perturb_text(text, severity, seed)` makes keyboard typos for text-conditioned models: each letter is hit with
probability TYPO_RATES[severity − 1] by one of swap (with the next letter), drop, insert (a QWERTY neighbour
before it) or replace (by a QWERTY neighbour), chosen with equal chance. The draws do not depend on the severity,
so with one seed the letters hit at a severity are also hit at every higher one. Text perturbations have their own
registry, TEXT_PERTURBATIONS (`typo`), whose names never clash with the image ones in PERTURBATIONS.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from PIL import Image
from scipy import ndimage, signal

from evaluator.errors import EvaluationError, unknown_name

SEVERITIES = (1, 2, 3, 4, 5)
TYPO_RATES = (0.02, 0.05, 0.10, 0.15, 0.20)
ImageT = TypeVar("ImageT", Image.Image, np.ndarray)
Apply = Callable[[np.ndarray, Any, np.random.Generator], np.ndarray]
ApplyText = Callable[[str, float, np.random.Generator], str]


@dataclass(frozen=True)
class Corruption:
    """One registered corruption: `apply(pixels uint8 (H, W, 3), parameter, rng)` → (H, W, 3) values in 0..255."""

    name: str
    params: tuple[Any, ...]  # one per severity 1..5
    apply: Apply
    seeded: bool  # whether the result depends on the seed


@dataclass(frozen=True)
class TextPerturbation:
    """One registered text perturbation: `apply(text, parameter, rng)` → the perturbed text."""

    name: str
    params: tuple[float, ...]  # one per severity 1..5
    apply: ApplyText


# --------------------------------------------------------------------------------------------- corruptions


def _unit(pixels: np.ndarray) -> np.ndarray:
    return pixels.astype(np.float32) / 255.0


def _gaussian_noise(pixels: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    x = _unit(pixels)
    return (x + sigma * rng.standard_normal(x.shape, dtype=np.float32)) * 255


def _shot_noise(pixels: np.ndarray, photons: float, rng: np.random.Generator) -> np.ndarray:
    return rng.poisson(_unit(pixels) * photons) / photons * 255


def _impulse_noise(pixels: np.ndarray, amount: float, rng: np.random.Generator) -> np.ndarray:
    out = pixels.astype(np.float32)
    flipped = rng.random(pixels.shape) < amount
    salt = rng.random(pixels.shape) < 0.5
    out[flipped & salt] = 255
    out[flipped & ~salt] = 0
    return out


def _gaussian_blur(pixels: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return ndimage.gaussian_filter(pixels.astype(np.float32), sigma=(sigma, sigma, 0), mode="nearest", truncate=4.0)


def _disk(radius: int, alias_sigma: float) -> np.ndarray:
    """ImageNet-C's anti-aliased disk: a normalised disk, then a 3×3 (5×5 past radius 8) Gaussian of it."""
    half, taps = (8, 3) if radius <= 8 else (radius, 5)
    grid = np.arange(-half, half + 1)
    disk = (grid[:, None] ** 2 + grid[None, :] ** 2 <= radius**2).astype(np.float64)
    disk /= disk.sum()
    offsets = np.arange(taps) - taps // 2
    g = np.exp(-(offsets**2) / (2 * alias_sigma**2))
    g /= g.sum()
    for axis in (0, 1):
        disk = ndimage.correlate1d(disk, g, axis=axis, mode="mirror")
    return disk


def _convolve_mirror(pixels: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    """2-D convolution of each channel with a symmetric kernel, reflect-101 borders (OpenCV's default)."""
    r0, r1 = kernel.shape[0] // 2, kernel.shape[1] // 2
    padded = np.pad(pixels.astype(np.float32), ((r0, r0), (r1, r1), (0, 0)), mode="reflect")
    return signal.fftconvolve(padded, kernel[:, :, None].astype(np.float32), mode="valid", axes=(0, 1))


def _defocus_blur(pixels: np.ndarray, param: tuple[int, float], rng: np.random.Generator) -> np.ndarray:
    return _convolve_mirror(pixels, _disk(*param))


def _motion_blur(pixels: np.ndarray, param: tuple[int, float], rng: np.random.Generator) -> np.ndarray:
    radius, sigma = param
    angle = np.deg2rad(rng.uniform(-45, 45))
    steps = np.arange(2 * radius + 1)
    weights = np.exp(-(steps**2) / (2 * sigma**2))
    weights /= weights.sum()
    dy, dx = np.rint(steps * np.sin(angle)).astype(int), np.rint(steps * np.cos(angle)).astype(int)
    pad = 2 * radius
    padded = np.pad(pixels.astype(np.float32), ((pad, pad), (pad, pad), (0, 0)), mode="edge")
    h, w = pixels.shape[:2]
    out = np.zeros(pixels.shape, np.float32)
    for weight, y, x in zip(weights, dy, dx):
        out += weight * padded[pad - y : pad - y + h, pad - x : pad - x + w]
    return out


def _jpeg(pixels: np.ndarray, quality: int, rng: np.random.Generator) -> np.ndarray:
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=quality)
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        return np.asarray(decoded.convert("RGB"))


def _contrast(pixels: np.ndarray, factor: float, rng: np.random.Generator) -> np.ndarray:
    x = _unit(pixels)
    means = x.mean(axis=(0, 1), keepdims=True)
    return ((x - means) * factor + means) * 255


def _brightness(pixels: np.ndarray, shift: float, rng: np.random.Generator) -> np.ndarray:
    x = _unit(pixels)
    value = x.max(axis=2, keepdims=True)
    lifted = np.minimum(value + shift, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(value > 0, x * (lifted / value), lifted) * 255


def _pixelate(pixels: np.ndarray, scale: float, rng: np.random.Generator) -> np.ndarray:
    image = Image.fromarray(pixels)
    small = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    return np.asarray(image.resize(small, Image.Resampling.BOX).resize(image.size, Image.Resampling.BOX))


PERTURBATIONS: dict[str, Corruption] = {
    c.name: c
    for c in (
        Corruption("gaussian_noise", (0.08, 0.12, 0.18, 0.26, 0.38), _gaussian_noise, seeded=True),
        Corruption("shot_noise", (60, 25, 12, 5, 3), _shot_noise, seeded=True),
        Corruption("impulse_noise", (0.03, 0.06, 0.09, 0.17, 0.27), _impulse_noise, seeded=True),
        Corruption("gaussian_blur", (1, 2, 3, 4, 6), _gaussian_blur, seeded=False),
        Corruption("defocus_blur", ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)), _defocus_blur, seeded=False),
        Corruption("motion_blur", ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)), _motion_blur, seeded=True),
        Corruption("jpeg", (25, 18, 15, 10, 7), _jpeg, seeded=False),
        Corruption("contrast", (0.4, 0.3, 0.2, 0.1, 0.05), _contrast, seeded=False),
        Corruption("brightness", (0.1, 0.2, 0.3, 0.4, 0.5), _brightness, seeded=False),
        Corruption("pixelate", (0.6, 0.5, 0.4, 0.3, 0.25), _pixelate, seeded=False),
    )
}


# TEXT_PERTURBATIONS, the registry of text perturbations, closes the module: after the typo code it refers to.


# ------------------------------------------------------------------------------------------------- public API


def get_perturbation(name: str) -> Corruption:
    """The registered corruption called `name`; an unknown name raises an error that lists the known ones."""
    if name not in PERTURBATIONS:
        raise unknown_name("perturbation", name, PERTURBATIONS)
    return PERTURBATIONS[name]


def perturb(image: ImageT, name: str, severity: int, seed: int = 0) -> ImageT:
    """`image` (PIL RGB, or uint8 (H, W, 3) array) corrupted by `name` at `severity` 1-5; same type and size."""
    corruption = get_perturbation(name)
    _check_severity(severity)
    _check_seed(seed)
    pixels = _pixels(image)
    out = corruption.apply(pixels, corruption.params[severity - 1], np.random.default_rng(seed))
    if out.dtype != np.uint8:
        out = np.clip(np.rint(out), 0, 255).astype(np.uint8)
    elif not out.flags.writeable:  # arrays read back from PIL are read-only views; hand out an ordinary array
        out = out.copy()
    return Image.fromarray(out) if isinstance(image, Image.Image) else out


def get_text_perturbation(name: str) -> TextPerturbation:
    """The registered text perturbation called `name`; an unknown name raises an error that lists the known ones."""
    if name not in TEXT_PERTURBATIONS:
        raise unknown_name("text perturbation", name, TEXT_PERTURBATIONS)
    return TEXT_PERTURBATIONS[name]


def perturb_text(text: str, severity: int, seed: int = 0, name: str = "typo") -> str:
    """`text` perturbed by the text perturbation `name` at `severity` 1-5; seeded. The default, `typo`, makes
    keyboard typos at the rate TYPO_RATES[severity − 1] per letter (module docstring)."""
    perturbation = get_text_perturbation(name)
    if not isinstance(text, str):
        raise EvaluationError(f"text must be a str, got {type(text).__name__}")
    _check_severity(severity)
    _check_seed(seed)
    return perturbation.apply(text, perturbation.params[severity - 1], np.random.default_rng(seed))


# ----------------------------------------------------------------------------------- validation and compute


def _check_severity(severity: object) -> None:
    if isinstance(severity, bool) or not isinstance(severity, int | np.integer) or severity not in SEVERITIES:
        raise EvaluationError(f"severity must be one of 1, 2, 3, 4, 5, got {severity!r}")


def _check_seed(seed: object) -> None:
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise EvaluationError(f"seed must be an integer ≥ 0, got {seed!r}")


def _pixels(image: object) -> np.ndarray:
    if isinstance(image, Image.Image):
        if image.mode != "RGB":
            raise EvaluationError(f"image mode is {image.mode!r}, expected 'RGB'; use image.convert('RGB')")
        return np.asarray(image)
    if isinstance(image, np.ndarray):
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3 or 0 in image.shape:
            raise EvaluationError(f"image array must be uint8 (H, W, 3), got {image.dtype} {image.shape}")
        return np.ascontiguousarray(image)
    raise EvaluationError(f"image must be a PIL image or a numpy array, got {type(image).__name__}")


_ROWS = ("qwertyuiop", "asdfghjkl", "zxcvbnm")
_NEIGHBOURS = {
    key: "".join(
        _ROWS[r][c]
        for r in range(max(0, row - 1), min(len(_ROWS), row + 2))
        for c in range(col - 1, col + 2)
        if 0 <= c < len(_ROWS[r]) and (r, c) != (row, col)
    )
    for row, keys in enumerate(_ROWS)
    for col, key in enumerate(keys)
}


def _neighbour(char: str, draw: float) -> str:
    """A QWERTY neighbour of `char` (its case kept), picked by `draw` in [0, 1)."""
    near = _NEIGHBOURS[char.lower()]
    typed = near[int(draw * len(near))]
    return typed.upper() if char.isupper() else typed


def _compute_typos(text: str, rate: float, rng: np.random.Generator) -> str:
    n = len(text)
    hit, ops, draws = rng.random(n) < rate, rng.integers(0, 4, n), rng.random(n)  # drawn up front: seeded layout
    out: list[str] = []
    i = 0
    while i < n:
        char = text[i]
        if not (hit[i] and char.isascii() and char.isalpha()):
            out.append(char)
        elif ops[i] == 0 and i + 1 < n:  # swap with the next character
            out += [text[i + 1], char]
            i += 1
        elif ops[i] == 1:  # drop
            pass
        elif ops[i] == 2:  # insert a neighbour before
            out += [_neighbour(char, draws[i]), char]
        else:  # replace by a neighbour (also a swap at the very end)
            out.append(_neighbour(char, draws[i]))
        i += 1
    return "".join(out)


TEXT_PERTURBATIONS: dict[str, TextPerturbation] = {
    t.name: t for t in (TextPerturbation("typo", TYPO_RATES, _compute_typos),)
}
