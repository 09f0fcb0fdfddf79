from __future__ import annotations

from relabel.common.vocabulary import ClassInfo, Vocabulary, load_builtin
from relabel.review.near_duplicates import near_duplicates


def test_the_builtin_pairs_link_both_ways() -> None:
    vocab = load_builtin()
    found = near_duplicates(vocab)
    names = {vocab.classes[c].name: sorted(vocab.classes[o].name for o in others) for c, others in found.items()}
    assert names["laptop"] == ["notebook"] and names["notebook"] == ["laptop"]
    assert names["sunglass"] == ["sunglasses"] and names["maillot"] == ["maillot (tank suit)"]
    assert len(found) == 14 and "tabby" not in names  # seven pairs; look-alikes are not duplicates


def test_only_groups_whose_members_the_vocabulary_holds_count() -> None:
    builtin = {c.name: c for c in load_builtin().classes}
    picked = [builtin[n] for n in ("laptop", "tabby", "sunglass", "sunglasses")]
    vocab = Vocabulary("four", [ClassInfo(i, c.name, c.wnid) for i, c in enumerate(picked)])
    assert near_duplicates(vocab) == {2: (3,), 3: (2,)}  # laptop's twin, notebook, is not in this vocabulary
