"""Pixel resampling as the ImageNet-C code computes it, in numpy: the steps `evaluator.corruptions` takes from scipy's
`zoom` (bilinear, one axis at a time), OpenCV's `resize(INTER_CUBIC)` and OpenCV's `warpAffine` (bilinear, fixed
point, reflect-101 borders)."""

from __future__ import annotations

import numpy as np


def clipped_zoom(layer: np.ndarray, factor: float) -> np.ndarray:
    """The centre 1/factor of `layer` (H, W, C) zoomed back up by `factor`, bilinear: at least H × W.

    As `scipy.ndimage.zoom(centre, (factor, factor, 1), order=1)`, the reference's call, computes it (output
    pixel o reads input coordinate o · (n_in − 1) / (n_out − 1)), but one axis at a time, which is faster.
    """
    h, w = layer.shape[:2]
    ch, cw = int(np.ceil(h / float(factor))), int(np.ceil(w / float(factor)))
    top, left = (h - ch) // 2, (w - cw) // 2
    centre = layer[top : top + ch, left : left + cw].astype(np.float64)
    return zoom_axis(zoom_axis(centre, factor, axis=0), factor, axis=1).astype(layer.dtype)


def zoom_axis(x: np.ndarray, factor: float, axis: int) -> np.ndarray:
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


def cubic_taps(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray]:
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


def resize_cubic_window(image: np.ndarray, size: tuple[int, int], window: tuple[slice, slice]) -> np.ndarray:
    """`window` of OpenCV's `resize(image, size, INTER_CUBIC)` for uint8 (H, W, C), computed alone.

    OpenCV rounds its float result to the nearest integer; this does the same, so the two agree except where
    float error falls on a tie (about 1 value in 10⁵, by 1).
    """
    rows, row_weights = (taps[window[0]] for taps in cubic_taps(image.shape[0], size[0]))
    cols, col_weights = (taps[window[1]] for taps in cubic_taps(image.shape[1], size[1]))
    across = np.einsum("hwkc,wk->hwc", image[:, cols].astype(np.float64), col_weights)
    down = np.einsum("hkwc,hk->hwc", across[rows], row_weights)
    return np.clip(np.rint(down), 0, 255).astype(np.uint8)


def warp_affine(image: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """OpenCV's `warpAffine(image, matrix, (W, H), INTER_LINEAR, BORDER_REFLECT_101)` for float32 (H, W, C).

    Each output pixel reads the input at the inverse map of its place; as in OpenCV's fixed point, the point is
    rounded to 1/32 pixel (10-bit products, then 5 bits kept) and the four neighbours are weighted bilinearly.
    """
    h, w = image.shape[:2]
    inverse = invert_affine(matrix)
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
    r0, r1, c0, c1 = reflect101(row, h), reflect101(row + 1, h), reflect101(col, w), reflect101(col + 1, w)
    top = image[r0, c0] * ((1 - fr) * (1 - fc)) + image[r0, c1] * ((1 - fr) * fc)
    return top + image[r1, c0] * (fr * (1 - fc)) + image[r1, c1] * (fr * fc)


def invert_affine(m: np.ndarray) -> np.ndarray:
    """`cv2.invertAffineTransform`, in its arithmetic."""
    det = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    d = 1.0 / det if det != 0 else 0.0
    a11, a22, a12, a21 = m[1, 1] * d, m[0, 0] * d, -m[0, 1] * d, -m[1, 0] * d
    return np.array(
        [[a11, a12, -a11 * m[0, 2] - a12 * m[1, 2]], [a21, a22, -a21 * m[0, 2] - a22 * m[1, 2]]], dtype=np.float64
    )


def reflect101(index: np.ndarray, n: int) -> np.ndarray:
    """OpenCV's BORDER_REFLECT_101 index: … 2 1 | 0 1 2 … n−1 | n−2 …"""
    if n == 1:
        return np.zeros_like(index)
    period = 2 * n - 2
    folded = np.abs(index) % period
    return np.where(folded >= n, period - folded, folded)
