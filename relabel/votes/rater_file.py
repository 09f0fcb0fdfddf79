"""ReaL's `real_raters.npz` read for its votes: the positions and values of the answer tensor's non-zero entries.

The tensor (85 raters x 184,962 pairs x 3 answers, float64) inflates to 377 MB, of which 2 % is not zero. It is inflated
a few raters at a time and only its non-zero entries are kept, so the 377 MB are never held at once (reading it whole
was 1.5 of the import's CPU seconds, this read about 0.8). Anything unusual about the archive (a member missing or too
large, a header numpy would refuse, Fortran order, a shape other than raters x pairs x 3, a cut or corrupted member)
leaves the file to `relabel.common.arrays.read_npz`, which reads it whole and names the problem: the checks and their
messages are read_npz's own.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy

from relabel.common.arrays import MAX_HEADER_BYTES, MAX_NPZ_BYTES, check_npy_header, read_npz
from relabel.common.errors import InputError

MEMBERS = ("tensor", "info", "ids")
WHAT = "a ReaL raters file"
STREAM_BYTES = 1 << 24  # tensor bytes inflated at a time


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
    """The file with its tensor inflated a few raters at a time, or None when anything is unusual."""
    try:
        with zipfile.ZipFile(path) as z:
            members = {m.filename.removesuffix(".npy"): m for m in z.infolist() if not m.is_dir()}
            if any(n not in members for n in MEMBERS) or sum(members[n].file_size for n in MEMBERS) > MAX_NPZ_BYTES:
                return None
            member = members["tensor"]
            with z.open(member) as f:
                check_npy_header(f, f"{path} member tensor", member.file_size)
            with z.open(member) as f:
                read_header = npy.read_array_header_1_0 if npy.read_magic(f) == (1, 0) else npy.read_array_header_2_0
                shape, fortran_order, dtype = read_header(f, max_header_size=MAX_HEADER_BYTES)
                if fortran_order or len(shape) != 3 or shape[2] != 3 or dtype.kind not in "iuf":
                    return None
                found = _nonzero_entries(f, shape, dtype)
                f.read()  # to the member's end, where its CRC is checked
    except (InputError, OSError, ValueError, EOFError, zlib.error, zipfile.BadZipFile, NotImplementedError):
        return None
    rest = read_npz(path, MEMBERS[1:], what=WHAT)
    return RaterArrays(shape, dtype, rest["info"], rest["ids"], streamed=found)


def _nonzero_entries(f: IO[bytes], shape: tuple[int, ...], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """(flat positions, values) of the non-zero entries of the C-order array of `shape` and `dtype` read from `f`."""
    row = shape[1] * shape[2]  # entries per rater
    step = max(1, STREAM_BYTES // max(row * dtype.itemsize, 1))
    hot, values = [np.empty(0, dtype=np.int64)], [np.empty(0, dtype=dtype)]
    for start in range(0, shape[0], step):
        size = min(step, shape[0] - start) * row * dtype.itemsize
        data = f.read(size)
        if len(data) != size:
            raise EOFError("the tensor member ends early")
        block = np.frombuffer(data, dtype=dtype)
        at = np.flatnonzero(block)
        hot.append(at + start * row)
        values.append(block[at])
    return np.concatenate(hot), np.concatenate(values)
