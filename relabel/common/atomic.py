"""Files written whole or not at all: a temporary file beside the target, renamed over it once complete.

Readers never see half a file, and two writers of the same file both write whole files (the last rename wins).
Snapshot exports, evaluation reports, the studio's display cache and the files it serves all write through here.

Only regular files are written. A rename replaces whatever directory entry has the target's name, so a target that
is a device (`/dev/null`), a socket, a FIFO or a symbolic link would itself be replaced by a plain file: as root,
`--out /dev/null` would turn the null device into a file, and a link would stop being one. Such a target is refused
with one line before anything is written, and checked again just before the rename.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from relabel.common.errors import OutputError, brief


def write_atomic(path: Path, content: str | bytes) -> None:
    """Write text (UTF-8) or bytes to a temporary file beside `path`, then rename: readers never see half a file.

    A file system error (disk full, no permission, a place such as /proc that takes no files) is an OutputError
    naming the path and the reason; the temporary file is removed and `path` is left as it was.
    """
    data = content.encode("utf-8") if isinstance(content, str) else content
    try:
        with atomic_writer(path) as f:
            f.write(data)
    except OSError as exc:
        raise output_error(path, exc) from None


@contextmanager
def atomic_writer(path: Path, *, private: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write `path`'s new content into; renamed over `path` when the block ends without error.

    On any exception the temporary file is removed, `path` is left as it was, and the exception (an OSError for a
    file system error) propagates. The file gets the mode a plain open() would give it, or stays readable by its
    owner alone with `private` (cached and served copies nobody else should read). A target that exists and is not a
    regular file is an OutputError (see the module docstring).
    """
    check_regular_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            yield f
        if not private:  # mkstemp makes the file private; give it the mode a plain open() would have.
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(tmp, 0o666 & ~umask)
        check_regular_target(path)  # the name may have been given to a device or a link while the file was written
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


NOT_REGULAR = (  # what a directory entry that is not a regular file is, in words
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
)


def check_regular_target(path: Path) -> None:
    """Refuse, as an OutputError, a `path` that exists and is not a regular file (the entry itself: a link is not
    followed). A path that does not exist, or cannot be examined, is left to the write to judge."""
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return
    if stat.S_ISREG(mode):
        return
    kind = next((name for test, name in NOT_REGULAR if test(mode)), "an entry of another kind")
    hint = "give the path it points to" if stat.S_ISLNK(mode) else "give the path of a new or regular file"
    raise OutputError(
        f"cannot write {brief(str(path), 120)}: it is {kind}, not a regular file; {hint}; nothing written"
    )


def output_error(path: Path, exc: OSError) -> OutputError:
    """One line for a file that could not be written: the path, the system's reason and its errno name."""
    reason = exc.strerror or str(exc)
    name = errno.errorcode.get(exc.errno) if exc.errno is not None else None
    code = f", {name}" if name else ""
    return OutputError(f"cannot write {brief(str(path), 120)}: {reason}{code}; nothing written")
