"""Folders written whole or not at all: filled under a temporary name beside the target, then renamed into place.

The folder counterpart of `relabel.common.atomic.write_atomic`, for outputs that are a directory of files (a Hugging
Face `save_to_disk` dataset). A reader never sees a half-filled folder under the target's name, and a failed write
leaves the target as it was. A target that exists must be an empty folder, or, with `replace`, a folder holding a
previous output of the same kind (it has the `marker` file): a mistyped `--out ~ --force` never deletes a home
directory. A symbolic link or a file at the target is refused, as `relabel.common.atomic` refuses them.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from relabel.common.atomic import output_error
from relabel.common.errors import InputError, brief


def write_folder_atomic(out: Path, fill: Callable[[Path], None], *, marker: str, replace: bool = False) -> None:
    """Call `fill(folder)` on a new, empty folder beside `out`, then rename it to `out`.

    `out` may be missing or an empty folder; with `replace`, also a folder that holds `marker` (the same kind of
    output written before), which is swapped out and deleted once the new folder is in place. Anything else is an
    InputError before `fill` runs. A file system error is an OutputError naming `out`; any failure removes the
    temporary folder and leaves `out` as it was.
    """
    check_folder_target(out, marker=marker, replace=replace)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp"))
    except OSError as exc:
        raise output_error(out, exc) from None
    try:
        fill(tmp)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes the folder private; give it the mode mkdir would
        _move_into_place(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise output_error(out, exc) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_folder_target(out: Path, *, marker: str, replace: bool) -> None:
    """Refuse, as an InputError, an `out` that a new folder may not take the place of (see write_folder_atomic)."""
    try:
        mode = os.lstat(out).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise output_error(out, exc) from None
    shown = brief(str(out), 120)
    if stat.S_ISLNK(mode) or not stat.S_ISDIR(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a folder"
        raise InputError(f"--out {shown} is {kind}; give the path of a new or empty folder; nothing written")
    if not any(out.iterdir()):
        return
    if not replace:
        raise InputError(
            f"--out {shown} is a folder that is not empty; give a new folder, or --force to replace an earlier "
            "export there; nothing written"
        )
    if not (out / marker).is_file():
        raise InputError(
            f"--out {shown} holds files but no {marker}, so it is not an earlier export; --force replaces only "
            "those; nothing written"
        )


def _move_into_place(tmp: Path, out: Path) -> None:
    """Rename `tmp` to `out`; a non-empty `out` (checked replaceable) is first renamed aside, then deleted."""
    try:
        os.rename(tmp, out)  # a missing or empty `out`: one rename
        return
    except OSError:
        if not out.is_dir() or not any(out.iterdir()):
            raise
    old = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.", suffix=".old"))
    os.rename(out, old / out.name)
    try:
        os.rename(tmp, out)
    except OSError:
        os.rename(old / out.name, out)  # put the earlier export back
        shutil.rmtree(old, ignore_errors=True)
        raise
    shutil.rmtree(old, ignore_errors=True)
