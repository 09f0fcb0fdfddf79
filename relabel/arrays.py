"""Numeric arrays a user gives (.npy files of predictions, scores or confusion counts): read without pickles, and
refused with one line when they hold anything but integers or finite floats in one or two dimensions."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from relabel.errors import InputError


def load_array(path: Path) -> np.ndarray:
    """The numeric array in an .npy file: integers or finite floats, 1-D or 2-D; anything else is refused."""
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"{path}: not a readable .npy array ({exc})") from None
    if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "iuf":
        kind = getattr(arr, "dtype", type(arr).__name__)
        raise InputError(f"{path}: holds {kind} values; expected class indices (integers) or scores (floats)")
    if arr.ndim not in (1, 2):
        raise InputError(f"{path}: shape {arr.shape}; expected (N,) class indices or an (N, K) matrix")
    if arr.dtype.kind == "f" and not np.isfinite(arr).all():
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise InputError(
            f"{path.name} row {bad[0]}: value {arr[tuple(bad)]} at {tuple(int(x) for x in bad)} is not a finite "
            "number (NaN and infinity are not); nothing written"
        )
    return arr
