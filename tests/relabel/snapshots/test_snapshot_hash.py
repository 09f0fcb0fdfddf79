"""The snapshot hash and the stored class-list text are byte for byte what `json` writes, whatever the rows hold."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np

from relabel.snapshots.content_hash import ClassListText, snapshot_hash


def reference_hash(rows, posteriors=None) -> str:
    """The hash as first written: one json.dumps per line."""
    h = hashlib.sha256()
    for path, classes, category in sorted(rows):
        h.update(json.dumps([path, classes, category], separators=(",", ":")).encode())
        h.update(b"\n")
    for path in sorted(posteriors or {}):
        pairs = [[c, round(p, 6)] for c, p in sorted(posteriors[path].items())]
        h.update(json.dumps([path, pairs], separators=(",", ":")).encode())
        h.update(b"\n")
    return h.hexdigest()


AWKWARD_PATHS = ['a"b/c.JPEG', "back\\slash.png", "tab\there", "é/ü/猫.jpg", "emoji 🐈.png", "line\nbreak", ""]


def test_the_hash_is_the_json_lines_hash() -> None:
    rng = random.Random(0)
    rows = [(f"n{i:05d}/ILSVRC2012_val_{i:08d}.JPEG", sorted(rng.sample(range(1000), i % 4)), "ABMZXU"[i % 6])
            for i in range(500)]  # fmt: skip
    rows += [(p, [k, k + 1], "U") for k, p in enumerate(AWKWARD_PATHS)]
    rows += [
        ("bools.png", [True, 0], "A"),
        ("floats.png", [1.0, 2], "B"),
        ("tuple.png", (4, 5), ""),
        ("n.png", [], "Z"),
    ]
    posteriors = {p: {c: rng.random() for c in rng.sample(range(1000), 3)} for p, _, _ in rows[:50]}
    posteriors["edge.png"] = {1: 1.0, 2: 0.0, 3: 1e-7, 4: 0.9999995, 5: 1}
    # what json writes otherwise than repr: a NaN, an infinity, a bool class; a numpy float, an int posterior
    posteriors["odd.png"] = {3: float("nan"), 1: float("inf"), False: 0.5, 7: np.float64(0.25), 8: 2}
    posteriors[AWKWARD_PATHS[0]] = {2: 1e308, 1: 1e308}  # finite, with a sum that is not
    assert snapshot_hash(rows) == reference_hash(rows)
    assert snapshot_hash(rows, posteriors) == reference_hash(rows, posteriors)
    assert snapshot_hash([]) == hashlib.sha256().hexdigest()


def test_class_list_text_is_json_dumps_per_list() -> None:
    text = ClassListText()
    for classes in ([], [1], [1, 2], (1, 2), [True], [1], [1.0], [0, False], [2**40], [-3]):
        assert text(classes) == json.dumps(list(classes))  # [True] and [1.0] never share [1]'s text
    compact = ClassListText(json.JSONEncoder(separators=(",", ":")).encode)
    assert compact([3, 4]) == "[3,4]"
