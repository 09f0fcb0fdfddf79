"""What the votes of a dataset say: labels by an aggregation method, agreement with a label source, and how
reliable each worker is.

`aggregate_dataset` collects the votes (`relabel.votes.table.collect_votes`), fits a method of
`relabel.votes.aggregation.METHODS` and, against a label source such as ReaL, reports two figures for the method and for
majority vote beside it: the share of rated (image, class) pairs on which both agree whether the class is in the
image, and the share of rated images whose whole rated label set they agree on. `worker_reliability` fits
Dawid-Skene and lists each worker's sensitivity P(yes | present), specificity P(no | absent) and answers, flagging
workers whose answers carry almost no evidence (spammers) and those who miss or over-call classes (feedback), once
they gave `FLAG_FROM` answers.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col

from db.enums import SourceKind
from db.models import Label, LabelSource, stored_id
from relabel.common.errors import InputError
from relabel.common.workspace import get_dataset, get_source
from relabel.decisions.log import ParsedLists
from relabel.votes.aggregation import METHODS, Aggregate, aggregate, decide, shared_answers, uncertain
from relabel.votes.fit import calibrate_items, calibrate_out_of_fold, reference_sets
from relabel.votes.posteriors import check_rule
from relabel.votes.table import VoteTable, collect_votes, vote_sources

BESIDE = "majority"  # the method whose figures are printed beside the chosen one
OUT_OF_FOLD = "calibrated on the other half of the images"  # the out-of-sample row when compared on the calibration
SPAMMER_EVIDENCE = 0.3  # mean |log odds| of a worker's answers below this: they barely depend on the truth
FEEDBACK_BELOW = 0.5  # sensitivity or specificity under this: the worker misses or over-calls classes
FLAG_FROM = 20  # answers a worker needs before a flag: a handful of answers says little about anyone


@dataclass(frozen=True)
class VoteChoice:
    """Which votes to read: imported `sources` (None: all), the studio's decisions, a model run as a worker."""

    sources: tuple[str, ...] | None = None
    studio: bool = True
    with_model: str | None = None


@dataclass(frozen=True)
class Agreement:
    """A method's decisions against a reference label source, on the rated pairs of the reference's images."""

    method: str
    pairs: int
    pairs_agreeing: int
    images: int
    images_matching: int  # every rated pair of the image agrees: the rated part of the label set is the same

    @property
    def pair_share(self) -> float:
        return self.pairs_agreeing / self.pairs if self.pairs else float("nan")

    @property
    def set_share(self) -> float:
        return self.images_matching / self.images if self.images else float("nan")


@dataclass
class AggregationReport:
    method: str
    threshold: float
    keep_original: float | None
    sources: tuple[str, ...]
    with_model: str | None
    votes: int
    items: int
    images: int
    workers: int
    accepted: int  # items that become labels
    uncertain: int  # items that settle nothing (`relabel.votes.aggregation.uncertain`, the original rule included)
    seconds: float  # the fit alone
    iterations: int = 0
    converged: bool = True
    reference: str | None = None
    # the method's, then out of fold when compared on its calibration reference, then majority's
    agreement: list[Agreement] = field(default_factory=list)
    uncertain_images: int = 0  # images with an uncertain item: those a snapshot makes U, origin "uncertain"
    calibration: dict[str, Any] | None = None  # as `Snapshot.consensus["calibration"]`: against, method, pairs, images
    shared_answers: int | None = None  # the median worker's answers on shared pairs (`aggregation.shared_answers`)

    @property
    def in_sample(self) -> bool:
        """The posteriors were calibrated on the reference they are compared with."""
        return bool(self.calibration) and self.calibration.get("against") == self.reference  # type: ignore[union-attr]


def aggregate_dataset(
    engine: Engine,
    *,
    dataset: str | None = None,
    method: str = "ds",
    threshold: float = 0.9,
    keep_original: float | None = 0.5,
    choice: VoteChoice = VoteChoice(),
    compare: str | None = None,
    calibrate: str | None = None,
) -> AggregationReport:
    """Fit `method` on the dataset's votes and decide each rated pair: a probabilistic method accepts a class at
    posterior >= `threshold`, an original (ImGT) class already at >= `keep_original` (None: the same threshold);
    the threshold is checked as a snapshot checks it (`relabel.votes.posteriors.check_rule`). With `calibrate` (a label
    source, or "adjudications"), the posteriors are first calibrated against it as `relabel snapshot create
    --calibrate` does (`relabel.votes.fit.calibrate_items`). With `compare` (a label source), the agreement
    of the method and of majority vote with it; when `compare` also calibrated, that figure is in-sample and the
    method's agreement with each image's posteriors calibrated on the other half of the images is added."""
    if method not in METHODS:
        raise InputError(f"unknown aggregation method {method!r}; known: {', '.join(METHODS)}")
    check_rule(method, threshold, keep_original)
    with engine.connect() as conn:
        dataset_id = _dataset_id(engine, dataset)
        table = _collect(conn, dataset_id, choice)
        original = _original_items(conn, dataset_id, table)
        reference = _reference_items(conn, engine, dataset, compare, table) if compare else None
        trusted = reference_sets(conn, dataset_id, calibrate) if calibrate else None
    started = time.perf_counter()
    raw = result = aggregate(table.votes, method)
    seconds = time.perf_counter() - started
    calibration = None
    if trusted is not None:
        result, calibration = calibrate_items(table, raw, trusted, original, calibrate)  # type: ignore[arg-type]
    accepted = decide(result, threshold, original=original, keep_original=keep_original)
    undecided = uncertain(result, threshold, original=original, keep_original=keep_original)
    report = AggregationReport(
        method, threshold, keep_original, table.sources, choice.with_model, len(table.votes.item),
        table.votes.n_items, table.votes.n_images, table.votes.n_workers, int(accepted.sum()),
        int(undecided.sum()), seconds, result.iterations, result.converged, compare,
        uncertain_images=len(np.unique(table.votes.item_image[undecided])), calibration=calibration,
        shared_answers=shared_answers(table.votes),
    )  # fmt: skip
    if reference is not None:
        report.agreement.append(agreement(method, accepted, reference, table))
        if trusted is not None and report.in_sample:
            held = calibrate_out_of_fold(table, raw, trusted, original, compare)  # type: ignore[arg-type]
            held_out = decide(held, threshold, original=original, keep_original=keep_original)
            report.agreement.append(agreement(f"{method}, {OUT_OF_FOLD}", held_out, reference, table))
        if method != BESIDE:
            beside = decide(aggregate(table.votes, BESIDE), threshold)
            report.agreement.append(agreement(BESIDE, beside, reference, table))
    return report


def list_sources(engine: Engine, *, dataset: str | None = None) -> list[Any]:
    """The dataset's vote sources (rows of `vote_sources`), by name."""
    dataset_id = _dataset_id(engine, dataset)
    with engine.connect() as conn:
        return vote_sources(conn, dataset_id)


def _dataset_id(engine: Engine, dataset: str | None) -> int:
    from sqlmodel import Session

    with Session(engine) as s:
        return stored_id(get_dataset(s, dataset))


def _collect(conn: Connection, dataset_id: int, choice: VoteChoice) -> VoteTable:
    table = collect_votes(conn, dataset_id, sources=choice.sources, studio=choice.studio, with_model=choice.with_model)
    if not len(table.pairs):
        raise InputError(
            "the dataset has no votes to aggregate; import some (relabel votes import FILE --format ...) or decide "
            "images in the studio"
        )
    return table


def _pair_keys(pairs: np.ndarray) -> np.ndarray:
    return pairs[:, 0] * 1_000_000 + pairs[:, 1]  # class indices stay below a million


def _label_pairs(conn: Connection, query: object, table: VoteTable) -> tuple[np.ndarray, set[int]]:
    """(the label pairs of `query`'s rows (image id, JSON classes) as keys, the image ids with a row) on the
    images of `table`."""
    wanted = set(table.image_ids.tolist())
    lists = ParsedLists()
    keys: list[int] = []
    images: set[int] = set()
    for image_id, classes in conn.execute(query):  # type: ignore[call-overload]
        if image_id in wanted:
            images.add(image_id)
            keys.extend(image_id * 1_000_000 + c for c in lists[classes])
    return np.array(keys, dtype=np.int64), images


def _original_items(conn: Connection, dataset_id: int, table: VoteTable) -> np.ndarray:
    """(I,) bool: the item's class is one of its image's original (ImGT) labels."""
    query = (
        select(col(Label.image_id), cast(col(Label.classes), String))
        .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
        .where(col(LabelSource.dataset_id) == dataset_id, col(LabelSource.kind) == SourceKind.original)
    )
    keys, _ = _label_pairs(conn, query, table)
    return np.isin(_pair_keys(table.pairs), keys)


def _reference_items(
    conn: Connection, engine: Engine, dataset: str | None, name: str, table: VoteTable
) -> tuple[np.ndarray, np.ndarray]:
    """((I,) bool the reference holds the item's class, (I,) bool the reference has a label set for its image)."""
    from sqlmodel import Session

    with Session(engine) as s:
        source_id = get_source(s, get_dataset(s, dataset), name).id
    query = select(col(Label.image_id), cast(col(Label.classes), String)).where(col(Label.source_id) == source_id)
    keys, images = _label_pairs(conn, query, table)
    if not images:
        raise InputError(f"--compare {name}: the label source has no label for any voted image")
    return np.isin(_pair_keys(table.pairs), keys), np.isin(table.pairs[:, 0], list(images))


def agreement(
    method: str, accepted: np.ndarray, reference: tuple[np.ndarray, np.ndarray], table: VoteTable
) -> Agreement:
    """How often `accepted` (I,) agrees with the reference on the items of images it labels."""
    holds, covered = reference
    agree = accepted == holds
    image = table.votes.item_image
    n_images = table.votes.n_images
    covered_image = np.bincount(image, weights=covered, minlength=n_images) > 0
    wrong = np.bincount(image, weights=covered & ~agree, minlength=n_images)
    return Agreement(
        method,
        int(covered.sum()),
        int((agree & covered).sum()),
        int(covered_image.sum()),
        int((covered_image & (wrong == 0)).sum()),
    )


@dataclass(frozen=True)
class WorkerRow:
    """One worker's reliability as a Dawid-Skene fit learnt it. `answers` (no, maybe, yes)."""

    name: str
    kind: str  # "rater", "annotator", "model", or "ballots" for a source's anonymous ballots pooled
    sensitivity: float
    specificity: float
    answers: tuple[int, int, int]
    evidence: float  # mean |log odds| of the worker's answers: near 0 for a spammer
    flag: str = ""  # "spammer", "needs feedback" or ""

    @property
    def total(self) -> int:
        return sum(self.answers)


SORT_KEYS = {
    "sensitivity": lambda r: r.sensitivity,
    "specificity": lambda r: r.specificity,
    "answers": lambda r: -r.total,
    "evidence": lambda r: r.evidence,
    "name": lambda r: r.name,
}


@dataclass(frozen=True)
class Reliability:
    """Each worker's reliability from one Dawid-Skene fit on `votes` votes."""

    votes: int
    rows: list[WorkerRow]


def dataset_reliability(conn: Connection, dataset_id: int, choice: VoteChoice = VoteChoice()) -> Reliability | None:
    """A Dawid-Skene fit on the dataset's votes, a row per worker (see `reliability_rows`); None without votes."""
    table = collect_votes(conn, dataset_id, sources=choice.sources, studio=choice.studio, with_model=choice.with_model)
    if not len(table.pairs):
        return None
    anonymous = {s.name for s in vote_sources(conn, dataset_id) if not s.workers_identified}
    return Reliability(len(table.votes.item), reliability_rows(table, aggregate(table.votes, "ds"), anonymous))


def worker_reliability(
    engine: Engine,
    *,
    dataset: str | None = None,
    choice: VoteChoice = VoteChoice(),
    sort: str = "sensitivity",
    limit: int | None = None,
) -> list[WorkerRow]:
    """Each worker's sensitivity, specificity and answers from a Dawid-Skene fit on the dataset's votes, sorted by
    `sort` (a key of `SORT_KEYS`; the weakest first). The anonymous ballots of a source whose workers are not
    identified are pooled into one row. Empty when the dataset has no votes."""
    if sort not in SORT_KEYS:
        raise InputError(f"unknown sort key {sort!r}; known: {', '.join(SORT_KEYS)}")
    dataset_id = _dataset_id(engine, dataset)
    with engine.connect() as conn:
        fitted = dataset_reliability(conn, dataset_id, choice)
    rows = sorted(fitted.rows, key=SORT_KEYS[sort]) if fitted else []
    return rows[:limit] if limit else rows


def reliability_lines(rows: Sequence[WorkerRow]) -> list[str]:
    """Workers' reliability as lines of a plain-text table (names as text, cut to 48 characters)."""
    if not rows:
        return []
    width = min(max(len(r.name) for r in rows), 48)
    lines = [f"{'worker':<{width}}  {'kind':<9} {'sens':>5} {'spec':>5} {'answers':>8}  {'no/maybe/yes':<20} flag"]
    for r in rows:
        name = r.name if len(r.name) <= width else r.name[: width - 1] + "…"
        answers = "/".join(f"{n:,}" for n in r.answers)
        figures = f"{r.sensitivity:5.2f} {r.specificity:5.2f} {r.total:8,}"
        lines.append(f"{name:<{width}}  {r.kind:<9} {figures}  {answers:<20} {r.flag}".rstrip())
    return lines


def reliability_rows(table: VoteTable, result: Aggregate, anonymous: Collection[str] = ()) -> list[WorkerRow]:
    """A `WorkerRow` per worker of a fitted `table`; workers of the `anonymous` sources pooled per source."""
    fit = result.workers
    if fit is None:
        raise InputError(f"method {result.method!r} learns no worker reliability; use ds or one-coin")
    share = fit.answers / np.maximum(fit.answers.sum(axis=1, keepdims=True), 1)
    evidence = (share * np.abs(fit.log_odds)).sum(axis=1)
    rows: list[WorkerRow] = []
    pooled: dict[str, list[int]] = {}
    for w, (name, kind) in enumerate(zip(table.workers, table.worker_kinds)):
        source = name.split(":", 1)[0]
        if kind == "rater" and source in anonymous:
            pooled.setdefault(source, []).append(w)
            continue
        rows.append(_row(name, kind, fit.sensitivity[[w]], fit.specificity[[w]], fit.answers[[w]], evidence[[w]]))
    for source, ws in pooled.items():
        rows.append(
            _row(f"{source}:* ({len(ws):,} anonymous ballots)", "ballots", fit.sensitivity[ws],
                 fit.specificity[ws], fit.answers[ws], evidence[ws], flag=False)
        )  # fmt: skip
    return rows


def _row(
    name: str,
    kind: str,
    sens: np.ndarray,
    spec: np.ndarray,
    answers: np.ndarray,
    evidence: np.ndarray,
    flag: bool = True,
) -> WorkerRow:
    """One row for one worker, or for several pooled (their figures weighted by their answers)."""
    weight = answers.sum(axis=1).astype(float)
    weight = weight / weight.sum() if weight.sum() else np.full(len(weight), 1 / len(weight))
    s, p, e = float(weight @ sens), float(weight @ spec), float(weight @ evidence)
    no, maybe, yes = (int(x) for x in answers.sum(axis=0))
    tag = ""
    if flag and no + maybe + yes >= FLAG_FROM:
        tag = "spammer" if e < SPAMMER_EVIDENCE else "needs feedback" if min(s, p) < FEEDBACK_BELOW else ""
    return WorkerRow(name, kind, s, p, (no, maybe, yes), e, tag)
