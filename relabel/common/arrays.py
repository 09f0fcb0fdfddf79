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

Members are inflated by zlib-ng (`open_member`), with zipfile's limits and checks: ReaL's 377 MB tensor, 98 % zeros,
inflates and passes its CRC in 0.1 CPU s, against 1.2 s through Python's zlib.
"""

from __future__ import annotations

import io
import math
import struct
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import IO, cast

import numpy as np
from numpy.lib import format as npy
from zlib_ng import zlib_ng

from relabel.common.errors import InputError, brief

MAX_ARRAY_BYTES = 1 << 30  # one array, in memory (1 GiB)
MAX_NPZ_BYTES = 1 << 30  # all members an .npz read inflates to, together (1 GiB)
MAX_HEADER_BYTES = 10_000  # numpy's own default bound on an .npy header
READ_BYTES = 1 << 20  # compressed bytes read from the file at a time
LOCAL_HEADER = struct.Struct("<4s2xH18xHH")  # a zip member's local header: signature, flags, name and extra sizes
# zlib-ng's error class (its stub declares an instance, hence the cast)
INFLATE_ERROR = cast(type[Exception], zlib_ng.error)
UNREAD_FLAGS = 0x1 | 0x20 | 0x40  # encrypted, patched or strongly encrypted members: `zipfile` says why not


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
                with open_member(z, members[n]) as f:
                    check_npy_header(f, f"{path} member {n}", members[n].file_size, max_bytes)
            arrays = {}
            for n in names:
                with open_member(z, members[n]) as f:
                    arrays[n] = npy.read_array(f, allow_pickle=False, max_header_size=MAX_HEADER_BYTES)
            return arrays
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
        raise InputError(f"{path}: not a readable .npz archive ({brief(str(exc), 120)})") from None


def open_member(z: zipfile.ZipFile, member: zipfile.ZipInfo) -> IO[bytes]:
    """`member` of the archive `z` as a stream of its inflated bytes, inflated by zlib-ng when it is deflated (or
    read as it is when stored): as `z.open(member)` reads it, never past the size the directory states, its CRC
    checked once that size is read. Other compressions, and encryption, are left to `z.open`. A damaged member raises
    zipfile.BadZipFile; one whose data ends early reads short (b"" from there on)."""
    if member.compress_type not in (zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED) or member.flag_bits & UNREAD_FLAGS:
        return z.open(member)
    if z.filename is None:
        raise NotImplementedError("an archive opened from a stream, not a file")
    return _Inflating(Path(z.filename), member)  # type: ignore[return-value]  # a BufferedIOBase reads as IO[bytes]


class _Inflating(io.BufferedIOBase):
    """The stream of `open_member`: the member's data from its local header on, inflated as it is read."""

    def __init__(self, path: Path, member: zipfile.ZipInfo) -> None:
        self._file = path.open("rb")
        self.name = member.filename
        self._size, self._left, self._raw_left = member.file_size, member.file_size, member.compress_size
        self._crc, self._expected_crc = 0, member.CRC
        self._inflater = zlib_ng.decompressobj(-15) if member.compress_type == zipfile.ZIP_DEFLATED else None
        try:
            self._skip_local_header(member)
        except BaseException:
            self._file.close()
            raise

    def _skip_local_header(self, member: zipfile.ZipInfo) -> None:
        self._file.seek(member.header_offset)
        header = self._file.read(LOCAL_HEADER.size)
        if len(header) != LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
            raise zipfile.BadZipFile("Bad magic number for file header")
        _, flags, name_size, extra_size = LOCAL_HEADER.unpack(header)
        name = self._file.read(name_size).decode("utf-8" if flags & 0x800 else "cp437")
        if name != member.orig_filename:
            raise zipfile.BadZipFile(f"File name in directory {member.orig_filename!r} and header {name!r} differ.")
        self._file.seek(extra_size, io.SEEK_CUR)

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._size - self._left

    def read(self, size: int | None = -1) -> bytes:
        """The next `size` bytes (all that are left when `size` is negative or None); fewer only at the end."""
        want = self._left if size is None or size < 0 else min(size, self._left)
        parts = []
        while want > 0 and (part := self._next(want)):
            parts.append(part)
            want -= len(part)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    read1 = read

    def _next(self, size: int) -> bytes:
        """Up to `size` (> 0) more inflated bytes; b"" where the data ends."""
        out = b""
        while not out:
            tail = self._inflater.unconsumed_tail if self._inflater is not None else b""
            raw = tail or self._file.read(min(size if self._inflater is None else READ_BYTES, self._raw_left))
            self._raw_left -= 0 if tail else len(raw)
            try:
                out = raw if self._inflater is None else self._inflater.decompress(raw, size)
            except INFLATE_ERROR as exc:
                raise zipfile.BadZipFile(f"damaged data in {self.name!r} ({exc})") from None
            if not out and not raw and (self._inflater is None or not self._inflater.unconsumed_tail):
                return b""  # the data ends before the stated size
        self._left -= len(out)
        self._crc = zlib_ng.crc32(out, self._crc)
        if self._left == 0 and self._crc != self._expected_crc:
            raise zipfile.BadZipFile(f"Bad CRC-32 for file {self.name!r}")
        return out

    def close(self) -> None:
        self._file.close()
        super().close()


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
