"""The array paths of a vote import agree with the rules they replace: ReaL's one-hot answers read from the non-zero
entries only (of the whole tensor, or of one inflated a few raters at a time), and the one sort that orders votes for
the table's primary key and finds a worker answering twice."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relabel.common.arrays import read_npz
from relabel.common.errors import InputError
from relabel.votes.formats import ParsedVotes, one_hot_answers
from relabel.votes.importing import refuse_duplicates, storage_order
from relabel.votes.rater_file import RaterArrays, read_rater_file

PATH = Path("r.npz")


def whole_tensor_rule(tensor: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, ...] | str:
    """The rule over every value of the tensor: (rater, pair, answer) pair-major, or the message of the refusal."""
    total = tensor.sum(axis=2)
    bad = np.argwhere(((tensor != 0) & (tensor != 1)).any(axis=2) | (total > 1))
    if len(bad):
        r, p = bad[0]
        return (
            f"{PATH.name} pair {p} rater {ids[r]}: answer {tensor[r, p].tolist()} is not one-hot no/maybe/yes "
            f"({len(bad)} such answers)"
        )
    pair, rater = np.nonzero(total.T > 0)
    return rater, pair, tensor[rater, pair].argmax(axis=1)


def random_answers(rng: np.random.Generator, raters: int, pairs: int, dtype: type = np.float64) -> np.ndarray:
    """One-hot answers, about half of them absent (all zero)."""
    tensor = np.zeros((raters, pairs, 3), dtype=dtype)
    r, p = np.nonzero(rng.random((raters, pairs)) < 0.5)
    tensor[r, p, rng.integers(0, 3, len(r))] = 1
    return tensor


def sparse_rule(raters: RaterArrays, path: Path = PATH) -> tuple[np.ndarray, ...] | str:
    try:
        return one_hot_answers(path, raters)
    except InputError as exc:
        return str(exc)


def whole(tensor: np.ndarray, ids: np.ndarray) -> RaterArrays:
    return RaterArrays(tensor.shape, tensor.dtype, np.zeros((tensor.shape[1], 2), dtype="U3"), ids, tensor=tensor)


def streamed(folder: Path, tensor: np.ndarray, ids: np.ndarray, *, compressed: bool = True) -> RaterArrays:
    """The tensor saved as a raters file (beside `PATH`'s name, which the messages use) and read back in steps."""
    folder.mkdir(exist_ok=True)
    save = np.savez_compressed if compressed else np.savez
    save(folder / PATH.name, tensor=tensor, info=np.zeros((tensor.shape[1], 2), dtype="U3"), ids=ids)
    raters = read_rater_file(folder / PATH.name)
    assert raters.streamed is not None and raters.tensor is None
    return raters


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.uint8, ">f8"])
def test_good_answers_give_the_same_votes(dtype: type, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr("relabel.votes.rater_file.STREAM_BYTES", 1000)  # several steps, of whole raters
    rng = np.random.default_rng(7)
    tensor, ids = random_answers(rng, 9, 40, dtype), np.arange(100, 109)
    expected = whole_tensor_rule(tensor, ids)
    assert not isinstance(expected, str) and len(expected[0]) > 100
    for raters in (whole(tensor, ids), streamed(tmp_path, tensor, ids)):
        got = sparse_rule(raters)
        assert not isinstance(got, str) and all(np.array_equal(e, g) for e, g in zip(expected, got, strict=True))


@pytest.mark.parametrize(
    "damage",
    [
        [(3, 5, 1, 2.0)],  # a value above 1
        [(3, 5, 0, -1.0)],  # a negative value
        [(0, 0, 2, np.nan)],  # not a number
        [(8, 39, 1, 0.5)],  # a fraction
        [(2, 7, 0, 1.0), (2, 7, 2, 1.0)],  # two answers at once
        [(1, 3, 0, 1.0), (1, 3, 1, -1.0)],  # sums to 0 with a value outside 0/1
        [(6, 6, 0, np.inf), (1, 30, 2, 3.0), (1, 2, 1, 1.0), (1, 2, 2, 1.0)],  # several: the first is named
    ],
)
def test_damaged_answers_are_refused_alike(damage: list[tuple[int, int, int, float]], tmp_path: Path) -> None:
    rng = np.random.default_rng(11)
    tensor, ids = random_answers(rng, 9, 40), np.arange(100, 109)
    tensor[tensor == 0] = -0.0  # shown as such in the message
    for r, p, a, value in damage:
        tensor[r, p, a] = value
    expected = whole_tensor_rule(tensor, ids)
    assert isinstance(expected, str)
    assert sparse_rule(whole(tensor, ids)) == expected
    assert sparse_rule(streamed(tmp_path, tensor, ids, compressed=False), tmp_path / PATH.name) == expected


def test_negative_zero_is_no_answer() -> None:
    tensor, ids = random_answers(np.random.default_rng(3), 4, 10), np.arange(4)
    tensor[tensor == 0] = -0.0
    got, expected = sparse_rule(whole(tensor, ids)), whole_tensor_rule(tensor, ids)
    assert not isinstance(got, str) and not isinstance(expected, str)
    assert all(np.array_equal(e, g) for e, g in zip(expected, got, strict=True))


def damaged_archives(folder: Path) -> dict[str, Path]:
    """Raters files the streamed read leaves to read_npz: each holds a problem, or something it does not stream."""
    tensor, ids = random_answers(np.random.default_rng(2), 3, 20), np.arange(3)
    info = np.zeros((20, 2), dtype="U3")
    files = {name: folder / f"{name}.npz" for name in ("cut", "no-ids", "fortran", "two-d", "corrupt", "strings")}
    np.savez(files["cut"], tensor=tensor, info=info, ids=ids)
    whole_file = files["cut"].read_bytes()
    files["cut"].write_bytes(whole_file[: len(whole_file) // 2])
    np.savez(files["no-ids"], tensor=tensor, info=info)
    np.savez(files["fortran"], tensor=np.asfortranarray(tensor), info=info, ids=ids)
    np.savez(files["two-d"], tensor=tensor.reshape(3, 60), info=info, ids=ids)
    np.savez(files["strings"], tensor=tensor.astype("U3"), info=info, ids=ids)
    np.savez(files["corrupt"], tensor=tensor, info=info, ids=ids)
    data = bytearray(files["corrupt"].read_bytes())
    data[200] ^= 0xFF  # inside the stored tensor: its CRC no longer matches
    files["corrupt"].write_bytes(bytes(data))
    return files


def test_an_unusual_archive_is_read_whole_and_named_as_read_npz_names_it(tmp_path: Path) -> None:
    for name, path in damaged_archives(tmp_path).items():
        try:
            expected = read_npz(path, ("tensor", "info", "ids"), what="a ReaL raters file")
        except InputError as exc:
            with pytest.raises(InputError) as got:
                read_rater_file(path)
            assert str(got.value) == str(exc), name
        else:  # a file read_npz takes: read whole, to the same arrays
            raters = read_rater_file(path)
            assert raters.streamed is None and raters.tensor is not None, name
            assert np.array_equal(raters.tensor, expected["tensor"]) and raters.shape == expected["tensor"].shape


def parsed_votes(image: list[int], cls: list[int], worker: list[int], names: list[str]) -> ParsedVotes:
    n = len(image)
    return ParsedVotes(
        keys=[f"k{i}" for i in range(max(image) + 1)],
        key_of=np.array(image, dtype=np.int64),
        classes=np.array(cls, dtype=np.int64),
        worker_names=names,
        worker_of=np.array(worker, dtype=np.int64),
        answers=np.zeros(n, dtype=np.int64),
        where=lambda i: f"votes.csv line {i + 2}",
    )


NAMES = ["9", "10", "100", "b", "a"]


@pytest.mark.parametrize("scale", [1, 2**40], ids=["one-key", "large-ids"])
def test_votes_are_ordered_as_the_primary_key(scale: int) -> None:
    rng = np.random.default_rng(5)
    triples = sorted({(int(i), int(c), int(w)) for i, c, w in rng.integers(0, [6, 4, 5], size=(60, 3))})
    rng.shuffle(triples)
    image, cls, worker = (list(column) for column in zip(*triples))
    parsed = parsed_votes(image, cls, worker, NAMES)
    image_ids = np.array(image, dtype=np.int64) * scale + 1
    order = storage_order(parsed, image_ids, PATH)
    stored = [(int(image_ids[k]), cls[k], NAMES[worker[k]]) for k in order]
    assert stored == sorted(stored) and len(stored) == len(triples)


@pytest.mark.parametrize("scale", [1, 2**40], ids=["one-key", "large-ids"])
def test_a_repeated_answer_is_named_as_before(scale: int) -> None:
    # image 1 class 2: worker "10" twice and worker "9" twice; the message names the same pair as the full check
    image, cls, worker = [0, 1, 1, 1, 1, 1, 0], [2, 2, 2, 2, 2, 3, 2], [0, 1, 0, 1, 0, 2, 3]
    parsed = parsed_votes(image, cls, worker, NAMES)
    image_ids = np.array(image, dtype=np.int64) * scale + 1
    with pytest.raises(InputError) as expected:
        refuse_duplicates(parsed, image_ids, PATH)
    with pytest.raises(InputError) as got:
        storage_order(parsed, image_ids, PATH)
    assert str(got.value) == str(expected.value)
    assert "worker '9' answers image 'k1' class 2 again" in str(got.value) and "2 repeated answers" in str(got.value)
