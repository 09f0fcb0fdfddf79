"""Bootstrap resample counts kept in a folder between processes (`evaluator.paired.resamples_kept(folder)`).

A `JointBootstrap`'s counts depend on (n_images, n_boot, seed) alone, so a set drawn by one evaluation is the same
set the next one would draw: drawing 1,000 resamples of 50,000 images costs about a third of a CPU second, reading
them back from a mapped file a hundredth. A file holds one set as bytes (the sets `resamples_kept` keeps in
memory; one with a count above 255 is never stored), behind a header naming its settings and the CRC-32 of the
counts; a file whose header or CRC does not match is ignored and drawn again. Files are written whole (a temporary
file renamed), read through a read-only map, and the least recently read are removed once the folder holds more
than MAX_FOLDER_BYTES of them. A folder that cannot be written (a read-only workspace) keeps nothing.
"""

from __future__ import annotations

import mmap
import struct
import zlib
from pathlib import Path

import numpy as np

from evaluator import cache_files

FORMAT = 1  # bump when the draws change: older files are then never read
MAGIC = b"RSMP"
HEADER = struct.Struct("<4sIQQqI")  # magic, format, n_images, n_boot, seed, CRC-32 of the counts
PREFIX = "resamples"
MAX_FOLDER_BYTES = 400_000_000  # about eight sets of ImageNet val's 50,000 x 1,000


def path_of(folder: Path, n_images: int, n_boot: int, seed: int) -> Path:
    """The file of one set; its name carries a digest of the code that draws the sets (a file another version
    drew is never read)."""
    code = cache_files.source_digest("paired", "index_draws")
    return folder / f"{PREFIX}-v{FORMAT}-{code}-{n_images}-{n_boot}-{seed}.bin"


def read(folder: Path, n_images: int, n_boot: int, seed: int) -> np.ndarray | None:
    """(n_boot, n_images) uint8, read-only, mapped from the folder's file; None when there is none or it does not
    hold these settings whole and intact."""
    path = path_of(folder, n_images, n_boot, seed)
    try:
        with path.open("rb") as f:
            view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # missing, unreadable, or empty (nothing to map)
        return None
    if not _holds(view, n_images, n_boot, seed):
        view.close()
        return None
    cache_files.touch(path)
    return np.frombuffer(view, np.uint8, offset=HEADER.size).reshape(n_boot, n_images)


def _holds(view: mmap.mmap, n_images: int, n_boot: int, seed: int) -> bool:
    """Whether the mapped file holds the whole set of these settings, as its CRC says it was written."""
    if len(view) != HEADER.size + n_images * n_boot:
        return False
    magic, fmt, n, boots, stored_seed, crc = HEADER.unpack_from(view)
    if (magic, fmt, n, boots, stored_seed) != (MAGIC, FORMAT, n_images, n_boot, seed):
        return False
    with memoryview(view) as data, data[HEADER.size :] as counts:
        return zlib.crc32(counts) == crc


def write(folder: Path, counts: np.ndarray, seed: int) -> None:
    """Keep `counts` (n_boot, n_images) uint8 in `folder`, then trim the folder to MAX_FOLDER_BYTES (the least
    recently read first). Nothing is kept, and nothing raised, where the folder cannot be written."""
    n_boot, n_images = counts.shape
    data = np.ascontiguousarray(counts, np.uint8)
    header = HEADER.pack(MAGIC, FORMAT, n_images, n_boot, seed, zlib.crc32(data.data))
    if cache_files.write_whole(path_of(folder, n_images, n_boot, seed), [header, data.data]):
        cache_files.trim(folder, f"{PREFIX}-*.bin", max_bytes=MAX_FOLDER_BYTES)
