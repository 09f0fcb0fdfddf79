"""Word-level evidence for mapping answers to classes: exact name look-up and BM25 over each class's text.

The text-embedding space knows that a "slip-on shoe" is close to shoes, but a small encoder may rank *running shoe*
above *Loafer*; the class's gloss, which says "a low-cut slip-on shoe", settles it by its words. Words are
lower-cased and reduced by a few suffix rules (`stem`: plurals, -ing, -ed), so "pressing clothes" meets "presses
clothing" half way without a language package.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

from relabel.common.vocabulary import Vocabulary

_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "and",
        "or",
        "with",
        "in",
        "on",
        "at",
        "to",
        "for",
        "is",
        "are",
        "it",
        "its",
        "this",
        "that",
        "by",
        "from",
        "as",
        "be",
        "has",
        "have",
        "which",
        "who",
        "their",
        "usually",
        "often",
        "typically",
        "may",
        "can",
        "very",
    ]
)
BM25_K1, BM25_B = 1.2, 0.75  # the usual Okapi constants


def stem(word: str) -> str:
    """A light suffix stripper: 'berries' -> 'berry', 'boxes' -> 'box', 'pressing' -> 'press', 'spotted' -> 'spott'.
    Both sides of a comparison go through it, so only consistency matters."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith(("ches", "shes", "xes", "sses", "zes")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    return word


def words(text: str) -> list[str]:
    """Stemmed content words of `text` (stop words dropped)."""
    return [stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def name_key(text: str, *, stemmed: bool = True) -> str:
    """A name for exact look-up: words stemmed and joined without spaces or hyphens ('Gas masks' == 'gasmask');
    `stemmed=False` keeps the words as written, so that 'moped' is not 'mop'."""
    found = (w for w in _WORD.findall(text.lower()) if w not in ("a", "an", "the"))
    return "".join(stem(w) if stemmed else w for w in found)


class Bm25Index:
    """Okapi BM25 of queries against one document per class (its names, synonyms and gloss, and any `extra` text
    for the class: its WordNet definition in `relabel.suggest.textmap`)."""

    def __init__(self, vocab: Vocabulary, extra: Sequence[str] | None = None, *, names: bool = True) -> None:
        more = extra if extra is not None else [""] * len(vocab.classes)
        docs = [
            words(" ".join([c.name, *c.synonyms, c.gloss, x] if names else [x])) for c, x in zip(vocab.classes, more)
        ]
        terms = sorted({t for d in docs for t in d})
        self.term_ids = {t: i for i, t in enumerate(terms)}
        df = Counter(t for d in docs for t in set(d))
        n, mean_len = len(docs), max(float(np.mean([len(d) for d in docs])), 1.0)
        rows, cols, vals = [], [], []
        for c, doc in enumerate(docs):
            norm = BM25_K1 * (1 - BM25_B + BM25_B * len(doc) / mean_len)
            for term, f in Counter(doc).items():
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                rows.append(self.term_ids[term])
                cols.append(c)
                vals.append(idf * f * (BM25_K1 + 1) / (f + norm))
        from scipy import sparse  # imported when an index is built: the protocol registry is read without it

        self.weights = sparse.csr_matrix((vals, (rows, cols)), shape=(len(terms), n), dtype=np.float32)

    def scores(self, queries: list[str]) -> np.ndarray:
        """(Q, C) BM25 score of each query against each class (each query term counted once)."""
        rows, cols = [], []
        for q, text in enumerate(queries):
            for term in set(words(text)):
                if term in self.term_ids:
                    rows.append(q)
                    cols.append(self.term_ids[term])
        from scipy import sparse

        shape = (len(queries), len(self.term_ids))
        query = sparse.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=shape)
        return np.asarray((query @ self.weights).todense(), dtype=np.float32)
