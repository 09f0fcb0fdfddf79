"""Text embeddings kept on disk, one row per distinct text: what the answer mapper (`relabel.suggest.textmap`) and
the text-neighbour distractors compare answers with (a vocabulary's names, descriptions and short descriptions).

Content addressed: a row is found by its encoder's id and the hash of its text, so a run that needs 20 class texts
embeds those 20 and no more, a vocabulary that gains a class embeds that class's texts alone, and vocabularies
share the texts they have in common. Nothing is shipped with the package: the first run with an encoder embeds what
it lacks (the built-in vocabulary's ~32,000 class texts with MiniLM: minutes of CPU, 407 CPU s once measured on two
busy cores, with a progress bar on a terminal) and keeps it; later runs read it back in under a second of CPU.

Where: `CACHE/text-embeddings/ENCODER/`, CACHE being the user's cache folder
(`relabel.common.kept_arrays.user_cache_dir`: `$RELABEL_CACHE`, else `$XDG_CACHE_HOME/relabel`, else
`~/.cache/relabel`), which the commands use: a row depends only on the encoder and the text, so every workspace of a
user shares it and a second workspace embeds nothing again; a caller may name another folder (`cache_dir`). An encoder's
folder holds shard files `DIGEST.npz` (`keys`: (n,) the texts' hashes; `vectors`: (n, D) float16), each written whole
(`relabel.common.atomic`) and named by its keys: two runs embedding at once never mix bytes, and a run that is
interrupted keeps the parts it finished. A folder of more than `MAX_SHARDS` shards is merged into one.

Rows are stored as float16 and always returned as the stored values (float32, L2-normalised again), whether they
were embedded a moment ago or read back, so a first run and a later one score alike.
"""

from __future__ import annotations

import hashlib
import re
import sys
import zipfile
from pathlib import Path
from typing import Protocol

import numpy as np

from relabel.common.atomic import atomic_writer, output_error
from relabel.common.errors import RelabelError
from relabel.common.kept_arrays import user_cache_dir
from relabel.common.progress import progress_bar

FOLDER = "text-embeddings"
MAX_SHARDS = 8  # more shards than this in an encoder's folder are merged into one
ENCODE_PART = 2048  # texts embedded at once, and kept as one shard: a progress bar counts the parts
_KEY = "S32"  # a text's key: the first 128 bits of its SHA-256, in hex
_READ_ERRORS = (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile)


class TextEncoder(Protocol):
    id: str  # stable name: the cache keeps each encoder's rows apart by it

    def encode(self, texts: list[str]) -> np.ndarray: ...  # (N, D) float32, L2-normalised rows


def encoder_folder(cache_dir: Path | None, encoder_id: str) -> Path:
    """`cache_dir/text-embeddings/NAME-HASH` for `encoder_id` (the user cache folder when `cache_dir` is None):
    readable, and distinct for ids that differ only in characters a file name cannot hold."""
    root = (cache_dir if cache_dir is not None else user_cache_dir()) / FOLDER
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", encoder_id).strip("._")[-48:] or "encoder"
    return root / f"{slug}-{hashlib.sha256(encoder_id.encode('utf-8')).hexdigest()[:12]}"


def text_keys(texts: list[str]) -> np.ndarray:
    """(n,) the texts' keys: the first 128 bits of each text's SHA-256 (UTF-8), as 32 hex characters."""
    digests = [hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest()[:32] for t in texts]
    return np.array(digests, dtype=_KEY).reshape(len(texts))


def encode_cached(encoder: TextEncoder, texts: list[str], cache_dir: Path | None, what: str) -> np.ndarray:
    """(len(texts), D) float32 unit rows: each text's embedding by `encoder`, read from the cache (module docstring)
    in `cache_dir` (the user cache folder when None), the texts it lacks embedded once each and kept there. `what`
    names the texts on the progress bar ("class descriptors"). An unwritable cache is an OutputError naming it."""
    if not texts:
        return np.asarray(encoder.encode([]), dtype=np.float32)
    folder = encoder_folder(cache_dir, encoder.id)
    unique, first, inverse = np.unique(text_keys(texts), return_index=True, return_inverse=True)
    keys, vectors = read_store(folder)
    at = _positions(keys, unique)
    missing = np.flatnonzero(at < 0)
    missing = missing[np.argsort(first[missing], kind="stable")]  # embedded in the order the texts come
    if len(missing):
        todo = [texts[i] for i in first[missing]]
        fresh = _embed(encoder, todo, unique[missing], folder, what, vectors.shape[1] if len(keys) else None)
        keys = np.concatenate([keys, unique[missing]])
        vectors = np.concatenate([vectors, fresh]) if len(vectors) else fresh
        at = _positions(keys, unique)
        _compact(folder)
    return unit_rows(vectors[at[inverse.reshape(-1)]])


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """(n, D) float32 rows of `vectors` divided by their L2 norms."""
    rows = np.asarray(vectors, dtype=np.float32)
    return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-12)


def read_store(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """Every row kept in an encoder's folder: (n,) keys and (n, D) float16 vectors (empty when there are none). A
    shard that cannot be read (cut short by a full disk, say) is removed, so its texts are embedded again; the list
    of shards is read again when one was merged away meanwhile by another run."""
    for _ in range(3):
        shards = _shards(folder)
        parts = [_read_shard(p) for p in shards]
        if all(p is not None or p_path.exists() for p, p_path in zip(parts, shards)):
            break  # nothing vanished while it was read (a vanished shard's rows are in the merged one)
    found = [p for p in parts if p is not None]
    if not found:
        return np.empty(0, dtype=_KEY), np.empty((0, 0), dtype=np.float16)
    dims = {v.shape[1] for _, v in found}
    if len(dims) > 1:
        raise RelabelError(f"the cached embeddings in {folder} differ in size ({sorted(dims)}); remove that folder")
    return np.concatenate([k for k, _ in found]), np.concatenate([v for _, v in found])


def _shards(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.npz") if p.is_file())


def _read_shard(path: Path) -> tuple[np.ndarray, np.ndarray] | None:
    try:
        with np.load(path, allow_pickle=False) as shard:
            keys, vectors = shard["keys"], shard["vectors"]
    except FileNotFoundError:
        return None  # merged into another shard by a run beside this one
    except _READ_ERRORS:
        path.unlink(missing_ok=True)
        return None
    if keys.dtype != np.dtype(_KEY) or keys.ndim != 1 or vectors.ndim != 2 or len(vectors) != len(keys):
        path.unlink(missing_ok=True)
        return None
    return keys, vectors.astype(np.float16, copy=False)


def _positions(keys: np.ndarray, want: np.ndarray) -> np.ndarray:
    """(len(want),) the row of `keys` holding each wanted key, -1 where none does."""
    if not len(keys):
        return np.full(len(want), -1, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    at = np.minimum(np.searchsorted(ordered, want), len(ordered) - 1)
    return np.where(ordered[at] == want, order[at], -1)


def _embed(
    encoder: TextEncoder, texts: list[str], keys: np.ndarray, folder: Path, what: str, dim: int | None
) -> np.ndarray:
    """(n, D) float16 embeddings of `texts` (distinct), encoded in parts of ENCODE_PART, each kept as a shard as soon
    as it is done; a progress bar on a terminal when there is more than one part (a few seconds of work or more).
    Rows of another size than the `dim` already kept are refused before anything is written."""
    bar = progress_bar(
        len(texts), f"embedding {what} with {encoder.id} (once)", enabled=len(texts) > ENCODE_PART and _tty()
    )
    parts = []
    try:
        for start in range(0, len(texts), ENCODE_PART):
            chunk = texts[start : start + ENCODE_PART]
            vectors = np.asarray(encoder.encode(chunk), dtype=np.float32).reshape(len(chunk), -1)
            if dim is not None and vectors.shape[1] != dim:
                raise RelabelError(
                    f"the cached embeddings of text encoder {encoder.id!r} in {folder} have {dim} dimensions, the "
                    f"encoder now gives {vectors.shape[1]}; remove that folder to embed them again"
                )
            dim = vectors.shape[1]
            parts.append(unit_rows(vectors).astype(np.float16))
            write_shard(folder, keys[start : start + ENCODE_PART], parts[-1])
            bar.update(len(chunk))
    finally:
        bar.close()
    return np.concatenate(parts)


def _tty() -> bool:
    return sys.stderr.isatty()


def write_shard(folder: Path, keys: np.ndarray, vectors: np.ndarray) -> Path:
    """Keep (n,) `keys` and their (n, D) float16 `vectors` as one shard, named by its keys, written whole."""
    path = folder / f"{hashlib.sha256(keys.tobytes()).hexdigest()[:20]}.npz"
    try:
        with atomic_writer(path, private=True) as f:
            np.savez(f, keys=keys, vectors=vectors)
    except OSError as exc:
        raise output_error(path, exc) from None
    return path


def _compact(folder: Path) -> None:
    """Merge a folder of more than MAX_SHARDS shards into one (a text kept twice, by two runs at once, once)."""
    shards = _shards(folder)
    if len(shards) <= MAX_SHARDS:
        return
    parts = [p for p in map(_read_shard, shards) if p is not None]
    if not parts:
        return
    keys, first = np.unique(np.concatenate([k for k, _ in parts]), return_index=True)
    merged = write_shard(folder, keys, np.concatenate([v for _, v in parts])[first])
    for shard in shards:
        if shard != merged:
            shard.unlink(missing_ok=True)
