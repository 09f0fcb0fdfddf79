"""The quick ways through a large import give what the careful ways give: JSON read without a check on each number,
class tokens resolved once, keys matched without building paths, label lists written as text, the top-5 of a score
matrix by argmax; and a bad row deep in a large file is still refused with its line and reason."""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import random
import re
from pathlib import Path, PurePosixPath

import numpy as np
import pytest
from sqlalchemy import func, select
from sqlmodel import Session

from db.models import ModelRun
from relabel.common.errors import InputError
from relabel.common.textfiles import _parse_json_strict, json_lines, parse_json
from relabel.common.vocabulary import UnknownClassError, load_builtin
from relabel.common.workspace import ImageIndex, name_and_stem
from relabel.sources.bulk import matched_rows
from relabel.sources.predictions import import_predictions
from relabel.sources.row_store import list_text
from relabel.sources.rows import LabelRow, resolve_rows
from relabel.sources.score_vectors import _mapped_member, _read_arrays, npz_in_id_order, top_k, write_scores
from tests.relabel.sources.test_sources import val_dataset

PIECES = [
    '{"a": ', "[", "]", "}", ", ", "1", "-0", "0.25", "1" * 20, "1" * 21, "1.5e99", "1.5e-400", "1e400", "-1E+308",
    "2e308", "NaN", "-Infinity", "true", "null", '"x"', '"e1000"', '"' + "7" * 30 + '"', '"\\u00e9"', '"\\u0000"',
    '"\\ud800"', '"\\ud83d\\ude00"', '"\\\\ud800"', "é", "\ufeff", " ", "\n",
]  # fmt: skip


def outcome(read, text: str) -> object:
    try:
        return ("value", json.dumps(read(text)))
    except InputError as exc:
        return ("refused", str(exc))


def test_json_without_number_checks_reads_and_refuses_as_the_strict_reading_does() -> None:
    rng = random.Random(7)
    texts = ['{"image": "a", "labels": [1, 2], "scores": [0.5, 0.25]}', "[" + "[" * 5000 + "]" * 5000 + "]"]
    texts += ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 7))) for _ in range(20_000)]
    texts += [f"[{p}]" for p in PIECES] + [f'{{"a": {p}}}' for p in PIECES]
    accepted = 0
    for text in texts:
        fast = outcome(lambda t: parse_json(t, "f.json"), text)
        assert fast == outcome(lambda t: _parse_json_strict(t, "f.json", False), text), text
        accepted += fast[0] == "value"
    assert accepted > 1000  # the comparison covered both outcomes


def test_json_lines_of_a_file_with_one_suspect_line_read_like_the_strict_reading(tmp_path: Path) -> None:
    lines = [json.dumps({"image": f"i{n}", "labels": [n % 1000]}) for n in range(500)]
    lines[300] = '{"image": "i300", "reason": "' + "9" * 25 + '"}'  # long digits inside a string: accepted
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert list(json_lines(path)) == [(n + 1, json.loads(line)) for n, line in enumerate(lines)]
    lines[400] = '{"image": "i400", "labels": [' + "1" * 21 + "]}"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}:401: number 1{{21}} has 21 digits"):
        list(json_lines(path))


LINE = 2718  # of 3,000: far past any first chunk or sample
KEY = f"ILSVRC2012_val_{LINE:08d}"


@pytest.mark.parametrize(
    ("bad_line", "pattern"),
    [
        (f'{{"image": "{KEY}", "labels": ["no-such-class"]}}', rf"p\.jsonl:{LINE}: unknown class 'no-such-class' in"),
        (f'{{"image": "{KEY}", "labels": [3, 5000]}}', rf"p\.jsonl:{LINE}: class index 5000 is out of range 0\.\.999"),
        (f'{{"image": "{KEY}", "labels": [3, true]}}', rf"p\.jsonl:{LINE}: label True is not a class"),
        (f'{{"image": "{KEY}", "labels": [3], "scores": [NaN]}}', rf"p\.jsonl:{LINE}: NaN is not a number JSON allows"),
        (f'{{"image": "{KEY}", "labels": [3], "scores": [1e400]}}', rf"p\.jsonl:{LINE}: '1e400' is beyond the range"),
        (f'{{"image": "{KEY}", "labels": [1{"0" * 20}]}}', rf"p\.jsonl:{LINE}: number 1(0){{20}} has 21 digits"),
        (f'{{"image": "{KEY}", "labels": [3], "scores": [0.5, 0.25]}}', rf"p\.jsonl:{LINE}: 2 score\(s\) for 1 label"),
        ('{"image": "ILSVRC2012_val_00000005", "labels": [3]}', rf"p\.jsonl:{LINE}: image '\w+5' appears twice"),
        (
            '{"image": "ILSVRC2012_val_00009999", "labels": [3]}',
            r"1 of 3000 image\(s\) are not in the dataset: '\w+9999';",
        ),
    ],
    ids=["unknown-name", "index-out-of-range", "bool", "nan", "infinite", "21-digits", "scores", "twice", "unknown"],
)
def test_a_bad_row_deep_in_a_large_prediction_file_is_named(
    engine, vocab, tmp_path: Path, bad_line: str, pattern: str
) -> None:
    val_dataset(engine, vocab, tmp_path, list(range(1, 3001)))
    lines = [
        json.dumps({"image": f"ILSVRC2012_val_{n:08d}", "labels": [n % 1000], "scores": [0.5]}) for n in range(1, 3001)
    ]
    good, lines[LINE - 1] = lines[LINE - 1], bad_line
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as caught:
        import_predictions(engine, tmp_path / "p.jsonl", run="m")
    assert re.search(pattern, str(caught.value)) and "\n" not in str(caught.value), str(caught.value)
    with Session(engine) as s:
        assert s.scalar(select(func.count()).select_from(ModelRun)) == 0  # nothing written
    lines[LINE - 1] = good
    (tmp_path / "p.jsonl").write_text("\n".join(lines) + "\n")
    assert import_predictions(engine, tmp_path / "p.jsonl", run="m").ok == 3000  # the file without that row


def test_list_text_is_what_json_dumps_writes() -> None:
    cases = [
        [], [0, 269, 999], [0.6, 0.2, 1e-05, -0.0, 1.7976931348623157e308], [1, 0.5], None, [True, 1],
        [float("nan")], [1e308, 1e308], [10**400], [np.int64(3)], (1, 2), [[1]], ["a"], [float("-inf")],
        [np.float64(0.5)], [np.float32(0.5)], [1.5e16, -2e-300], [[]], ["1, 2"], [None], [0.1 + 0.2],
    ]  # fmt: skip
    for values in cases:
        if isinstance(values, list) and any(isinstance(v, np.integer | np.float32) for v in values):
            with pytest.raises(TypeError):  # json.dumps refuses numpy ints and float32; so must the quick way
                list_text(values)
            continue
        assert list_text(values) == json.dumps(values), values  # type: ignore[arg-type]
    looped: list[object] = [1]
    looped.append(looped)  # written "[1, [...]]" by str(): no JSON
    for refused in (looped, [10**5000]):  # json.dumps refuses both (a circle; more digits than Python writes)
        with pytest.raises(ValueError):
            list_text(refused)  # type: ignore[arg-type]


def test_matching_rows_keeps_what_the_careful_walk_keeps() -> None:
    """Repeated classes dropped, classes outside the vocabulary, unknown images and an image named twice: the quick
    ways through `resolve_rows` and `matched_rows` give the rows, ids and errors that the row-by-row walk gives."""
    index = ImageIndex({f"img{i}.jpg": i for i in range(1, 6)})
    rows = [LabelRow(f"img{i}", [i, i, 0], where=f"f:{i}") for i in range(1, 6)]
    ids, unknown = resolve_rows(rows, index, 10, skip_unknown=False, what="f")
    assert (ids, unknown, [r.classes for r in rows]) == ([1, 2, 3, 4, 5], 0, [[i, 0] for i in range(1, 6)])
    assert list(matched_rows(rows, ids, "f")) == list(zip(rows, ids))
    for classes, pattern in (
        ([3, 10], r"f: 1 row\(s\) have classes outside 0..9: 'f:2: \[3, 10\]'"),
        ([-1], r"\[-1\]"),
    ):
        bad = [LabelRow("img1", [1], where="f:1"), LabelRow("img2", classes, where="f:2")]
        with pytest.raises(InputError, match=pattern):
            resolve_rows(bad, index, 10, skip_unknown=False, what="f")
    with pytest.raises(InputError, match=r"^f:1: a label set of 11 entries"):
        resolve_rows([LabelRow("img1", [1] * 11, where="f:1")], index, 10, skip_unknown=False, what="f")
    twice = [LabelRow("img1", [1], where="f:1"), LabelRow("nope", [1], where="f:2"), LabelRow("img1", [2], where="f:3")]
    ids, unknown = resolve_rows(twice[:2], index, 10, skip_unknown=True, what="f")
    assert (ids, unknown, list(matched_rows(twice[:2], ids, "f"))) == ([1, -1], 1, [(twice[0], 1)])
    with pytest.raises(InputError, match=r"^f:3: image 'img1' appears twice in f; nothing written"):
        list(matched_rows(twice, [1, -1, 1], "f"))


def test_keys_are_matched_by_name_and_stem_as_paths_read_them() -> None:
    for parts in itertools.chain.from_iterable(itertools.product("a./", repeat=n) for n in range(8)):
        path = "".join(parts)
        pure = PurePosixPath(path)
        assert name_and_stem(path) == (pure.name, pure.stem), path
    index = ImageIndex({"val/x.tar.gz": 1, "y.": 2, "z": 3, ".hidden": 4})
    assert [index.lookup(k) for k in ("x.tar", "x.tar.gz", "y.", "y", "z", ".hidden", "val/x.tar", "train/x.tar")] == [
        1,
        1,
        2,
        None,
        3,
        4,
        1,
        None,
    ]  # fmt: skip ("y." has no suffix: its stem is "y.")


def test_a_remembered_class_answers_only_its_own_token() -> None:
    vocab = load_builtin()
    assert vocab.resolve(1) == vocab.resolve("1") == 1
    with pytest.raises(UnknownClassError):  # True == 1 as a key, yet names no class
        vocab.resolve(True)  # type: ignore[arg-type]
    for _ in range(2):  # a refusal is not remembered as an answer
        with pytest.raises(UnknownClassError, match="class index 1000 is out of range"):
            vocab.resolve("1000")


def test_top_k_by_argmax_is_the_stable_sort_in_blocks() -> None:
    rng = np.random.default_rng(5)
    tied = rng.integers(0, 3, (101, 9)).astype(np.float32)
    tied[0] = -0.0
    tied[1, ::2] = 0.0  # -0.0 and 0.0 tie
    for scores in (tied, rng.random((64, 1000)).astype(np.float32), rng.random((7, 3))):
        for k in (1, 5, 20):
            top, top_scores = top_k(scores, k, block=10)
            expected = np.argsort(-scores, axis=1, kind="stable")[:, : min(k, scores.shape[1])]
            np.testing.assert_array_equal(top, expected)
            np.testing.assert_array_equal(top_scores, np.take_along_axis(scores, expected, axis=1))
            assert top_scores.dtype == scores.dtype


def test_score_files_are_the_bytes_np_savez_writes_of_the_sorted_rows() -> None:
    """The stored file is named by its sha256: the same scores must give the same bytes, however they are written."""
    rng = np.random.default_rng(8)
    for n, n_classes, dtype in ((9000, 13, np.float64), (10, 5, np.float32), (1, 3, np.float32), (0, 4, np.float32)):
        scores = rng.random((n, n_classes)).astype(dtype)
        image_ids = rng.permutation(3 * n)[:n].astype(np.int64)
        order = np.argsort(image_ids, kind="stable")
        expected = io.BytesIO()
        np.savez(expected, scores=scores[order].astype(np.float32), image_ids=image_ids[order])
        assert npz_in_id_order(image_ids, scores, block=7).getvalue() == expected.getvalue()


def test_score_files_in_id_order_already_and_stored_once(tmp_path: Path) -> None:
    """Rows in id order go to the archive as they are; the stored file is named by its sha256, and a second store
    of the same scores finds it and leaves nothing behind."""
    rng = np.random.default_rng(9)
    scores = rng.random((50, 6)).astype(np.float32)
    image_ids = np.arange(3, 53, dtype=np.int64)
    expected = io.BytesIO()
    np.savez(expected, scores=scores, image_ids=image_ids)
    assert npz_in_id_order(image_ids, scores, block=7).getvalue() == expected.getvalue()
    shuffled = rng.permutation(50)
    relative, digest, fresh = write_scores(tmp_path, image_ids[shuffled], scores[shuffled])
    assert fresh and relative == f"scores/{digest[:32]}.npz"
    assert (tmp_path / relative).read_bytes() == expected.getvalue()
    assert digest == hashlib.sha256(expected.getvalue()).hexdigest()
    assert write_scores(tmp_path, image_ids, scores) == (relative, digest, False)
    assert [p.name for p in (tmp_path / "scores").iterdir()] == [Path(relative).name]


def test_a_score_file_is_hashed_without_a_memory_map_where_none_can_be_made(tmp_path: Path, monkeypatch) -> None:
    def refuse(*_: object, **__: object) -> None:
        raise OSError("no mapping here")

    scores = np.random.default_rng(4).random((30, 5)).astype(np.float32)
    image_ids = np.arange(30, dtype=np.int64)[::-1].copy()
    expected = npz_in_id_order(image_ids, scores).getvalue()
    monkeypatch.setattr("relabel.sources.score_vectors.mmap.mmap", refuse)
    relative, digest, fresh = write_scores(tmp_path, image_ids, scores)
    assert fresh and digest == hashlib.sha256(expected).hexdigest()
    assert (tmp_path / relative).read_bytes() == expected


def test_stored_scores_are_read_in_place_and_checked_as_read_npz_checks_them(tmp_path: Path) -> None:
    """np.savez stores its members as they are: the scores are then a read-only view of the file, equal to what
    np.load reads in any layout; a compressed archive is read as before; a stored member whose bytes changed after
    it was written is not mapped, and fails its CRC check as `read_npz` reads it."""
    rng = np.random.default_rng(3)
    scores = rng.random((40, 7)).astype(np.float32)
    ids = np.array([f"k{i}" for i in range(40)])
    path = tmp_path / "s.npz"
    for save, layout in (
        (np.savez, scores),
        (np.savez, np.asfortranarray(scores)),
        (np.savez, scores.astype(">f8")),
        (np.savez_compressed, scores),
    ):
        save(path, scores=layout, ids=ids)
        arrays = _read_arrays(path, ("scores", "ids"))
        np.testing.assert_array_equal(arrays["scores"], layout)
        assert arrays["scores"].dtype == layout.dtype and arrays["ids"].tolist() == ids.tolist()
        assert arrays["scores"].flags.writeable == (save is np.savez_compressed)
    np.savez(path, scores=scores, ids=ids)
    data = bytearray(path.read_bytes())
    data[data.index(scores.tobytes()[:16])] ^= 1
    path.write_bytes(bytes(data))
    assert _mapped_member(path, "scores", ("scores", "ids")) is None
    with pytest.raises(InputError, match="CRC"):
        _read_arrays(path, ("scores", "ids"))
