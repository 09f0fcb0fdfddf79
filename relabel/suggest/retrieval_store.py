"""The embeddings of a retrieval run, kept as files beside the workspace's database (`WORKSPACE/embeddings/...`).

A run's folder holds `texts.npy` (C, d) float32, one L2-normalised query per class of the dataset's vocabulary (in
class-index order), `meta.json` (the model, the template, the dimension), and one `part-NNNNN.npz` per chunk of
images: `image_ids` (n,) int64 and `embeddings` (n, d) float32 of the images that were embedded, and `failed_ids`,
`failed_reasons` of those that could not be read. Every file is written whole under a temporary name and renamed,
so an interrupted run leaves only whole parts; the next call embeds the images no part holds.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from relabel.common.atomic import write_atomic
from relabel.common.errors import InputError

EMBEDDINGS_DIR = "embeddings"
TEXTS, META = "texts.npy", "meta.json"
_PART = re.compile(r"^part-(\d{5,})\.npz$")


def run_folder(workspace: Path, dataset: str, run: str) -> Path:
    """WORKSPACE/embeddings/<dataset>-<run>-<hash>: readable, and distinct for names that differ only in the
    characters a file name cannot hold."""
    digest = hashlib.sha256(json.dumps([dataset, run]).encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{dataset}-{run}")[:60]
    return workspace / EMBEDDINGS_DIR / f"{slug}-{digest}"


@dataclass(frozen=True, eq=False)
class StoredEmbeddings:
    """What a run's folder holds: images sorted by id, `images` (n, d) and `texts` (C, d), both float32."""

    image_ids: np.ndarray
    images: np.ndarray
    texts: np.ndarray
    failed: dict[int, str]  # image id -> why it could not be embedded
    meta: dict[str, Any]


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def write_texts(folder: Path, texts: np.ndarray, meta: dict[str, Any]) -> None:
    """The class queries' embeddings and the run's description (written at every call: the same model gives the
    same queries)."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / TEXTS, _npy_bytes(np.asarray(texts, np.float32)))
    write_atomic(folder / META, json.dumps(meta, indent=1, sort_keys=True) + "\n")


def write_part(folder: Path, image_ids: list[int], embeddings: np.ndarray, failed: dict[int, str]) -> Path:
    """One chunk's embeddings (and the images that failed) as the next part file."""
    folder.mkdir(parents=True, exist_ok=True)
    numbers = [int(m.group(1)) for p in folder.iterdir() if (m := _PART.match(p.name))]
    path = folder / f"part-{max(numbers, default=-1) + 1:05d}.npz"
    buffer = io.BytesIO()
    np.savez(
        buffer,
        image_ids=np.asarray(image_ids, np.int64),
        embeddings=np.asarray(embeddings, np.float32).reshape(len(image_ids), -1),
        failed_ids=np.asarray(list(failed), np.int64),
        failed_reasons=np.asarray(list(failed.values()), dtype=str),
    )
    write_atomic(path, buffer.getvalue())
    return path


def _parts(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if _PART.match(p.name)) if folder.is_dir() else []


def done_ids(folder: Path) -> set[int]:
    """The images some part holds, embedded or failed: the next call skips them."""
    done: set[int] = set()
    for path in _parts(folder):
        with np.load(path, allow_pickle=False) as part:
            done.update(int(i) for i in part["image_ids"])
            done.update(int(i) for i in part["failed_ids"])
    return done


def load_embeddings(folder: Path, run: str) -> StoredEmbeddings:
    """Every part of the run's folder, images sorted by id (an image embedded twice keeps its last part's row);
    InputError naming the run and the folder when it is missing or unreadable."""
    again = f"run `relabel suggest --protocol retrieval --run {run}` again to embed the images"
    if not (folder / TEXTS).is_file() or not (folder / META).is_file():
        raise InputError(f"retrieval run {run!r}: its embeddings are missing from {folder}; {again}")
    try:
        texts = np.load(folder / TEXTS, allow_pickle=False)
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
        ids: list[np.ndarray] = []
        rows: list[np.ndarray] = []
        failed: dict[int, str] = {}
        for path in _parts(folder):
            with np.load(path, allow_pickle=False) as part:
                ids.append(part["image_ids"])
                rows.append(part["embeddings"])
                failed.update(zip((int(i) for i in part["failed_ids"]), (str(r) for r in part["failed_reasons"])))
    except (OSError, ValueError, KeyError) as exc:
        raise InputError(f"retrieval run {run!r}: cannot read its embeddings in {folder} ({exc}); {again}") from None
    width = texts.shape[1] if texts.ndim == 2 else 0
    all_ids = np.concatenate(ids) if ids else np.zeros(0, np.int64)
    images = np.concatenate(rows) if rows else np.zeros((0, width), np.float32)
    # the last occurrence of each id: reverse, take the first of each, order by id
    unique, first = np.unique(all_ids[::-1], return_index=True)
    keep = len(all_ids) - 1 - first
    return StoredEmbeddings(unique.astype(np.int64), images[keep], texts, failed, meta)
