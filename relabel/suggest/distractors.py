"""Distractors for multiple choice: the classes offered beside an image's reference class.

A question's distractors come from an ordered list of sources (relabel.suggest.distractor_sources holds the
registry: a shipped confusion table, WordNet siblings and cousins, a stored run of another model, a file, text
neighbours). Each source gives, per class, its linked classes, most confusable first; the sources in turn fill the
question's slots, and random classes (uniform over the rest) fill only the slots left when every source has run out
of classes for the reference class `t`. A reference label of the image is never a distractor.

Definition: a distractor is **hard** when a source chose it, **random** otherwise. Each question records the source
of every option (`details["option_sources"]`: the source's name, `random` or `reference`), the run records its
sources (`params["distractor_sources"]`, see `DistractorSource.describe`) and the share of hard distractors
(`params["measured"]["hard_distractor_share"]`, see `summarize_distractors`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np

from relabel.common.arrays import load_array
from relabel.common.errors import InputError
from relabel.common.textfiles import read_json
from relabel.common.vocabulary import Vocabulary
from relabel.suggest.class_texts import class_descriptions
from relabel.suggest.embedding_cache import TextEncoder, encode_cached

TEXT_NEIGHBOURS = 10  # per class: enough to fill any question of up to 11 options from text alone
MAX_NEIGHBOURS = 20  # per class, kept from a confusion source
RANDOM, REFERENCE = "random", "reference"


@dataclass(frozen=True)
class Neighbours:
    """For each class index, its linked classes, most confusable first. `origin` says where they came from, in
    words; `record` is what a run stores about the source (its name, and e.g. the run and model it read).
    `by_image` (a stored run's source only): for an image the run scored, the classes it ranked for that photo,
    best first; they come before the class's links, since a photo's own look-alikes are what a model mistakes it
    for."""

    by_class: dict[int, list[int]]
    origin: str
    record: dict[str, Any] = field(default_factory=dict)
    by_image: dict[int, list[int]] = field(default_factory=dict)
    parts: tuple[Neighbours, ...] = ()  # merged sources (`|`): `linked` takes turns among them per image

    def linked(self, true: int, image_id: int | None = None) -> list[int]:
        """The classes linked to `true` for this image, most confusable first: the image's own ranked classes (when
        the source has them), then the class's links, each class once; for merged sources, their lists in turns."""
        if self.parts:
            ranks = zip_longest(*(part.linked(true, image_id) for part in self.parts))
            return list(dict.fromkeys(d for rank in ranks for d in rank if d is not None))[:MAX_NEIGHBOURS]
        own = self.by_image.get(image_id, []) if image_id is not None else []
        return list(dict.fromkeys([*own, *self.by_class.get(true, [])]))


@dataclass(frozen=True)
class DistractorSource:
    """Hard distractors from `sources`, an ordered tuple of (source name, neighbours). `spread`: each source picks
    its slots at random among its best `spread × slots` candidates (1: always the most confusable ones)."""

    sources: tuple[tuple[str, Neighbours], ...]
    spread: int = 1
    label: str = ""  # how the sources were asked for (`--distractors`); default: their names joined by "+"

    def __post_init__(self) -> None:
        if self.spread < 1:
            raise InputError(f"the distractor spread must be at least 1, got {self.spread}")
        names = [name for name, _ in self.sources]
        if RANDOM in names or REFERENCE in names:
            raise InputError(f"{RANDOM!r} and {REFERENCE!r} name no source of hard distractors")

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.sources]

    def describe(self) -> dict[str, Any]:
        """The settings recorded with a run: the sources as asked for, each source's record (name, origin, and e.g.
        the run and model it read) in order, and the spread."""
        records = [{"source": name, "origin": n.origin, **n.record} for name, n in self.sources]
        label = self.label or "+".join(self.names)
        return {"distractors": label, "distractor_sources": records, "distractor_spread": self.spread}

    def hard(
        self, true: int, k: int, exclude: set[int], rng: np.random.Generator, image_id: int | None = None
    ) -> list[tuple[int, str]]:
        """Up to `k` (class, source name) pairs linked to `true` (for image `image_id`, when a source knows the
        image), none in `exclude`, all distinct. Each source in turn fills the slots left, from its best
        `spread × slots` candidates (the generator is seeded per image)."""
        chosen: list[tuple[int, str]] = []
        taken = set(exclude)
        for name, neighbours in self.sources:
            slots = k - len(chosen)
            if slots <= 0:
                break
            candidates = [c for c in neighbours.linked(true, image_id) if c not in taken]
            candidates = candidates[: self.spread * slots]
            if len(candidates) > slots:
                candidates = [int(c) for c in rng.permutation(candidates)[:slots]]
            chosen += [(int(c), name) for c in candidates]
            taken.update(candidates)
        return chosen


def load_confusion(path: Path, n_classes: int) -> Neighbours:
    """Class groups as JSON (`[{"classes": {"72": "...", ...}}, ...]`, like confusion_clusters.json) or a (C, C) .npy
    confusion matrix of counts (rows: true class, columns: predicted)."""
    if not path.is_file():
        raise InputError(f"confusion source {str(path)!r} does not exist")
    if path.suffix.lower() == ".npy":
        return neighbours_from_matrix(load_array(path), n_classes, path.name)
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


def neighbours_from_matrix(
    matrix: np.ndarray, n_classes: int, origin: str, tie_break: np.ndarray | None = None
) -> Neighbours:
    """Each class's linked classes from a (C, C) confusion matrix (rows: true, columns: predicted), both ways:
    `M[t, d] + M[d, t] > 0`, ranked by that sum; equal sums by `tie_break[t, d]` (lower first, e.g. a tree
    distance), then by class index."""
    if matrix.shape != (n_classes, n_classes):
        raise InputError(f"{origin}: a confusion matrix must be {n_classes}×{n_classes}, got {matrix.shape}")
    sym = matrix + matrix.T
    np.fill_diagonal(sym, 0)
    by_class = {}
    for c in range(n_classes):
        keys = (tie_break[c],) if tie_break is not None else ()
        order = np.lexsort((*keys, -sym[c]))[:MAX_NEIGHBOURS]
        by_class[c] = [int(j) for j in order if sym[c, j] > 0]
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
    return neighbours_from_matrix(matrix, n_classes, origin)


def text_neighbours(
    encoder: TextEncoder, vocab: Vocabulary, cache_dir: Path | None, k: int = TEXT_NEIGHBOURS
) -> Neighbours:
    """Each class's `k` nearest classes by cosine similarity of "display name: gloss" embeddings (cached on disk)."""
    emb = encode_cached(encoder, class_descriptions(vocab), cache_dir, "class descriptions")
    sims = emb @ emb.T
    np.fill_diagonal(sims, -np.inf)
    k = min(k, len(vocab) - 1)
    order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return Neighbours({c: [int(j) for j in order[c]] for c in range(len(vocab))}, f"{encoder.id}, {k} per class")


def summarize_distractors(option_sources: Iterable[Sequence[str]]) -> dict[str, Any]:
    """Counts over a run's questions, from each question's option sources (one per option, `reference` for the
    reference class): `hard_distractor_share` = hard distractors / all distractors (None without any)."""
    counts: dict[str, int] = {}
    questions = 0
    for sources in option_sources:
        questions += 1
        for s in sources:
            if s != REFERENCE:
                counts[s] = counts.get(s, 0) + 1
    total = sum(counts.values())
    hard = total - counts.get(RANDOM, 0)
    return {
        "questions": questions,
        "distractors": total,
        "distractors_by_source": dict(sorted(counts.items())),
        "hard_distractor_share": round(hard / total, 4) if total else None,
    }
