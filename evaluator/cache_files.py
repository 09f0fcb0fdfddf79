"""Files of a cache folder (`evaluator.stored_resamples`, `evaluator.kept_scores`): each written whole, under a
temporary name renamed into place, so a reader never sees half a file; the least recently used removed once the
folder holds too many. Nothing here raises for a folder that cannot be written: a cache that keeps nothing is
still correct."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path


@functools.cache
def source_digest(*modules: str) -> str:
    """A digest of the source of these modules of `evaluator`: numbers kept under it are those this code computes
    (a changed module is another digest, and what the old code kept is never read)."""
    digest = hashlib.blake2b(digest_size=8)
    for name in modules:
        digest.update(Path(__file__).with_name(f"{name}.py").read_bytes())
    return digest.hexdigest()


def write_whole(path: Path, parts: Sequence[bytes | memoryview]) -> bool:
    """Write `parts` one after another as the file `path`; False (and nothing left behind) where it cannot be."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as f:
            for part in parts:
                f.write(part)
        umask = os.umask(0)  # mkstemp makes the file private; give it the mode a plain open() would have
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
        return True
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return False


def touch(path: Path) -> None:
    """Mark `path` used now: the last to be removed by `trim`."""
    with contextlib.suppress(OSError):
        os.utime(path)


def trim(folder: Path, pattern: str, *, max_bytes: int | None = None, max_files: int | None = None) -> None:
    """Remove the least recently used files of `folder` matching `pattern` beyond `max_bytes` or `max_files`."""
    try:
        files = sorted(folder.glob(pattern), key=lambda p: p.stat().st_mtime, reverse=True)
        held = 0
        for n, path in enumerate(files, 1):
            held += path.stat().st_size
            if (max_bytes is not None and held > max_bytes) or (max_files is not None and n > max_files):
                path.unlink(missing_ok=True)
    except OSError:  # a file removed meanwhile by another process
        pass
