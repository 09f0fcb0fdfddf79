"""A snapshot as a Hugging Face `datasets` dataset, written with `save_to_disk` and read back with
`datasets.load_from_disk(FOLDER)`.

One row per image, in file-name order (the order of every other export):

- `image`: `datasets.Image`, built from the file's path; `save_to_disk` copies each file's bytes into the
  dataset (it always embeds images, see its docs), reading them a batch at a time without decoding them. Loading
  gives the file's bytes, decoded lazily when a row is read; its `path` is then the file name alone.
  A file that is no longer there is written as None (and counted in a warning).
- `path`: the image's absolute path when it was exported (the dataset's root joined with its relative path).
- `labels`: `Sequence(ClassLabel(names=the vocabulary's class names))`, the ReGT label set.
- `imgt`: `ClassLabel`, the original label (-1: the image has none); a `Sequence` of them when some image of the
  dataset has several original labels.
- `category` (A, B, M, Z, X, U) and `origin` (adjudication, consensus, base, disputed, uncertain): strings.
- For a snapshot that stores posteriors (a consensus that read votes): `posterior_classes`
  (`Sequence(ClassLabel)`) and `posteriors` (`Sequence(float64)`, P(class present) or, for a counting rule, the share
  of yes answers), in parallel, for the (image, class) pairs the votes asked about.

`datasets` is an optional dependency (`pip install 'relabel[hf]'`), imported only here, when a dataset is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType
from typing import Any

from relabel.common.errors import InputError
from relabel.common.vocabulary import Vocabulary
from relabel.snapshots.reader import SnapshotRow

INSTALL_HINT = "--format hf needs the datasets package, which is not installed: pip install 'relabel[hf]'"
MARKER = "dataset_info.json"  # every folder save_to_disk writes holds it


def import_datasets() -> ModuleType:
    """The `datasets` package, or an InputError saying in one line how to install it."""
    try:
        import datasets
    except ImportError:
        raise InputError(INSTALL_HINT) from None
    return datasets


def image_path(root: str | None, path: str) -> str:
    """The absolute path of an image stored as `path` under `root` (the path itself when the root is unknown)."""
    return os.path.join(root, path) if root else path


def write_hf_dataset(
    rows: list[SnapshotRow],
    vocab: Vocabulary,
    folder: Path,
    *,
    root: str | None,
    originals: dict[str, tuple[int, ...]],
) -> list[str]:
    """Write `rows` into the empty `folder` with `save_to_disk`; returns warnings (image files not found).

    `originals` maps an image's relative path to its original (ImGT) classes; `root` is the dataset's folder.
    """
    datasets = import_datasets()
    paths = [image_path(root, r.path) for r in rows]
    found = [os.path.isfile(p) for p in paths]
    columns = hf_columns(rows, paths, found, originals)
    features = hf_features(datasets, vocab, columns)
    table = datasets.Dataset.from_dict(columns, features=features)
    table.save_to_disk(str(folder))
    missing = found.count(False)
    if not missing:
        return []
    first = next(p for p, ok in zip(paths, found, strict=True) if not ok)
    return [f"{missing:,} image file(s) not found, e.g. {first!r}: their `image` is None, their labels are written"]


def hf_columns(
    rows: list[SnapshotRow], paths: list[str], found: list[bool], originals: dict[str, tuple[int, ...]]
) -> dict[str, list[Any]]:
    """The dataset's columns as Python lists, one item per row (see the module docstring)."""
    imgt = [originals.get(r.path, ()) for r in rows]
    several = any(len(classes) > 1 for classes in imgt)
    columns: dict[str, list[Any]] = {
        "image": [p if ok else None for p, ok in zip(paths, found, strict=True)],
        "path": paths,
        "labels": [r.classes for r in rows],
        "imgt": [list(c) for c in imgt] if several else [c[0] if c else -1 for c in imgt],
        "category": [r.category for r in rows],
        "origin": [r.origin for r in rows],
    }
    if any(r.posteriors is not None for r in rows):
        pairs = [sorted((r.posteriors or {}).items()) for r in rows]
        columns["posterior_classes"] = [[c for c, _ in p] for p in pairs]
        columns["posteriors"] = [[float(v) for _, v in p] for p in pairs]
    return columns


def hf_features(datasets: ModuleType, vocab: Vocabulary, columns: dict[str, list[Any]]) -> Any:
    """`datasets.Features` for `columns`: class indices as ClassLabel over the vocabulary's class names."""
    label = datasets.ClassLabel(names=[c.name for c in vocab.classes])
    several_imgt = any(isinstance(v, list) for v in columns["imgt"])
    features = {
        "image": datasets.Image(),
        "path": datasets.Value("string"),
        "labels": datasets.Sequence(label),
        "imgt": datasets.Sequence(label) if several_imgt else label,
        "category": datasets.Value("string"),
        "origin": datasets.Value("string"),
    }
    if "posteriors" in columns:
        features["posterior_classes"] = datasets.Sequence(label)
        features["posteriors"] = datasets.Sequence(datasets.Value("float64"))
    return datasets.Features(features)
