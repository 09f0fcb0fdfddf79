"""Tidy relabel/resources/imagenet1k_descriptors.json in place: the rules its names and descriptions must follow.

The resource holds, for each ImageNet-1k class, short descriptions written the way an answer describes a thing it
does not name ("a huge grey barrel-shaped animal wallowing in a river" for *hippopotamus*) and everyday names
("fridge", "clicker"). They were written class by class, apart from the answers in tests/data that the mapper is
measured on; this script applies the rules that keep them from misleading the mapper, and running it twice changes
nothing.

Descriptions:
- a contrast with another thing is cut off ("a woolly animal, bigger than an alpaca" -> "a woolly animal"; "...,
  unlike a camel", "..., not a puffing hog-nosed one"): its words and meaning belong to that other thing, and would
  pull an answer about it toward this class;
- a description that says one of the class's own names or synonyms, or fewer than three words after the cut, goes;
- repeats within a class go, and so does a description that is word for word the object phrase of an answer in
  tests/data (the held-out set and the tuning sets: "sour yellow citrus fruit"), so that no answer the mapper is
  measured on finds itself among the descriptions.

Everyday names are kept only when
- no class lists the name (those map exactly already), only one class has it, it is no other name of another class
  (`imagenet1k_alternative_names.json`), and it is not the last word of another class's listed name ("newt" would
  take every answer from *common newt*), and not one of the few in `WRONG`;
- and, for a word WordNet knows (or its singular), its most frequent noun sense is the class or below it. A name
  whose first sense is something else ("robot" for *traffic light*, "bone" for *trombone*, "mac" for *trench
  coat*) is moved to `compared`: the mapper compares answers with it but never takes it as the class outright.

WordNet's dictionary files come from Debian's `wordnet-base` package (apt-get install wordnet-base). Run
scripts/build_class_embeddings.py afterwards.

Example:
    python scripts/tidy_descriptors.py --wordnet /usr/share/wordnet
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

from build_hyponym_names import read_nouns

from relabel.common.vocabulary import load_builtin
from relabel.suggest.class_texts import normalize_answer
from relabel.suggest.phrases import object_phrase

RESOURCES = Path(__file__).resolve().parent.parent / "relabel" / "resources"
OUT = RESOURCES / "imagenet1k_descriptors.json"
TEST_ANSWERS = Path(__file__).resolve().parent.parent / "tests" / "data"
_COMPARATIVE = r"(?:\w+er|more \w+|less \w+)"
CONTRAST = re.compile(
    r"\s*[,;(]?\s*\b(?:unlike|not (?:a|an|the|just|like|as)|rather than|instead of|as opposed to|compared (?:with|to)"
    rf"|{_COMPARATIVE} than)\b.*$"
)


# names that WordNet cannot judge and that name another thing: the spectacled bear, the German for pug
WRONG = {("sloth bear", "andean bear"), ("pug", "mops")}


def cut_contrast(text: str) -> str:
    """'a woolly animal, bigger than an alpaca' -> 'a woolly animal'; unchanged without a contrast."""
    return CONTRAST.sub("", text).strip(" ,;-")


def key(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", name.lower())


def tidy_descriptions(descriptions: dict[str, list[str]], own_names: dict[str, list[str]]) -> dict[str, list[str]]:
    answered = {
        object_phrase(json.loads(line)["answer"])
        for path in sorted(TEST_ANSWERS.glob("mapping_*.jsonl"))
        for line in path.read_text("utf-8").splitlines()
    }
    out = {}
    for wnid, texts in descriptions.items():
        names = [f" {normalize_answer(n)} " for n in own_names[wnid]]
        kept = []
        for text in texts:
            t = cut_contrast(text)
            if len(t.split()) < 3 or any(n in f" {normalize_answer(t)} " for n in names):
                continue
            if object_phrase(t) not in answered:
                kept.append(t)
        out[wnid] = list(dict.fromkeys(kept))
    return out


def below(synsets: dict[str, tuple[list[str], list[str]]], top: str) -> set[str]:
    """`top` and every synset below it."""
    seen, todo = set(), [top]
    while todo:
        s = todo.pop()
        if s not in seen:
            seen.add(s)
            todo += synsets.get(s, ((), []))[1]
    return seen


def tidy_names(names: dict[str, list[str]], wordnet: Path) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(names taken as the class outright, names only compared with), each {wnid: names}."""
    vocab = load_builtin()
    display = {c.wnid or "": c.name for c in vocab.classes}
    listed = {key(n) for c in vocab.classes for n in (c.name, *c.synonyms)}
    last_word: dict[str, set[str]] = {}
    for c in vocab.classes:
        for n in (c.name, *c.synonyms):
            if len(n.split()) > 1:
                last_word.setdefault(key(n.split()[-1]), set()).add(c.wnid or "")
    alternative = json.loads((RESOURCES / "imagenet1k_alternative_names.json").read_text("utf-8"))["names"]
    elsewhere: dict[str, set[str]] = {}
    for wnid, others in alternative.items():
        for n in others:
            elsewhere.setdefault(key(n), set()).add(wnid)
    owners: dict[str, set[str]] = {}
    for wnid, ns in names.items():
        for n in ns:
            owners.setdefault(key(n), set()).add(wnid)
    synsets, first_sense = read_nouns(wordnet)
    taken: dict[str, list[str]] = {}
    compared: dict[str, list[str]] = {}
    for wnid, ns in names.items():
        mine = below(synsets, wnid[1:])
        for n in dict((key(n), n) for n in ns).values():  # one spelling per key
            k = key(n)
            others = (last_word.get(k, set()) | elsewhere.get(k, set()) | owners[k]) - {wnid}
            if k in listed or others or (display[wnid], n.lower()) in WRONG:
                continue
            sense = first_sense.get(n.lower()) or first_sense.get(re.sub(r"s$", "", n.lower()))
            (taken if sense is None or sense in mine else compared).setdefault(wnid, []).append(n)
    return taken, compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"), help="WordNet 3.0 dict folder")
    args = parser.parse_args()
    data = json.loads(OUT.read_text("utf-8"))
    own = {c.wnid or "": [c.name, *c.synonyms] for c in load_builtin().classes}
    descriptions = tidy_descriptions(data["descriptions"], own)
    names, compared = tidy_names(_merge(data["names"], data.get("compared", {})), args.wordnet)
    data |= {"names": names, "compared": compared, "descriptions": descriptions}
    OUT.write_text(json.dumps(data, ensure_ascii=False, indent=0) + "\n", encoding="utf-8")
    print(
        f"{sum(map(len, descriptions.values())):,} descriptions of {len(descriptions):,} classes; "
        f"{sum(map(len, names.values())):,} names taken outright, {sum(map(len, compared.values())):,} compared"
    )


def _merge(a: dict[str, list[str]], b: dict[str, list[str]]) -> dict[str, list[str]]:
    return {w: [*a.get(w, ()), *b.get(w, ())] for w in dict.fromkeys([*a, *b])}


if __name__ == "__main__":
    main()
