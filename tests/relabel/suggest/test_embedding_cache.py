"""The text-embedding cache: content addressed by encoder and text, kept in shards written whole, float16 rows."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from relabel.common.errors import OutputError, RelabelError
from relabel.common.kept_arrays import CACHE_ENV, user_cache_dir
from relabel.common.progress import NullProgress
from relabel.suggest import embedding_cache
from relabel.suggest.embedding_cache import encode_cached, encoder_folder, read_store, text_keys, unit_rows
from tests.fakes import TrigramEncoder

TEXTS = [f"class text number {i}" for i in range(20)]


def stored(vectors: np.ndarray) -> np.ndarray:
    """What the cache hands back for freshly encoded rows: float16 values, L2-normalised again as float32."""
    return unit_rows(vectors.astype(np.float16))


def shards(cache: Path) -> list[Path]:
    return sorted(cache.glob("text-embeddings/*/*.npz"))


def test_texts_are_embedded_once_each_and_read_back(tmp_path: Path) -> None:
    encoder = TrigramEncoder()
    first = encode_cached(encoder, TEXTS, tmp_path, "class texts")
    assert encoder.calls == [TEXTS]  # 20 texts, 20 embedded
    assert first.dtype == np.float32 and np.array_equal(first, stored(TrigramEncoder().encode(TEXTS)))
    again = encode_cached(encoder, TEXTS[::-1], tmp_path, "class texts")  # any order, from the cache
    assert len(encoder.calls) == 1 and np.array_equal(again, first[::-1])


def test_only_the_texts_the_cache_lacks_meet_the_encoder(tmp_path: Path) -> None:
    encoder = TrigramEncoder()
    encode_cached(encoder, TEXTS[:5], tmp_path, "class texts")
    asked = ["a new text", TEXTS[2], "another new text", "a new text", TEXTS[0]]
    got = encode_cached(encoder, asked, tmp_path, "class texts")
    assert encoder.calls[1:] == [["a new text", "another new text"]]  # distinct, in the order they come
    assert np.array_equal(got, stored(TrigramEncoder().encode(asked)))
    assert encode_cached(encoder, [], tmp_path, "class texts").shape[0] == 0


def test_encoders_are_kept_apart_by_id(tmp_path: Path) -> None:
    other = TrigramEncoder()
    other.id = "test:trigram/other"  # same vectors under another name: nothing is shared
    encode_cached(TrigramEncoder(), TEXTS, tmp_path, "class texts")
    encode_cached(other, TEXTS, tmp_path, "class texts")
    assert other.calls == [TEXTS]
    folders = {p.parent.name for p in shards(tmp_path)}
    assert folders == {encoder_folder(tmp_path, "test:trigram").name, encoder_folder(tmp_path, other.id).name}
    assert encoder_folder(tmp_path, "a/b").name != encoder_folder(tmp_path, "a_b").name  # same slug, other hash
    assert encoder_folder(tmp_path, "st:sentence-transformers/all-MiniLM-L6-v2").name.startswith(
        "st_sentence-transformers_all-MiniLM-L6-v2-"
    )


def test_text_keys_tell_apart_what_differs_by_a_character() -> None:
    keys = text_keys(["tabby", "Tabby", "tabby ", "tábby", "\udc80"])  # a lone surrogate still has a key
    assert keys.dtype == np.dtype("S32") and len(set(keys.tolist())) == 5


def test_each_part_is_kept_as_it_is_done_and_many_parts_merged(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(embedding_cache, "ENCODE_PART", 3)
    monkeypatch.setattr(embedding_cache, "MAX_SHARDS", 100)
    encoder = TrigramEncoder()
    got = encode_cached(encoder, TEXTS, tmp_path, "class texts")
    assert [len(c) for c in encoder.calls] == [3, 3, 3, 3, 3, 3, 2] and len(shards(tmp_path)) == 7
    assert np.array_equal(got, stored(TrigramEncoder().encode(TEXTS)))  # parts equal one call
    monkeypatch.setattr(embedding_cache, "MAX_SHARDS", 4)
    encode_cached(encoder, ["one more"], tmp_path, "class texts")  # the eighth shard: all merged into one
    (merged,) = shards(tmp_path)
    keys, vectors = read_store(merged.parent)
    assert sorted(keys.tolist()) == sorted(text_keys([*TEXTS, "one more"]).tolist()) and vectors.dtype == np.float16


def test_an_interrupted_run_keeps_the_parts_it_finished(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setattr(embedding_cache, "ENCODE_PART", 8)

    class Interrupted(TrigramEncoder):
        def encode(self, texts: list[str]) -> np.ndarray:
            if self.calls:
                raise KeyboardInterrupt
            return super().encode(texts)

    with pytest.raises(KeyboardInterrupt):
        encode_cached(Interrupted(), TEXTS, tmp_path, "class texts")
    encoder = TrigramEncoder()
    encode_cached(encoder, TEXTS, tmp_path, "class texts")
    assert encoder.calls == [TEXTS[8:16], TEXTS[16:]]  # the first part was kept


def test_a_damaged_shard_is_removed_and_its_texts_embedded_again(tmp_path: Path) -> None:
    encode_cached(TrigramEncoder(), TEXTS, tmp_path, "class texts")
    (shard,) = shards(tmp_path)
    shard.write_bytes(shard.read_bytes()[:100])  # cut short
    encoder = TrigramEncoder()
    got = encode_cached(encoder, TEXTS, tmp_path, "class texts")
    assert encoder.calls == [TEXTS] and np.array_equal(got, stored(TrigramEncoder().encode(TEXTS)))
    assert shards(tmp_path) == [shard] and len(read_store(shard.parent)[0]) == 20  # written whole again


def test_vectors_of_another_size_under_the_same_id_are_refused(tmp_path: Path) -> None:
    encode_cached(TrigramEncoder(), TEXTS, tmp_path, "class texts")

    class Wider(TrigramEncoder):
        def encode(self, texts: list[str]) -> np.ndarray:
            return np.hstack([super().encode(texts), np.zeros((len(texts), 4), np.float32)])

    with pytest.raises(RelabelError, match=r"'test:trigram' in .* have 512 dimensions, the encoder now gives 516"):
        encode_cached(Wider(), ["a text the cache lacks"], tmp_path, "class texts")
    assert len(shards(tmp_path)) == 1  # nothing of the other size was kept


def test_an_unwritable_cache_is_one_line_naming_it(tmp_path: Path) -> None:
    (tmp_path / "cache").write_text("a file where the cache folder goes")
    with pytest.raises(OutputError, match=re.escape(f"cannot write '{tmp_path / 'cache'}/")) as caught:
        encode_cached(TrigramEncoder(), TEXTS, tmp_path / "cache", "class texts")
    assert "\n" not in str(caught.value)


def test_a_file_in_place_of_a_shard_is_refused_before_writing(tmp_path: Path) -> None:
    folder = encoder_folder(tmp_path, TrigramEncoder.id)
    encode_cached(TrigramEncoder(), TEXTS[:1], tmp_path, "class texts")
    (shard,) = shards(tmp_path)
    shard.unlink()
    shard.mkdir()  # a directory where the shard of the same keys goes
    with pytest.raises(OutputError, match="a directory"):
        encode_cached(TrigramEncoder(), TEXTS[:1], tmp_path, "class texts")
    assert folder.is_dir()


def test_without_a_workspace_the_user_cache_folder_is_used(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "mine"))
    assert user_cache_dir() == tmp_path / "mine"
    encode_cached(TrigramEncoder(), TEXTS[:2], None, "class texts")
    assert len(shards(tmp_path / "mine")) == 1
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert user_cache_dir() == tmp_path / "xdg" / "relabel"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert user_cache_dir() == tmp_path / "home" / ".cache" / "relabel"


def test_a_long_job_shows_a_progress_bar_on_a_terminal(monkeypatch, tmp_path: Path) -> None:
    bars: list[tuple[int, str, bool]] = []

    def record(total: int, desc: str, *, enabled: bool = True, unit: str = "img") -> object:
        bars.append((total, desc, enabled))
        return NullProgress()

    monkeypatch.setattr(embedding_cache, "ENCODE_PART", 4)
    monkeypatch.setattr(embedding_cache, "_tty", lambda: True)
    monkeypatch.setattr(embedding_cache, "progress_bar", record)
    encode_cached(TrigramEncoder(), TEXTS[:4], tmp_path, "class names")  # one part: a moment, no bar
    encode_cached(TrigramEncoder(), TEXTS, tmp_path, "class descriptors")  # 16 more in four parts
    assert bars == [(4, "embedding class names with test:trigram (once)", False),
                    (16, "embedding class descriptors with test:trigram (once)", True)]  # fmt: skip
