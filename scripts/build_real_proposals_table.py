"""Regenerate relabel/resources/imagenet1k_real_proposals.json: which ImageNet-1k classes a pool of strong models
proposed beside each original label, counted over the ILSVRC-2012 validation images that ReaL had rated.

Source: ImageNet ReaL (Beyer, Hénaff, Kolesnikov, Zhai & van den Oord, "Are we done with ImageNet?", 2020;
https://github.com/google-research/reassessed-imagenet, Apache License 2.0). Before its raters saw an image, ReaL
asked a pool of 19 models for candidate classes; `raters.npz` lists every proposed (image, class) pair, 184,962 for
24,889 images, whatever the raters then answered. A proposed class other than the original label is a class that
strong models took the image for (a look-alike, or another object in the photo), so counting those per original
label gives a dense confusion table of many models: 160,073 proposals, 62,004 (label, class) pairs, at least 3
classes for 998 of the 1,000 labels. EfficientNet-Lite0, the offline model `relabel` tests hardness with, is not
in that pool, and nothing here reads it.

The file keeps, for each original label (wnid), the classes proposed beside it and how often. No per-image data
is kept. The `real-proposals` distractor source (relabel.suggest.distractor_sources) reads it; the product never
reads the release itself.

Example:
    python scripts/build_real_proposals_table.py --data ../shared/data/imagenet-val
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from relabel.common.vocabulary import load_builtin

OUT = Path(__file__).resolve().parent.parent / "relabel" / "resources" / "imagenet1k_real_proposals.json"
RATERS = "real_raters.npz"
ORIGINAL = "original_labels_by_index.npy"
ORDER = "index_to_filepath.json"
SOURCE = (
    "classes that ReaL's pool of 19 models proposed for the ILSVRC-2012 validation images, beside the original "
    "label (Beyer et al., 'Are we done with ImageNet?', 2020; https://github.com/google-research/reassessed-imagenet, "
    "Apache License 2.0; scripts/build_real_proposals_table.py)"
)
LICENSE = "Apache License 2.0 (google-research/reassessed-imagenet)"


def original_by_file(original: np.ndarray, paths: list[str]) -> dict[str, int]:
    """{validation file name: original class index}; `paths[i]` (".../ILSVRC2012_val_00000293.JPEG") names the
    image of `original[i]`."""
    if len(paths) != original.size:
        raise SystemExit(f"{len(paths)} paths for {original.size} labels")
    return {p.rsplit("/", 1)[-1]: int(c) for p, c in zip(paths, original.tolist())}


def count_proposals(
    pairs: np.ndarray, original: dict[str, int], wnids: list[str]
) -> tuple[dict[str, dict[str, int]], int]:
    """({original wnid: {proposed wnid: count}} over the proposals other than the original label, most frequent
    first; the number of images). `pairs`: (P, 2) of (file name, class index as text), ReaL's `info`."""
    counts: Counter[tuple[int, int]] = Counter()
    images = set()
    for name, proposed in pairs.tolist():
        if name not in original:
            raise SystemExit(f"{name}: not among the validation images")
        images.add(name)
        t, c = original[name], int(proposed)
        if c != t:
            counts[(t, c)] += 1
    table: dict[str, dict[str, int]] = defaultdict(dict)
    for (t, c), n in sorted(counts.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
        table[wnids[t]][wnids[c]] = n
    return dict(sorted(table.items())), len(images)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with real_raters.npz and the label files")
    args = parser.parse_args()
    for name in (RATERS, ORIGINAL, ORDER):
        if not (args.data / name).is_file():
            raise SystemExit(f"no {name} in {args.data}")
    paths = json.loads((args.data / ORDER).read_text(encoding="utf-8"))
    original = original_by_file(np.load(args.data / ORIGINAL), paths)
    with np.load(args.data / RATERS) as raters:
        pairs = raters["info"]
    wnids = [c.wnid or "" for c in load_builtin().classes]
    table, images = count_proposals(pairs, original, wnids)
    proposals = sum(sum(row.values()) for row in table.values())
    doc = {"source": SOURCE, "license": LICENSE, "images": images, "proposals": proposals, "confusions": table}
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{sum(map(len, table.values()))} pairs, {proposals} proposals on {images} images -> {OUT}")


if __name__ == "__main__":
    main()
