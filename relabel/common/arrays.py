"""Numeric arrays a user gives (.npy files of predictions, scores or confusion counts, .npz archives of votes): read
without pickles, and refused with one line when they hold anything but integers or finite floats in one or two
dimensions.

An .npy header states the array's shape and dtype, and `np.load` allocates whatever it states: a 200-byte file whose
header claims a 1.86 TiB array ends in a MemoryError, and an .npz member compressed 700:1 inflates for a minute. So
every header is read first (`numpy.lib.format.read_magic` and `read_array_header_*`, never pickles) and checked
against what the file can hold and against MAX_ARRAY_BYTES; in an .npz the zip directory's inflated sizes are summed
and checked against MAX_NPZ_BYTES before anything is inflated. Python's zipfile stops inflating a member at the size
its directory entry states (a member that claims less than it holds fails its CRC check), so the caps bound both the
memory and the time a file can cost. The largest file the product reads, ReaL's published `real_raters.npz` (85
raters x 184,962 pairs x 3), is 2.5 MB on disk and 0.42 GB inflated.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy

from relabel.common.errors import InputError, brief

MAX_ARRAY_BYTES = 1 << 30  # one array, in memory (1 GiB)
MAX_NPZ_BYTES = 1 << 30  # all members an .npz read inflates to, together (1 GiB)
MAX_HEADER_BYTES = 10_000  # numpy's own default bound on an .npy header


def check_npy_header(f: IO[bytes], where: str, available: int, max_bytes: int = MAX_ARRAY_BYTES) -> int:
    """Read the .npy header at `f`'s position and check the array it announces, before any allocation: a plain
    dtype (no Python objects), at most `max_bytes` bytes, and no more than the `available` bytes of the file or
    member (header included). Returns the array's size in bytes; anything else is one InputError naming `where`."""
    try:
        version = npy.read_magic(f)
        if version == (1, 0):
            shape, _, dtype = npy.read_array_header_1_0(f, max_header_size=MAX_HEADER_BYTES)
        elif version in ((2, 0), (3, 0)):  # 3.0 differs only in allowing UTF-8 field names
            shape, _, dtype = npy.read_array_header_2_0(f, max_header_size=MAX_HEADER_BYTES)
        else:
            raise ValueError(f"format version {version[0]}.{version[1]} is not one numpy writes")
    except (ValueError, EOFError, SyntaxError, TypeError) as exc:
        raise InputError(f"{where}: not a readable .npy array ({brief(str(exc), 120)})") from None
    if dtype.hasobject:
        raise InputError(f"{where}: holds Python objects ({dtype}), which are read only as pickles; not read")
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > max_bytes or math.prod(shape) > max_bytes:
        raise InputError(
            f"{where}: its header announces a {dtype} array of shape {shape} ({size_text(nbytes)}); "
            f"at most {size_text(max_bytes)} is read"
        )
    if f.tell() + nbytes > available:
        raise InputError(
            f"{where}: its header announces {nbytes:,} bytes of data ({dtype}, shape {shape}) but the file holds "
            f"{max(0, available - f.tell()):,}; the file is cut or its header is wrong"
        )
    return nbytes


def size_text(nbytes: int) -> str:
    """A byte count in binary units: "1.86 TiB", "1 GiB", "420.00 MiB"."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20)):
        if nbytes >= scale:
            return f"{nbytes / scale:,.2f} {unit}".replace(".00 ", " ")
    return f"{nbytes:,} bytes"


def read_npy(path: Path, max_bytes: int = MAX_ARRAY_BYTES) -> np.ndarray:
    """The array of an .npy file, its header checked first (`check_npy_header`)."""
    try:
        with path.open("rb") as f:
            check_npy_header(f, str(path), path.stat().st_size, max_bytes)
            f.seek(0)
            return npy.read_array(f, allow_pickle=False, max_header_size=MAX_HEADER_BYTES)
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"{path}: not a readable .npy array ({brief(str(exc), 120)})") from None


def read_npz(path: Path, names: Sequence[str], *, what: str, max_bytes: int = MAX_NPZ_BYTES) -> dict[str, np.ndarray]:
    """The arrays `names` of an .npz archive (`what` says what kind of file it should be, for the message when one
    is missing). Their inflated sizes from the zip directory, together at most `max_bytes`, and each header are
    checked before any member is inflated; other members are never read."""
    try:
        with zipfile.ZipFile(path) as z:
            members = {m.filename.removesuffix(".npy"): m for m in z.infolist() if not m.is_dir()}
            missing = [n for n in names if n not in members]
            if missing:
                raise InputError(
                    f"{path}: lacks {', '.join(missing)}; {what} holds {', '.join(names[:-1])} and {names[-1]} "
                    f"(found: {', '.join(members) or 'nothing'})"
                )
            inflated = sum(members[n].file_size for n in names)
            if inflated > max_bytes:
                raise InputError(
                    f"{path}: {', '.join(names)} inflate to {size_text(inflated)} ({path.stat().st_size:,} bytes "
                    f"on disk); at most {size_text(max_bytes)} is read"
                )
            for n in names:
                with z.open(members[n]) as f:
                    check_npy_header(f, f"{path} member {n}", members[n].file_size, max_bytes)
            arrays = {}
            for n in names:
                with z.open(members[n]) as f:
                    arrays[n] = npy.read_array(f, allow_pickle=False, max_header_size=MAX_HEADER_BYTES)
            return arrays
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
        raise InputError(f"{path}: not a readable .npz archive ({brief(str(exc), 120)})") from None


def load_array(path: Path) -> np.ndarray:
    """The numeric array in an .npy file: integers or finite floats, 1-D or 2-D; anything else is refused."""
    arr = read_npy(path)
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
