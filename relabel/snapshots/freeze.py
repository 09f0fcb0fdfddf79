"""ReGT snapshots: freeze the current consensus labels of a dataset, immutably, under a content hash."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from typing import Any, NamedTuple

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.bulk import all_plain_rows, insert_plain, table_of
from db.engine import session_scope
from db.enums import Category, Verdict
from db.models import Dataset, Image, Snapshot, SnapshotLabel, SnapshotPosterior, pk, stored_id
from relabel import __version__
from relabel.common.collector import cyclic_gc_paused
from relabel.common.errors import ConflictError, InputError
from relabel.common.kept_arrays import cache_dir_of
from relabel.common.storable import one_line_name
from relabel.common.workspace import IMGT, dataset_vocabulary, get_dataset, get_source
from relabel.decisions.log import current_decisions
from relabel.decisions.rules import (
    DEFAULT_RULE,
    RULES,
    Consensus,
    Outcome,
    categorize,
    decision_key,
    reads_votes,
    settle_images,
)
from relabel.decisions.rules import consensus as image_consensus
from relabel.snapshots.arrays import keep_frozen_arrays
from relabel.snapshots.content_hash import ClassListText, snapshot_hash
from relabel.snapshots.reader import check_classes, source_labels
from relabel.votes.aggregation import METHODS
from relabel.votes.fit import VoteFit, fit_votes
from relabel.votes.posteriors import POSTERIOR_COLUMNS, UNCERTAIN, VotedImage, check_rule, posterior_rows

KEEP_ORIGINAL = 0.5  # posterior an original class needs to stay, as `relabel votes aggregate` decides
# (threshold, keep_original) for calibrated posteriors: what bench/bench_calibration.py chose on each half of ReaL's
# rated images apart (BENCHMARKS.md). Uncalibrated posteriors keep 0.9 and 0.5, fitted on ReaL in-sample.
CALIBRATED_DEFAULTS: tuple[float, float | None] = (0.75, None)
UNCALIBRATED_DEFAULTS: tuple[float, float | None] = (0.9, KEEP_ORIGINAL)
MAX_MIN_VOTES = 1000  # more agreeing votes than any team gives one image: a typo, not a policy
UNDECIDED_POLICIES = {
    "keep": "undecided images keep the base source's labels (ImGT unless --base names a prior); an uncertain "
    "voted image takes its best estimate",
    "exclude": "undecided images get an empty label set and drop out of multi-label scoring",
}  # what `relabel snapshot create --undecided` and the studio's Snapshots tab offer
DEFAULT_UNDECIDED = "keep"
LABEL_COLUMNS = ("snapshot_id", "image_id", "classes", "category", "origin")  # of `snapshot_labels`, as stored
# an enum's .value and .name are properties, slow 50,000 times over; the column stores the name
_CATEGORY_TEXT, _CATEGORY_NAME = {c: c.value for c in Category}, {c: c.name for c in Category}


def consensus_defaults(calibrate: str | None) -> tuple[float, float | None]:
    """The default (threshold, keep_original) of a vote-based snapshot, with or without a `calibrate` reference."""
    return CALIBRATED_DEFAULTS if calibrate else UNCALIBRATED_DEFAULTS


@dataclass
class SnapshotSummary:
    name: str
    content_hash: str
    n_images: int
    counts: dict[str, int]
    origins: dict[str, int] = field(default_factory=dict)  # adjudication / consensus / base, disputed, uncertain
    consensus: dict[str, Any] = field(default_factory=lambda: {"rule": DEFAULT_RULE})  # as `Snapshot.consensus`
    n_posteriors: int = 0  # (image, class) posteriors stored

    @property
    def uncertain(self) -> int:
        """Images whose votes settle nothing (category U, origin "uncertain")."""
        return self.origins.get(UNCERTAIN, 0)


class FrozenRow(NamedTuple):
    image_id: int
    path: str
    classes: list[int]
    category: Category
    origin: str
    where: str  # what the labels came from, for error messages
    voted: bool = False  # settled by the votes: its posteriors are stored


def create_snapshot(
    engine: Engine,
    name: str,
    *,
    dataset: str | None = None,
    base: str = IMGT,
    undecided: str = DEFAULT_UNDECIDED,
    min_votes: int = 1,
    created_by: str = "",
    consensus: str = DEFAULT_RULE,
    threshold: float = 0.9,
    keep_original: float | None = KEEP_ORIGINAL,
    vote_sources: Sequence[str] | None = None,
    with_model: str | None = None,
    studio_votes: bool = True,
    calibrate: str | None = None,
    reference: str | None = None,
    show_progress: bool = False,
) -> SnapshotSummary:
    """Freeze the consensus of every image of the dataset as snapshot `name`.

    `consensus` a rule of `relabel.decisions.rules.RULES` (the default ``unanimous``): the decision and category that
    `relabel.decisions.rules` settles on (that rule with `min_votes`), else the base source's labels under the
    `undecided` policy, category U. A name of `relabel.votes.aggregation.METHODS` aggregates the dataset's votes
    (`relabel.votes.table.collect_votes`: the imported `vote_sources`, None all, the studio's decisions when
    `studio_votes`, the run `with_model` as one more worker): a lead's adjudication still settles an image outright; a
    voted image takes the classes whose posterior reaches `threshold` (`keep_original` for a class of its ImGT labels,
    None: `threshold` too; see `relabel.votes.posteriors`), is U with origin "uncertain" when a pair is neither accepted
    nor confidently absent (posterior above 1 - threshold; `relabel.votes.aggregation.uncertain`) and then takes its
    best estimate (the classes at posterior >= 0.5, an original class at >= `keep_original`; the `undecided` policy
    "exclude" gives it none), Z when every pair is confidently absent; images without votes follow the default rule.
    With `calibrate` (a label source, or "adjudications") the posteriors are first calibrated against it
    (`relabel.votes.fit.calibrate_posteriors`); with `reference`, how many voted images the votes settle and how often
    those agree with it, at `threshold` and along a curve (`relabel.votes.risk_coverage`), are recorded. The posteriors
    of the voted images are stored per (image, class) in `snapshot_posteriors`; an adjudicated image stores none (an
    adjudication is certain).
    """
    sources = None if vote_sources is None else tuple(vote_sources)
    request = ConsensusRequest(
        consensus, threshold, keep_original, min_votes, sources, with_model, studio_votes, calibrate, reference
    )
    _check_request(name, undecided, request)
    # a row, a decision and a posterior dict per image, none in a reference cycle: the collector would only walk them
    with cyclic_gc_paused(), session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        assert ds.id is not None  # a stored dataset
        if s.scalars(select(Snapshot).where(col(Snapshot.dataset_id) == ds.id, col(Snapshot.name) == name)).first():
            raise ConflictError(f"snapshot {name!r} already exists and is immutable; choose another name")
        rows, fit = _freeze(s, ds, base, undecided, request, show_progress)
        labelled = ((r.path, r.classes, r.where) for r in rows)
        check_classes(labelled, len(dataset_vocabulary(s, ds)), f"snapshot {name!r} not created")
        voted = fit.images if fit else {}
        posteriors = {r.path: voted[r.image_id].posteriors for r in rows if r.voted}
        categories = [_CATEGORY_TEXT[r.category] for r in rows]
        digest = snapshot_hash([(r.path, r.classes, c) for r, c in zip(rows, categories)], posteriors or None)
        counts = dict(sorted(Counter(categories).items()))
        settings = {"rule": consensus, "min_votes": min_votes, **(fit.settings if fit else {})}
        snap = Snapshot(
            dataset_id=ds.id,
            name=name,
            content_hash=digest,
            base_source=base,
            undecided_policy=undecided,
            n_images=len(rows),
            counts=counts,
            created_by=created_by,
            tool_version=__version__,
            consensus=settings,
        )
        n_posteriors = _store(s, snap, rows, voted)
        snapshot_id, n_classes = stored_id(snap), len(dataset_vocabulary(s, ds))
    _keep_arrays(engine, snapshot_id, n_classes, rows, voted)
    origins = dict(sorted(Counter(r.origin for r in rows).items()))
    return SnapshotSummary(name, digest, len(rows), counts, origins, settings, n_posteriors)


@dataclass(frozen=True)
class ConsensusRequest:
    """How a snapshot is asked to reach its consensus (the arguments of `create_snapshot` of that name)."""

    rule: str
    threshold: float
    keep_original: float | None
    min_votes: int
    vote_sources: tuple[str, ...] | None
    with_model: str | None
    studio_votes: bool
    calibrate: str | None = None
    reference: str | None = None


def _check_request(name: str, undecided: str, request: ConsensusRequest) -> None:
    if undecided not in UNDECIDED_POLICIES:
        raise InputError(f"unknown undecided-image policy {undecided!r}; known: {', '.join(UNDECIDED_POLICIES)}")
    one_line_name(name, "snapshot name")
    if not 1 <= request.min_votes <= MAX_MIN_VOTES:
        raise InputError(f"--min-votes must be between 1 and {MAX_MIN_VOTES}, got {request.min_votes}")
    voting = check_rule(request.rule, request.threshold, request.keep_original)
    if not voting and (request.vote_sources or request.with_model):
        raise InputError(
            f"--votes and --with-model need a consensus that reads votes (ds, majority, ...), not {request.rule!r}"
        )
    if request.calibrate is not None and (not voting or not METHODS[request.rule].probabilistic):
        raise InputError(f"--calibrate needs a probabilistic consensus (ds, one-coin), not {request.rule!r}")
    if request.reference is not None and not voting:
        raise InputError(f"--reference needs a consensus that reads votes (ds, majority, ...), not {request.rule!r}")


def _freeze(
    s: Session, ds: Dataset, base: str, undecided: str, request: ConsensusRequest, show_progress: bool
) -> tuple[list[FrozenRow], VoteFit | None]:
    """Every image's row (in path order), and the vote fit when the rule reads votes."""
    conn = s.connection()
    base_labels = source_labels(conn, stored_id(get_source(s, ds, base)))
    imgt = get_source(s, ds, IMGT) if base != IMGT else None
    original = source_labels(conn, stored_id(imgt)) if imgt else base_labels
    images = all_plain_rows(  # plain tuples from the driver: no result row object per image
        conn, select(pk(Image.id), col(Image.path)).where(col(Image.dataset_id) == ds.id).order_by(col(Image.path))
    )
    if not images:
        raise InputError(f"dataset {ds.name!r} has no images; nothing to freeze")
    decisions = current_decisions(conn, stored_id(ds))
    # Most images have no standing decision, and all of those are settled alike: the rule runs once for them.
    rule = request.rule if request.rule in RULES else DEFAULT_RULE  # a vote method: the studio's default rule
    settled = settle_images(decisions, decisions.keys(), min_votes=request.min_votes, rule=rule)
    nobody = image_consensus((), request.min_votes, rule)
    fit = None
    if request.rule not in RULES:
        fit = fit_votes(
            conn,
            stored_id(ds),
            request.rule,
            request.threshold,
            request.vote_sources,
            request.studio_votes,
            request.with_model,
            original=original,
            keep_original=request.keep_original,
            calibrate=request.calibrate,
            reference=request.reference,
            show_progress=show_progress,
        )
    voted = fit.images if fit else {}
    # Images nobody decided and no vote reached (most of them) get the row `_frozen_row` gives them, built here
    base_origin, where, keep = (
        "disputed" if nobody.outcome is Outcome.disputed else "base",
        f"source {base!r}",
        undecided == "keep",
    )
    frozen = [
        _frozen_row(i, p, settled.get(i, nobody), voted.get(i), base_labels, original, base, undecided)
        if i in settled or i in voted
        else FrozenRow(i, p, list(base_labels.get(i, ())) if keep else [], Category.U, base_origin, where)
        for i, p in images
    ]
    return frozen, fit


def _store(s: Session, snap: Snapshot, rows: list[FrozenRow], voted: dict[int, VotedImage]) -> int:
    """Insert the snapshot, its labels and the posteriors of its voted images; returns how many posteriors.

    The rows go through the driver as plain values (`db.bulk.insert_plain`): the classes as the JSON text the
    column's own serializer writes, the category as its stored name."""
    s.add(snap)
    s.flush()
    conn, snapshot_id = s.connection(), stored_id(snap)
    text = ClassListText()
    labels = zip(
        repeat(snapshot_id),
        map(attrgetter("image_id"), rows),
        map(text, map(attrgetter("classes"), rows)),
        map(_CATEGORY_NAME.__getitem__, map(attrgetter("category"), rows)),
        map(attrgetter("origin"), rows),
    )  # iterators alone: no Python step per row
    insert_plain(conn, table_of(SnapshotLabel), LABEL_COLUMNS, labels)
    stored = posterior_rows(snapshot_id, voted, (r.image_id for r in rows if r.voted))
    return insert_plain(conn, table_of(SnapshotPosterior), POSTERIOR_COLUMNS, stored)


def _keep_arrays(
    engine: Engine, snapshot_id: int, n_classes: int, rows: list[FrozenRow], voted: dict[int, VotedImage]
) -> None:
    """Keep the new snapshot's arrays in the workspace's cache folder (`relabel.snapshots.arrays`), made from
    the rows just written as `_store` wrote them, under the snapshot as its readers will read it back."""
    folder = cache_dir_of(engine.url)
    if folder is None:
        return
    text = ClassListText()
    labels = [(r.image_id, text(r.classes), _CATEGORY_NAME[r.category]) for r in rows]
    stored = posterior_rows(snapshot_id, voted, (r.image_id for r in rows if r.voted))
    posteriors = [(image_id, class_index, p) for _, image_id, class_index, p in stored]
    with session_scope(engine) as s:
        keep_frozen_arrays(folder, s.get_one(Snapshot, snapshot_id), n_classes, labels, posteriors)


def _frozen_row(
    image_id: int,
    path: str,
    settled: Consensus,
    voted: VotedImage | None,
    base_labels: Mapping[int, Sequence[int]],
    original: Mapping[int, Sequence[int]],
    base: str,
    undecided: str,
) -> FrozenRow:
    """One image's labels, category and origin (see `create_snapshot`)."""
    decision, outcome = settled
    undecided_labels = list(base_labels.get(image_id, ())) if undecided == "keep" else []
    if decision is not None and (voted is None or outcome is Outcome.adjudication):
        category = settled.category(original.get(image_id))
        return FrozenRow(
            image_id, path, list(decision.classes), category, outcome.value, f"decision #{decision.annotation_id}"
        )
    if voted is None:
        origin = "disputed" if outcome is Outcome.disputed else "base"
        return FrozenRow(image_id, path, undecided_labels, Category.U, origin, f"source {base!r}")
    if voted.uncertain:
        if voted.best is None or undecided != "keep":
            return FrozenRow(image_id, path, undecided_labels, Category.U, UNCERTAIN, f"source {base!r}", True)
        return FrozenRow(image_id, path, list(voted.best), Category.U, UNCERTAIN, "votes (best estimate)", True)
    key = decision_key(Verdict.none_fit if voted.none_fit else Verdict.labels, voted.classes)
    category = categorize(key, original.get(image_id))
    return FrozenRow(image_id, path, list(voted.classes), category, Outcome.consensus.value, "votes", True)


def vote_snapshot_lines(engine: Engine, dataset: str | None = None) -> list[str]:
    """The dataset's newest snapshot whose consensus read votes, as the dashboard shows it: how many of its images
    are uncertain (U, review first), when it recorded one, its risk and coverage against a reference
    (`relabel.votes.risk_coverage`), and a caution when its workers shared too few answers
    (`relabel.votes.fit.shared_caution`). Empty without such a snapshot."""
    from relabel.votes.fit import shared_caution
    from relabel.votes.risk_coverage import coverage_lines

    ordered = sorted(list_snapshots(engine, dataset), key=lambda x: (x.created_at, x.id or 0))
    newest = next((x for x in reversed(ordered) if reads_votes(x.consensus)), None)
    if newest is None:
        return []
    query = select(func.count()).where(
        col(SnapshotLabel.snapshot_id) == newest.id, col(SnapshotLabel.origin) == UNCERTAIN
    )
    with engine.connect() as conn:
        uncertain = conn.execute(query).scalar_one()
    settings = dict(newest.consensus or {})
    lines = [f"snapshot {newest.name!r} ({settings.get('rule')}): {uncertain:,} uncertain images, reviewed first"]
    if settings.get("risk_coverage"):
        lines += coverage_lines(settings["risk_coverage"], settings.get("threshold", 0.9))
    if (caution := shared_caution(settings)) is not None:
        lines.append(f"caution: {caution}")
    return lines


def list_snapshots(engine: Engine, dataset: str | None = None) -> list[Snapshot]:
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        return list(
            s.scalars(select(Snapshot).where(col(Snapshot.dataset_id) == ds.id).order_by(col(Snapshot.created_at)))
        )
