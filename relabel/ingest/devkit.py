"""ImageNet validation labels from the ILSVRC-2012 devkit: ground-truth ids 1..1000, mapped to classes through
the devkit's data/meta.mat. Its ids are not the sorted-wnid class order, so the mapping must come from a meta.mat
that really is the devkit's: every check here keeps a bogus one from relabeling 50,000 images silently."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np

from relabel.common.errors import InputError, brief, examples
from relabel.common.textfiles import read_lines
from relabel.common.vocabulary import Vocabulary

DEVKIT_ID = re.compile(r"[0-9]{1,4}")
WNID = re.compile(r"n[0-9]{8}")
DEVKIT_HINT = "pass the ILSVRC-2012 devkit's data/meta.mat, which lists the 1000 leaf classes as ids 1..1000"


def _read_devkit_meta(meta: Path, vocab: Vocabulary) -> dict[int, int]:
    """ILSVRC2012_ID (1..1000) -> class index, through the wnids of the devkit's data/meta.mat.

    The file must list the 1000 ILSVRC-2012 leaf synsets, ids 1..1000 once each, with distinct wnids
    (n########) that are all classes of `vocab`; anything else is refused with one line. A "wnid" that is not
    shaped like one (the number 5) is refused, never read as class index 5.
    """
    from scipy.io import loadmat  # heavy; only the devkit format needs it
    from scipy.io.matlab import MatReadError

    try:
        synsets = np.atleast_1d(loadmat(str(meta), squeeze_me=True)["synsets"])
        fields = synsets.dtype.names or ()
        if "ILSVRC2012_ID" not in fields or "WNID" not in fields:
            raise KeyError("synsets lack the fields ILSVRC2012_ID and WNID")
        rows = [
            (_devkit_int(s["ILSVRC2012_ID"]), s["WNID"], s["num_children"] if "num_children" in fields else 0)
            for s in synsets
        ]
    except (OSError, KeyError, ValueError, TypeError, IndexError, MatReadError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:100]
        raise InputError(
            f"{meta}: not a readable ILSVRC2012 devkit meta.mat ({reason}); pass the devkit's data/meta.mat"
        ) from None
    return _devkit_classes(meta, rows, vocab)


def _devkit_int(value: object) -> int | None:
    """A MATLAB scalar that holds a whole number, else None."""
    arr = np.asarray(value)
    if arr.size != 1 or arr.dtype.kind not in "iuf":
        return None
    number = arr.reshape(()).item()
    return int(number) if float(number).is_integer() else None


def _devkit_classes(meta: Path, rows: list[tuple[int | None, object, object]], vocab: Vocabulary) -> dict[int, int]:
    leaves: list[tuple[int, object, object]] = [(i, w, k) for i, w, k in rows if i is not None and 1 <= i <= 1000]
    ids = Counter(i for i, _, _ in leaves)
    missing = [i for i in range(1, 1001) if i not in ids]
    twice = sorted(i for i, k in ids.items() if k > 1)
    if missing or twice:
        problems = [f"lacks ids {examples(missing)}"] if missing else []
        problems += [f"repeats ids {examples(twice)}"] if twice else []
        raise InputError(f"{meta}: {' and '.join(problems)} among ILSVRC2012_ID 1..1000; {DEVKIT_HINT}")
    out: dict[int, int] = {}
    seen: dict[str, int] = {}
    for i, wnid, kids in sorted(leaves, key=lambda leaf: leaf[0]):
        if not isinstance(wnid, str) or not WNID.fullmatch(wnid):
            raise InputError(f"{meta}: id {i} has WNID {brief(wnid, 40)}, not a wnid like 'n01440764'; {DEVKIT_HINT}")
        if wnid in seen:
            raise InputError(f"{meta}: ids {seen[wnid]} and {i} share the WNID {wnid}; {DEVKIT_HINT}")
        if _devkit_int(kids) != 0:
            raise InputError(f"{meta}: id {i} ({wnid}) has {brief(kids, 40)} children, not a leaf class; {DEVKIT_HINT}")
        index = vocab.try_resolve(wnid)  # not a number: read as a wnid (or a name), never as an index
        if index is None:
            raise InputError(
                f"{meta}: id {i} has WNID {wnid}, which is no class of vocabulary {vocab.name!r}; the devkit labels "
                "ImageNet-1k, so ingest with the built-in imagenet-1k vocabulary (or one with its wnids)"
            )
        seen[wnid] = i
        out[i] = index
    return out


def read_devkit_ground_truth(path: Path, meta: Path | None, vocab: Vocabulary) -> dict[str, int]:
    """Class index by val stem from ILSVRC2012_validation_ground_truth.txt (line n: the id of image n), through
    `meta` (default: the meta.mat beside it). Raises one InputError naming the file and line."""
    if meta is None:
        beside = path.parent / "meta.mat"
        if not beside.exists():
            raise InputError(f"{path}: devkit ids 1..1000 are not class indices; pass --devkit-meta data/meta.mat")
        meta = beside
    id_to_class = _read_devkit_meta(meta, vocab)
    labels: dict[str, int] = {}
    for lineno, line in read_lines(path):
        if not DEVKIT_ID.fullmatch(line.strip()) or int(line) not in id_to_class:
            raise InputError(f"{path}:{lineno}: expected an ILSVRC2012 id 1..1000, got {brief(line.strip(), 40)}")
        labels[f"ILSVRC2012_val_{lineno:08d}"] = id_to_class[int(line)]
    return labels
