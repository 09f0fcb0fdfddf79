"""Image indices of a bootstrap resample, read from the bit generator's raw words: the same numbers as numpy's
`Generator.integers(0, n, dtype=np.int32)`, with less work per number and no large array of draws.

numpy draws an integer in [0, n) from the next 32-bit word x of the generator (for PCG64: the low, then the high
half of each 64-bit output) by Lemire's method: m = x·n, the draw is m >> 32, and a word whose low half of m falls
below 2^32 mod n is rejected (the next word is read in its place), which happens to about n / 2^32 of the words.
`IndexDraws` does the same over the raw 64-bit outputs (`BitGenerator.random_raw`) with whole-array products, row
by row, so a resample's draws stay small enough to be held in cache while they are counted; the words are taken in
numpy's order, and a word left over at the end of a row is the first of the next, as in numpy's buffer. Drawing
n numbers at a time this way gives, bit for bit, what consecutive `integers` calls from the same seed give.
"""

from __future__ import annotations

import numpy as np

MAX_IMAGES = 2**31 - 1  # numpy's int32 draws: beyond this numpy reads 64-bit words, which `IndexDraws` does not


class IndexDraws:
    """The stream of `np.random.default_rng(seed).integers(0, n, dtype=np.int32)`, drawn `count` numbers at a time
    (`take`); 2 ≤ n ≤ MAX_IMAGES. The generator must serve no other draws meanwhile."""

    def __init__(self, seed: int, n: int) -> None:
        if not 2 <= n <= MAX_IMAGES:
            raise ValueError(f"n must be in [2, {MAX_IMAGES}], got {n}")
        self.bits = np.random.default_rng(seed).bit_generator
        self.n32, self.n64 = np.uint32(n), np.uint64(n)
        self.limit = np.uint32((1 << 32) % n)  # a word whose low product falls below this is rejected
        self.pending = np.empty(0, np.uint32)  # the half of a raw output not read yet

    def take(self, count: int) -> np.ndarray:
        """(count,) int64: the next `count` draws, in [0, n)."""
        words = self._words(count)
        accepted = np.multiply(words, self.n32) >= self.limit  # uint32 product: the low half of x·n
        n_accepted = int(np.count_nonzero(accepted))
        while n_accepted < count:  # rejected words: read on
            more = self._words(count - n_accepted)
            words, accepted = np.concatenate([words, more]), np.concatenate([accepted, more * self.n32 >= self.limit])
            n_accepted = int(np.count_nonzero(accepted))
        end = count if n_accepted == len(words) or bool(accepted[:count].all()) else _end(accepted, count)
        used = words[:end] if end == count else words[:end][accepted[:end]]
        self.pending = words[end:]
        wide = np.multiply(used, self.n64, dtype=np.uint64)
        wide >>= np.uint64(32)
        return wide.view(np.int64)

    def _words(self, count: int) -> np.ndarray:
        """At least `count` 32-bit words, the pending half-output first; what is not read goes back to pending."""
        need = count - len(self.pending)
        fresh = self.bits.random_raw((need + 1) // 2).view(np.uint32) if need > 0 else np.empty(0, np.uint32)
        words = np.concatenate([self.pending, fresh]) if len(self.pending) else fresh
        self.pending = np.empty(0, np.uint32)
        return words


def _end(accepted: np.ndarray, count: int) -> int:
    """The number of words read for `count` accepted ones."""
    return int(np.flatnonzero(accepted)[count - 1]) + 1
