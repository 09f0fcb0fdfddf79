"""ReaL's raters file read a slab at a time: the non-zero entries found are those of the tensor read whole, whatever
the slab size, dtype or byte order, and a file the streamed read cannot take is read whole."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from relabel.votes import rater_file
from relabel.votes.rater_file import read_rater_file


def sparse_tensor(dtype: str, raters: int = 5, pairs: int = 37) -> np.ndarray:
    rng = np.random.default_rng(3)
    tensor = np.zeros((raters, pairs, 3), dtype=dtype)
    hot = rng.random((raters, pairs)) < 0.3
    tensor[hot, rng.integers(0, 3, hot.sum())] = 1
    tensor[0, 0, 0], tensor[-1, -1, 2] = 1, 2  # the first and the last entry
    return tensor


def save(path: Path, tensor: np.ndarray) -> Path:
    info = np.array([[f"ILSVRC2012_val_{p + 1:08d}.JPEG", "3"] for p in range(tensor.shape[1])])
    np.savez_compressed(path, tensor=tensor, info=info, ids=np.arange(tensor.shape[0]) + 100)
    return path


@pytest.mark.parametrize("dtype", ["<f8", ">f8", "<f4", "<i8", "|u1", "<i2"])
@pytest.mark.parametrize("slab_bytes", [8, 40, 1000, 1 << 20])
def test_the_streamed_non_zero_entries_are_those_of_the_whole_tensor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str, slab_bytes: int
) -> None:
    monkeypatch.setattr(rater_file, "STREAM_BYTES", slab_bytes)
    tensor = sparse_tensor(dtype)
    raters = read_rater_file(save(tmp_path / "r.npz", tensor))
    assert raters.streamed is not None and raters.tensor is None
    hot, values = raters.nonzero()
    assert np.array_equal(hot, np.flatnonzero(tensor)) and len(hot) > 20
    assert np.array_equal(values, tensor.reshape(-1)[hot]) and values.dtype.str[1:] == tensor.dtype.str[1:]
    assert raters.shape == tensor.shape and raters.ids.tolist() == list(range(100, 105))


def test_negative_zero_is_no_answer(tmp_path: Path) -> None:
    """-0.0 equals zero though its bits do not: it is no entry, as when the tensor is read whole."""
    tensor = sparse_tensor("<f8")
    tensor[1, 2] = [-0.0, -0.0, 1.0]
    hot, values = read_rater_file(save(tmp_path / "r.npz", tensor)).nonzero()
    assert np.array_equal(hot, np.flatnonzero(tensor)) and (values != 0).all()
    assert (1 * 37 + 2) * 3 + 2 in hot.tolist() and (1 * 37 + 2) * 3 not in hot.tolist()


def test_a_fortran_order_tensor_is_read_whole_with_the_same_entries(tmp_path: Path) -> None:
    tensor = sparse_tensor("<f8")
    raters = read_rater_file(save(tmp_path / "f.npz", np.asfortranarray(tensor)))
    assert raters.streamed is None and raters.tensor is not None
    hot, values = raters.nonzero()
    assert np.array_equal(hot, np.flatnonzero(tensor)) and np.array_equal(values, tensor.reshape(-1)[hot])
