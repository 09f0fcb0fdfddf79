"""ReaL's `real_raters.npz` read for its votes: the positions and values of the answer tensor's non-zero entries.

The tensor (85 raters x 184,962 pairs x 3 answers, float64) inflates to 377 MB, of which 2 % is not zero. It is
inflated by zlib-ng (`relabel.common.arrays.open_member`) a megabyte at a time, and only the non-zero entries of each
megabyte are kept, so the 377 MB are never held at once: inflating, checking the CRC and finding the non-zero entries
take about 0.15 CPU s (Python's zlib took 1.2 s to inflate alone). Anything unusual about the archive (a member
missing or too large, a header numpy would refuse, Fortran order, a shape other than raters x pairs x 3, a cut or
corrupted member) leaves the file to `relabel.common.arrays.read_npz`, which reads it whole and names the problem:
the checks and their messages are read_npz's own.
"""

from __future__ import annotations

import math
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy

from relabel.common.arrays import MAX_HEADER_BYTES, MAX_NPZ_BYTES, check_npy_header, open_member, read_npz
from relabel.common.errors import InputError

MEMBERS = ("tensor", "info", "ids")
WHAT = "a ReaL raters file"
STREAM_BYTES = 1 << 20  # tensor bytes inflated at a time: small enough to reuse the same memory


@dataclass
class RaterArrays:
    """The arrays of a raters file: the tensor's `shape` and `dtype`, `info` (pairs x 2) and `ids` (raters,), and
    the tensor itself when it was read whole (else its non-zero entries, from `nonzero`)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    info: np.ndarray
    ids: np.ndarray
    tensor: np.ndarray | None = None
    streamed: tuple[np.ndarray, np.ndarray] | None = None

    def nonzero(self) -> tuple[np.ndarray, np.ndarray]:
        """(M,) the C-order flat positions of the tensor's non-zero entries, ascending, and (M,) their values."""
        if self.streamed is not None:
            return self.streamed
        assert self.tensor is not None  # read whole when not streamed
        flat = self.tensor.reshape(-1)
        hot = np.flatnonzero(flat)
        return hot, flat[hot]

    def answer(self, path: Path, rater: int, pair: int) -> list[object]:
        """tensor[rater, pair] as a list, for an error message (a streamed file is read again, whole)."""
        tensor = self.tensor if self.tensor is not None else read_npz(path, MEMBERS, what=WHAT)["tensor"]
        return tensor[rater, pair].tolist()


def read_rater_file(path: Path) -> RaterArrays:
    """The arrays of ReaL's raters file at `path`; any problem is read_npz's one-line InputError."""
    streamed = _streamed(path)
    if streamed is not None:
        return streamed
    arrays = read_npz(path, MEMBERS, what=WHAT)
    tensor = arrays["tensor"]
    return RaterArrays(tensor.shape, tensor.dtype, arrays["info"], arrays["ids"], tensor=tensor)


def _streamed(path: Path) -> RaterArrays | None:
    """The file with its tensor inflated a megabyte at a time, or None when anything is unusual."""
    try:
        with zipfile.ZipFile(path) as z:
            members = {m.filename.removesuffix(".npy"): m for m in z.infolist() if not m.is_dir()}
            if any(n not in members for n in MEMBERS) or sum(members[n].file_size for n in MEMBERS) > MAX_NPZ_BYTES:
                return None
            member = members["tensor"]
            with open_member(z, member) as f:
                check_npy_header(f, f"{path} member tensor", member.file_size)
            with open_member(z, member) as f:
                read_header = npy.read_array_header_1_0 if npy.read_magic(f) == (1, 0) else npy.read_array_header_2_0
                shape, fortran_order, dtype = read_header(f, max_header_size=MAX_HEADER_BYTES)
                if fortran_order or len(shape) != 3 or shape[2] != 3 or dtype.kind not in "iuf":
                    return None
                found = _nonzero_entries(f, shape, dtype)
                f.read()  # to the member's end, where its CRC is checked
    except (InputError, OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError):
        return None
    rest = read_npz(path, MEMBERS[1:], what=WHAT)
    return RaterArrays(shape, dtype, rest["info"], rest["ids"], streamed=found)


def _nonzero_entries(f: IO[bytes], shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(flat positions, values) of the non-zero entries of the C-order array of `shape` and `dtype` read from `f`."""
    count, itemsize = math.prod(shape), dtype.itemsize
    # zero's bits are all zero: scanning them as unsigned integers is a fifth faster than as floats (a float's -0.0,
    # zero with one bit set, is dropped below)
    bits = np.dtype(f"u{itemsize}") if itemsize in (1, 2, 4, 8) else dtype
    step = max(1, STREAM_BYTES // itemsize)
    hot, values = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=dtype)]
    for start in range(0, count, step):
        size = min(step, count - start) * itemsize
        data = f.read(size)
        if len(data) != size:
            raise EOFError("the tensor member ends early")
        at = np.flatnonzero(np.frombuffer(data, dtype=bits))
        found = np.frombuffer(data, dtype=dtype)[at]
        if dtype.kind == "f":
            keep = found != 0
            at, found = at[keep], found[keep]
        hot.append(at + start)
        values.append(found)
    return np.concatenate(hot), np.concatenate(values)
