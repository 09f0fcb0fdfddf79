"""Regenerate relabel/resources/imagenet1k_cv_confusions.json: which ImageNet-1k classes a classifier mistakes
for which, counted over the 50,000 ILSVRC-2012 validation images.

Source: the cleanlab label-errors release (Northcutt, Athalye & Mueller, "Pervasive Label Errors in Test Sets
Destabilize Machine Learning Benchmarks", NeurIPS 2021 Datasets and Benchmarks; https://github.com/cleanlab/label-errors),
which publishes the argmax prediction of a cross-validated classifier for every validation image beside the original
label. That classifier is not EfficientNet-Lite0 (it scores 72.73 % top-1 against the original labels, Lite0
about 75 %), so multiple-choice distractors drawn from its mistakes are chosen independently of the offline default
model that `relabel` tests with.

The file keeps, for each original label (wnid), the classes predicted instead of it and how often: 13,634 mistakes,
9,566 (label, prediction) pairs. No per-image data is kept. The `imagenet-confusions` distractor source
(relabel.suggest.distractor_sources) reads it; the product never reads the release itself.

Example:
    python scripts/build_confusion_table.py --data ../shared/data/imagenet-val
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from relabel.common.vocabulary import load_builtin

OUT = Path(__file__).resolve().parent.parent / "relabel" / "resources" / "imagenet1k_cv_confusions.json"
PREDICTED = "cleanlab_cv_predicted_labels_by_index.npy"
ORIGINAL = "original_labels_by_index.npy"
SOURCE = (
    "argmax predictions of the cross-validated classifier in the cleanlab label-errors release "
    "(Northcutt, Athalye & Mueller, NeurIPS 2021; https://github.com/cleanlab/label-errors) against the original "
    "ILSVRC-2012 validation labels, 50,000 images (scripts/build_confusion_table.py)"
)


def count_confusions(original: np.ndarray, predicted: np.ndarray, wnids: list[str]) -> dict[str, dict[str, int]]:
    """{original wnid: {predicted wnid: count}} over the images where the two differ, most frequent first.
    `original`, `predicted`: (N,) class indices in ImageNet-1k order (sorted wnids)."""
    if original.shape != predicted.shape:
        raise SystemExit(f"label and prediction arrays differ in shape: {original.shape} vs {predicted.shape}")
    pairs = Counter(zip(original.tolist(), predicted.tolist()))
    table: dict[str, dict[str, int]] = defaultdict(dict)
    for (t, p), n in sorted(pairs.items(), key=lambda kv: (kv[0][0], -kv[1], kv[0][1])):
        if t != p:
            table[wnids[t]][wnids[p]] = n
    return dict(sorted(table.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, required=True, help="folder with the two .npy files of the release")
    args = parser.parse_args()
    for name in (PREDICTED, ORIGINAL):
        if not (args.data / name).is_file():
            raise SystemExit(f"no {name} in {args.data}")
    original, predicted = np.load(args.data / ORIGINAL), np.load(args.data / PREDICTED)
    wnids = [c.wnid or "" for c in load_builtin().classes]
    table = count_confusions(original, predicted, wnids)
    agree = float(np.mean(original == predicted))
    doc = {"source": SOURCE, "images": int(original.size), "top1_vs_original": round(agree, 5), "confusions": table}
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{sum(map(len, table.values()))} pairs, {int((original != predicted).sum())} mistakes -> {OUT}")


if __name__ == "__main__":
    main()
