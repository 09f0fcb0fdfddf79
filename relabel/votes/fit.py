"""Fit a vote-based consensus for a snapshot: collect a dataset's votes, aggregate them, calibrate the posteriors
against a reference the user names (optional), settle each image."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.enums import SourceKind, Verdict
from db.models import Label, LabelSource
from relabel.common.errors import InputError, unknown_name
from relabel.common.progress import Progress, finish, progress_bar
from relabel.decisions.log import ParsedLists, current_decisions
from relabel.decisions.rules import adjudication
from relabel.votes.aggregation import METHODS, MIN_SHARED_ANSWERS, Aggregate, FitOptions, aggregate, shared_answers
from relabel.votes.calibration import MIN_PAIRS, cross_fit, describe, fit_calibration, group_names, image_folds
from relabel.votes.posteriors import VotedImage, items_held, original_items, voted_images
from relabel.votes.risk_coverage import CURVE, risk_coverage
from relabel.votes.risk_coverage import describe as describe_coverage
from relabel.votes.table import VoteTable, collect_votes

ADJUDICATIONS = "adjudications"  # --calibrate against the leads' standing adjudications, not a label source


@dataclass(frozen=True)
class VoteFit:
    """A vote-based consensus fitted on a dataset: each voted image (`relabel.votes.posteriors.VotedImage`) and the
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
    calibrate: str | None = None,
    reference: str | None = None,
    show_progress: bool = False,
) -> VoteFit:
    """Aggregate the dataset's votes with `rule` (a name of `relabel.votes.aggregation.METHODS`), calibrate the
    posteriors against `calibrate` (a label source, or "adjudications"; None: as fitted; see `calibrate_posteriors`)
    and settle each voted image (`relabel.votes.posteriors.voted_images`; `original`: image id -> its ImGT classes).
    With `reference` (a label source, or "adjudications"), the settings record the risk and coverage against it
    (`relabel.votes.risk_coverage`). InputError when there is no vote to aggregate."""
    table = collect_votes(conn, dataset_id, sources=sources, studio=studio, with_model=with_model)
    if not len(table.pairs):
        raise InputError(
            f"--consensus {rule}: the dataset has no votes to aggregate; import some (relabel votes import), "
            "decide images in the studio, or use --consensus unanimous"
        )
    result = _fit(table, rule, show_progress)
    references = _References(conn, dataset_id)
    calibration = None
    if calibrate is not None:
        result, calibration = calibrate_posteriors(table, result, references[calibrate], original or {}, calibrate)
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
        "shared_answers": shared_answers(table.votes),
        "calibration": calibration,
    }
    if reference is not None:
        mask = original_items(table.pairs, original or {}) if keep_original is not None else None
        trusted = references[reference]
        truth = items_held(table.pairs, trusted), np.isin(table.pairs[:, 0], _ids(trusted))
        points = risk_coverage(
            table.pairs, result, truth, (*CURVE, threshold), original=mask, keep_original=keep_original
        )
        settings["risk_coverage"] = describe_coverage(points, reference, reference == calibrate)
    images = voted_images(table, result, threshold, original=original, keep_original=keep_original)
    return VoteFit(images, settings)


def _fit(table: VoteTable, rule: str, show_progress: bool) -> Aggregate:
    method = METHODS[rule]
    bar = progress_bar(FitOptions().max_iter, f"{rule} EM", enabled=show_progress and method.probabilistic, unit="step")
    try:
        result = aggregate(table.votes, rule, FitOptions(progress=lambda _, change: _step(bar, change)))
        if result.converged and result.iterations:
            finish(bar, f"converged after {result.iterations} steps")
        return result
    finally:
        bar.close()


def calibrate_posteriors(
    table: VoteTable,
    result: Aggregate,
    reference: Mapping[int, Collection[int]],
    original: Mapping[int, Collection[int]],
    against: str,
) -> tuple[Aggregate, dict[str, Any]]:
    """`result` with its posteriors calibrated (`relabel.votes.calibration.fit_calibration`) on the items of the images
    that `reference` labels (image id -> classes; an item is true when its class is in the set), and what a
    snapshot records of it. `original`: image id -> its ImGT classes. See `calibrate_items`."""
    return calibrate_items(table, result, reference, original_items(table.pairs, original), against)


def calibrate_items(
    table: VoteTable,
    result: Aggregate,
    reference: Mapping[int, Collection[int]],
    is_original: np.ndarray,
    against: str,
) -> tuple[Aggregate, dict[str, Any]]:
    """`calibrate_posteriors` with the items whose class is an original label given as (I,) bool `is_original`.
    InputError for a counting method or fewer than `MIN_PAIRS` reference items."""
    labelled, truth = _reference_items(table, result, reference, against)
    cal = fit_calibration(result.posterior[labelled], truth[labelled], is_original[labelled])
    calibrated = replace(result, posterior=cal.apply(result.posterior, is_original))
    return calibrated, {**describe(cal, against), "images": int(len(np.unique(table.pairs[labelled, 0])))}


def calibrate_out_of_fold(
    table: VoteTable,
    result: Aggregate,
    reference: Mapping[int, Collection[int]],
    is_original: np.ndarray,
    against: str,
) -> Aggregate:
    """`result` with the posteriors of the reference's images calibrated out of fold: the images are split in two
    (`relabel.votes.calibration.image_folds`, seed 0) and each half is calibrated on the other half alone, so no image's
    posteriors are calibrated on its own reference labels (items of images the reference leaves out keep theirs).
    Scored against the same reference, it gives the out-of-sample figures of `calibrate_items`."""
    labelled, truth = _reference_items(table, result, reference, against)
    posterior = result.posterior.copy()
    folds = image_folds(table.pairs[labelled, 0])
    posterior[labelled] = cross_fit(result.posterior[labelled], truth[labelled], is_original[labelled], folds)[0]
    return replace(result, posterior=posterior)


def _reference_items(
    table: VoteTable, result: Aggregate, reference: Mapping[int, Collection[int]], against: str
) -> tuple[np.ndarray, np.ndarray]:
    """((I,) bool the reference labels the item's image, (I,) bool it holds the item's class), checked as
    `calibrate_items` says."""
    if not METHODS[result.method].probabilistic:
        raise InputError(f"--calibrate needs a probabilistic consensus (ds, one-coin), not {result.method!r}")
    labelled = np.isin(table.pairs[:, 0], _ids(reference))
    if labelled.sum() < MIN_PAIRS:
        raise InputError(
            f"--calibrate {against}: it labels {int(labelled.sum())} of the {len(table.pairs):,} voted (image, class) "
            f"pairs; a calibration needs at least {MIN_PAIRS}: adjudicate or import labels for more voted images"
        )
    return labelled, items_held(table.pairs, reference)


def reference_sets(conn: Connection, dataset_id: int, name: str) -> dict[int, frozenset[int]]:
    """Image id -> the classes a reference holds: the leads' standing adjudications (`ADJUDICATIONS`; an image
    adjudicated "none fit" holds none, "unclear" is left out) or the label source `name` of the dataset.
    NotFoundError naming the known sources for an unknown name."""
    if name == ADJUDICATIONS:
        out: dict[int, frozenset[int]] = {}
        for image_id, decisions in current_decisions(conn, dataset_id).items():
            adjudicated = adjudication(decisions)
            if adjudicated is not None and adjudicated.verdict in (Verdict.labels, Verdict.none_fit):
                out[image_id] = frozenset(adjudicated.classes if adjudicated.verdict == Verdict.labels else ())
        return out
    sources = dict(
        conn.execute(
            select(col(LabelSource.name), col(LabelSource.id)).where(col(LabelSource.dataset_id) == dataset_id)
        ).all()
    )
    if name not in sources:
        raise unknown_name("reference for --calibrate", name, [*sorted(sources), ADJUDICATIONS])
    query = select(col(Label.image_id), cast(col(Label.classes), String)).where(col(Label.source_id) == sources[name])
    sets: dict[str, frozenset[int]] = {}  # one set per distinct list: a source has far fewer lists than images
    lists = ParsedLists()
    return {
        image_id: sets.get(text) or sets.setdefault(text, frozenset(lists[text]))
        for image_id, text in conn.execute(query)
    }


class _References(dict[str, dict[int, frozenset[int]]]):
    """`reference_sets` by name, each read once: a snapshot may calibrate against the source it is checked on."""

    def __init__(self, conn: Connection, dataset_id: int) -> None:
        super().__init__()
        self.conn, self.dataset_id = conn, dataset_id

    def __missing__(self, name: str) -> dict[int, frozenset[int]]:
        value = self[name] = reference_sets(self.conn, self.dataset_id, name)
        return value


def calibration_references(conn: Connection, dataset_id: int) -> list[str]:
    """What a snapshot can be calibrated against: the dataset's imported label sources by name (not its original
    labels, the very labels under review), then `ADJUDICATIONS`."""
    query = select(col(LabelSource.name)).where(
        col(LabelSource.dataset_id) == dataset_id, col(LabelSource.kind) != SourceKind.original
    )
    return [*sorted(conn.execute(query).scalars()), ADJUDICATIONS]


def calibration_line(recorded: Mapping[str, Any]) -> str:
    """ "calibrated against real (isotonic, original and other classes apart) on 1,234 other and 567 original
    pairs of 890 images": a calibration as a snapshot records it (`Snapshot.consensus["calibration"]`)."""
    return (
        f"calibrated against {recorded.get('against')} ({recorded.get('method')}) on "
        f"{group_names(recorded.get('pairs', [0, 0]))} of {recorded.get('images', 0):,} images"
    )


def shared_caution(recorded: Mapping[str, Any]) -> str | None:
    """The warning a snapshot's consensus settings (`Snapshot.consensus`) call for when a probabilistic method
    learned its workers' reliabilities from too few shared answers (`relabel.votes.aggregation.shared_answers`);
    None otherwise, and for snapshots made before the count was recorded."""
    shared, rule = recorded.get("shared_answers"), recorded.get("rule")
    if shared is None or rule not in METHODS or not METHODS[rule].probabilistic or shared >= MIN_SHARED_ANSWERS:
        return None
    return (
        f"the workers share few pairs (the median worker answered {shared:,} pair(s) that another also answered; "
        f"{MIN_SHARED_ANSWERS} or more are needed): their reliabilities, and so the posteriors, are barely "
        "estimated and will move when reviews add answers; review a first round, make a new snapshot and look again"
    )


def _ids(reference: Mapping[int, Collection[int]]) -> np.ndarray:
    return np.fromiter(reference, np.int64, len(reference))


def _step(bar: Progress, change: float) -> None:
    bar.update(1)
    bar.set_postfix_str(f"largest change {change:.1e}")
