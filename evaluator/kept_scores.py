"""Expected top-1 scores kept by the content they were computed from, in the folder of `resamples_kept(folder)`.

`uncertain_accuracies` is a pure function of its arguments (the predictions, the posteriors, the masks, the seed):
the same arguments give the same numbers, bit for bit. So within `evaluator.paired.resamples_kept(folder)` its
result is kept in the folder under a digest of every argument and of the source of the modules that compute it,
and read back whenever the digest recurs (evaluating again after adding a reference, a metric or a robustness run
draws no label twice). A changed prediction, posterior, mask or seed, or changed code, is another digest, so a
kept score is always the score the call would compute. Files are JSON (never code); one that does not parse into
scores is ignored and computed again; the folder keeps the MAX_FILES most recently used.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evaluator import cache_files

PREFIX = "uncertain-scores"
MAX_FILES = 512  # a file is one call's scores (under a kilobyte per run)
# the modules whose code decides the numbers: a change to any of them is a new digest
MODULES = ("label_uncertainty", "label_draws", "index_draws", "paired", "posteriors", "references", "scoring")


def digest(*parts: Any) -> str | None:
    """A hex digest of `parts` (arrays by dtype, shape and bytes; None, numbers, strings, and sequences of them);
    None for a part it cannot digest by content (an array of objects), which is then never kept."""
    h = hashlib.blake2b(cache_files.source_digest(*MODULES).encode(), digest_size=20)
    try:
        _update(h, parts)
    except _NoDigest:
        return None
    return h.hexdigest()


class _NoDigest(Exception):
    pass


def _update(h: Any, part: Any) -> None:
    if part is None or isinstance(part, bool | int | float | str | np.generic):
        h.update(f"{type(part).__name__}:{part!r};".encode())
    elif isinstance(part, np.ndarray):
        if part.dtype.hasobject:
            raise _NoDigest
        arr = np.ascontiguousarray(part)
        h.update(f"array:{arr.dtype.str}:{arr.shape};".encode())
        h.update(arr.data if arr.size else b"")
    elif isinstance(part, Sequence):
        h.update(f"seq:{len(part)};".encode())
        for item in part:
            _update(h, item)
    else:
        _update(h, np.asarray(part))


def read(folder: Path, key: str) -> list[dict[str, Any]] | None:
    """The scores kept under `key`, as the mappings `write` was given; None when there are none or the file does
    not hold a list of mappings."""
    path = folder / f"{PREFIX}-{key}.json"
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return None
    cache_files.touch(path)
    return items


def write(folder: Path, key: str, items: list[dict[str, Any]]) -> None:
    """Keep `items` (one mapping of numbers per score) under `key`, then trim the folder to MAX_FILES; nothing
    kept, nothing raised, where the folder cannot be written."""
    if cache_files.write_whole(folder / f"{PREFIX}-{key}.json", [json.dumps(items).encode()]):
        cache_files.trim(folder, f"{PREFIX}-*.json", max_files=MAX_FILES)
