"""The texts each class of a vocabulary is known by, for answer mapping (`relabel.suggest.textmap`): its names and
synonyms, the other names it goes by, the names WordNet gives its kinds and close groups, its WordNet definition and
its short descriptions. The built-in ImageNet-1k vocabulary draws on three resource files (scripts/
build_alternative_names.py, build_hyponym_names.py, tidy_descriptors.py); a custom vocabulary has its own names and
gloss only. None of these names is used by `Vocabulary.resolve` or the closed-world protocols.
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from typing import Any

from relabel.common.vocabulary import Vocabulary

_PUNCT = re.compile(r"[^\w\s'-]+")
HYPONYM_NAMES = "imagenet1k_hyponym_names.json"
ALTERNATIVE_NAMES = "imagenet1k_alternative_names.json"
DESCRIPTORS = "imagenet1k_descriptors.json"


def normalize_answer(text: str) -> str:
    """Lower-case, without surrounding punctuation, articles or a trailing period: 'A Tabby cat.' -> 'tabby cat'."""
    t = _PUNCT.sub(" ", text.strip().lower())
    t = re.sub(r"^(a|an|the|this is an?|it is an?|it's an?)\s+", "", t.strip())
    return re.sub(r"\s+", " ", t).strip()


def class_descriptions(vocab: Vocabulary) -> list[str]:
    """ "display name: gloss" of every class, in class order (the name alone where there is no gloss)."""
    return [f"{c.name}: {c.gloss}" if c.gloss else c.name for c in vocab.classes]


@functools.cache
def _resource(resource: str) -> dict[str, Any]:
    """One of the name resources, parsed once (scripts/build_hyponym_names.py, build_alternative_names.py,
    tidy_descriptors.py)."""
    parsed: dict[str, Any] = json.loads(resources.files("relabel.resources").joinpath(resource).read_text("utf-8"))
    return parsed


def _union(*tables: dict[str, list[str]]) -> dict[str, list[str]]:
    """{wnid: names} of every table, each wnid's names in the order of the tables."""
    return {w: [n for t in tables for n in t.get(w, ())] for w in dict.fromkeys(w for t in tables for w in t)}


def _resource_names(resource: str) -> dict[str, list[str]]:
    """{wnid: names} from one of the name resources."""
    names: dict[str, list[str]] = _resource(resource)["names"]
    return names


def _other_names() -> dict[str, list[str]]:
    """{wnid: other names the class goes by}: the MIT tables (scripts/build_alternative_names.py), then the everyday
    names of the descriptor resource ("clicker", "fridge")."""
    tables, everyday = _resource_names(ALTERNATIVE_NAMES), _descriptor_resource().get("names", {})
    return _union(tables, everyday)


def _descriptor_resource() -> dict[str, Any]:
    """{"names": {wnid: everyday names}, "descriptions": {wnid: short descriptions}} (imagenet1k_descriptors.json)."""
    return _resource(DESCRIPTORS)


def class_descriptors(vocab: Vocabulary, *, hyponyms: bool = True) -> tuple[list[str], list[int]]:
    """Each class's display name, then its short descriptions, which avoid its names ("a huge grey barrel-shaped
    animal wallowing in a river" for *hippopotamus*), grouped by class in class order, and their classes. The name
    leads because other classes' descriptions may use it ("a juvenile newt" of *eft*) where the class's own never
    do: a bare "newt" must still meet *common newt*. Only a vocabulary whose every class has descriptions gets
    them; elsewhere (a custom vocabulary, even one that reuses some ImageNet wnids, or `hyponyms` off) every class
    has its name alone, for a class measured by its name against others' many descriptions would lose."""
    found: dict[str, list[str]] = _descriptor_resource().get("descriptions", {}) if hyponyms else {}
    if not all(found.get(c.wnid or "") for c in vocab.classes):
        found = {}
    texts, owners = [], []
    for c in vocab.classes:
        mine = [c.name, *found.get(c.wnid or "", ())]
        texts += mine
        owners += [c.index] * len(mine)
    return texts, owners


def _hyponym_names() -> dict[str, list[str]]:
    """{wnid: names of the kinds below the class in WordNet, and of the close groups above it that hold no other
    class}."""
    kinds, groups = _resource_names(HYPONYM_NAMES), group_names()
    return _union(kinds, groups)


def wordnet_glosses() -> dict[str, str]:
    """{wnid: the class's WordNet definition} ("burrowing herbivorous Australian marsupials about the size of a
    badger" for *wombat*): more words for the BM25 evidence, which descriptive answers share."""
    found: dict[str, str] = _resource(HYPONYM_NAMES).get("glosses", {})
    return found


def group_names() -> dict[str, list[str]]:
    """{wnid: names to compare an answer with, never taken as the class outright}: the close WordNet groups above
    the class that hold no other class ("sea cow" for *dugong*), and the everyday names whose most frequent sense
    is another thing ("biscuit" for *puck*; scripts/tidy_descriptors.py)."""
    groups: dict[str, list[str]] = _resource(HYPONYM_NAMES).get("groups", {})
    compared: dict[str, list[str]] = _descriptor_resource().get("compared", {})
    return _union(groups, compared)


def class_names(vocab: Vocabulary, *, hyponyms: bool = True) -> tuple[list[str], list[int], list[bool]]:
    """Normalised names, their classes and whether each is listed in `vocab`, grouped by class in class order: a
    class's name and synonyms, then (`hyponyms`, for classes with a WordNet id) the other names it goes by
    ("Japanese Chin" for *Japanese spaniel*, scripts/build_alternative_names.py; "fridge" for *refrigerator*,
    imagenet1k_descriptors.json) and the names of the kinds below it in WordNet ("grizzly" for *brown bear*), of the
    groups above it that hold no other class ("sea cow" for *dugong*) and its everyday names whose first sense is
    another thing ("biscuit" for *puck*), except those that are a listed name of any class."""
    texts, owners, listed = [], [], []
    taken = {normalize_answer(n) for c in vocab.classes for n in (c.name, *c.synonyms)}
    other, extra = (_other_names(), _hyponym_names()) if hyponyms else ({}, {})
    for c in vocab.classes:
        mine = dict.fromkeys(normalize_answer(n) for n in (c.name, *c.synonyms))
        more = (*other.get(c.wnid or "", ()), *extra.get(c.wnid or "", ()))
        kinds = [k for k in dict.fromkeys(normalize_answer(n) for n in more) if k not in taken]
        texts += [*mine, *kinds]
        owners += [c.index] * (len(mine) + len(kinds))
        listed += [True] * len(mine) + [False] * len(kinds)
    return texts, owners, listed
