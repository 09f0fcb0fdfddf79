"""Arrays a user gives, read with their .npy headers checked first: crafted files, each a few kilobytes or megabytes
on disk, that announce or inflate to more than the product reads are refused in one line before any allocation."""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as npy

from relabel.common.arrays import MAX_NPZ_BYTES, load_array, open_member, read_npz
from relabel.common.errors import InputError
from relabel.common.vocabulary import load_builtin
from relabel.votes.formats import parse_real_raters

NAMES = ("tensor", "info", "ids")


def npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    out = io.BytesIO()
    npy.write_array_header_1_0(out, {"descr": descr, "fortran_order": False, "shape": shape})
    return out.getvalue()


def small_members() -> dict[str, bytes]:
    """info and ids of a one-pair, one-rater file, as .npy bytes."""
    members = {}
    for name, arr in (("info", np.array([["ILSVRC2012_val_00000001.JPEG", "0"]])), ("ids", np.array([7]))):
        out = io.BytesIO()
        np.save(out, arr)
        members[name] = out.getvalue()
    return members


def raw_zip(members: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip archive written field by field: (name, deflated bytes, size the directory states, CRC) per member, so
    a test can build a bomb without inflating it, or a directory that understates a member."""
    body, directory = b"", b""
    for name, deflated, size, crc in members:
        offset, encoded = len(body), name.encode()
        body += struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(deflated), size, len(encoded), 0)
        body += encoded + deflated
        directory += struct.pack(
            "<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc, len(deflated), size, len(encoded), 0, 0, 0,
            0, 0, offset,
        )  # fmt: skip
        directory += encoded
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(directory), len(body), 0)
    return body + directory + end


def deflated(data: bytes) -> bytes:
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    return co.compress(data) + co.flush()


def zeros_deflated(header: bytes, total: int) -> bytes:
    """A raw deflate stream of `header` and then zeros up to `total` bytes, built from one repeated block (each
    block after a full flush is independent), so a 2 GB member costs a few megabytes and no inflating."""
    block = 1 << 24
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = co.compress(header + bytes(block - len(header))) + co.flush(zlib.Z_FULL_FLUSH)
    again = co.compress(bytes(block)) + co.flush(zlib.Z_FULL_FLUSH)
    assert total % block == 0
    return first + again * (total // block - 1) + co.flush()


def archive_with_tensor(path: Path, tensor: tuple[bytes, int, int]) -> Path:
    rest = [(f"{n}.npy", deflated(b), len(b), zlib.crc32(b)) for n, b in small_members().items()]
    path.write_bytes(raw_zip([("tensor.npy", *tensor), *rest]))
    return path


def test_a_header_claiming_1_86_tib_is_one_line_before_any_allocation(tmp_path: Path) -> None:
    header = npy_header((85, 1_000_000_000, 3))
    path = archive_with_tensor(tmp_path / "huge.npz", (deflated(header), len(header), zlib.crc32(header)))
    assert path.stat().st_size < 2000
    with pytest.raises(InputError) as refused:
        parse_real_raters(path, load_builtin())
    assert "huge.npz member tensor: its header announces a float64 array of shape (85, 1000000000, 3)" in str(
        refused.value
    )
    assert "(1.86 TiB); at most 1 GiB is read" in str(refused.value) and len(str(refused.value).splitlines()) == 1


def test_a_3_mb_file_that_inflates_to_2_gb_is_refused_from_its_zip_directory(tmp_path: Path) -> None:
    total = 2 << 30
    stream = zeros_deflated(npy_header((85, total // (85 * 3 * 8), 3)), total)
    path = archive_with_tensor(tmp_path / "bomb.npz", (stream, total, 0))
    assert path.stat().st_size < 3_000_000 and total > MAX_NPZ_BYTES
    with pytest.raises(InputError, match=r"bomb.npz: tensor, info, ids inflate to 2 GiB \([\d,]+ bytes on disk\); "):
        read_npz(path, NAMES, what="a ReaL raters file")


def test_a_directory_that_understates_a_member_stops_inflating_at_the_stated_size(tmp_path: Path) -> None:
    """The zip directory claims 1 kB for a member whose stream inflates to 64 MB: reading stops at 1 kB and the
    member fails its CRC check (nothing near 64 MB is inflated or allocated)."""
    header = npy_header((3, 1, 3))
    stated = len(header) + 72
    stream = zeros_deflated(header, 4 << 24)
    path = archive_with_tensor(tmp_path / "lies.npz", (stream, stated, 12345))
    with pytest.raises(InputError, match=r"lies.npz: not a readable .npz archive \(.Bad CRC-32 for file"):
        read_npz(path, NAMES, what="a ReaL raters file")


def test_a_header_that_announces_more_than_the_member_holds_is_refused(tmp_path: Path) -> None:
    data = npy_header((1000, 1000, 3)) + bytes(64)
    path = archive_with_tensor(tmp_path / "short.npz", (deflated(data), len(data), zlib.crc32(data)))
    with pytest.raises(InputError, match=r"member tensor: its header announces 24,000,000 bytes .* but the file"):
        read_npz(path, NAMES, what="a ReaL raters file")


def test_objects_are_never_unpickled(tmp_path: Path) -> None:
    np.savez(tmp_path / "obj.npz", tensor=np.array([{"a": 1}], dtype=object), info=np.zeros(1), ids=np.zeros(1))
    with pytest.raises(InputError, match="obj.npz member tensor: holds Python objects"):
        read_npz(tmp_path / "obj.npz", NAMES, what="a ReaL raters file")


def test_npy_files_are_checked_the_same_way(tmp_path: Path) -> None:
    (tmp_path / "huge.npy").write_bytes(npy_header((50_000, 10**9), "<f4"))
    with pytest.raises(InputError, match=r"huge.npy: its header announces a float32 array .* \(181.90 TiB\)"):
        load_array(tmp_path / "huge.npy")
    (tmp_path / "cut.npy").write_bytes(npy_header((50_000,), "<i8") + bytes(100))
    with pytest.raises(InputError, match="cut.npy: its header announces 400,000 bytes .* holds 100;"):
        load_array(tmp_path / "cut.npy")
    (tmp_path / "junk.npy").write_bytes(b"\x93NUMPY\x09\x00")
    with pytest.raises(InputError, match="junk.npy: not a readable .npy array"):
        load_array(tmp_path / "junk.npy")
    np.save(tmp_path / "ok.npy", np.arange(6).reshape(2, 3))
    assert load_array(tmp_path / "ok.npy").tolist() == [[0, 1, 2], [3, 4, 5]]


def test_a_well_formed_archive_reads_as_np_load_reads_it(tmp_path: Path) -> None:
    tensor = np.zeros((1, 1, 3), dtype=np.int8)
    tensor[0, 0, 2] = 1
    np.savez_compressed(tmp_path / "r.npz", tensor=tensor, info=[["ILSVRC2012_val_00000001.JPEG", "0"]], ids=[7])
    arrays = read_npz(tmp_path / "r.npz", NAMES, what="a ReaL raters file")
    with np.load(tmp_path / "r.npz") as z:
        assert all(np.array_equal(arrays[n], z[n]) and arrays[n].dtype == z[n].dtype for n in NAMES)
    assert arrays["tensor"].flags.writeable
    with zipfile.ZipFile(tmp_path / "r.npz") as z:
        assert sorted(z.namelist()) == ["ids.npy", "info.npy", "tensor.npy"]


def test_open_member_reads_what_zipfile_reads_in_any_size_of_read(tmp_path: Path) -> None:
    """Deflated and stored members read through zlib-ng give zipfile's bytes whatever the sizes asked for."""
    data = np.random.default_rng(0).integers(0, 3, 100_000, dtype=np.uint8).tobytes() + bytes(300_000)
    path = tmp_path / "m.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("d.npy", data, compress_type=zipfile.ZIP_DEFLATED)
        z.writestr("s.npy", data, compress_type=zipfile.ZIP_STORED)
        z.writestr("e.npy", b"", compress_type=zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(path) as z:
        for name in ("d.npy", "s.npy"):
            for size in (1, 7, 4096, 1 << 20):
                with open_member(z, z.getinfo(name)) as f:
                    parts = [f.read(size) for _ in range(len(data) // size + 2)]
                    assert b"".join(parts) == data and f.tell() == len(data) and f.read() == b""
                    assert all(len(p) == size for p in parts[: len(data) // size])  # whole reads
            with open_member(z, z.getinfo(name)) as f:
                assert f.read(10) == data[:10] and f.tell() == 10 and f.read() == data[10:]
        with open_member(z, z.getinfo("e.npy")) as f:
            assert f.read() == b""


def test_a_member_whose_crc_or_data_is_wrong_is_one_line(tmp_path: Path) -> None:
    data = npy_header((1, 1, 3)) + np.array([0.0, 0.0, 1.0]).tobytes()
    members = [(f"{n}.npy", deflated(b), len(b), zlib.crc32(b)) for n, b in small_members().items()]
    (tmp_path / "crc.npz").write_bytes(raw_zip([("tensor.npy", deflated(data), len(data), 7), *members]))
    with zipfile.ZipFile(tmp_path / "crc.npz") as z, open_member(z, z.getinfo("tensor.npy")) as f:
        assert f.read(len(data) - 1) == data[:-1]  # the CRC is checked once the last byte is read
        with pytest.raises(zipfile.BadZipFile, match="Bad CRC-32 for file 'tensor.npy'"):
            f.read()
    with pytest.raises(InputError, match=r"crc.npz: not a readable .npz archive \(.Bad CRC-32 for file"):
        read_npz(tmp_path / "crc.npz", NAMES, what="a ReaL raters file")
    damaged = b"\xff" * 8 + deflated(data)[8:]  # 0xff starts a reserved block type
    (tmp_path / "bad.npz").write_bytes(raw_zip([("tensor.npy", damaged, len(data), zlib.crc32(data)), *members]))
    with pytest.raises(InputError) as refused:
        read_npz(tmp_path / "bad.npz", NAMES, what="a ReaL raters file")
    assert "bad.npz: not a readable .npz archive (\"damaged data in 'tensor.npy' (Error -3" in str(refused.value)
    assert len(str(refused.value).splitlines()) == 1
