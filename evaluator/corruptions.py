"""The ImageNet-C image corruptions as pure functions: `apply(pixels, parameter, seed)` → (H, W, 3) values.

`pixels` is uint8 (H, W, 3); the result is float (or uint8) on the 0..255 scale, before the rounding, clipping and
JPEG save step of `evaluator.perturbations`, which also holds the severity tables. Thirteen functions follow
`imagecorruptions` (Michaelis et al. 2019, the maintained form of Hendrycks & Dietterich's `make_imagenet_c.py` for
images of any size) operation by operation, so that with the same seed the pixels agree with it to ±1 grey level.
Frost and elastic transform follow `make_imagenet_c.py` itself, where `imagecorruptions` departs from it: frost draws
from five photos, not six, and crops them unscaled; elastic transform takes ImageNet-C's per-severity (alpha, sigma,
affine shift) in pixels and its random affine warp, where `imagecorruptions` scales σ with the image and drops the
warp. Only numpy, scipy and Pillow are used; what the references take from OpenCV (`filter2D`, `GaussianBlur`,
`resize(INTER_CUBIC)`, `cvtColor`, `getAffineTransform`, `warpAffine`) and the re-implementation of ImageMagick's
`MotionBlurImage` are written out here and, for resampling, in `evaluator.resampling`.

Random draws repeat the reference's, in its order, given the same seed:

- numpy's legacy `RandomState(seed)` (what `np.random.seed(seed)` seeds) for gaussian and shot noise, glass blur,
  motion blur, snow, frost, fog and elastic transform. For glass blur this also equals `imagecorruptions`' numba
  loop seeded with `seed=`: numba seeds the same Mersenne Twister the same way and draws `randint` by the same
  masked rejection. Seeds of 2**32 and above seed it with their 32-bit words (low word first);
- `numpy.random.default_rng(seed)` for impulse noise (scikit-image's `random_noise(..., rng=seed)`).

The frost textures under `resources/frost` are those `imagecorruptions` ships (Apache-2.0; see the NOTICE there);
ImageNet-C's own are the same six photos, of which its code draws the first five.
"""

from __future__ import annotations

import io
import math
from functools import lru_cache
from importlib import resources

import numpy as np
from PIL import Image
from scipy import ndimage, signal

from evaluator import resampling

FROST_TEXTURES = ("frost1.png", "frost2.png", "frost3.png", "frost4.jpg", "frost5.jpg", "frost6.jpg")
FROST_DRAWN = 5  # make_imagenet_c.py lists six photos but draws np.random.randint(5): frost6.jpg never appears
_GREY = (0.299, 0.587, 0.114)  # OpenCV's RGB → grey weights


def legacy_rng(seed: int) -> np.random.RandomState:
    """numpy's legacy generator as `np.random.seed(seed)` sets it; seeds ≥ 2**32 go in as 32-bit words."""
    if seed < 2**32:
        return np.random.RandomState(seed)
    words = []
    while seed:
        words.append(seed & 0xFFFFFFFF)
        seed >>= 32
    return np.random.RandomState(np.array(words, dtype=np.uint32))


# ------------------------------------------------------------------------------------------------------ noise


def gaussian_noise(pixels: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    x = pixels / 255.0
    return (x + legacy_rng(seed).normal(size=x.shape, scale=sigma)) * 255


def shot_noise(pixels: np.ndarray, photons: float, seed: int) -> np.ndarray:
    return legacy_rng(seed).poisson(pixels / 255.0 * photons) / float(photons) * 255


def impulse_noise(pixels: np.ndarray, amount: float, seed: int) -> np.ndarray:
    """scikit-image's salt and pepper: each value is hit with probability `amount`, then salt or pepper 50:50."""
    rng = np.random.default_rng(seed)
    flipped = rng.random(pixels.shape) <= amount
    salted = rng.random(pixels.shape) <= 0.5
    out = pixels.copy()
    out[flipped & salted] = 255
    out[flipped & ~salted] = 0
    return out


# ------------------------------------------------------------------------------------------------------- blur


def _gaussian(x: np.ndarray, sigma: float) -> np.ndarray:
    """scikit-image's `gaussian(x, sigma, channel_axis=-1)`: nearest-edge borders, truncated at 4 σ."""
    return ndimage.gaussian_filter(x, sigma=(sigma, sigma, 0), mode="nearest", truncate=4.0)


def gaussian_blur(pixels: np.ndarray, sigma: float, seed: int) -> np.ndarray:
    return _gaussian(pixels / 255.0, sigma) * 255


def glass_blur(pixels: np.ndarray, param: tuple[float, int, int], seed: int) -> np.ndarray:
    """Blur, let pixels wander by up to `delta` for `iterations` passes, blur again."""
    sigma, delta, iterations = param
    h, w = pixels.shape[:2]
    blurred = (_gaussian(pixels / 255.0, sigma) * 255).astype(np.uint8)  # the reference truncates here
    source = _glass_sources(h, w, delta, iterations, legacy_rng(seed))
    return _gaussian(blurred.reshape(h * w, 3)[source].reshape(h, w, 3) / 255.0, sigma) * 255


def _glass_sources(h: int, w: int, delta: int, iterations: int, rng: np.random.RandomState) -> np.ndarray:
    """For each flat pixel index, the index of the blurred pixel it ends up showing.

    The reference visits rows h−δ … δ+1 and, in each, columns w−δ … δ+1 (both descending), draws dx, dy in
    [−δ, δ) and runs `x[r, c], x[r+dy, c+dx] = x[r+dy, c+dx], x[r, c]` on numpy views: the second assignment
    reads the already overwritten pixel, so the step copies x[r+dy, c+dx] into x[r, c] rather than swapping.
    A pixel visited earlier in the pass hands on the value it was given; that chain is followed by pointer
    jumping instead of a Python loop over every pixel.
    """
    n = h * w
    rows, cols = np.arange(h - delta, delta, -1), np.arange(w - delta, delta, -1)
    visited = (rows[:, None] * w + cols[None, :]).ravel()  # in visiting order
    source = np.arange(n)
    if visited.size == 0:
        return source
    order = np.full(n, n, dtype=np.int64)
    order[visited] = np.arange(visited.size)
    for _ in range(iterations):
        dx, dy = rng.randint(-delta, delta, size=(visited.size, 2)).T
        read = visited + dy * w + dx
        chained = order[read] < order[visited]  # read a pixel this pass has already written
        base, jump = np.arange(n), np.arange(n)
        base[visited] = read
        jump[visited[chained]] = read[chained]
        while not np.array_equal(jump[jump], jump):
            jump = jump[jump]
        source = source[base[jump]]
    return source


def _disk(radius: int, alias_sigma: float) -> np.ndarray:
    """ImageNet-C's anti-aliased disk: a normalised disk, then a 3×3 (5×5 past radius 8) Gaussian of it."""
    half, taps = (8, 3) if radius <= 8 else (radius, 5)
    grid = np.arange(-half, half + 1)
    disk = (grid[:, None] ** 2 + grid[None, :] ** 2 <= radius**2).astype(np.float64)
    disk /= disk.sum()
    offsets = np.arange(taps) - taps // 2
    g = np.exp(-(offsets**2) / (2 * alias_sigma**2))
    g /= g.sum()
    for axis in (0, 1):  # OpenCV's GaussianBlur border: reflect-101
        disk = ndimage.correlate1d(disk, g, axis=axis, mode="mirror")
    return disk


def defocus_blur(pixels: np.ndarray, param: tuple[int, float], seed: int) -> np.ndarray:
    """Each channel convolved with the disk, reflect-101 borders (OpenCV `filter2D`'s default)."""
    kernel = _disk(*param)
    r = kernel.shape[0] // 2
    padded = np.pad(pixels / 255.0, ((r, r), (r, r), (0, 0)), mode="reflect")
    return signal.fftconvolve(padded, kernel[:, :, None], mode="valid", axes=(0, 1)) * 255


def motion_kernel(radius: int, sigma: float, angle: float) -> list[tuple[float, int, int]]:
    """ImageMagick MotionBlurImage's taps (weight, dy, dx): out(y, x) = Σ weight · in(y + dy, x + dx).

    2·radius + 1 taps with Gaussian weights exp(−i² / 2σ²), normalised, at i pixels along `angle` (degrees,
    clockwise from +x as rows grow downwards), rounded as ImageMagick does (ceil(v − ½)).
    """
    width = 2 * radius + 1
    steps = np.arange(width)
    weights = np.exp(-(steps**2) / (2 * sigma**2)) / (np.sqrt(2 * np.pi) * sigma)
    weights = weights / weights.sum()
    point = (width * np.sin(np.deg2rad(angle)), width * np.cos(np.deg2rad(angle)))
    hypot = math.hypot(*point)
    return [
        (float(weights[i]), math.ceil(i * point[0] / hypot - 0.5), math.ceil(i * point[1] / hypot - 0.5))
        for i in range(width)
    ]


def _motion_blur(layer: np.ndarray, radius: int, sigma: float, angle: float) -> np.ndarray:
    """`layer` (H, W) or (H, W, C) blurred along `angle`; the image's edge pixels repeat beyond it."""
    h, w = layer.shape[:2]
    pad = 2 * radius + 1
    padded = np.pad(layer, ((pad, pad), (pad, pad)) + ((0, 0),) * (layer.ndim - 2), mode="edge")
    out = np.zeros(layer.shape, np.float64)
    for weight, dy, dx in motion_kernel(radius, sigma, angle):  # summed in the reference's order
        out = out + weight * padded[pad + dy : pad + dy + h, pad + dx : pad + dx + w]
    return out


def motion_blur(pixels: np.ndarray, param: tuple[int, float], seed: int) -> np.ndarray:
    return _motion_blur(pixels, *param, angle=legacy_rng(seed).uniform(-45, 45))


def zoom_blur(pixels: np.ndarray, factors: tuple[float, float, float], seed: int) -> np.ndarray:
    """The mean of the image and its zooms by each of `np.arange(*factors)`."""
    h, w = pixels.shape[:2]
    x = (pixels / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    zooms = np.arange(*factors)
    for factor in zooms:
        out += resampling.clipped_zoom(x, factor)[:h, :w]
    return (x + out) / (len(zooms) + 1) * 255


# ---------------------------------------------------------------------------------------------------- weather


def snow(pixels: np.ndarray, param: tuple[float, ...], seed: int) -> np.ndarray:
    """Thresholded zoomed noise, motion-blurred into streaks, added twice (once turned 180°) to a greyed image."""
    mean, std, zoom, threshold, radius, sigma, keep = param
    rng = legacy_rng(seed)
    h, w = pixels.shape[:2]
    x = pixels.astype(np.float32) / 255.0
    flakes = resampling.clipped_zoom(rng.normal(size=(h, w), loc=mean, scale=std)[..., np.newaxis], zoom)[..., 0]
    flakes[flakes < threshold] = 0
    flakes = _motion_blur(np.clip(flakes, 0, 1), int(radius), sigma, rng.uniform(-135, -45))
    flakes = (np.round(flakes * 255).astype(np.uint8) / 255.0)[:h, :w, np.newaxis]
    r, g, b = (np.float32(v) for v in _GREY)
    grey = (x[..., 0] * r + x[..., 1] * g + x[..., 2] * b)[..., np.newaxis]
    x = keep * x + (1 - keep) * np.maximum(x, grey * 1.5 + 0.5)
    return (x + flakes + np.rot90(flakes, k=2)) * 255


def frost(pixels: np.ndarray, param: tuple[float, float], seed: int) -> np.ndarray:
    """ImageNet-C's frost: a random crop of one of the first five frost photos, blended in.

    As `make_imagenet_c.py`: `np.random.randint(5)` picks frost1.png … frost5.jpg (frost6.jpg is listed there but
    never drawn), then a crop the image's size starts at `randint(0, H_t − H)`, `randint(0, W_t − W)`, unscaled.
    Deviation: an image as tall or as wide as the photo (which the 224-px original never meets) has the photo scaled
    up first, as `imagecorruptions` does (bicubic, to 1.1× the size that covers the image).
    """
    keep, weight = param
    rng = legacy_rng(seed)
    texture = frost_texture(FROST_TEXTURES[rng.randint(FROST_DRAWN)])
    (h, w), (th, tw) = pixels.shape[:2], texture.shape[:2]
    if th > h and tw > w:
        top, left = rng.randint(0, th - h), rng.randint(0, tw - w)
        return keep * pixels + weight * texture[top : top + h, left : left + w]
    scale = max(1, h / th, w / tw) * 1.1
    size = (int(np.ceil(th * scale)), int(np.ceil(tw * scale)))
    top, left = rng.randint(0, size[0] - h), rng.randint(0, size[1] - w)
    crop = resampling.resize_cubic_window(texture, size, (slice(top, top + h), slice(left, left + w)))
    return keep * pixels + weight * crop


@lru_cache(maxsize=len(FROST_TEXTURES))
def frost_texture(name: str) -> np.ndarray:
    """The frost photo `name` as uint8 (H, W, 3) RGB (alpha dropped, as OpenCV's `imread` does)."""
    data = (resources.files("evaluator") / "resources" / "frost" / name).read_bytes()
    with Image.open(io.BytesIO(data)) as image:
        pixels = np.asarray(image.convert("RGB"))
    pixels.flags.writeable = False
    return pixels


def fog(pixels: np.ndarray, param: tuple[float, float], seed: int) -> np.ndarray:
    """A plasma-fractal haze of strength `thickness` added, then the result scaled back to the image's peak."""
    thickness, decay = param
    h, w = pixels.shape[:2]
    x = pixels / 255.0
    peak = x.max()
    size = _next_power_of_2(max(pixels.shape))  # the channel count too, as in the reference
    x += thickness * _plasma_fractal(size, decay, legacy_rng(seed))[:h, :w][..., np.newaxis]
    return x * peak / (peak + thickness) * 255


def _next_power_of_2(n: int) -> int:
    return 1 if n == 0 else 2 ** (n - 1).bit_length()


def _plasma_fractal(size: int, decay: float, rng: np.random.RandomState) -> np.ndarray:
    """A diamond-square height map, `size` × `size` (a power of two), scaled to 0..1.

    As in ImageNet-C (after FLHerne/mapgen's diamondsquare.py): each step sets the centres of squares, then of
    diamonds, to the mean of their four corners plus uniform noise whose range shrinks by `decay` per step.
    """
    heights = np.empty((size, size), dtype=np.float32)
    heights[0, 0] = 0
    step, wibble = size, 100.0

    def wibbled_mean(total: np.ndarray) -> np.ndarray:
        return total / 4 + wibble * rng.uniform(-wibble, wibble, total.shape)

    while step >= 2:
        half = step // 2
        corners = heights[0:size:step, 0:size:step]
        squares = corners + np.roll(corners, shift=-1, axis=0)
        squares += np.roll(squares, shift=-1, axis=1)
        heights[half:size:step, half:size:step] = wibbled_mean(squares)
        centres = heights[half:size:step, half:size:step]
        corners = heights[0:size:step, 0:size:step]
        left = (centres + np.roll(centres, 1, axis=0)) + (corners + np.roll(corners, -1, axis=1))
        heights[0:size:step, half:size:step] = wibbled_mean(left)
        top = (centres + np.roll(centres, 1, axis=1)) + (corners + np.roll(corners, -1, axis=0))
        heights[half:size:step, 0:size:step] = wibbled_mean(top)
        step //= 2
        wibble /= decay
    heights -= heights.min()
    return heights / heights.max()


# ---------------------------------------------------------------------------------------------------- digital


def elastic_transform(pixels: np.ndarray, param: tuple[float, float, float], seed: int) -> np.ndarray:
    """ImageNet-C's elastic transform: a random affine warp, then pixels moved by smoothed noise.

    `param` is (alpha, sigma, shift) in pixels, as `make_imagenet_c.py` gives them for its 224-px images: three
    points around the centre move by U(±shift) each and the affine map that moves them warps the image (bilinear,
    reflect-101 borders); then each pixel reads the warped image at its place plus (dy, dx), each U(±1) noise
    Gaussian-smoothed with `sigma` (reflect borders, 3 σ) and times `alpha` (bilinear, reflect borders).
    """
    alpha, sigma, shift = param
    rng = legacy_rng(seed)
    h, w = pixels.shape[:2]
    image = resampling.warp_affine(pixels.astype(np.float32) / 255.0, _random_affine(h, w, shift, rng))
    dx = _displacement(rng, h, w, alpha, sigma)[..., np.newaxis]
    dy = _displacement(rng, h, w, alpha, sigma)[..., np.newaxis]
    rows, cols, channels = np.meshgrid(np.arange(h), np.arange(w), np.arange(3), indexing="ij")
    return ndimage.map_coordinates(image, [rows + dy, cols + dx, channels], order=1, mode="reflect") * 255


def _random_affine(h: int, w: int, shift: float, rng: np.random.RandomState) -> np.ndarray:
    """The (2, 3) map of `cv2.getAffineTransform` that moves three points by U(±shift) each.

    The points are make_imagenet_c.py's, written in (x, y) order from the (row, column) centre as it writes them
    (the same point for its square images). Fewer than 3 rows or columns leave no triangle: no warp.
    """
    centre = np.array((h, w), dtype=np.float32) // 2
    half = min(h, w) // 3
    source = np.array([centre + half, [centre[0] + half, centre[1] - half], centre - half], dtype=np.float32)
    target = source + rng.uniform(-shift, shift, size=source.shape).astype(np.float32)
    if half == 0:
        return np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    corners = np.column_stack([source.astype(np.float64), np.ones(3)])
    return np.linalg.solve(corners, target.astype(np.float64)).T


def _displacement(rng: np.random.RandomState, h: int, w: int, alpha: float, sigma: float) -> np.ndarray:
    """(H, W) float32 shifts in pixels: U(±1) noise, Gaussian-smoothed (σ = `sigma`, reflect, 3 σ), × `alpha`."""
    noise = rng.uniform(-1, 1, size=(h, w))
    return (ndimage.gaussian_filter(noise, sigma, mode="reflect", truncate=3) * alpha).astype(np.float32)


def jpeg(pixels: np.ndarray, quality: int, seed: int) -> np.ndarray:
    return jpeg_round_trip(pixels, quality)


def jpeg_round_trip(pixels: np.ndarray, quality: int, optimize: bool = False) -> np.ndarray:
    """`pixels` saved by Pillow as a JPEG of `quality` (Pillow's default 4:2:0 chroma subsampling) and decoded."""
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=quality, optimize=optimize)
    buffer.seek(0)
    with Image.open(buffer) as decoded:
        return np.asarray(decoded.convert("RGB"))


def contrast(pixels: np.ndarray, factor: float, seed: int) -> np.ndarray:
    x = pixels / 255.0
    means = x.mean(axis=(0, 1), keepdims=True)
    return ((x - means) * factor + means) * 255


def brightness(pixels: np.ndarray, shift: float, seed: int) -> np.ndarray:
    """skimage's rgb→hsv, V + shift (capped at 1), hsv→rgb, in closed form: RGB scales with V at fixed H and S."""
    x = pixels / 255.0
    value = x.max(axis=2, keepdims=True)
    lifted = np.minimum(value + shift, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(value > 0, x * (lifted / value), lifted) * 255


def pixelate(pixels: np.ndarray, scale: float, seed: int) -> np.ndarray:
    """Box-filtered down to `scale` of each side, then nearest-neighbour back up."""
    image = Image.fromarray(pixels)
    small = (max(1, int(image.width * scale)), max(1, int(image.height * scale)))
    return np.asarray(image.resize(small, Image.Resampling.BOX).resize(image.size, Image.Resampling.NEAREST))
