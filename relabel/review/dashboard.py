"""The numbers behind the leads' dashboard: progress, per-class progress, live categories, suggestion use and
annotator throughput, as frozen dataclasses of plain data that the UI turns into tables and plots.

`Progress` and `ClassProgress` count *reviewable* images (status ok) and report unreadable and missing ones apart;
`LiveCategories` counts every image, as a snapshot taken now would; suggestion use, throughput and the hourly
series count the dataset's annotation events whatever their image's status. `dashboard` reads the dataset with a
few queries (the annotation log once) and computes the rest in single passes by the functions below, which take
plain data and can be called on their own.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from operator import attrgetter

from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from db.enums import Category, ImageStatus, Role, SuggestionAction, Verdict
from db.models import Dataset, Image, Label, LabelSource, User, VocabClass, pk, stored_id
from relabel.common.collector import cyclic_gc_paused
from relabel.common.errors import InputError
from relabel.common.workspace import IMGT, get_dataset
from relabel.decisions.log import IMAGE_STATUSES, LogRow, ParsedLists, load_events
from relabel.decisions.rules import Consensus, Decision, Outcome, settle_images, standing_decisions
from relabel.votes.report import Reliability, dataset_reliability

ACTIVE_GAP_CAP_S = 300.0  # a longer pause between two events of one user is a break, counted as 5 minutes
# An images/hour rate is shown only from 10 minutes of active time on: below that it extrapolates a handful of
# decisions (3 decisions in 5 s read as 2,160 per hour) and says nothing about a working pace. Ten minutes is
# twice the break cap, so a single capped pause cannot make up most of the time the rate is taken over.
RATE_MIN_ACTIVE_S = 600.0
HOUR_S = 3600.0
NO_RUN = "(no run)"  # `by_run` key of suggestions whose prediction row is not recorded
Settled = Mapping[int, Consensus]  # image id -> its consensus (`relabel.decisions.rules.settle_images`)


@dataclass(frozen=True)
class Progress:
    """How far the review of the reviewable images has come.

    `consensus + adjudicated + disputed + undecided == reviewable`; undecided includes images whose annotators
    agree with fewer than `min_votes` votes.
    """

    total: int  # every image of the dataset
    reviewable: int  # status ok
    unreadable: int
    missing: int
    with_decision: int  # reviewable images with at least one standing decision (an annotator's or a lead's)
    with_overlap: int  # reviewable images with standing decisions of ≥ `overlap` users, adjudications not counted
    overlap: int
    consensus: int
    adjudicated: int
    disputed: int
    undecided: int

    @property
    def decided(self) -> int:
        return self.consensus + self.adjudicated


@dataclass(frozen=True)
class ClassProgress:
    """The reviewable images whose ImGT label starts with class `index`."""

    index: int
    name: str
    images: int
    decided: int  # by consensus or adjudication
    disputed: int

    @property
    def fraction_decided(self) -> float:
        return self.decided / self.images


@dataclass(frozen=True)
class LiveCategories:
    """What a snapshot taken now would count: every image, every `Category` value as a key (zeros included).

    `disputed` is the part of U whose annotators disagree; the rest of U has too few votes.
    """

    counts: dict[str, int]
    disputed: int


@dataclass(frozen=True)
class SuggestionUse:
    """What annotators did with the suggestions they were shown; rates are in [0, 1], NaN when none was shown."""

    shown: int
    accepted: int
    edited: int
    rejected: int

    @property
    def rates(self) -> dict[str, float]:
        """{"accepted": .., "edited": .., "rejected": ..} as fractions of `shown`."""
        return {
            k: getattr(self, k) / self.shown if self.shown else math.nan for k in ("accepted", "edited", "rejected")
        }


@dataclass(frozen=True)
class SuggestionReport:
    overall: SuggestionUse
    by_run: dict[str, SuggestionUse]  # model run name (NO_RUN when unknown) -> use; keys sorted


@dataclass(frozen=True)
class AnnotatorThroughput:
    """One user's work on the dataset; `annotator_throughput` defines each number."""

    user_id: int
    name: str
    role: Role
    decisions: int
    undos: int
    images_decided: int
    median_seconds: float  # NaN when none of the user's decisions recorded its time on item
    active_seconds: float  # see `active_seconds`
    images_per_hour: float  # decisions per active hour; NaN below RATE_MIN_ACTIVE_S of active time
    hourly: list[tuple[datetime, int]]  # the user's decisions per clock hour, see `hourly_decisions`

    @property
    def active_minutes(self) -> float:
        return self.active_seconds / 60


@dataclass(frozen=True)
class Dashboard:
    """Every number of the leads' dashboard for one dataset; `dashboard` builds it."""

    dataset: str
    generated_at: datetime  # the `now` of the hourly series, UTC
    min_votes: int
    progress: Progress
    classes: list[ClassProgress]  # by class index; classes without reviewable images left out
    categories: LiveCategories
    suggestions: SuggestionReport
    annotators: list[AnnotatorThroughput]  # by name; users without events on this dataset left out
    hourly: list[tuple[datetime, int]]  # everyone's decisions per clock hour, see `hourly_decisions`


def _utc(moment: datetime) -> datetime:
    """Aware UTC; a naive datetime is taken to be UTC already."""
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise InputError(f"{name} must be at least 1, got {value}")


def progress_counts(
    statuses: Mapping[int, ImageStatus],
    decisions: Mapping[int, Sequence[Decision]],
    settled: Settled,
    *,
    overlap: int = 1,
) -> Progress:
    """Progress of the images of `statuses` (image id -> status); `settled` must cover the reviewable ones."""
    _check_positive("overlap", overlap)
    by_status = Counter(statuses.values())
    reviewable = [i for i, s in statuses.items() if s is ImageStatus.ok]
    origins = Counter(settled[i].outcome for i in reviewable)
    voters = [len({d.user_id for d in decisions.get(i, ()) if not d.is_adjudication}) for i in reviewable]
    return Progress(
        total=len(statuses),
        reviewable=len(reviewable),
        unreadable=by_status[ImageStatus.unreadable],
        missing=by_status[ImageStatus.missing],
        with_decision=sum(1 for i in reviewable if decisions.get(i)),
        with_overlap=sum(1 for n in voters if n >= overlap),
        overlap=overlap,
        consensus=origins[Outcome.consensus],
        adjudicated=origins[Outcome.adjudication],
        disputed=origins[Outcome.disputed],
        undecided=origins[Outcome.undecided],
    )


def class_progress(
    reviewable: Iterable[int], originals: Mapping[int, Sequence[int]], settled: Settled, names: Mapping[int, str]
) -> list[ClassProgress]:
    """Progress per ImGT class (the first class of an image's original label), sorted by class index; images
    without an original label are left out. `names` maps class index -> display name."""
    images: Counter[int] = Counter()
    decided: Counter[int] = Counter()
    disputed: Counter[int] = Counter()
    for image_id in reviewable:
        original = originals.get(image_id)
        if not original:
            continue
        cls, outcome = original[0], settled[image_id].outcome
        images[cls] += 1
        decided[cls] += outcome.decided
        disputed[cls] += outcome is Outcome.disputed
    return [ClassProgress(c, names.get(c, str(c)), images[c], decided[c], disputed[c]) for c in sorted(images)]


def live_categories(settled: Settled, originals: Mapping[int, Sequence[int]]) -> LiveCategories:
    """Category counts of the images of `settled`, each categorized against its ImGT label as
    `create_snapshot` does (`relabel.decisions.rules.categorize`)."""
    counts = dict.fromkeys((c.value for c in Category), 0)
    disputed = 0
    for image_id, settled_image in settled.items():
        counts[settled_image.category(originals.get(image_id)).value] += 1
        disputed += settled_image.outcome is Outcome.disputed
    return LiveCategories(counts, disputed)


def suggestion_use(events: Iterable[LogRow], decisions: Mapping[int, Sequence[Decision]]) -> SuggestionReport:
    """Accepted / edited / rejected among the standing annotator decisions made with a suggestion on screen
    (adjudications, and decisions since superseded or undone, are left out)."""
    standing = {d.annotation_id for ds in decisions.values() for d in ds if not d.is_adjudication}
    overall: Counter[SuggestionAction] = Counter()
    per_run: defaultdict[str, Counter[SuggestionAction]] = defaultdict(Counter)
    for e in events:
        if e.suggestion_action is not SuggestionAction.none and e.id in standing:
            overall[e.suggestion_action] += 1
            per_run[e.run or NO_RUN][e.suggestion_action] += 1
    return SuggestionReport(_use(overall), {run: _use(per_run[run]) for run in sorted(per_run)})


def _use(counts: Counter[SuggestionAction]) -> SuggestionUse:
    a, e, r = counts[SuggestionAction.accepted], counts[SuggestionAction.edited], counts[SuggestionAction.rejected]
    return SuggestionUse(a + e + r, a, e, r)


def hourly_decisions(events: Iterable[LogRow], *, now: datetime) -> list[tuple[datetime, int]]:
    """Decisions (undos not counted) in each of the 24 clock hours (UTC) up to the one that holds `now`, oldest
    first: (hour start, count)."""
    # Whole hours, not `now`, bound the window: SQLite's millisecond timestamps may round an event just past `now`.
    first = (_utc(now).timestamp() // HOUR_S - 23) * HOUR_S
    counts = [0] * 24
    for e in events:
        hour = (e.at - first) // HOUR_S
        if 0 <= hour < 24 and e.verdict is not Verdict.retract:
            counts[int(hour)] += 1
    return [(datetime.fromtimestamp(first + h * HOUR_S, timezone.utc), n) for h, n in enumerate(counts)]


def active_seconds(events: Sequence[LogRow]) -> float:
    """Time one user spent working, from their events in time order.

    The sum of the gaps between consecutive events, each capped at `ACTIVE_GAP_CAP_S` (a longer pause is a break),
    plus the first event's `seconds_on_item` when it was recorded (capped the same way): the gaps time every item
    but the first.
    """
    if not events:
        return 0.0
    total = min(events[0].seconds_on_item or 0.0, ACTIVE_GAP_CAP_S)
    for before, after in zip(events, events[1:]):
        total += min(after.at - before.at, ACTIVE_GAP_CAP_S)
    return total


def hourly_rate(count: int, active_s: float) -> float:
    """`count` per active hour, or NaN while `active_s` (seconds) is under `RATE_MIN_ACTIVE_S`."""
    return count / (active_s / HOUR_S) if active_s >= RATE_MIN_ACTIVE_S else math.nan


def annotator_throughput(
    events: Iterable[LogRow],
    decisions: Mapping[int, Sequence[Decision]],
    users: Mapping[int, tuple[str, Role]],
    *,
    now: datetime,
) -> list[AnnotatorThroughput]:
    """One row per user with events, sorted by name; `users` maps user id -> (name, role).

    * decisions: the user's events other than undos, including decisions later superseded or undone;
    * undos: the user's `retract` events;
    * images_decided: images on which a decision of the user stands now;
    * median_seconds: median `seconds_on_item` of the user's decisions that recorded it;
    * active_seconds: `active_seconds` of all the user's events in time order (undos included: they are work too);
    * images_per_hour: decisions / active hours, NaN while the active time is under `RATE_MIN_ACTIVE_S`;
    * hourly: `hourly_decisions` of the user's events.
    """
    by_user: defaultdict[int, list[LogRow]] = defaultdict(list)
    for e in events:
        by_user[e.user_id].append(e)
    images_decided: Counter[int] = Counter()
    for ds in decisions.values():
        images_decided.update({d.user_id for d in ds})
    rows = [
        _throughput(user_id, users.get(user_id), sorted(own, key=attrgetter("at", "id")), images_decided[user_id], now)
        for user_id, own in by_user.items()
    ]
    return sorted(rows, key=attrgetter("name", "user_id"))


def _throughput(
    user_id: int, user: tuple[str, Role] | None, own: Sequence[LogRow], images_decided: int, now: datetime
) -> AnnotatorThroughput:
    made = [e for e in own if e.verdict is not Verdict.retract]
    timed = [e.seconds_on_item for e in made if e.seconds_on_item is not None]
    active = active_seconds(own)
    name, role = user or (f"user {user_id}", Role.annotator)
    return AnnotatorThroughput(
        user_id=user_id,
        name=name,
        role=role,
        decisions=len(made),
        undos=len(own) - len(made),
        images_decided=images_decided,
        median_seconds=statistics.median(timed) if timed else math.nan,
        active_seconds=active,
        images_per_hour=hourly_rate(len(made), active),
        hourly=hourly_decisions(own, now=now),
    )


def _load_images(
    conn: Connection, dataset: Dataset
) -> tuple[dict[int, ImageStatus], dict[int, tuple[int, ...]], dict[int, str]]:
    """Status by image id, ImGT label by image id (empty without an ImGT source), class name by class index."""
    statuses = select(pk(Image.id), cast(col(Image.status), String)).where(col(Image.dataset_id) == dataset.id)
    originals = (
        select(col(Label.image_id), cast(col(Label.classes), String))
        .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
        .where(col(LabelSource.dataset_id) == dataset.id, col(LabelSource.name) == IMGT)
    )
    names = select(col(VocabClass.index), col(VocabClass.name)).where(
        col(VocabClass.vocabulary_id) == dataset.vocabulary_id
    )
    lists = ParsedLists()
    return (
        {image_id: IMAGE_STATUSES[status] for image_id, status in conn.execute(statuses).all()},
        {image_id: lists[classes] for image_id, classes in conn.execute(originals).all()},
        {index: name for index, name in conn.execute(names).all()},
    )


def dashboard(
    engine: Engine, dataset: str | None = None, *, min_votes: int = 1, overlap: int = 1, now: datetime | None = None
) -> Dashboard:
    """Every dashboard number of `dataset` (None: the workspace's only dataset).

    Consensus needs `min_votes` agreeing annotator votes (a lead's adjudication always settles an image);
    `Progress.with_overlap` counts images decided by at least `overlap` annotators; the hourly series end with
    the clock hour that holds `now` (default: the clock; a naive datetime is taken as UTC).
    """
    _check_positive("min_votes", min_votes)
    _check_positive("overlap", overlap)
    now = _utc(now or datetime.now(timezone.utc))
    with cyclic_gc_paused():
        with Session(engine) as session:
            ds = get_dataset(session, dataset)
            assert ds.id is not None  # a stored dataset
            conn = session.connection()
            statuses, originals, names = _load_images(conn, ds)
            users = {
                i: (name, Role(role))
                for i, name, role in conn.execute(select(pk(User.id), col(User.name), col(User.role)))
            }
            events = load_events(conn, ds.id)
        decisions = standing_decisions(events)
        settled = settle_images(decisions, statuses, min_votes=min_votes)
        reviewable = (i for i, s in statuses.items() if s is ImageStatus.ok)
        return Dashboard(
            dataset=ds.name,
            generated_at=now,
            min_votes=min_votes,
            progress=progress_counts(statuses, decisions, settled, overlap=overlap),
            classes=class_progress(reviewable, originals, settled, names),
            categories=live_categories(settled, originals),
            suggestions=suggestion_use(events, decisions),
            annotators=annotator_throughput(events, decisions, users, now=now),
            hourly=hourly_decisions(events, now=now),
        )


def worker_reliability_table(engine: Engine, dataset: str | None = None) -> Reliability | None:
    """Every worker's sensitivity, specificity and answers (studio annotators, imported raters) from one
    Dawid-Skene fit on the dataset's votes, lowest sensitivity first; None without votes. Apart from `dashboard`:
    the fit reads every vote, so the tab runs it when a lead asks."""
    with Session(engine) as session:
        ds = get_dataset(session, dataset)
        fitted = dataset_reliability(session.connection(), stored_id(ds))
    if fitted is None:
        return None
    return Reliability(fitted.votes, sorted(fitted.rows, key=attrgetter("sensitivity")))
