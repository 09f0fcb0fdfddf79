"""Finding a class by what an annotator types: exact names first, never a silent different class.

Every class is known by its terms: the display name, the synonyms and the wnid (and its index, typed as digits).
Matches come in tiers, and a class is listed once, under its best tier:

0. exact: the query is one of the class's terms ("cup" is `cup`, never `porcupine`); a display name before a
   synonym ("cardigan" is the sweater before `Cardigan Welsh corgi`);
1. word prefix: a term starts with the query at a word boundary ("tig" finds `tiger`, "car" finds `car wheel`
   and `passenger car`), terms that start with it before those that hold it later;
2. substring: the query appears inside a word ("cup" inside `porcupine`);
3. fuzzy: a maintained fuzzy matcher (rapidfuzz) for typos ("tigr", "expresso"), above a score threshold.

Within a tier, display names come before synonyms and shorter terms before longer ones, then the class index.
The studio shows the first match as "Enter adds ..." before anything is saved.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

from relabel.common.vocabulary import Vocabulary
from relabel.review.near_duplicates import near_duplicates

TIERS = ("exact", "prefix", "substring", "fuzzy")
FUZZY_MIN_SCORE = 80.0  # rapidfuzz ratio, 0..100: "tigr" scores 89 against "tiger", "press" 77 against "espresso"
MAX_QUERY = 200


@dataclass(frozen=True)
class ClassMatch:
    """One search hit: the class, its best tier (index into TIERS) and the term that matched."""

    index: int
    tier: int
    term: str

    @property
    def how(self) -> str:
        return TIERS[self.tier]


def normalize(text: str) -> str:
    """Case-folded, accents removed, punctuation as spaces, single spaces: how terms and queries are compared."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(re.sub(r"[^\w]+", " ", plain).split())


@dataclass(frozen=True)
class _Term:
    index: int
    text: str  # normalized
    shown: str  # as written in the vocabulary
    is_name: bool
    is_wnid: bool = False


class ClassSearch:
    """Ranked class lookup over one vocabulary; build once per vocabulary, then `search` per keystroke."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        terms: list[_Term] = []
        for c in vocab.classes:
            seen: set[str] = set()
            named = [(c.name, True, False), *((s, False, False) for s in c.synonyms), (c.wnid or "", False, True)]
            for shown, is_name, is_wnid in named:
                text = normalize(shown)
                if text and text not in seen:
                    seen.add(text)
                    terms.append(_Term(c.index, text, shown, is_name, is_wnid))
        self._terms = terms

    @cached_property
    def twins(self) -> dict[int, tuple[int, ...]]:
        """Each class's near-duplicate classes (`relabel.review.near_duplicates`), worked out once per vocabulary."""
        return near_duplicates(self.vocab)

    @cached_property
    def _words(self) -> tuple[list[str], list[int]]:
        """Every term and every word of a several-word term (not wnids), with the term each came from: typos
        are matched against both, so "egyptain" finds `Egyptian cat`."""
        texts: list[str] = []
        owners: list[int] = []
        for position, term in enumerate(self._terms):
            if term.is_wnid:
                continue
            parts = term.text.split(" ")
            for text in dict.fromkeys([term.text, *(parts if len(parts) > 1 else [])]):
                texts.append(text)
                owners.append(position)
        return texts, owners

    def search(self, query: str, limit: int = 8) -> list[ClassMatch]:
        """The best `limit` classes for `query`, best first; [] for an empty query."""
        q = normalize(query[:MAX_QUERY])
        if not q or limit < 1:
            return []
        best: dict[int, tuple[tuple[int, int, int, int], ClassMatch]] = {}

        def offer(term: _Term, tier: int, rank: int = 0) -> None:
            key = (tier, rank, 0 if term.is_name else 1, len(term.text))
            held = best.get(term.index)
            if held is None or key < held[0]:
                best[term.index] = (key, ClassMatch(term.index, tier, term.shown))

        if q.isdigit() and int(q) < len(self.vocab):
            offer(_Term(int(q), q, q, True), 0)
        word_start = re.compile(rf"(?:^| ){re.escape(q)}(?P<whole>$| )?")
        for term in self._terms:
            if term.text == q:
                offer(term, 0)
            elif (found := word_start.search(term.text)) is not None:
                # a whole word before a word's beginning ("car wheel", "passenger car" before "carton"), and at the
                # start of the term before later in it
                offer(term, 1, 2 * (found.group("whole") is None) + (found.start() > 0))
            elif q in term.text and not term.is_wnid:
                offer(term, 2)
        if len(best) < limit and len(q) >= 3:
            self._fuzzy(q, offer, limit)
        ranked = sorted(best.values(), key=lambda kv: (kv[0], kv[1].index))
        return [match for _, match in ranked[:limit]]

    def _fuzzy(self, q: str, offer: Callable[[_Term, int, int], None], limit: int) -> None:
        from rapidfuzz import fuzz, process

        texts, owners = self._words
        # plain edit-distance ratio: a partial-match scorer would find "press" inside "expresso"
        hits = process.extract(q, texts, scorer=fuzz.ratio, limit=limit * 4, score_cutoff=FUZZY_MIN_SCORE)
        for _, score, position in hits:
            offer(self._terms[owners[position]], 3, int(round(100 - score)))
