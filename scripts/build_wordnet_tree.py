"""Regenerate relabel/resources/imagenet1k_wordnet_tree.json: the WordNet 3.0 noun hierarchy above ImageNet-1k.

ImageNet's classes are WordNet noun synsets. For every class and every synset above one (hypernyms and instance
hypernyms, up to `entity`), the file keeps the synset's direct parents, as wnids ("n" + the 8-digit offset). The
`wordnet` multiple-choice distractor source (relabel.suggest.distractor_sources) reads it to find a class's closest
classes in the tree: siblings first (one shared parent), then cousins.

WordNet's dictionary files come from Debian's `wordnet-base` package (apt-get install wordnet-base).

Example:
    python scripts/build_wordnet_tree.py --wordnet /usr/share/wordnet
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from build_hyponym_names import LICENSE  # scripts/ is on the path when a script runs

from relabel.common.vocabulary import load_builtin

OUT = Path(__file__).resolve().parent.parent / "relabel" / "resources" / "imagenet1k_wordnet_tree.json"
HYPERNYM_POINTERS = ("@", "@i")


def read_parents(wordnet: Path) -> dict[str, list[str]]:
    """{offset: offsets of its direct hypernyms and instance hypernyms} for every noun synset in data.noun."""
    parents: dict[str, list[str]] = {}
    for line in (wordnet / "data.noun").read_text(encoding="latin-1").splitlines():
        if line.startswith("  "):  # the license header
            continue
        f = line.split(" | ")[0].split()
        k = 4 + 2 * int(f[3], 16)
        pointers = [f[k + 1 + 4 * i : k + 5 + 4 * i] for i in range(int(f[k]))]
        parents[f[0]] = [p[1] for p in pointers if p[0] in HYPERNYM_POINTERS and p[2] == "n"]
    return parents


def tree_above(parents: dict[str, list[str]], offsets: list[str]) -> dict[str, list[str]]:
    """{wnid: parent wnids} for `offsets` and every synset above them."""
    out: dict[str, list[str]] = {}
    stack = list(offsets)
    while stack:
        o = stack.pop()
        if f"n{o}" in out:
            continue
        if o not in parents:
            raise SystemExit(f"synset {o} is not in WordNet's data.noun: is this WordNet 3.0?")
        out[f"n{o}"] = [f"n{p}" for p in parents[o]]
        stack.extend(parents[o])
    return dict(sorted(out.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"), help="WordNet 3.0 dict folder")
    args = parser.parse_args()
    if not (args.wordnet / "data.noun").is_file():
        raise SystemExit(f"no WordNet data.noun in {args.wordnet}; apt-get install wordnet-base, or pass --wordnet")
    classes = [c.wnid[1:] for c in load_builtin().classes if c.wnid]
    tree = tree_above(read_parents(args.wordnet), classes)
    source = "WordNet 3.0 hypernyms of the ImageNet-1k synsets, up to the root (scripts/build_wordnet_tree.py)"
    doc = {"source": source, "license": LICENSE, "parents": tree}
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"{len(classes)} classes, {len(tree)} synsets -> {OUT}")


if __name__ == "__main__":
    main()
