"""Full score vectors of an imported model run: an N x C matrix (one row per image, one column per class of the
dataset's vocabulary), kept beside the database so that tools that need every class's score (cleanlab's
`find_label_issues`, calibration) get them exactly; the database holds each image's top-5 as for any run.

Input: an .npy (N, C) float matrix whose rows follow a stated image order (`--order`), or an .npz archive with
`scores` (N, C floats), `ids` (N image keys: paths, file names or stems) and optionally `classes` (C wnids or class
names, in the columns' order; the columns are put in the vocabulary's order). Every header is checked before
anything is allocated (`relabel.common.arrays`); the values must be finite floats.

Storage: one uncompressed .npz (`scores` as float32, `image_ids` ascending) under the workspace's `scores/`
folder, named by the content's sha256, written whole before the run's rows are committed; the run's params name
the file (`scores_file`) and its hash. 50,000 x 1,000 scores take 200 MB there, not 50 million database rows.

A 200 MB matrix costs more in fresh memory than in arithmetic (on a virtual machine, first touching 200 MB costs
about half a CPU second): an archive that stores `scores` as it is (`np.savez` does; `np.savez_compressed`
deflates) is read as a read-only view of the file, its CRC checked, and the stored file is written straight to
disk and hashed from there, so neither matrix is ever copied whole into memory of its own.
"""

from __future__ import annotations

import hashlib
import io
import math
import mmap
import os
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
from numpy.lib import format as npy
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select
from zlib_ng import zlib_ng

from db.enums import SourceKind
from db.models import Image, Label, LabelSource, ModelRun
from relabel.common.arrays import (
    LOCAL_HEADER,
    MAX_ARRAY_BYTES,
    MAX_HEADER_BYTES,
    MAX_NPZ_BYTES,
    UNREAD_FLAGS,
    check_npy_header,
    read_npy,
    read_npz,
)
from relabel.common.atomic import check_regular_target, output_error, write_atomic
from relabel.common.errors import InputError, NotFoundError, brief, unknown_name
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import dataset_vocabulary, get_dataset

SCORES_DIR = "scores"  # under the workspace folder
SCORE_KEYS = ("scores", "ids")  # the members an .npz of score vectors must hold; "classes" is optional


@dataclass
class ScoreMatrix:
    """Scores as read from a file: `keys[i]` names the image of row i; columns in the vocabulary's order."""

    keys: list[str]
    scores: np.ndarray  # (N, C) float32


@dataclass
class RunScores:
    """A run's stored score vectors in the dataset's image order (ascending image id)."""

    run: str
    image_ids: np.ndarray  # (N,) int64
    paths: list[str]
    scores: np.ndarray  # (N, C) float32
    classes: list[str]  # the vocabulary's wnids (or names), one per column


def _check_matrix(arr: np.ndarray, where: str, n_classes: int) -> np.ndarray:
    if arr.dtype.kind != "f":
        raise InputError(f"{where}: holds {arr.dtype} values; score vectors are floats (one per class)")
    if arr.ndim != 2:
        raise InputError(f"{where}: shape {arr.shape}; score vectors are an (N, {n_classes}) matrix")
    if arr.shape[1] != n_classes:
        raise InputError(f"{where}: {arr.shape[1]} columns; the vocabulary has {n_classes} classes (one column each)")
    # One float64 sum is finite when every score is (a float32 sum cannot overflow it): no N x C mask to build
    # unless a score is not, or float64 scores overflow the sum.
    with np.errstate(over="ignore", invalid="ignore"):
        total = arr.sum(dtype=np.float64)
    if not np.isfinite(total) and not (finite := np.isfinite(arr)).all():
        row, column = (int(x) for x in np.argwhere(~finite)[0])
        raise InputError(
            f"{where} row {row}: score {arr[row, column]} in column {column} is not a finite number (NaN and infinity "
            "are not); nothing written"
        )
    stored = arr.astype(np.float32, copy=False)
    if arr.dtype.itemsize > 4:  # a wider float can hold a finite score that float32, how scores are kept, cannot
        with np.errstate(over="ignore", invalid="ignore"):
            if not np.isfinite(stored.sum(dtype=np.float64)) and not (fits := np.isfinite(stored)).all():
                row, column = (int(x) for x in np.argwhere(~fits)[0])
                raise InputError(
                    f"{where} row {row}: score {arr[row, column]} in column {column} is beyond the range of float32 "
                    "(about ±3.4e38), in which scores are stored; nothing written"
                )
    return stored


def _text_list(arr: np.ndarray, where: str, what: str) -> list[str]:
    if arr.ndim != 1 or arr.dtype.kind not in "US":
        raise InputError(f"{where}: {what} must be a 1-D array of strings, got {arr.dtype} of shape {arr.shape}")
    items = [x.decode() if isinstance(x, bytes) else str(x) for x in arr.tolist()]
    bad = next((i for i, k in enumerate(items) if not k.strip()), None)
    if bad is not None:
        raise InputError(f"{where}: {what} entry {bad} is empty")
    return [k.strip() for k in items]


def _column_order(classes: list[str], vocab: Vocabulary, where: str) -> np.ndarray:
    """For each vocabulary class, the file column holding it; the file's classes must be the vocabulary's, once."""
    if len(classes) != len(vocab):
        raise InputError(f"{where}: classes lists {len(classes)} classes; the vocabulary has {len(vocab)}")
    try:
        indices = [vocab.resolve(c) for c in classes]
    except InputError as exc:
        raise InputError(f"{where}: classes: {exc}") from None
    columns = np.full(len(vocab), -1, dtype=np.int64)
    for column, index in enumerate(indices):
        if columns[index] >= 0:
            raise InputError(
                f"{where}: classes names {brief(classes[column], 60)} twice (columns {columns[index]}, {column})"
            )
        columns[index] = column
    return columns


def read_score_matrix(path: Path, vocab: Vocabulary, order: list[str] | None) -> ScoreMatrix:
    """The score vectors of an .npy (rows in `order`) or an .npz (`scores`, `ids`, optional `classes`); checked as
    the module docstring says. Anything else is one InputError naming the file and the reason."""
    if path.suffix.lower() == ".npz":
        try:
            with zipfile.ZipFile(path) as z:
                members = {name.removesuffix(".npy") for name in z.namelist()}
        except (OSError, zipfile.BadZipFile) as exc:
            raise InputError(f"{path}: not a readable .npz archive ({brief(str(exc), 120)})") from None
        names = (*SCORE_KEYS, "classes") if "classes" in members else SCORE_KEYS
        arrays = _read_arrays(path, names)
        scores = _check_matrix(arrays["scores"], f"{path.name} member scores", len(vocab))
        keys = _text_list(arrays["ids"], f"{path.name} member ids", "ids")
        if len(keys) != len(scores):
            raise InputError(f"{path}: {len(keys):,} ids for {len(scores):,} rows of scores")
        if "classes" in arrays:
            columns = _column_order(_text_list(arrays["classes"], f"{path.name}", "classes"), vocab, path.name)
            if not np.array_equal(columns, np.arange(len(vocab))):
                scores = scores[:, columns]
        return ScoreMatrix(keys, scores)
    if order is None:
        raise InputError(f"{path}: an NPY array has no image keys; pass --order FILE or --order sorted")
    scores = _check_matrix(read_npy(path), path.name, len(vocab))
    if len(scores) != len(order):
        raise InputError(f"{path}: shape {scores.shape} does not match the {len(order)} images of the stated order")
    return ScoreMatrix(list(order), scores)


def _read_arrays(path: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """The members `names` of the .npz at `path`, as `relabel.common.arrays.read_npz` reads and checks them, with
    `scores` a read-only view of the file itself when the archive stores it uncompressed (`_mapped_member`)."""
    what = "an archive of score vectors"
    mapped = _mapped_member(path, "scores", names)
    if mapped is None:
        return read_npz(path, names, what=what)
    return {"scores": mapped, **read_npz(path, [n for n in names if n != "scores"], what=what)}


def _mapped_member(path: Path, name: str, names: Sequence[str]) -> np.ndarray | None:
    """Member `name` of the .npz at `path` as a read-only array over the file's own bytes (memory-mapped), when the
    archive stores it uncompressed and whole and everything `read_npz` checks of `names` holds: each of them
    present, their inflated sizes within MAX_NPZ_BYTES, `name`'s .npy header a plain array within
    MAX_ARRAY_BYTES that the member holds, its CRC right. None otherwise: `read_npz` then reads the archive, and
    refuses it with its own message."""
    try:
        with zipfile.ZipFile(path) as z:
            members = {m.filename.removesuffix(".npy"): m for m in z.infolist() if not m.is_dir()}
        if any(n not in members for n in names) or sum(members[n].file_size for n in names) > MAX_NPZ_BYTES:
            return None
        member = members[name]
        if member.compress_type != zipfile.ZIP_STORED or member.flag_bits & UNREAD_FLAGS:
            return None
        with path.open("rb") as f:
            start = _member_data_offset(f, member)
            if start is None:
                return None
            end = start + member.file_size
            f.seek(start)
            nbytes = check_npy_header(f, str(path), end, MAX_ARRAY_BYTES)
            f.seek(start)
            shape, fortran, dtype = _npy_header(f)
            offset = f.tell()
            if not nbytes or offset + nbytes != end:
                return None
            view = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        with memoryview(view) as data, data[start:end] as stored:
            if zlib_ng.crc32(stored) != member.CRC:
                return None
        flat = np.frombuffer(view, dtype=dtype, count=math.prod(shape), offset=offset)
        return flat.reshape(shape, order="F" if fortran else "C")
    except (OSError, ValueError, EOFError, SyntaxError, TypeError, zipfile.BadZipFile, InputError):
        return None


def _member_data_offset(f: IO[bytes], member: zipfile.ZipInfo) -> int | None:
    """Where `member`'s data begin in the archive file `f`: after its local header, whose name must be the
    directory's (None when it is not)."""
    f.seek(member.header_offset)
    header = f.read(LOCAL_HEADER.size)
    if len(header) != LOCAL_HEADER.size or header[:4] != b"PK\x03\x04":
        return None
    _, flags, name_size, extra_size = LOCAL_HEADER.unpack(header)
    if f.read(name_size).decode("utf-8" if flags & 0x800 else "cp437") != member.orig_filename:
        return None
    return member.header_offset + LOCAL_HEADER.size + name_size + extra_size


def _npy_header(f: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran order, dtype) of the .npy header at `f`'s position, which `check_npy_header` has passed."""
    if npy.read_magic(f) == (1, 0):
        return npy.read_array_header_1_0(f, max_header_size=MAX_HEADER_BYTES)
    return npy.read_array_header_2_0(f, max_header_size=MAX_HEADER_BYTES)


def top_k(scores: np.ndarray, k: int, *, block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """(the k best classes of each row, best first, ties by class index; their scores).

    k passes of argmax (which gives the first of equal maxima) over blocks of `block` rows, each pass masking the
    class it found: a sort or argpartition of the whole matrix would allocate its N x C indices (400 MB for
    50,000 x 1,000) and took 25 times longer. Scores are finite floats (the mask is -inf)."""
    n, n_classes = scores.shape
    k = min(k, n_classes)
    top = np.empty((n, k), dtype=np.int64)
    buffer = np.empty((min(block, n), n_classes), dtype=scores.dtype)  # one block's copy, reused: no page faults
    for start in range(0, n, block):
        part = buffer[: min(block, n - start)]
        np.copyto(part, scores[start : start + block])
        rows = np.arange(len(part))
        for j in range(k):
            best = part.argmax(axis=1)
            top[start : start + len(part), j] = best
            part[rows, best] = -np.inf
    return top, np.take_along_axis(scores, top, axis=1)


def write_scores(workspace: Path, image_ids: np.ndarray, scores: np.ndarray) -> tuple[str, str, bool]:
    """Store `scores` (rows for `image_ids`) sorted by image id under WORKSPACE/scores; returns (the file's path
    relative to the workspace, its content's sha256, whether this call created it). Written whole or not at all:
    into a temporary file beside its final name, hashed there, then renamed to that name (or removed when a file of
    that content is there already). Its mode is what a plain open() gives."""
    folder = workspace / SCORES_DIR
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=folder, prefix=".scores.", suffix=".npz.tmp")
    except OSError as exc:
        raise output_error(folder, exc) from None
    staged, target = Path(name), folder
    try:
        with os.fdopen(fd, "w+b") as f:
            write_npz_in_id_order(f, image_ids, scores)
            f.flush()
            digest = _file_sha256(f)
        relative = f"{SCORES_DIR}/{digest[:32]}.npz"
        target = workspace / relative
        if target.is_file():
            staged.unlink()
            return relative, digest, False
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(staged, 0o666 & ~umask)
        check_regular_target(target)
        os.replace(staged, target)
    except OSError as exc:
        staged.unlink(missing_ok=True)
        raise output_error(target, exc) from None
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    return relative, digest, True


def _file_sha256(f: IO[bytes]) -> str:
    """sha256 of the whole of the file `f` (written and flushed), read through a memory map: no copy of it (a file
    system that maps no files is read a megabyte at a time)."""
    if not f.seek(0, os.SEEK_END):
        return hashlib.sha256(b"").hexdigest()
    try:
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return hashlib.sha256(view).hexdigest()
    except (OSError, ValueError):
        f.seek(0)
        digest = hashlib.sha256()
        while chunk := f.read(1 << 20):
            digest.update(chunk)
        return digest.hexdigest()


def npz_in_id_order(image_ids: np.ndarray, scores: np.ndarray, *, block: int = 4096) -> io.BytesIO:
    """The .npz that `np.savez(f, scores=scores[order].astype(np.float32), image_ids=image_ids[order])` writes, `order`
    sorting the image ids (stable), byte for byte, in memory (`write_npz_in_id_order`)."""
    buffer = io.BytesIO()
    write_npz_in_id_order(buffer, image_ids, scores, block=block)
    return buffer


def write_npz_in_id_order(f: IO[bytes], image_ids: np.ndarray, scores: np.ndarray, *, block: int = 4096) -> None:
    """Write to `f` (seekable) the .npz that `np.savez(f, scores=scores[order].astype(np.float32),
    image_ids=image_ids[order])` writes, `order` sorting the image ids (stable), byte for byte; the sorted matrix is
    never made whole (200 MB for 50,000 x 1,000): its rows go to the archive `block` at a time, gathered into one
    reused buffer, or straight from `scores` when they are float32 rows in id order already."""
    order = np.argsort(image_ids, kind="stable")
    in_place = scores.dtype == np.float32 and scores.flags.c_contiguous and np.array_equal(order, np.arange(len(order)))
    gathered = np.empty((0 if in_place else min(block, len(order)), scores.shape[1]), dtype=np.float32)
    with zipfile.ZipFile(f, mode="w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
        with z.open("scores.npy", "w", force_zip64=True) as member:
            header = npy.header_data_from_array_1_0(np.broadcast_to(np.float32(0), scores.shape))
            npy.write_array_header_1_0(member, header)
            for start in range(0, len(order), block):
                rows = order[start : start + block]
                if in_place:
                    part = scores[start : start + len(rows)]
                elif scores.dtype == np.float32:
                    part = np.take(scores, rows, axis=0, out=gathered[: len(rows)], mode="clip")
                else:
                    part = np.ascontiguousarray(scores[rows], dtype=np.float32)
                member.write(part.data)
        with z.open("image_ids.npy", "w", force_zip64=True) as member:
            npy.write_array(member, image_ids[order])


def discard_scores(workspace: Path, relative: str | None, session: Session | None = None) -> None:
    """Remove a score file no run names any more (checked in `session` when given)."""
    if not relative:
        return
    if session is not None:
        for params in session.exec(select(col(ModelRun.params))).all():
            if (params or {}).get("scores_file") == relative:
                return
    (workspace / relative).unlink(missing_ok=True)


def load_run_scores(session: Session, workspace: Path, run: ModelRun, vocab: Vocabulary) -> RunScores:
    """The run's stored score vectors with the paths of their images, in ascending image id."""
    relative = (run.params or {}).get("scores_file")
    if not relative:
        raise NotFoundError(
            f"run {run.name!r} has no stored score vectors; import them with relabel predictions import FILE.npz "
            f"--run {run.name} --replace --keep-scores"
        )
    path = workspace / relative
    if not path.is_file():
        raise NotFoundError(f"run {run.name!r}: its score file {path} is missing from the workspace")
    arrays = read_npz(path, ("scores", "image_ids"), what="a stored score file", max_bytes=MAX_NPZ_BYTES)
    image_ids = arrays["image_ids"].astype(np.int64)
    paths = dict(
        session.exec(select(col(Image.id), col(Image.path)).where(col(Image.id).in_(image_ids.tolist()))).all()
    )
    classes = [c.wnid or c.name for c in vocab.classes]
    return RunScores(run.name, image_ids, [paths[int(i)] for i in image_ids], arrays["scores"], classes)


def run_scores(engine: Engine, workspace: Path, run: str, dataset: str | None = None) -> RunScores:
    """The stored score vectors of run `run` (see `load_run_scores`)."""
    with Session(engine) as s:
        ds = get_dataset(s, dataset)
        found = s.exec(select(ModelRun).where(col(ModelRun.dataset_id) == ds.id, col(ModelRun.name) == run)).first()
        if found is None:
            names = s.exec(select(col(ModelRun.name)).where(col(ModelRun.dataset_id) == ds.id)).all()
            raise unknown_name(f"run of dataset {ds.name!r}", run, names)
        return load_run_scores(s, workspace, found, dataset_vocabulary(s, ds))


def original_top1(engine: Engine, image_ids: np.ndarray, dataset: str | None = None) -> np.ndarray:
    """Each image's first original (ImGT) class, -1 for an image without one: cleanlab's `labels`."""
    with Session(engine) as s:
        ds = get_dataset(s, dataset)
        query = (
            select(col(Label.image_id), col(Label.classes))
            .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
            .where(col(LabelSource.dataset_id) == ds.id, col(LabelSource.kind) == SourceKind.original)
        )
        first = {image_id: classes[0] for image_id, classes in s.exec(query).all() if classes}
    return np.array([first.get(int(i), -1) for i in image_ids], dtype=np.int64)


def export_run_scores(engine: Engine, workspace: Path, run: str, out: Path, dataset: str | None = None) -> RunScores:
    """Write run `run`'s score vectors to the .npz `out`: `scores` (N, C float32), `ids` (image paths),
    `image_ids`, `labels` (ImGT top-1, -1 where none) and `classes` (the columns' wnids), in ascending image id."""
    scores = run_scores(engine, workspace, run, dataset)
    labels = original_top1(engine, scores.image_ids, dataset)
    buffer = io.BytesIO()
    np.savez(
        buffer, scores=scores.scores, ids=np.array(scores.paths), image_ids=scores.image_ids, labels=labels,
        classes=np.array(scores.classes),
    )  # fmt: skip
    write_atomic(out, buffer.getvalue())
    return scores
