"""`resamples_kept`: inside the block a bootstrap's resamples are drawn once, kept as bytes, and read again, the
same numbers; outside it, and beyond its memory bound, they are drawn on every call and nothing is held. With a
folder, a set is kept there for the next process, checked on reading."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest

from evaluator import paired, stored_resamples
from evaluator.paired import JointBootstrap, resamples_kept


def drawn(n_images: int, n_boot: int = 30, seed: int = 5) -> list[np.ndarray]:
    """The chunks of one pass, copied: inside the block a chunk is valid only until the next one."""
    return [chunk.copy() for chunk in JointBootstrap(n_images, n_boot, seed).counts()]


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The image counts of the bootstraps drawn (kept or not) while the test runs."""
    made: list[int] = []
    plain, as_bytes = JointBootstrap._draw, JointBootstrap._draw_bytes

    def counted_draw(self: JointBootstrap) -> Iterator[np.ndarray]:
        made.append(self.n_images)
        return plain(self)

    def counted_bytes(self: JointBootstrap) -> np.ndarray | None:
        made.append(self.n_images)
        return as_bytes(self)

    monkeypatch.setattr(JointBootstrap, "_draw", counted_draw)
    monkeypatch.setattr(JointBootstrap, "_draw_bytes", counted_bytes)
    return made


def test_kept_resamples_are_drawn_once_and_equal_the_fresh_ones(draws: list[int]) -> None:
    fresh = drawn(400)
    with resamples_kept():
        first, again = drawn(400), drawn(400)
        other_seed = drawn(400, seed=6)
        held = paired._kept.get()[(400, 30, 5)]  # type: ignore[index]
        chunk = next(iter(JointBootstrap(400, 30, 5).counts()))
    assert draws == [400, 400, 400]  # fresh, first (kept), other seed: `again` is read from memory
    assert all(c.dtype == np.uint8 for c in held) and sum(c.nbytes for c in held) == 400 * 30
    assert np.array_equal(np.concatenate(first), np.concatenate(fresh)) and first[0].dtype == np.float32
    assert np.array_equal(np.concatenate(again), np.concatenate(fresh))
    assert not np.array_equal(np.concatenate(other_seed), np.concatenate(fresh))
    with pytest.raises(ValueError, match="read-only"):
        chunk[0, 0] = 7  # one statistic cannot change another's resamples


@pytest.mark.parametrize("kept_as", ["drawn", "bytes", "float32"])
def test_columns_are_the_counts_of_the_images_picked(monkeypatch: pytest.MonkeyPatch, kept_as: str) -> None:
    monkeypatch.setattr(paired, "CHUNK_VALUES", 4_000)  # chunks of 10 resamples: three chunks
    fresh = np.concatenate(drawn(400))
    picks = np.array([399, 3, 3, 0, 250]), np.arange(0, 400, 7), np.zeros(0, np.int64)
    if kept_as == "float32":
        monkeypatch.setattr(paired, "KEPT_MAX", 1)
    with resamples_kept() if kept_as != "drawn" else nullcontext():
        got = [[c.copy() for c in chunk] for chunk in JointBootstrap(400, 30, 5).columns(*picks)]
        if kept_as != "drawn":
            (held,) = paired._kept.get().values()  # type: ignore[union-attr]
            assert held[0].dtype == (np.uint8 if kept_as == "bytes" else np.float32)
    for i, pick in enumerate(picks):
        part = np.concatenate([chunk[i] for chunk in got])
        assert part.dtype == np.float32 and part.flags.c_contiguous
        assert np.array_equal(part, fresh[:, pick])


def test_two_passes_at_once_read_their_own_buffers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paired, "CHUNK_VALUES", 4_000)  # chunks of 10 resamples
    fresh = np.concatenate(drawn(400))
    with resamples_kept():
        drawn(400)
        pairs = [
            (a.copy(), b.copy())
            for a, b in zip(JointBootstrap(400, 30, 5).counts(), JointBootstrap(400, 30, 5).counts())
        ]
        later = drawn(400)  # the two buffers are spare again
    assert np.array_equal(np.concatenate([a for a, _ in pairs]), fresh)
    assert np.array_equal(np.concatenate([b for _, b in pairs]), fresh)
    assert np.array_equal(np.concatenate(later), fresh)


def test_a_count_above_a_byte_keeps_the_set_as_float32(monkeypatch: pytest.MonkeyPatch, draws: list[int]) -> None:
    fresh = drawn(400)
    monkeypatch.setattr(paired, "KEPT_MAX", 1)  # every resample draws some image twice
    with resamples_kept():
        first, again = drawn(400), drawn(400)
        (held,) = paired._kept.get().values()  # type: ignore[union-attr]
    assert draws == [400, 400, 400]  # fresh; the bytes refused, then drawn as float32 and kept
    assert all(c.dtype == np.float32 for c in held)
    assert np.array_equal(np.concatenate(first), np.concatenate(fresh))
    assert np.array_equal(np.concatenate(again), np.concatenate(fresh))


def test_the_same_numbers_through_means_inside_and_outside_the_block() -> None:
    values = np.random.default_rng(0).random((3, 250)) < 0.6
    outside = JointBootstrap(250, 40, seed=2).means(values)
    with resamples_kept():
        JointBootstrap(250, 40, seed=2).means(values[:1])
        inside = JointBootstrap(250, 40, seed=2).means(values)
    assert np.array_equal(inside, outside)


def test_outside_the_block_nothing_is_held(draws: list[int]) -> None:
    with resamples_kept():
        pass
    first, again = list(JointBootstrap(400, 30, 5).counts()), list(JointBootstrap(400, 30, 5).counts())
    assert draws == [400, 400] and not any(a is b for a, b in zip(first, again))
    assert np.array_equal(np.concatenate(first), np.concatenate(again))


def test_the_memory_bound_drops_the_oldest_and_skips_what_cannot_fit(
    monkeypatch: pytest.MonkeyPatch, draws: list[int]
) -> None:
    monkeypatch.setattr(paired, "KEPT_BYTES", 30 * 500)  # room for one 500-image set of 30 resamples, as bytes
    monkeypatch.setattr(paired, "CHUNK_VALUES", 4_000)  # drawn in chunks of a few resamples: all of them count
    with resamples_kept():
        drawn(300)
        big = drawn(500)  # fits alone: the 300-image set is dropped
        drawn(300)
        drawn(600), drawn(600)  # larger than the bound: never held
        assert np.array_equal(np.concatenate(big), np.concatenate(drawn(500)))
    assert draws == [300, 500, 300, 600, 600, 500]  # 300 again (dropped for 500), which drops 500 in turn


def test_scratch_buffers_are_reused_inside_the_block_only() -> None:
    outside = [paired.scratch("t", (4, 5), np.float32) for _ in range(2)]
    assert not np.shares_memory(*outside)
    with resamples_kept():
        first = paired.scratch("t", (40, 50), np.float32)
        smaller = paired.scratch("t", (3, 7), np.uint32)
        other_name = paired.scratch("u", (3, 7), np.uint32)
        larger = paired.scratch("t", (80, 50), np.float32)
    assert first.shape == (40, 50) and smaller.shape == (3, 7) and smaller.dtype == np.uint32
    assert np.shares_memory(first, smaller) and not np.shares_memory(first, other_name)
    assert larger.shape == (80, 50) and not np.shares_memory(first, larger)  # grown: new memory


def test_a_folder_keeps_the_set_for_the_next_block_the_same_numbers(tmp_path: Path, draws: list[int]) -> None:
    fresh = drawn(400)
    with resamples_kept(tmp_path):
        first = drawn(400)
    (stored,) = tmp_path.glob("resamples-*.bin")
    with resamples_kept(tmp_path):  # another process, as it were: nothing in memory yet
        again = drawn(400)
        drawn(400, n_boot=20)
    assert draws == [400, 400, 400]  # fresh, first (drawn and stored), other settings: `again` read from the file
    assert np.array_equal(np.concatenate(first), np.concatenate(fresh))
    assert np.array_equal(np.concatenate(again), np.concatenate(fresh))
    assert len(list(tmp_path.glob("resamples-*.bin"))) == 2 and stored.exists()


@pytest.mark.parametrize("damage", ["flip", "truncate", "settings", "empty"])
def test_a_damaged_or_foreign_file_is_drawn_again_and_replaced(tmp_path: Path, draws: list[int], damage: str) -> None:
    with resamples_kept(tmp_path):
        fresh = drawn(400)
    (path,) = tmp_path.glob("resamples-*.bin")
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-1] ^= 1  # one count changed: the CRC no longer matches
    elif damage == "truncate":
        data = data[:-10]
    elif damage == "settings":  # a file of another seed under this name
        data[stored_resamples.HEADER.size - 12] ^= 1
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with resamples_kept(tmp_path):
        again = drawn(400)
    assert draws == [400, 400]
    assert np.array_equal(np.concatenate(again), np.concatenate(fresh))
    with resamples_kept(tmp_path):
        drawn(400)
    assert draws == [400, 400]  # rewritten whole by the second block


def test_the_folder_is_trimmed_to_its_bound_least_recently_read_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stored_resamples, "MAX_FOLDER_BYTES", 2 * (400 * 30 + stored_resamples.HEADER.size))
    with resamples_kept(tmp_path):
        drawn(400, seed=1)
        drawn(400, seed=2)
    old = stored_resamples.path_of(tmp_path, 400, 30, 1)
    os.utime(old, (1, 1))
    os.utime(stored_resamples.path_of(tmp_path, 400, 30, 2), (2, 2))
    with resamples_kept(tmp_path):
        drawn(400, seed=2)  # read: now the most recent
        drawn(400, seed=3)  # a third set: seed 1, read longest ago, goes
    assert sorted(p.name for p in tmp_path.glob("resamples-*.bin")) == [
        stored_resamples.path_of(tmp_path, 400, 30, s).name for s in (2, 3)
    ]


def test_a_folder_that_cannot_be_written_keeps_nothing_and_raises_nothing(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with resamples_kept(blocked):
        counts = drawn(400)
    assert np.array_equal(np.concatenate(counts), np.concatenate(drawn(400)))
    assert blocked.read_text() == "not a folder"
