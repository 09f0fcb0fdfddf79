"""A snapshot's content hash, and the JSON text of its class lists, written fast and byte for byte as `json` does.

The hash is sha256 over one line per image, ``json.dumps([path, classes, category], separators=(",", ":"))`` in path
order, then one line per image with posteriors, ``[path, [[class, P rounded to 6 decimals], ...]]``. A snapshot of
50,000 images writes 75,000 such lines and 50,000 class lists for `snapshot_labels`; `json.dumps` builds a new
encoder for every call, which took longer than the hashing. Here a class list's text is made once per distinct list
(an ImageNet snapshot has a few thousand) and a line is put together from json's own string escaping; anything that
is not a plain str or a list of plain ints (a bool would equal 1 in a cache key) goes through the encoder itself, so
the text, and so the hash, stays what `json` writes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from json.encoder import encode_basestring_ascii
from math import isfinite

_COMPACT = json.JSONEncoder(separators=(",", ":"))  # json.dumps(..., separators=(",", ":")), one encoder for all


class ClassListText(dict[tuple[int, ...], str]):
    """The JSON text of class lists, made once per distinct list by `encode` (default `json.dumps`: the text the
    `snapshot_labels.classes` column's serializer writes)."""

    def __init__(self, encode: Callable[[list[int]], str] = json.dumps) -> None:
        super().__init__()
        self.encode = encode

    def __call__(self, classes: Sequence[int]) -> str:
        key = tuple(classes)
        if not all(type(c) is int for c in key):
            return self.encode(list(key))
        text = self.get(key)
        if text is None:
            text = self[key] = self.encode(list(key))
        return text


def snapshot_hash(
    rows: Iterable[tuple[str, Sequence[int], str]], posteriors: Mapping[str, Mapping[int, float]] | None = None
) -> str:
    """sha256 over (path, classes, category) in path order: equal labels give an equal hash. A probabilistic
    snapshot's posteriors (path -> class -> P) are hashed too, rounded to 6 decimals, so two snapshots that agree
    on the labels but not on how sure they are differ."""
    compact = ClassListText(_COMPACT.encode)
    lines = [_label_line(path, classes, category, compact) for path, classes, category in sorted(rows)]
    if posteriors:
        lines += [_posterior_line(path, posteriors[path]) for path in sorted(posteriors)]
    lines.append("")  # every line ends with a newline
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _label_line(path: str, classes: Sequence[int], category: str, compact: ClassListText) -> str:
    """``json.dumps([path, classes, category], separators=(",", ":"))``."""
    if type(path) is not str or type(category) is not str:
        return _COMPACT.encode([path, classes, category])
    return f"[{encode_basestring_ascii(path)},{compact(classes)},{encode_basestring_ascii(category)}]"


def _posterior_line(path: str, posteriors: Mapping[int, float]) -> str:
    """``json.dumps([path, [[class, round(P, 6)], ...]], separators=(",", ":"))``, classes ascending. A plain int
    and a finite float are written as json writes them (their repr); anything else goes through the encoder."""
    classes = sorted(posteriors)
    rounded = [round(posteriors[c], 6) for c in classes]
    if (
        type(path) is str
        and all(type(c) is int for c in classes)
        and all(type(p) is float for p in rounded)
        and isfinite(sum(rounded))  # finite when every term is; a sum that overflows takes the long way
    ):
        return f"[{encode_basestring_ascii(path)},[{','.join([f'[{c},{p!r}]' for c, p in zip(classes, rounded)])}]]"
    return _COMPACT.encode([path, [[c, p] for c, p in zip(classes, rounded)]])
