"""Regenerate relabel/resources/imagenet1k_hyponym_names.json: more names for answer mapping, from WordNet 3.0.

ImageNet's classes are WordNet noun synsets, and an answer often names a kind of the class rather than the class:
"grizzly" for *brown bear*, "woodlouse" for *isopod*, "sieve" for *strainer*. For each class this collects the
words of its synset and of every synset below it (hyponyms and instances, all the way down), keeping a word only when

- it is no listed name or synonym of any class (those already map exactly),
- it lies below one class only, and
- its most frequent noun sense (the first in WordNet's index, ranked by tagged frequency) is below that class, so
  that everyday words whose rare sense happens to sit there stay out ("drill" the tool, not the baboon; "sausage"
  the food, not the airship).

It also collects, apart (`groups`), the words of the synsets up to two levels above a class that have no other
ImageNet-1k class below them and at most 15 synsets in all ("sea cow" and "sirenian" for *dugong*, "eagle" for *bald
eagle*), under the same first-sense rule. Wider groups name a category, not the class ("plant" the factory is above
*lumbermill* alone, "location" above *bakery*), so they are left out; and the mapper never takes a group's name as
the class outright, only as a name to compare the answer with.

It also keeps each class's own WordNet definition (`glosses`, up to the first ";"): "burrowing herbivorous Australian
marsupials about the size of a badger" for *wombat*. Answers that describe an object share its words more often than
the vocabulary's visual description ("A stocky burrowing marsupial."), so the mapper's word evidence (BM25) reads it
beside the description.

The names are used by `relabel.suggest.textmap` only, never by `Vocabulary.resolve` or the closed-world protocols.
WordNet's dictionary files come from Debian's `wordnet-base` package (apt-get install wordnet-base).

Example:
    python scripts/build_hyponym_names.py --wordnet /usr/share/wordnet
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

from relabel.common.vocabulary import load_builtin

OUT = Path(__file__).resolve().parent.parent / "relabel" / "resources" / "imagenet1k_hyponym_names.json"
LICENSE = (
    "WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved. Used under the WordNet License "
    "(https://wordnet.princeton.edu/license-and-commercial-use), which allows use, copying and distribution "
    "with this notice."
)


def read_nouns(wordnet: Path) -> tuple[dict[str, tuple[list[str], list[str]]], dict[str, str]]:
    """{offset: (words, hyponym offsets)} from data.noun, and {word: offset of its most frequent sense}."""
    synsets: dict[str, tuple[list[str], list[str]]] = {}
    for line in (wordnet / "data.noun").read_text(encoding="latin-1").splitlines():
        if line.startswith("  "):  # the license header
            continue
        f = line.split(" | ")[0].split()
        n = int(f[3], 16)
        lemmas = [re.sub(r"\(\w+\)$", "", f[4 + 2 * i]).replace("_", " ") for i in range(n)]
        k = 4 + 2 * n
        pointers = [f[k + 1 + 4 * i : k + 5 + 4 * i] for i in range(int(f[k]))]
        synsets[f[0]] = (lemmas, [p[1] for p in pointers if p[0] in ("~", "~i") and p[2] == "n"])
    first: dict[str, str] = {}
    for line in (wordnet / "index.noun").read_text(encoding="latin-1").splitlines():
        if not line.startswith("  "):
            f = line.split()
            first[f[0].replace("_", " ")] = f[-int(f[2])]
    return synsets, first


def below(synsets: dict[str, tuple[list[str], list[str]]], offset: str) -> set[str]:
    """Every synset under `offset` (not `offset` itself)."""
    out: set[str] = set()
    stack = list(synsets[offset][1])
    while stack:
        o = stack.pop()
        if o not in out:
            out.add(o)
            stack.extend(synsets[o][1])
    return out


def sole_ancestors(
    synsets: dict[str, tuple[list[str], list[str]]], classes: list[str], levels: int = 2, most: int = 15
) -> list[set[str]]:
    """For each class synset, the synsets at most `levels` above it that have no other of `classes` at or below
    them and at most `most` synsets below them."""
    parents: dict[str, list[str]] = defaultdict(list)
    for offset, (_, hyponyms) in synsets.items():
        for h in hyponyms:
            parents[h].append(offset)
    ancestors = []
    for c in classes:
        seen: set[str] = set()
        stack = list(parents[c])
        while stack:
            o = stack.pop()
            if o not in seen:
                seen.add(o)
                stack.extend(parents[o])
        ancestors.append(seen)
    count: dict[str, int] = defaultdict(int)
    for c, seen in zip(classes, ancestors):
        for o in seen - {c}:
            count[o] += 1
    is_class = set(classes)
    out = []
    for c in classes:
        near, frontier = set(), {c}
        for _ in range(levels):
            frontier = {p for f in frontier for p in parents[f]}
            near |= frontier
        out.append({o for o in near if count[o] == 1 and o not in is_class and len(below(synsets, o)) <= most})
    return out


def glosses(wordnet: Path) -> dict[str, str]:
    """{wnid: its WordNet definition, up to the first ";"} for the built-in ImageNet-1k classes."""
    wanted = {c.wnid[1:] for c in load_builtin().classes if c.wnid}
    out = {}
    for line in (wordnet / "data.noun").read_text(encoding="latin-1").splitlines():
        offset = line.split(" ", 1)[0]
        if offset in wanted and " | " in line:
            out[f"n{offset}"] = line.split(" | ", 1)[1].split(";")[0].strip()
    return dict(sorted(out.items()))


def _key(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s'-]+", " ", text.lower()).split())


def hyponym_names(wordnet: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """({wnid: sorted kind names}, {wnid: sorted group names}) for the built-in ImageNet-1k classes, by the rules in
    the module docstring; a word goes to one class or none."""
    vocab = load_builtin()
    synsets, first = read_nouns(wordnet)
    listed = {_key(n) for c in vocab.classes for n in (c.name, *c.synonyms)}
    owners: dict[str, set[str]] = defaultdict(set)
    from_group: set[str] = set()
    for c, sole in zip(vocab.classes, sole_ancestors(synsets, [c.wnid[1:] for c in vocab.classes])):
        under = {c.wnid[1:], *below(synsets, c.wnid[1:])}  # its own synset's words too, where the vocabulary lacks them
        for o in sole:
            for word in synsets[o][0]:
                if _key(word) not in listed and first.get(word.lower()) == o:
                    owners[_key(word)].add(c.wnid)
                    from_group.add(_key(word))
        for o in under:
            for word in synsets[o][0]:
                if _key(word) not in listed and first.get(word.lower()) in under:
                    owners[_key(word)].add(c.wnid)
    names: dict[str, list[str]] = defaultdict(list)
    groups: dict[str, list[str]] = defaultdict(list)
    for word, wnids in sorted(owners.items()):
        if len(wnids) == 1:
            (groups if word in from_group else names)[next(iter(wnids))].append(word)
    return dict(sorted(names.items())), dict(sorted(groups.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"), help="WordNet 3.0 dict folder")
    args = parser.parse_args()
    if not (args.wordnet / "data.noun").is_file():
        raise SystemExit(f"no WordNet data.noun in {args.wordnet}; apt-get install wordnet-base, or pass --wordnet")
    names, groups = hyponym_names(args.wordnet)
    source = "WordNet 3.0 hyponyms, sole hypernyms and definitions (scripts/build_hyponym_names.py)"
    doc = {"source": source, "license": LICENSE, "names": names, "groups": groups, "glosses": glosses(args.wordnet)}
    OUT.write_text(json.dumps(doc, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{sum(map(len, names.values()))} kind names, {sum(map(len, groups.values()))} group names -> {OUT}")


if __name__ == "__main__":
    main()
