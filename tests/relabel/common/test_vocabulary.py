"""The built-in ImageNet-1k vocabulary and custom vocabularies from files."""

from __future__ import annotations

import codecs
import json
import re
from pathlib import Path

import numpy as np
import pytest

from relabel.common.errors import InputError
from relabel.common.vocabulary import load_vocabulary_file
from relabel.ingest.layouts import builtin_val_labels
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


@pytest.mark.parametrize(
    ("payload", "pattern"),
    [
        ([1, 2, 3], r"v\.json: class 0 is 1; a class is a name, or an object with 'name'"),
        (["a", ["b", "c"]], r"v\.json: class 1 is \['b', 'c'\]; a class is a name"),
        ([{"name": 5}], r"v\.json: class 0: name is 5; a class is a name"),
        ([{"name": "a", "wnid": 5}], r"v\.json: class 0: wnid is 5"),
        ([{"name": "a", "synonyms": "abc"}], r"v\.json: class 0: synonyms is 'abc'; expected a list of names"),
        ([{"name": "a", "synonyms": ["a", 3]}], r"v\.json: class 0: synonyms is \['a', 3\]"),
        ([{"name": "a", "gloss": ["x"]}], r"v\.json: class 0: gloss is \['x'\]"),
        ([{"name": "a", "nmae": "b"}], r"v\.json: class 0 has unknown field\(s\) 'nmae'"),
        ([{"name": "a"}, {"index": 5, "name": "b"}], r"v\.json: class 1 has index 5; classes must be listed in index"),
        ({"classes": 5}, r"v\.json: expected a JSON list of classes"),
        ([], r"v\.json: the list of classes is empty; a vocabulary has at least one class"),
        ({"classes": []}, r"v\.json: the list of classes is empty"),
    ],
)
def test_wrong_types_in_a_json_vocabulary_are_one_line(tmp_path: Path, payload: object, pattern: str) -> None:
    (tmp_path / "v.json").write_text(json.dumps(payload))
    with pytest.raises(InputError) as caught:
        load_vocabulary_file(tmp_path / "v.json")
    assert "\n" not in str(caught.value) and re.search(pattern, str(caught.value)), str(caught.value)


@pytest.mark.slow  # a load test: 100,000 classes, read three times
def test_one_duplicate_among_100000_classes_is_named(tmp_path: Path) -> None:
    """The duplicate check is linear: it used to call list.count once per class (minutes at this size)."""
    names = [f"class {i}" for i in range(100_000)]
    names[76_543] = "Class 12"
    (tmp_path / "big.txt").write_text("\n".join(names) + "\n")
    with pytest.raises(InputError, match=r"big\.txt: vocabulary 'big': display names must be unique; repeated: "):
        load_vocabulary_file(tmp_path / "big.txt")
    with pytest.raises(InputError, match=r"repeated: 'class 12'$"):
        load_vocabulary_file(tmp_path / "big.txt")
    names[76_543] = "class 76543"
    (tmp_path / "big.txt").write_text("\n".join(names) + "\n")
    assert len(load_vocabulary_file(tmp_path / "big.txt")) == 100_000


def test_vocabulary_files_decode_like_every_other_input(tmp_path: Path) -> None:
    (tmp_path / "utf16.txt").write_bytes(codecs.BOM_UTF16_LE + "café\nthé\n".encode("utf-16-le"))
    assert [c.name for c in load_vocabulary_file(tmp_path / "utf16.txt").classes] == ["café", "thé"]
    (tmp_path / "latin1.txt").write_bytes("dog\ncafé\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.txt: not UTF-8 text: byte offset 7 \(line 2\) holds 0xe9"):
        load_vocabulary_file(tmp_path / "latin1.txt")
    (tmp_path / "v.txt").write_text("dog\n , \ncat\n")
    with pytest.raises(InputError, match=r"v\.txt:2: ' , ' names no class"):
        load_vocabulary_file(tmp_path / "v.txt")
    (tmp_path / "v.csv").write_text("name,wnid,sysnonyms\ndog,n1,dog\n")
    with pytest.raises(InputError, match=r"v\.csv:1: the header has unknown column\(s\) 'sysnonyms'"):
        load_vocabulary_file(tmp_path / "v.csv")


@pytest.mark.parametrize("token", ["\u00b2", "\u0663", "9" * 5000, "-1"])
def test_digit_lookalikes_and_huge_indices_are_not_tracebacks(vocab, token: str) -> None:
    with pytest.raises(InputError, match=r"(unknown class|out of range 0\.\.999)"):
        vocab.resolve(token)


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        ("v.txt", "", r"v\.txt: the file is empty \(blank lines and '#' comments aside\); a \.txt vocabulary has one"),
        ("v.txt", "# just a comment\n\n  \n", r"v\.txt: the file is empty"),
        ("v.csv", "name,wnid\n", r"v\.csv: has a header but no class rows"),
        ("v.csv", "", r"v\.csv: the file is empty; a CSV vocabulary starts with a header"),
        ("v.json", '["a", "b", "\\ud800"]', r"v\.json: line 1 column 13: the string escape \\ud800 is an unpaired"),
        ("v.json", '[{"name": "a", "synonyms": ["a\\u0000"]}]', r"v\.json: line 1 column 31: .*\\u0000 is a NUL"),
    ],
    ids=["txt-empty", "txt-comments-only", "csv-header-only", "csv-empty", "json-surrogate", "json-nul"],
)
def test_empty_or_unstorable_vocabularies_say_so(tmp_path: Path, name: str, content: str, pattern: str) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(InputError) as caught:
        load_vocabulary_file(tmp_path / name)
    assert "\n" not in str(caught.value) and re.search(pattern, str(caught.value)), str(caught.value)


def test_a_number_is_an_index_unless_it_names_another_class(tmp_path: Path) -> None:
    """SVHN-style digits listed 1..9, 0: "0" is index 0 (class "1") and the name of class 9. Neither reading may
    win silently; where both give one class, or only one reading exists, that class is meant."""
    (tmp_path / "digits.txt").write_text("\n".join(["1", "2", "3", "4", "5", "6", "7", "8", "9", "0"]) + "\n")
    digits = load_vocabulary_file(tmp_path / "digits.txt")
    for token in ("0", "1", "9", 0):
        with pytest.raises(InputError) as caught:
            digits.resolve(token)
        assert "\n" not in str(caught.value) and "is ambiguous in vocabulary 'digits': as an index it is" in str(
            caught.value
        )
    with pytest.raises(InputError, match=r"class '0' .* as an index it is class 0 '1', as a name it is class 9 '0'"):
        digits.resolve("0")
    with pytest.raises(InputError, match=r"rename the classes so no name is another class's index \(e.g. 'digit 0'\)"):
        digits.resolve("0")
    (tmp_path / "same.txt").write_text("0\n1\ncat\n2020\n")
    same = load_vocabulary_file(tmp_path / "same.txt")
    assert [same.resolve(t) for t in ("0", "1", 1, "2", "cat", "2020", " 1 ")] == [0, 1, 1, 2, 2, 3, 1]
    (tmp_path / "syn.json").write_text(json.dumps(["a", {"name": "b", "synonyms": ["b", "0"]}]))
    with pytest.raises(InputError, match=r"class '0' .* as an index it is class 0 'a', as a name it is class 1 'b'"):
        load_vocabulary_file(tmp_path / "syn.json").resolve("0")


def test_numbers_in_the_builtin_vocabulary_stay_indices(vocab) -> None:
    assert [vocab.resolve(t) for t in ("0", "281", "999", 65)] == [0, 281, 999, 65]
    for token in ("1_0", "\uff10", "+1", "1.0", "0x41"):
        with pytest.raises(InputError, match="unknown class"):
            vocab.resolve(token)
