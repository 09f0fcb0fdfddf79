"""The retrieval task of `relabel evaluate`: a retrieval run's stored embeddings (`relabel.suggest.retrieval_store`)
scored against the evaluation's first reference (a: ImGT by default) and side by side against every other named
reference (b: a snapshot).

Text → image: one query per class of the vocabulary, "a photo of a {class}."; an image is relevant when the
reference's set holds the query's class; R@1/5/10 (a relevant image within the top K), mAP over the queries with a
relevant image. Image → text: R@1/5/10 over the class queries, a hit when one of the image's classes ranks within
the top K (`evaluator.retrieval`). The gallery is the run's embedded images the reference labels; a row under b
is on the images both a and b label, and adds the mAP of a on those images, the difference b − a and its
bootstrap interval over the classes (a class's AP under a and under b resampled together). Images the run could
not read are not in its gallery; their count is shown (`n_unreadable`).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from db.models import ModelRun
from evaluator import LabelSets
from evaluator.retrieval import KS, Retrieval, compare_retrieval
from relabel.common.errors import InputError
from relabel.suggest.retrieval_store import StoredEmbeddings, load_embeddings


@dataclass(frozen=True)
class MapDifference:
    """mAP under b − mAP under a on the images both label (each over the queries with a relevant image under it),
    with its 95 % bootstrap interval over those classes, paired (None without resamples)."""

    reference_a: str
    map_a: float
    difference: float
    n_queries: int  # queries with a relevant image under a or b: what the interval resamples
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class RetrievalRow:
    """One retrieval run against one reference; recalls keyed by K (1, 5, 10)."""

    run: str
    model: str
    reference: str
    n_images: int  # the gallery
    n_queries: int  # text → image queries with a relevant image
    t2i_recall: dict[int, float]
    t2i_map: float
    i2t_recall: dict[int, float]
    n_unreadable: int = 0
    versus: MapDifference | None = None


def load_run_embeddings(run: ModelRun, n_classes: int) -> StoredEmbeddings:
    """The stored embeddings of a retrieval run; InputError naming the run when they are missing, empty or made
    for another class list."""
    folder = run.params.get("embeddings")
    if not isinstance(folder, str):
        raise InputError(f"retrieval run {run.name!r} names no embeddings folder; run it again with relabel suggest")
    stored = load_embeddings(Path(folder), run.name)
    if not len(stored.image_ids):
        raise InputError(f"retrieval run {run.name!r} has no embedded image; run it again with relabel suggest")
    if stored.texts.shape[0] != n_classes:
        raise InputError(
            f"retrieval run {run.name!r} has {stored.texts.shape[0]} class queries, the references {n_classes} classes"
        )
    return stored


def retrieval_rows(
    run: ModelRun,
    stored: StoredEmbeddings,
    names: Sequence[str],
    sets: Sequence[LabelSets],
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> list[RetrievalRow]:
    """The rows of one retrieval run: against the first reference alone, then each other side by side with it;
    `sets[i]` are reference `names[i]`'s label sets of `stored.image_ids`, in that order.

    One pass over the similarities serves every reference whose common gallery with the first is the same (a
    snapshot that labels every image the first labels, usually), and the first reference's own row too when that
    gallery is its own; a reference with another common gallery gets a pass of its own."""
    a_gallery = sets[0].counts > 0
    if not a_gallery.any():
        raise InputError(f"reference {names[0]!r} labels none of the images retrieval run {run.name!r} embedded")
    by_gallery: dict[bytes, tuple[np.ndarray, list[int]]] = {}
    for i in range(1, len(sets)):
        common = a_gallery & (sets[i].counts > 0)
        by_gallery.setdefault(np.packbits(common).tobytes(), (common, []))[1].append(i)
    alone: Retrieval | None = None
    later: dict[int, RetrievalRow] = {}
    for common, members in by_gallery.values():
        if not common.any():  # nothing in common with the first: each on its own gallery, no difference
            later.update({i: _row(run, names[i], _scores([sets[i]], stored)[0], stored) for i in members
                          if (sets[i].counts > 0).any()})  # fmt: skip
            continue
        scores = _scores([sets[0], *(sets[i] for i in members)], stored)
        if np.array_equal(common, a_gallery):  # the first reference's own gallery: its own row comes with it
            alone = scores[0]
        for i, b in zip(members, scores[1:]):
            later[i] = _row(run, names[i], b, stored, _map_difference(names[0], scores[0], b, n_boot, seed))
    first = _row(run, names[0], alone if alone is not None else _scores([sets[0]], stored)[0], stored)
    return [first, *(later[i] for i in range(1, len(sets)) if i in later)]


def _scores(references: list[LabelSets], stored: StoredEmbeddings) -> list[Retrieval]:
    """Every reference on the images all of them label, in one pass."""
    return compare_retrieval(references, query_embeddings=stored.texts, image_embeddings=stored.images, ks=KS)


def _row(
    run: ModelRun, reference: str, r: Retrieval, stored: StoredEmbeddings, versus: MapDifference | None = None
) -> RetrievalRow:
    t2i, i2t = r.text_to_image, r.image_to_text
    return RetrievalRow(
        run.name, run.model, reference, t2i.n_gallery, t2i.n_queries, dict(t2i.recall_at_k), t2i.mean_ap,
        dict(i2t.recall_at_k), len(stored.failed), versus,
    )  # fmt: skip


def _map_difference(name_a: str, a: Retrieval, b: Retrieval, n_boot: int, seed: int) -> MapDifference:
    """mAP under b − mAP under a on the same gallery, each over the queries with a relevant image under it; the
    interval resamples the classes with a relevant image under either (a class's AP under a and b together)."""
    ap_a, ap_b = a.text_to_image.average_precision, b.text_to_image.average_precision
    either = np.flatnonzero(np.isfinite(ap_a) | np.isfinite(ap_b))
    map_a, map_b = a.text_to_image.mean_ap, b.text_to_image.mean_ap
    low = high = None
    if n_boot and len(either):
        draws = either[np.random.default_rng(seed).integers(0, len(either), size=(n_boot, len(either)))]
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a resample without a query of a or of b: NaN, dropped
            diffs = np.nanmean(ap_b[draws], axis=1) - np.nanmean(ap_a[draws], axis=1)
        if np.isfinite(diffs).any():
            low, high = (float(v) for v in np.nanpercentile(diffs, [2.5, 97.5]))
    return MapDifference(name_a, map_a, map_b - map_a, len(either), low, high)
