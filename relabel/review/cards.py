"""One review card: everything an annotator sees about one image, read in four small indexed queries (the cards of
several images in four as well).

Other annotators' decisions are part of the card only once the viewer has decided the image themselves (blind
review), or when a lead opens it for adjudication.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from operator import attrgetter
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection
from sqlmodel import Session, col

from db.enums import Category, PredictionStatus, SourceKind, Verdict
from db.models import Annotation, Dataset, Image, Label, LabelSource, ModelRun, Prediction, User, pk, stored_id
from relabel.common.errors import NotFoundError
from relabel.common.vocabulary import ClassInfo, Vocabulary
from relabel.decisions.rules import DecisionKey, Outcome, categorize, decision_key, settle, standing
from relabel.review.display import StoredImage
from relabel.suggest.protocols import ranked_protocols, suggestion_protocols


@dataclass(frozen=True)
class Suggestion:
    prediction_id: int
    run: str
    model: str
    protocol: str
    ok: bool
    raw: str  # the model's own words
    classes: tuple[int, ...]  # ranked
    scores: tuple[float, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    @property
    def top1(self) -> int | None:
        return self.classes[0] if self.ok and self.classes else None


@dataclass(frozen=True)
class PriorLabel:
    source: str
    classes: tuple[int, ...]
    category: str | None
    extra: dict[str, Any] | None


@dataclass(frozen=True)
class HistoryEntry:
    """One entry of an image's audit trail: a decision or an undo, with its user's name, flags and note."""

    annotation_id: int
    user: str
    verdict: Verdict
    classes: tuple[int, ...]
    flags: tuple[str, ...]
    note: str
    suggestion_action: str
    is_adjudication: bool
    retracts_id: int | None
    seconds_on_item: float | None
    created_at: datetime

    @property
    def id(self) -> int:
        return self.annotation_id

    @property
    def key(self) -> DecisionKey:
        return decision_key(self.verdict, self.classes)


def slot(e: HistoryEntry) -> tuple[str, bool]:
    """The standing slot of an event of one image's history: its user, adjudication or not."""
    return e.user, e.is_adjudication


@dataclass(frozen=True)
class Card:
    image: StoredImage
    dataset: str
    width: int | None
    height: int | None
    notes: str
    original: tuple[int, ...]  # ImGT classes (usually one)
    suggestion: Suggestion | None  # from a generative run (OW / CW / CW+)
    classifier: Suggestion | None  # top-k of a scoring run
    priors: tuple[PriorLabel, ...]
    history: tuple[HistoryEntry, ...]  # every event on the image, oldest first
    viewer: str

    @property
    def image_id(self) -> int:
        return self.image.image_id

    @property
    def suggested_class(self) -> int | None:
        """What "suggestion is right" means: the MLLM's class, else the classifier's top-1."""
        for s in (self.suggestion, self.classifier):
            if s is not None and s.top1 is not None:
                return s.top1
        return None

    @property
    def suggestion_used(self) -> Suggestion | None:
        for s in (self.suggestion, self.classifier):
            if s is not None and s.top1 is not None:
                return s
        return None

    def standing(self) -> dict[str, HistoryEntry]:
        """Each user's standing decision (`relabel.decisions.rules.standing`), adjudications under 'lead:NAME'."""
        return {f"lead:{e.user}" if e.is_adjudication else e.user: e for e in standing(self.history, slot).values()}

    def settled(self) -> tuple[Outcome, Category]:
        """The image's consensus now (`relabel.decisions.rules.settle`) and its category against the original label."""
        stand = sorted(self.standing().values(), key=attrgetter("annotation_id"))
        outcome, key = settle(
            [(e.user, e.key) for e in stand if not e.is_adjudication],
            [e.key for e in stand if e.is_adjudication],
        )
        return outcome, categorize(key, self.original)

    def own(self) -> HistoryEntry | None:
        return self.standing().get(self.viewer)

    def others(self, reveal: bool = False) -> list[HistoryEntry]:
        """Other users' standing decisions: hidden (empty) until the viewer has decided, unless `reveal`."""
        standing = self.standing()
        if not reveal and self.viewer not in standing:
            return []
        return [e for who, e in standing.items() if who != self.viewer]


@dataclass(frozen=True)
class RunChoice:
    """The runs a card shows: one generative suggestion run and one classifier run (either may be missing)."""

    suggestion: int | None
    classifier: int | None
    names: dict[int, str] = field(default_factory=dict, compare=False)

    def name(self, run_id: int | None) -> str:
        return self.names.get(run_id, "none") if run_id is not None else "none"


def pick_runs(conn: Connection, dataset_id: int, suggestion: str | None, classifier: str | None) -> RunChoice:
    """The named runs, or the newest generative / scoring run of the dataset."""
    rows = conn.execute(
        select(col(ModelRun.id), col(ModelRun.name), col(ModelRun.protocol))
        .where(col(ModelRun.dataset_id) == dataset_id)
        .order_by(col(ModelRun.created_at).desc(), col(ModelRun.id).desc())
    ).all()
    by_name = {r.name: r.id for r in rows}

    def choose(name: str | None, protocols: tuple[str, ...], what: str) -> int | None:
        if name is not None:
            if name not in by_name:
                raise NotFoundError(f"unknown {what} run {name!r}; known runs: {', '.join(by_name) or 'none'}")
            return by_name[name]
        return next((r.id for r in rows if r.protocol in protocols), None)

    return RunChoice(
        choose(suggestion, suggestion_protocols(), "suggestion"),
        choose(classifier, ranked_protocols(), "classifier"),
        {r.id: r.name for r in rows},
    )


def load_card(conn: Connection, image_id: int, runs: RunChoice, viewer: str, cached: Card | None = None) -> Card:
    """The card of `image_id` as `viewer` sees it. Raises NotFoundError for an unknown image.

    With `cached` (an earlier card of the same image, or one of `load_cards`), only the decision history is read
    again: the image, its labels and its suggestions do not change while the studio runs (`Studio.refresh` drops
    the cache).
    """
    if cached is None:
        cached = load_cards(conn, [image_id], runs, viewer).get(image_id)
        if cached is None:
            raise NotFoundError(f"image id {image_id} does not exist")
    return replace(cached, history=tuple(image_history(conn, image_id)), viewer=viewer)


def load_cards(conn: Connection, image_ids: list[int], runs: RunChoice, viewer: str) -> dict[int, Card]:
    """The cards of `image_ids` without their decision history (`load_card` reads it), in three statements
    whatever their number; unknown ids are left out."""
    with Session(bind=conn) as session:
        rows = session.execute(
            select(Image, col(Dataset.root), col(Dataset.name))
            .join(Dataset, col(Dataset.id) == col(Image.dataset_id))
            .where(col(Image.id).in_(image_ids))
        ).all()
        if not rows:
            return {}
        labels = _labels(session, image_ids)
        suggestions = _suggestions(session, image_ids, runs)
    cards = {}
    for image, root, dataset in rows:
        image_id = stored_id(image)
        original, priors = labels.get(image_id, ((), ()))
        suggestion, classifier = suggestions.get(image_id, (None, None))
        cards[image_id] = Card(
            image=stored_image(image, root),
            dataset=dataset,
            width=image.width,
            height=image.height,
            notes=image.notes,
            original=original,
            suggestion=suggestion,
            classifier=classifier,
            priors=priors,
            history=(),
            viewer=viewer,
        )
    return cards


def _labels(conn: Session, image_ids: list[int]) -> dict[int, tuple[tuple[int, ...], tuple[PriorLabel, ...]]]:
    """Each image's original classes and prior relabels, by image id."""
    rows = conn.execute(
        select(
            col(Label.image_id),
            col(LabelSource.name),
            col(LabelSource.kind),
            col(Label.classes),
            col(Label.category),
            col(Label.extra),
        )
        .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
        .where(col(Label.image_id).in_(image_ids))
        .order_by(col(LabelSource.name))
    ).all()
    by_image: dict[int, list[Any]] = {}
    for r in rows:
        by_image.setdefault(r.image_id, []).append(r)
    out = {}
    for image_id, found in by_image.items():
        original = next((tuple(r.classes) for r in found if r.kind == SourceKind.original), ())
        priors = tuple(
            PriorLabel(r.name, tuple(r.classes), r.category, r.extra) for r in found if r.kind == SourceKind.prior
        )
        out[image_id] = original, priors
    return out


def _suggestions(
    conn: Session, image_ids: list[int], runs: RunChoice
) -> dict[int, tuple[Suggestion | None, Suggestion | None]]:
    """Each image's suggestion and classifier top-k of the chosen runs, by image id."""
    wanted = [r for r in (runs.suggestion, runs.classifier) if r is not None]
    if not wanted:
        return {}
    rows = conn.execute(
        select(Prediction, col(ModelRun.name), col(ModelRun.model), col(ModelRun.protocol))
        .join(ModelRun, col(ModelRun.id) == col(Prediction.run_id))
        .where(col(Prediction.image_id).in_(image_ids), col(Prediction.run_id).in_(wanted))
    ).all()
    found: dict[int, dict[int, Suggestion]] = {}
    for p, name, model, protocol in rows:
        found.setdefault(p.image_id, {})[p.run_id] = Suggestion(
            prediction_id=p.id,
            run=name,
            model=model,
            protocol=protocol,
            ok=p.status is PredictionStatus.ok,
            raw=p.raw_output,
            classes=tuple(p.classes),
            scores=tuple(p.scores or ()),
            details=dict(p.details or {}),
            error=p.reason,
        )
    return {i: (by_run.get(runs.suggestion or -1), by_run.get(runs.classifier or -1)) for i, by_run in found.items()}


_HISTORY = (
    select(
        col(Annotation.id),
        col(Annotation.verdict),
        col(Annotation.classes),
        col(Annotation.flags),
        col(Annotation.note),
        col(Annotation.suggestion_action),
        col(Annotation.is_adjudication),
        col(Annotation.retracts_id),
        col(Annotation.seconds_on_item),
        col(Annotation.created_at),
        col(User.name),
    )
    .join(User, col(User.id) == col(Annotation.user_id))
    .where(col(Annotation.image_id) == bindparam("image_id"))
    .order_by(col(Annotation.id))
)  # built once: it runs for every card shown


def image_history(conn: Connection | Session, image_id: int) -> list[HistoryEntry]:
    """Every decision event on the image, oldest first."""
    return [history_entry(row, row.name) for row in conn.execute(_HISTORY, {"image_id": image_id})]


def audit_events(
    conn: Connection, dataset_id: int, *, user: str | None = None, limit: int = 200
) -> list[tuple[HistoryEntry, str]]:
    """The newest decision events of a dataset (of one user, if given), newest first, with each image's path."""
    with Session(bind=conn) as session:
        query = (
            select(Annotation, col(User.name), col(Image.path))
            .join(User, col(User.id) == col(Annotation.user_id))
            .join(Image, col(Image.id) == col(Annotation.image_id))
            .where(col(Image.dataset_id) == dataset_id)
        )
        if user:
            query = query.where(col(User.name) == user)
        rows = session.execute(query.order_by(col(Annotation.id).desc()).limit(limit)).all()
        return [(history_entry(a, name), path) for a, name, path in rows]


def history_entry(a: Any, user: str) -> HistoryEntry:
    """An Annotation (or a row of its columns) as an entry of its image's history."""
    return HistoryEntry(
        annotation_id=a.id,
        user=user,
        verdict=Verdict(a.verdict),
        classes=tuple(a.classes),
        flags=tuple(a.flags),
        note=a.note,
        suggestion_action=str(getattr(a.suggestion_action, "value", a.suggestion_action)),
        is_adjudication=bool(a.is_adjudication),
        retracts_id=a.retracts_id,
        seconds_on_item=a.seconds_on_item,
        created_at=a.created_at,
    )


# StoredImage's fields after `root`, in order, as columns: read without loading Image objects
IMAGE_COLUMNS = (pk(Image.id), col(Image.path), col(Image.sha256), col(Image.format), col(Image.mode),
                 col(Image.width), col(Image.height), col(Image.exif_orientation), col(Image.bytes))  # fmt: skip


def stored_image(image: Image, root: str | None) -> StoredImage:
    return StoredImage(
        stored_id(image),
        root,
        image.path,
        image.sha256,
        image.format,
        image.mode,
        image.width,
        image.height,
        image.exif_orientation,
        image.bytes,
    )


def describe_class(vocab: Vocabulary, index: int | None) -> ClassInfo | None:
    return vocab.classes[index] if index is not None and 0 <= index < len(vocab) else None
