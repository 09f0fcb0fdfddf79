"""The built-in ImageNet-1k vocabulary and custom vocabularies from files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from relabel.errors import InputError
from relabel.ingest.layouts import builtin_val_labels
from relabel.vocabulary import load_vocabulary_file
from tests.conftest import shared


def test_builtin_has_1000_classes_in_sorted_wnid_order(vocab) -> None:
    assert len(vocab) == 1000
    wnids = [c.wnid for c in vocab.classes]
    assert wnids == sorted(wnids) and len(set(wnids)) == 1000
    assert vocab.classes[0].wnid == "n01440764" and vocab.classes[0].name == "tench"
    assert sum(1 for c in vocab.classes if c.gloss) >= 970


def test_display_names_are_unique_where_raw_names_repeat(vocab) -> None:
    names = [c.name.casefold() for c in vocab.classes]
    assert len(set(names)) == 1000
    assert vocab.classes[134].name == "crane (bird)" and vocab.classes[517].name == "crane (machine)"
    assert vocab.classes[638].name != vocab.classes[639].name
    assert vocab.resolve("missile") == 657 and vocab.resolve("projectile") == 744


@pytest.mark.parametrize(
    ("token", "index"),
    [
        ("n01440764", 0),
        ("tench", 0),
        ("Tinca tinca", 0),
        ("281", 281),
        ("TABBY", 281),
        ("tabby cat", 281),
        ("coffee mug", 504),
    ],
)
def test_resolve(vocab, token: str, index: int) -> None:
    assert vocab.resolve(token) == index


def test_ambiguous_and_unknown_names_are_explained(vocab) -> None:
    with pytest.raises(InputError, match=r"ambiguous.*134 'crane \(bird\)'.*517 'crane \(machine\)'"):
        vocab.resolve("crane")
    with pytest.raises(InputError, match="unknown class 'unicorn'"):
        vocab.resolve("unicorn")
    with pytest.raises(InputError, match="out of range 0..999"):
        vocab.resolve("1000")


def test_builtin_val_labels_match_the_original_labels() -> None:
    order = json.loads(shared("imagenet-val", "index_to_filepath.json").read_text())
    original = np.load(shared("imagenet-val", "original_labels_by_index.npy"))
    labels = builtin_val_labels()
    by_number = {int(p.split("_")[-1].split(".")[0]): int(o) for p, o in zip(order, original)}
    assert len(labels) == 50_000
    assert all(labels[n - 1] == c for n, c in by_number.items())


def test_custom_vocabularies_from_txt_csv_json(tmp_path: Path) -> None:
    (tmp_path / "birds.txt").write_text("# my birds\nrobin, American robin\nblue jay\nmagpie\n")
    v = load_vocabulary_file(tmp_path / "birds.txt")
    assert len(v) == 3 and v.resolve("American robin") == 0 and v.resolve("magpie") == 2
    (tmp_path / "birds.csv").write_text(
        'name,wnid,synonyms\nrobin,n01558993,"robin,American robin"\njay,n01580077,jay\n'
    )
    v = load_vocabulary_file(tmp_path / "birds.csv")
    assert v.resolve("n01580077") == 1 and v.classes[0].synonyms == ("robin", "American robin")
    (tmp_path / "b.json").write_text(json.dumps({"classes": [{"name": "a"}, "b"]}))
    assert [c.name for c in load_vocabulary_file(tmp_path / "b.json").classes] == ["a", "b"]


def test_custom_vocabulary_errors(tmp_path: Path) -> None:
    (tmp_path / "dup.txt").write_text("cat\ndog\nCat\n")
    with pytest.raises(InputError, match="display names must be unique"):
        load_vocabulary_file(tmp_path / "dup.txt")
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(InputError, match="invalid JSON"):
        load_vocabulary_file(tmp_path / "bad.json")
