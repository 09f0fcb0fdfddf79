"""Every bad-image case gets a clear status and reason; readable oddities get notes."""

from __future__ import annotations

from pathlib import Path

import pytest

from db.enums import ImageStatus
from relabel.common.imagecheck import check_image
from tests import images


def test_good_jpeg_has_hash_size_and_format(tmp_path: Path) -> None:
    c = check_image(images.photo(tmp_path / "a.jpg", (64, 48)))
    assert c.status is ImageStatus.ok and c.reason == ""
    assert (c.width, c.height, c.format, c.mode) == (64, 48, "JPEG", "RGB")
    assert c.sha256 is not None and len(c.sha256) == 64 and c.bytes == (tmp_path / "a.jpg").stat().st_size


def test_missing_file(tmp_path: Path) -> None:
    c = check_image(tmp_path / "nope.jpg")
    assert c.status is ImageStatus.missing and "not found" in c.reason


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (images.zero_bytes, "empty file (0 bytes)"),
        (images.html_named_jpeg, "HTML"),
        (images.truncated_jpeg, "truncated"),
        (images.png_bomb, "decompression bomb"),
    ],
)
def test_bad_files_are_unreadable_with_a_reason(tmp_path: Path, make, expected: str) -> None:
    c = check_image(make(tmp_path / "bad.JPEG"))
    assert c.status is ImageStatus.unreadable
    assert expected in c.reason


def test_decompression_bomb_is_caught_from_the_header_alone(tmp_path: Path) -> None:
    path = images.png_bomb(tmp_path / "bomb.png", 30_000, 30_000)
    assert path.stat().st_size < 1000
    c = check_image(path)
    assert c.status is ImageStatus.unreadable
    assert "30000×30000 = 900.0 MP" in c.reason or "exceeds" in c.reason


def test_custom_pixel_limit(tmp_path: Path) -> None:
    c = check_image(images.photo(tmp_path / "a.png", (100, 100)), max_pixels=5000)
    assert c.status is ImageStatus.unreadable and "10000" not in c.reason and "0.0 MP" in c.reason


def test_truncated_jpeg_passes_header_only_check(tmp_path: Path) -> None:
    path = images.truncated_jpeg(tmp_path / "t.jpg")
    assert check_image(path, decode=False).status is ImageStatus.ok
    assert check_image(path, decode=True).status is ImageStatus.unreadable


def test_binary_garbage(tmp_path: Path) -> None:
    p = tmp_path / "x.jpg"
    p.write_bytes(bytes(range(256)) * 4)
    c = check_image(p)
    assert c.status is ImageStatus.unreadable and "unrecognised format" in c.reason


@pytest.mark.parametrize(
    ("make", "note"),
    [
        (images.cmyk_jpeg, "CMYK"),
        (images.png_16bit, "16-bit"),
        (images.palette_alpha_png, "palette with transparency"),
    ],
)
def test_unusual_modes_are_ok_with_a_note(tmp_path: Path, make, note: str) -> None:
    c = check_image(make(tmp_path / ("odd.jpg" if make is images.cmyk_jpeg else "odd.png")))
    assert c.status is ImageStatus.ok
    assert note in c.notes


def test_exif_rotation_swaps_displayed_size(tmp_path: Path) -> None:
    c = check_image(images.exif_rotated_jpeg(tmp_path / "r.jpg", 6))
    assert c.status is ImageStatus.ok
    assert c.exif_orientation == 6
    assert (c.width, c.height) == (20, 60)
    assert "rotated 90° clockwise" in c.notes


def test_exif_orientation_1_is_not_noted(tmp_path: Path) -> None:
    c = check_image(images.exif_rotated_jpeg(tmp_path / "r.jpg", 1))
    assert c.exif_orientation is None and c.notes == "" and (c.width, c.height) == (60, 20)
