"""`ImageIndex.lookup` against its definition written with PurePosixPath: a key is an image's path, or a file name or
stem that exactly one image has, its folders (if any) ending the image's folders. Every path and key of a small
alphabet, on random datasets, some sharing names."""

from __future__ import annotations

import itertools
import random
from pathlib import PurePosixPath

from relabel.common.workspace import ImageIndex


def defined_lookup(ids_by_path: dict[str, int], key: str) -> int | None:
    key = key.strip().replace("\\", "/")
    if key in ids_by_path:
        return ids_by_path[key]
    by_alias: dict[str, int | None] = {}
    for path, image_id in ids_by_path.items():
        pure = PurePosixPath(path)
        for alias in {pure.name, pure.stem}:
            by_alias[alias] = None if alias in by_alias else image_id
    paths = {image_id: path for path, image_id in ids_by_path.items()}
    pure = PurePosixPath(key)
    for alias in (pure.name, pure.stem):
        hit = by_alias.get(alias)
        if hit is not None:
            a, b = pure.parent.parts, PurePosixPath(paths[hit]).parent.parts
            n = min(len(a), len(b))
            if n == 0 or a[-n:] == b[-n:]:
                return hit
    return None


WORDS = ["".join(p) for n in range(1, 6) for p in itertools.product("ab./", repeat=n)]


def test_lookup_answers_as_defined_on_every_small_key() -> None:
    rng = random.Random(5)
    paths = [w for w in WORDS if not w.startswith("/") and not w.endswith("/") and "//" not in w]
    keys = WORDS + [f" {w}" for w in WORDS[:50]] + [w.replace("/", "\\") for w in WORDS if "/" in w][:100]
    for size in (1, 3, 12, 60):
        dataset = {p: i + 1 for i, p in enumerate(rng.sample(paths, size))}
        index = ImageIndex(dict(dataset))
        got = [index.lookup(k) for k in keys]
        assert got == [defined_lookup(dataset, k) for k in keys], sorted(dataset)
        assert any(g is not None for g in got) and any(g is None for g in got)


def test_a_shared_name_is_no_answer_and_paths_need_no_names() -> None:
    index = ImageIndex({"val/a.jpg": 1, "train/a.jpg": 2, "b.png": 3})
    assert [index.lookup(k) for k in ("a.jpg", "a", "val/a", "train\\a.jpg", " b ", "b.png", "c")] == [
        None,
        None,
        None,  # its folder does not pick one of the two
        2,
        3,
        3,
        None,
    ]  # fmt: skip
    exact = ImageIndex({"x/y.jpg": 7})
    assert exact.lookup("x/y.jpg") == 7 and exact._by_alias is None  # an exact path builds no names
    assert exact.lookup("y") == 7 and exact._by_alias == {"y.jpg": 7, "y": 7}
