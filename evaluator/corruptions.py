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
`MotionBlurImage` are written out here.

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


def _clipped_zoom(layer: np.ndarray, factor: float) -> np.ndarray:
    """The centre 1/factor of `layer` (H, W, C) zoomed back up by `factor`, bilinear: at least H × W.

    As `scipy.ndimage.zoom(centre, (factor, factor, 1), order=1)`, the reference's call, computes it (output
    pixel o reads input coordinate o · (n_in − 1) / (n_out − 1)), but one axis at a time, which is faster.
    """
    h, w = layer.shape[:2]
    ch, cw = int(np.ceil(h / float(factor))), int(np.ceil(w / float(factor)))
    top, left = (h - ch) // 2, (w - cw) // 2
    centre = layer[top : top + ch, left : left + cw].astype(np.float64)
    return _zoom_axis(_zoom_axis(centre, factor, axis=0), factor, axis=1).astype(layer.dtype)


def _zoom_axis(x: np.ndarray, factor: float, axis: int) -> np.ndarray:
    """x linearly resampled along `axis` to round(n · factor) samples, end samples on end samples.

    Like scipy's mode="constant", a coordinate that float error puts past the last sample reads 0: the reference
    then shows a black last row or column in some zoom layers, and so does this.
    """
    n = x.shape[axis]
    n_out = int(round(n * factor))
    coords = np.arange(n_out) * ((n - 1) / (n_out - 1) if n_out > 1 else 1.0)
    start = np.clip(np.floor(coords).astype(np.int64), 0, max(n - 2, 0))
    shape = [1] * x.ndim
    shape[axis] = n_out
    t = (coords - start).reshape(shape)
    inside = (coords <= n - 1).reshape(shape)
    before, after = np.take(x, start, axis=axis), np.take(x, np.minimum(start + 1, n - 1), axis=axis)
    return np.where(inside, before * (1 - t) + after * t, 0.0)


def zoom_blur(pixels: np.ndarray, factors: tuple[float, float, float], seed: int) -> np.ndarray:
    """The mean of the image and its zooms by each of `np.arange(*factors)`."""
    h, w = pixels.shape[:2]
    x = (pixels / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    zooms = np.arange(*factors)
    for factor in zooms:
        out += _clipped_zoom(x, factor)[:h, :w]
    return (x + out) / (len(zooms) + 1) * 255


# ---------------------------------------------------------------------------------------------------- weather


def snow(pixels: np.ndarray, param: tuple[float, ...], seed: int) -> np.ndarray:
    """Thresholded zoomed noise, motion-blurred into streaks, added twice (once turned 180°) to a greyed image."""
    mean, std, zoom, threshold, radius, sigma, keep = param
    rng = legacy_rng(seed)
    h, w = pixels.shape[:2]
    x = pixels.astype(np.float32) / 255.0
    flakes = _clipped_zoom(rng.normal(size=(h, w), loc=mean, scale=std)[..., np.newaxis], zoom)[..., 0]
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
    crop = _resize_cubic_window(texture, size, (slice(top, top + h), slice(left, left + w)))
    return keep * pixels + weight * crop


@lru_cache(maxsize=len(FROST_TEXTURES))
def frost_texture(name: str) -> np.ndarray:
    """The frost photo `name` as uint8 (H, W, 3) RGB (alpha dropped, as OpenCV's `imread` does)."""
    data = (resources.files("evaluator") / "resources" / "frost" / name).read_bytes()
    with Image.open(io.BytesIO(data)) as image:
        pixels = np.asarray(image.convert("RGB"))
    pixels.flags.writeable = False
    return pixels


def _cubic_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
    """OpenCV INTER_CUBIC (a = −0.75) source indices and weights (n_out, 4); edge pixels repeat."""
    f = (np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5
    start = np.floor(f).astype(np.int64)
    t = f - start
    a = -0.75
    w0 = ((a * (t + 1) - 5 * a) * (t + 1) + 8 * a) * (t + 1) - 4 * a
    w1 = ((a + 2) * t - (a + 3)) * t * t + 1
    w2 = ((a + 2) * (1 - t) - (a + 3)) * (1 - t) * (1 - t) + 1
    weights = np.stack([w0, w1, w2, 1 - w0 - w1 - w2], axis=1)
    return np.clip(start[:, None] + np.arange(-1, 3), 0, n_in - 1), weights


def _resize_cubic_window(image: np.ndarray, size: tuple[int, int], window: tuple[slice, slice]) -> np.ndarray:
    """`window` of OpenCV's `resize(image, size, INTER_CUBIC)` for uint8 (H, W, C), computed alone.

    OpenCV rounds its float result to the nearest integer; this does the same, so the two agree except where
    float error falls on a tie (about 1 value in 10⁵, by 1).
    """
    rows, row_weights = (taps[window[0]] for taps in _cubic_taps(image.shape[0], size[0]))
    cols, col_weights = (taps[window[1]] for taps in _cubic_taps(image.shape[1], size[1]))
    across = np.einsum("hwkc,wk->hwc", image[:, cols].astype(np.float64), col_weights)
    down = np.einsum("hkwc,hk->hwc", across[rows], row_weights)
    return np.clip(np.rint(down), 0, 255).astype(np.uint8)


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
    image = _warp_affine(pixels.astype(np.float32) / 255.0, _random_affine(h, w, shift, rng))
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


def _warp_affine(image: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """OpenCV's `warpAffine(image, matrix, (W, H), INTER_LINEAR, BORDER_REFLECT_101)` for float32 (H, W, C).

    Each output pixel reads the input at the inverse map of its place; as in OpenCV's fixed point, the point is
    rounded to 1/32 pixel (10-bit products, then 5 bits kept) and the four neighbours are weighted bilinearly.
    """
    h, w = image.shape[:2]
    inverse = _invert_affine(matrix)
    x, y = np.arange(w, dtype=np.float64), np.arange(h, dtype=np.float64)
    fixed = [
        (
            np.rint(m[0] * x * 1024).astype(np.int64)[None, :]
            + np.rint((m[1] * y + m[2]) * 1024).astype(np.int64)[:, None]
            + 16
        )
        >> 5
        for m in inverse
    ]
    (col, row), (fc, fr) = ([f >> 5 for f in fixed]), ([(f & 31).astype(np.float32) / 32 for f in fixed])
    fc, fr = fc[..., np.newaxis], fr[..., np.newaxis]
    r0, r1, c0, c1 = _reflect101(row, h), _reflect101(row + 1, h), _reflect101(col, w), _reflect101(col + 1, w)
    top = image[r0, c0] * ((1 - fr) * (1 - fc)) + image[r0, c1] * ((1 - fr) * fc)
    return top + image[r1, c0] * (fr * (1 - fc)) + image[r1, c1] * (fr * fc)


def _invert_affine(m: np.ndarray) -> np.ndarray:
    """`cv2.invertAffineTransform`, in its arithmetic."""
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    d = 1.0 / det if det != 0 else 0.0
    a11, a22, a12, a21 = m[1, 1] * d, m[0, 0] * d, -m[0, 1] * d, -m[1, 0] * d
    return np.array(
        [[a11, a12, -a11 * m[0, 2] - a12 * m[1, 2]], [a21, a22, -a21 * m[0, 2] - a22 * m[1, 2]]], dtype=np.float64
    )


def _reflect101(index: np.ndarray, n: int) -> np.ndarray:
    """OpenCV's BORDER_REFLECT_101 index: … 2 1 | 0 1 2 … n−1 | n−2 …"""
    if n == 1:
        return np.zeros_like(index)
    period = 2 * n - 2
    folded = np.abs(index) % period
    return np.where(folded >= n, period - folded, folded)


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
