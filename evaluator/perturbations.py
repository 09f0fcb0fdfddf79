"""Seeded image corruptions (the 15 of ImageNet-C, and Gaussian blur, at severity 1-5) and text typos.

`perturb(image, name, severity, seed)` takes a PIL RGB image or a uint8 (H, W, 3) array and returns the same type
and size. The same seed gives identical pixels. The corruptions themselves live in `evaluator.corruptions`
(numpy, scipy and Pillow only); this module holds their registry and severity tables, and the steps around them:

1. the corruption, at the parameter of its severity (tables below, from Hendrycks & Dietterich, ICLR 2019,
   `make_imagenet_c.py`, as `imagecorruptions` generalises them to any image size, except elastic transform, whose
   table is `make_imagenet_c.py`'s own, in pixels);
2. rounding to the nearest integer and clipping to 0..255 (ImageNet-C truncates; the two differ by at most 1);
3. the benchmark's JPEG step: the released ImageNet-C files were written by Pillow as JPEG at quality 85
   (`optimize=True`), so every corrupted image is saved and decoded that way too, Gaussian noise as much as JPEG
   compression. `benchmark_jpeg=False` skips it and returns the corruption alone.

| name              | parameter per severity 1, 2, 3, 4, 5                                            |
|-------------------|---------------------------------------------------------------------------------|
| gaussian_noise    | σ of N(0, σ) on x ∈ [0, 1]: .08 .12 .18 .26 .38                                 |
| shot_noise        | photons c, Poisson(c·x)/c: 60 25 12 5 3                                         |
| impulse_noise     | share of values set to 0 or 1: .03 .06 .09 .17 .27                              |
| defocus_blur      | disk radius, anti-alias σ: 3,.1  4,.5  6,.5  8,.5  10,.5                        |
| glass_blur        | σ, max shift δ, passes: .7,1,2  .9,2,1  1,2,3  1.1,3,2  1.5,4,2                 |
| motion_blur       | radius, σ (angle U(±45°)): 10,3  15,5  15,8  15,12  20,15                       |
| zoom_blur         | zooms arange(1, stop, step): 1.11,.01  1.16,.01  1.21,.02  1.26,.02  1.31,.03   |
| snow              | flake mean, sd, zoom, threshold, streak radius, σ, image kept (7 numbers each)  |
| frost             | image kept, frost added: 1,.4  .8,.6  .7,.7  .65,.7  .6,.75                     |
| fog               | haze strength, fractal decay: 1.5,2  2,2  2.5,1.7  2.5,1.5  3,1.4               |
| brightness        | added to HSV value V: .1 .2 .3 .4 .5                                            |
| contrast          | factor towards the channel mean: .4 .3 .2 .1 .05                                |
| elastic_transform | 244 px × α,σ,shift: 2,.7,.1  2,.08,.2  .05,.01,.02  .07,.01,.02  .12,.01,.02    |
| pixelate          | box down-sampling to this share of each side (nearest back up): .6 .5 .4 .3 .25 |
| jpeg              | JPEG quality: 25 18 15 10 7 (ImageNet-C's jpeg_compression)                     |
| gaussian_blur     | σ in pixels: 1 2 3 4 6 (one of ImageNet-C's 4 extra corruptions, not of the 15) |

The random ones (gaussian, shot and impulse noise, glass and motion blur, snow, frost, fog, elastic transform)
draw as `imagecorruptions` does after `np.random.seed(seed)` (impulse noise and glass blur: its `seed=`), so with
seeds below 2**32 the pixels match it to ±1 grey level; frost and elastic transform draw as `make_imagenet_c.py`
does (frost from five photos). See `evaluator.corruptions`. The others ignore the seed.

`perturb_text(text, severity, seed)` makes keyboard typos for text-conditioned models: each letter is hit with
probability TYPO_RATES[severity − 1] by one of swap (with the next letter), drop, insert (a QWERTY neighbour
before it) or replace (by a QWERTY neighbour), chosen with equal chance. The draws do not depend on the severity,
so with one seed the letters hit at a severity are also hit at every higher one. Text perturbations have their own
registry, TEXT_PERTURBATIONS (`typo`), whose names never clash with the image ones in PERTURBATIONS.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from PIL import Image

from evaluator import corruptions as c
from evaluator.errors import EvaluationError, unknown_name

SEVERITIES = (1, 2, 3, 4, 5)
TYPO_RATES = (0.02, 0.05, 0.10, 0.15, 0.20)
BENCHMARK_JPEG_QUALITY = 85  # make_imagenet_c.py: Image.fromarray(np.uint8(img)).save(path, quality=85, optimize=True)
ImageT = TypeVar("ImageT", Image.Image, np.ndarray)
Apply = Callable[[np.ndarray, Any, int], np.ndarray]
ApplyText = Callable[[str, float, np.random.Generator], str]


@dataclass(frozen=True)
class Corruption:
    """One registered corruption: `apply(pixels uint8 (H, W, 3), parameter, seed)` → (H, W, 3) on the 0..255
    scale (float or uint8; `perturb` rounds and clips)."""

    name: str
    params: tuple[Any, ...]  # one per severity 1..5
    apply: Apply
    seeded: bool  # whether the result depends on the seed
    benchmark: bool = True  # one of ImageNet-C's 15 (False: one of its extra corruptions)
    imagenet_c: str = ""  # its name in ImageNet-C where that differs (its folders, AlexNet's published errors)

    @property
    def imagenet_c_name(self) -> str:
        return self.imagenet_c or self.name


@dataclass(frozen=True)
class TextPerturbation:
    """One registered text perturbation: `apply(text, parameter, rng)` → the perturbed text."""

    name: str
    params: tuple[float, ...]  # one per severity 1..5
    apply: ApplyText


_SNOW = (
    (0.1, 0.3, 3, 0.5, 10, 4, 0.8),
    (0.2, 0.3, 2, 0.5, 12, 4, 0.7),
    (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
    (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65),
    (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
)

# make_imagenet_c.py's (alpha, sigma, affine shift) in pixels, with its "244 should have been 224" kept as written
_ELASTIC = (
    (244 * 2, 244 * 0.7, 244 * 0.1),
    (244 * 2, 244 * 0.08, 244 * 0.2),
    (244 * 0.05, 244 * 0.01, 244 * 0.02),
    (244 * 0.07, 244 * 0.01, 244 * 0.02),
    (244 * 0.12, 244 * 0.01, 244 * 0.02),
)

PERTURBATIONS: dict[str, Corruption] = {
    k.name: k
    for k in (
        Corruption("gaussian_noise", (0.08, 0.12, 0.18, 0.26, 0.38), c.gaussian_noise, seeded=True),
        Corruption("shot_noise", (60, 25, 12, 5, 3), c.shot_noise, seeded=True),
        Corruption("impulse_noise", (0.03, 0.06, 0.09, 0.17, 0.27), c.impulse_noise, seeded=True),
        Corruption("defocus_blur", ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)), c.defocus_blur, seeded=False),
        Corruption(
            "glass_blur", ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)), c.glass_blur, seeded=True
        ),
        Corruption("motion_blur", ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)), c.motion_blur, seeded=True),
        Corruption(
            "zoom_blur",
            ((1, 1.11, 0.01), (1, 1.16, 0.01), (1, 1.21, 0.02), (1, 1.26, 0.02), (1, 1.31, 0.03)),
            c.zoom_blur,
            seeded=False,
        ),
        Corruption("snow", _SNOW, c.snow, seeded=True),
        Corruption("frost", ((1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)), c.frost, seeded=True),
        Corruption("fog", ((1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)), c.fog, seeded=True),
        Corruption("brightness", (0.1, 0.2, 0.3, 0.4, 0.5), c.brightness, seeded=False),
        Corruption("contrast", (0.4, 0.3, 0.2, 0.1, 0.05), c.contrast, seeded=False),
        Corruption("elastic_transform", _ELASTIC, c.elastic_transform, seeded=True),
        Corruption("pixelate", (0.6, 0.5, 0.4, 0.3, 0.25), c.pixelate, seeded=False),
        Corruption("jpeg", (25, 18, 15, 10, 7), c.jpeg, seeded=False, imagenet_c="jpeg_compression"),
        Corruption("gaussian_blur", (1, 2, 3, 4, 6), c.gaussian_blur, seeded=False, benchmark=False),
    )
}
# ImageNet-C's 15, in the paper's order: noise, blur, weather, digital.
BENCHMARK_CORRUPTIONS = tuple(name for name, k in PERTURBATIONS.items() if k.benchmark)


# TEXT_PERTURBATIONS, the registry of text perturbations, closes the module: after the typo code it refers to.


# ------------------------------------------------------------------------------------------------- public API


def get_perturbation(name: str) -> Corruption:
    """The registered corruption called `name`; an unknown name raises an error that lists the known ones."""
    if name not in PERTURBATIONS:
        raise unknown_name("perturbation", name, PERTURBATIONS)
    return PERTURBATIONS[name]


def perturb(image: ImageT, name: str, severity: int, seed: int = 0, *, benchmark_jpeg: bool = True) -> ImageT:
    """`image` (PIL RGB, or uint8 (H, W, 3) array) corrupted by `name` at `severity` 1-5; same type and size.

    With `benchmark_jpeg` (the default) the result is then saved as JPEG at quality 85 and decoded, as the
    released ImageNet-C images were; False returns the corruption alone.
    """
    corruption = get_perturbation(name)
    _check_severity(severity)
    _check_seed(seed)
    if not isinstance(benchmark_jpeg, bool):
        raise EvaluationError(f"benchmark_jpeg must be True or False, got {benchmark_jpeg!r}")
    out = corruption.apply(_pixels(image), corruption.params[severity - 1], int(seed))
    if out.dtype != np.uint8:
        out = np.clip(np.rint(out), 0, 255).astype(np.uint8)
    if benchmark_jpeg:
        out = c.jpeg_round_trip(out, BENCHMARK_JPEG_QUALITY, optimize=True)
    if not out.flags.writeable:  # arrays read back from PIL are read-only views; hand out an ordinary array
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
