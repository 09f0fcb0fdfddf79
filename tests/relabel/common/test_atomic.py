"""Files written whole or not at all, and only as regular files: a device, socket, FIFO, directory or symbolic link
at the target's name is refused in one line and left as it was, with no temporary file beside it."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from relabel.common.atomic import atomic_writer, check_regular_target, write_atomic
from relabel.common.errors import OutputError


def make_fifo(path: Path) -> None:
    os.mkfifo(path)


def make_socket(path: Path) -> None:
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))  # the socket file stays after the socket is closed


def make_link(path: Path) -> None:
    (path.parent / "target.csv").write_text("keep me\n")
    path.symlink_to(path.parent / "target.csv")


def make_dangling_link(path: Path) -> None:
    path.symlink_to(path.parent / "nowhere.csv")


def make_device(path: Path) -> None:
    """A null device node of our own (never /dev/null itself: a broken check must not replace the system's)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("creating a device node needs root")


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (make_fifo, "a FIFO (named pipe)"),
        (make_socket, "a socket"),
        (make_link, "a symbolic link"),
        (make_dangling_link, "a symbolic link"),
        (make_device, "a character device"),
    ],
    ids=["fifo", "socket", "symlink", "dangling-symlink", "device"],
)
def test_a_target_that_is_not_a_regular_file_is_refused_and_left_as_it_was(
    tmp_path: Path, make: Callable[[Path], None], kind: str
) -> None:
    target = tmp_path / "out.csv"
    make(target)
    before = os.lstat(target)
    with pytest.raises(OutputError) as refused:
        write_atomic(target, "image,labels\n")
    message = str(refused.value)
    assert f"it is {kind}, not a regular file" in message and "nothing written" in message
    assert "out.csv" in message and len(message.splitlines()) == 1
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)  # the same entry, not a new file
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary file left
    if kind == "a symbolic link" and (tmp_path / "target.csv").exists():
        assert (tmp_path / "target.csv").read_text() == "keep me\n"


def test_the_system_null_device_is_refused_before_anything_is_written() -> None:
    with pytest.raises(OutputError, match="'/dev/null': it is a character device, not a regular file"):
        check_regular_target(Path("/dev/null"))
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode)


def test_a_link_made_while_the_file_is_written_is_not_replaced(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(OutputError, match="symbolic link"), atomic_writer(target) as f:
        f.write(b"[]")
        target.symlink_to(tmp_path / "elsewhere.json")
    assert target.is_symlink() and [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_regular_file_or_a_new_name_is_written_whole(tmp_path: Path) -> None:
    existing = tmp_path / "a.csv"
    existing.write_text("old\n")
    write_atomic(existing, "new\n")
    write_atomic(tmp_path / "sub" / "b.csv", b"bytes\n")
    assert existing.read_text() == "new\n" and (tmp_path / "sub" / "b.csv").read_bytes() == b"bytes\n"
    check_regular_target(tmp_path / "missing.csv")  # a name that does not exist yet is fine
