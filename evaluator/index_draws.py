"""Image indices of a bootstrap resample, read from the bit generator's raw words: the same numbers as numpy's
`Generator.integers(0, n, dtype=np.int32)`, with less work per number and no large array of draws.

numpy draws an integer in [0, n) from the next 32-bit word x of the generator (for PCG64: the low, then the high
half of each 64-bit output) by Lemire's method: m = x·n, the draw is m >> 32, and a word whose low half of m falls
below 2^32 mod n is rejected (the next word is read in its place), which happens to about n / 2^32 of the words.
`IndexDraws` does the same over the raw 64-bit outputs (`BitGenerator.random_raw`) with whole-array products, row
by row, so a resample's draws stay small enough to be held in cache while they are counted; the words are taken in
numpy's order, and a word left over at the end of a row is the first of the next, as in numpy's buffer. Drawing
n numbers at a time this way gives, bit for bit, what consecutive `integers` calls from the same seed give.

numpy's float32 uniform is (x >> 8)·2^-24 of the next word, so `u < p` for a float32 p holds exactly when the
integer x >> 8 is below ceil(p·2^24) (`unit_thresholds`): `RawWords` gives the same coins as `Generator.random(
dtype=np.float32)` without making the floats, and fills a caller's buffer block by block.
"""

from __future__ import annotations

import numpy as np

UNIT_BITS = 24  # numpy's float32 uniform: the top 24 bits of a 32-bit word, times 2^-24
# words read from the generator at once (64 kB): arrays this small come from the allocator's heap and are reused,
# where larger ones are mapped and cleared by the system anew each time
BLOCK_WORDS = 16_384
MAX_IMAGES = 2**31 - 1  # numpy's int32 draws: beyond this numpy reads 64-bit words, which `IndexDraws` does not


class IndexDraws:
    """The stream of `np.random.default_rng(seed).integers(0, n, dtype=np.int32)`, drawn `count` numbers at a time
    (`take`); 2 ≤ n ≤ MAX_IMAGES. The generator must serve no other draws meanwhile."""

    def __init__(self, seed: int, n: int) -> None:
        if not 2 <= n <= MAX_IMAGES:
            raise ValueError(f"n must be in [2, {MAX_IMAGES}], got {n}")
        self.words = RawWords(np.random.default_rng(seed).bit_generator)
        self.n32, self.n64 = np.uint32(n), np.uint64(n)
        self.limit = np.uint32((1 << 32) % n)  # a word whose low product falls below this is rejected
        self.low, self.rejected = np.empty(BLOCK_WORDS, np.uint32), np.empty(BLOCK_WORDS, bool)
        self.wide = np.empty(0, np.uint64)

    def take(self, count: int) -> np.ndarray:
        """(count,) int64: the next `count` draws, in [0, n); a view of a buffer of this object, valid until the
        next call. Read BLOCK_WORDS words at a time, so every array but the result stays small."""
        if len(self.wide) < count:
            self.wide = np.empty(count, np.uint64)
        out, done = self.wide[:count], 0
        while done < count:
            want = min(BLOCK_WORDS, count - done)
            words = self.words.take(want)
            self.words.give_back(words[want:])
            words = words[:want]
            low = np.multiply(words, self.n32, out=self.low[:want])  # uint32 product: the low half of x·n
            rejected = np.less(low, self.limit, out=self.rejected[:want])
            used = words[~rejected] if rejected.any() else words  # a rejected word is skipped, as numpy does
            np.multiply(used, self.n64, out=out[done : done + len(used)], dtype=np.uint64)
            done += len(used)
        out >>= np.uint64(32)
        return out.view(np.int64)


class RawWords:
    """The 32-bit words numpy's 32-bit draws read from `bits` (a PCG64 or another generator whose 32-bit word is
    the low, then the high half of a raw output), in order, from raw outputs: `take` at least `count` of them,
    `give_back` the unread end."""

    def __init__(self, bits: np.random.BitGenerator) -> None:
        self.bits = bits
        self.pending = np.empty(0, np.uint32)  # words read from a raw output and not used yet

    def take(self, count: int) -> np.ndarray:
        """(≥ count,) uint32: the next words; those past `count` (one at most) are the caller's to give back."""
        need = count - len(self.pending)
        fresh = self.bits.random_raw((need + 1) // 2).view(np.uint32) if need > 0 else np.empty(0, np.uint32)
        words = np.concatenate([self.pending, fresh]) if len(self.pending) else fresh
        self.pending = np.empty(0, np.uint32)
        return words

    def give_back(self, words: np.ndarray) -> None:
        """The words of the last `take` not used: they come first in the next."""
        self.pending = words

    def fill_units(self, out: np.ndarray) -> np.ndarray:
        """`out` (uint32, C-contiguous) filled with the next words shifted right by 8 bits: the numerators of the
        float32 uniforms numpy's `random(dtype=np.float32, out=...)` would draw (module docstring)."""
        flat = out.reshape(-1)
        for start in range(0, len(flat), BLOCK_WORDS):
            count = min(BLOCK_WORDS, len(flat) - start)
            words = self.take(count)
            self.give_back(words[count:])
            np.right_shift(words[:count], 8, out=flat[start : start + count])
        return out


def unit_thresholds(p: np.ndarray) -> np.ndarray:
    """(n,) uint32 ceil(p·2^24) of float32 probabilities `p`: a uniform's numerator (`RawWords.fill_units`) is
    below it exactly when the float32 uniform is below p. NaN gives 0 (never below), as `u < NaN` is false."""
    scaled = np.ceil(np.asarray(p, dtype=np.float32) * np.float32(2**UNIT_BITS))  # a power of two: exact
    scaled = np.nan_to_num(scaled, nan=0.0, posinf=2**UNIT_BITS, neginf=0.0)
    return np.clip(scaled, 0, 2**UNIT_BITS).astype(np.uint32)
