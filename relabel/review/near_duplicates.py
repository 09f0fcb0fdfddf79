"""Near-duplicate classes: pairs of classes that name one kind of object (ImageNet-1k's laptop and notebook,
sunglass and sunglasses, maillot and maillot (tank suit), ...). The picker marks them, so an annotator who adds one
sees that the other may fit as well, and a multi-label answer can hold both.

The built-in list (relabel/resources/imagenet1k_near_duplicates.json) is matched by wnid, so it applies to any
vocabulary holding those ImageNet classes and to no other.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

from relabel.common.vocabulary import Vocabulary

RESOURCE = "imagenet1k_near_duplicates.json"


@lru_cache(maxsize=1)
def _groups() -> tuple[tuple[str, ...], ...]:
    text = resources.files("relabel.resources").joinpath(RESOURCE).read_text(encoding="utf-8")
    return tuple(tuple(group) for group in json.loads(text)["groups"])


def near_duplicates(vocab: Vocabulary) -> dict[int, tuple[int, ...]]:
    """{class index: the other classes of its near-duplicate group}, for the classes of `vocab` in a group whose
    other members `vocab` holds too."""
    index = {c.wnid: c.index for c in vocab.classes if c.wnid}
    found: dict[int, tuple[int, ...]] = {}
    for group in _groups():
        members = [index[w] for w in group if w in index]
        for m in members:
            others = tuple(o for o in members if o != m)
            if others:
                found[m] = others
    return found
