"""Distractors for multiple choice: the classes offered beside an image's reference class.

Definition: a distractor `d` offered for an image whose reference class is `t` is **hard** when one of these
sources links `d` to `t`, and **random** otherwise. Sources are tried in this order:

1. ``confusion`` (``--confusion``), one of
   - ``run:NAME``: a stored model run put `d` in its top-5 for an image labelled `t`, or `t` in its top-5 for an
     image labelled `d`; linked classes are ranked by the summed score of those predictions (1/rank where the run
     stored no scores), so a top-1 mistake outranks a fifth guess;
   - class groups (``.json``, like confusion_clusters.json): `d` and `t` are in one group;
   - a confusion matrix (``.npy``): ``M[t, d] + M[d, t] > 0``, ranked by that count;
2. ``text``: `d` is one of the `TEXT_NEIGHBOURS` classes nearest to `t` in the text-embedding space, by cosine
   similarity of "display name: gloss" (the vocabulary's description of the class; the display name alone where
   it has none) under the mapping encoder (default all-MiniLM-L6-v2, offline).

Random distractors (uniform over the remaining classes) fill only the slots left when both sources have run out
of classes for `t`. A reference label of the image is never a distractor. Each question records the source of
every option (`details["option_sources"]`) and the run records the share of hard distractors
(`params["measured"]["hard_distractor_share"]`, see `summarize_distractors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from relabel.arrays import load_array
from relabel.errors import InputError
from relabel.suggest.class_texts import class_descriptions
from relabel.suggest.textmap import TextEncoder, encode_cached
from relabel.textfiles import read_json
from relabel.vocabulary import Vocabulary

TEXT_NEIGHBOURS = 10  # per class: enough to fill any question of up to 11 options from text alone
MAX_NEIGHBOURS = 20  # per class, kept from a confusion source
CONFUSION, TEXT, RANDOM, REFERENCE = "confusion", "text", "random", "reference"
HARD_SOURCES = (CONFUSION, TEXT)


@dataclass(frozen=True)
class Neighbours:
    """For each class index, its linked classes, most confusable first; `origin` names where they came from."""

    by_class: dict[int, list[int]]
    origin: str


@dataclass(frozen=True)
class DistractorSource:
    """Hard distractors: confusion neighbours first, then text neighbours (either may be absent)."""

    confusion: Neighbours | None = None
    text: Neighbours | None = None
    sources: tuple[tuple[str, Neighbours], ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        pairs = ((CONFUSION, self.confusion), (TEXT, self.text))
        object.__setattr__(self, "sources", tuple((kind, n) for kind, n in pairs if n is not None))

    def describe(self) -> dict[str, Any]:
        """The settings recorded with a run: `confusion` and `text_neighbours` origins (None when unused)."""
        return {
            "confusion": self.confusion.origin if self.confusion else None,
            "text_neighbours": self.text.origin if self.text else None,
        }

    def hard(self, true: int, k: int, exclude: set[int], rng: np.random.Generator) -> list[tuple[int, str]]:
        """Up to `k` (class, source) pairs linked to `true`, none in `exclude`. Each source in turn fills the slots
        left, choosing at random among its best `2 × slots` candidates so that repeated questions about one
        class vary (the caller's generator is seeded per image)."""
        chosen: list[tuple[int, str]] = []
        taken = set(exclude)
        for kind, neighbours in self.sources:
            slots = k - len(chosen)
            if slots <= 0:
                break
            candidates = [c for c in neighbours.by_class.get(true, []) if c not in taken][: 2 * slots]
            if len(candidates) > slots:
                candidates = [int(c) for c in rng.permutation(candidates)[:slots]]
            chosen += [(int(c), kind) for c in candidates]
            taken.update(candidates)
        return chosen


def load_confusion(path: Path, n_classes: int) -> Neighbours:
    """Class groups as JSON (`[{"classes": {"72": "...", ...}}, ...]`, like confusion_clusters.json) or a (C, C) .npy
    confusion matrix of counts (rows: true class, columns: predicted)."""
    if not path.is_file():
        raise InputError(f"confusion source {str(path)!r} does not exist")
    if path.suffix.lower() == ".npy":
        return _from_matrix(load_array(path), n_classes, path.name)
    try:
        groups = read_json(path)
        neighbours: dict[int, list[int]] = {}
        for group in groups:
            members = [int(c) for c in group["classes"]]
            for c in members:
                linked = neighbours.setdefault(c, [])
                linked.extend(m for m in members if m != c and m not in linked)
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path}: expected a JSON list of {{'classes': {{index: name}}}} groups ({exc})") from exc
    bad = [c for c in neighbours if not 0 <= c < n_classes]
    if bad:
        raise InputError(f"{path}: class indices {bad[:3]} are outside 0..{n_classes - 1}")
    return Neighbours(neighbours, path.name)


def _from_matrix(matrix: np.ndarray, n_classes: int, origin: str) -> Neighbours:
    if matrix.shape != (n_classes, n_classes):
        raise InputError(f"{origin}: a confusion matrix must be {n_classes}×{n_classes}, got {matrix.shape}")
    sym = matrix + matrix.T
    np.fill_diagonal(sym, 0)
    order = np.argsort(-sym, axis=1, kind="stable")
    by_class = {c: [int(j) for j in order[c, :MAX_NEIGHBOURS] if sym[c, j] > 0] for c in range(n_classes)}
    return Neighbours(by_class, origin)


def confusion_from_predictions(
    rows: Iterable[tuple[int, Sequence[int], Sequence[float] | None]], n_classes: int, origin: str
) -> Neighbours:
    """Confusions of a model run: for each (reference class, ranked classes, their scores or None) of a labelled
    image, every ranked class but the reference adds its score (1/rank without scores) to the pair."""
    matrix = np.zeros((n_classes, n_classes), dtype=np.float64)
    for true, ranked, scores in rows:
        by_rank = [1 / (r + 1) for r in range(len(ranked))]
        weights = scores if scores is not None and len(scores) == len(ranked) else by_rank
        for c, w in zip(ranked, weights):
            if c != true and 0 <= c < n_classes:
                matrix[true, c] += max(float(w), 1e-9)  # a zero score still records the pair
    return _from_matrix(matrix, n_classes, origin)


def text_neighbours(
    encoder: TextEncoder, vocab: Vocabulary, cache_dir: Path | None, k: int = TEXT_NEIGHBOURS
) -> Neighbours:
    """Each class's `k` nearest classes by cosine similarity of "display name: gloss" embeddings (cached on disk)."""
    emb = encode_cached(encoder, class_descriptions(vocab), cache_dir, "class-descriptions")
    sims = emb @ emb.T
    np.fill_diagonal(sims, -np.inf)
    k = min(k, len(vocab) - 1)
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return Neighbours({c: [int(j) for j in order[c]] for c in range(len(vocab))}, f"{encoder.id}, {k} per class")


def summarize_distractors(option_sources: Iterable[Sequence[str]]) -> dict[str, Any]:
    """Counts over a run's questions, from each question's option sources (one per option, `reference` for the
    reference class): `hard_distractor_share` = hard distractors / all distractors (None without any)."""
    counts = {CONFUSION: 0, TEXT: 0, RANDOM: 0}
    questions = 0
    for sources in option_sources:
        questions += 1
        for s in sources:
            if s in counts:
                counts[s] += 1
    total = sum(counts.values())
    hard = counts[CONFUSION] + counts[TEXT]
    return {
        "questions": questions,
        "distractors": total,
        "distractors_by_source": counts,
        "hard_distractor_share": round(hard / total, 4) if total else None,
    }
