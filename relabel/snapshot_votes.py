"""Fit a vote-based consensus for a snapshot: collect a dataset's votes, aggregate them, settle each image."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection

from relabel.aggregation import METHODS, FitOptions, aggregate
from relabel.errors import InputError
from relabel.posteriors import VotedImage, voted_images
from relabel.progress import Progress, progress_bar
from relabel.votes import collect_votes


@dataclass(frozen=True)
class VoteFit:
    """A vote-based consensus fitted on a dataset: each voted image (`relabel.posteriors.VotedImage`) and the
    settings a snapshot records in `Snapshot.consensus`."""

    images: dict[int, VotedImage]
    settings: dict[str, Any]


def fit_votes(
    conn: Connection,
    dataset_id: int,
    rule: str,
    threshold: float,
    sources: Sequence[str] | None,
    studio: bool,
    with_model: str | None,
    *,
    original: Mapping[int, Collection[int]] | None = None,
    keep_original: float | None = None,
    show_progress: bool = False,
) -> VoteFit:
    """Aggregate the dataset's votes with `rule` (a name of `relabel.aggregation.METHODS`) and settle each voted
    image (`relabel.posteriors.voted_images`; `original`: image id -> its ImGT classes, which need only
    `keep_original`); InputError when there is no vote to aggregate."""
    table = collect_votes(conn, dataset_id, sources=sources, studio=studio, with_model=with_model)
    if not len(table.pairs):
        raise InputError(
            f"--consensus {rule}: the dataset has no votes to aggregate; import some (relabel votes import), "
            "decide images in the studio, or use --consensus unanimous"
        )
    method = METHODS[rule]
    bar = progress_bar(FitOptions().max_iter, f"{rule} EM", enabled=show_progress and method.probabilistic, unit="step")
    try:
        result = aggregate(table.votes, rule, FitOptions(progress=lambda _, change: _step(bar, change)))
    finally:
        bar.close()
    imported = list(table.sources[: len(table.sources) - studio - (with_model is not None)])
    settings = {
        "threshold": threshold,
        "keep_original": keep_original,
        "vote_sources": imported,
        "studio": studio,
        "with_model": with_model,
        "iterations": result.iterations,
        "converged": result.converged,
        "n_pairs": len(table.pairs),
        "n_votes": len(table.votes.item),
        "n_workers": table.votes.n_workers,
    }
    images = voted_images(table, result, threshold, original=original, keep_original=keep_original)
    return VoteFit(images, settings)


def _step(bar: Progress, change: float) -> None:
    bar.update(1)
    bar.set_postfix_str(f"largest change {change:.1e}")
