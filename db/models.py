"""SQLModel tables of a workspace.

Class sets are stored as JSON lists of vocabulary indices, in the order their source gave them (ReaL's
`real.json` does not sort its lists, and an export must give them back unchanged). Annotations are append-only:
an undo is a new row that retracts an earlier one. Snapshots and their labels are never updated or deleted; the
migrations install database triggers that refuse it.

The annotations are evaluated as the classes are built (no `from __future__ import annotations`): pydantic and
SQLAlchemy then read types rather than strings to resolve, a part of what every command pays at start-up.
"""

from datetime import datetime, timezone
from typing import Any, Protocol, cast

from sqlalchemy import JSON, BigInteger, CheckConstraint, Column, Index, LargeBinary, UniqueConstraint, true
from sqlalchemy.orm import Mapped
from sqlmodel import Field, SQLModel, col
from sqlmodel.main import SQLModelConfig

from db.enums import Category, ImageStatus, PredictionStatus, Role, SourceKind, SuggestionAction, Verdict


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def pk(column: int | None) -> Mapped[int]:
    """A table's `id` column in a query, typed as the database holds it: a stored row always has one (the model says
    `int | None` only so that a new row can be built before the database numbers it)."""
    return cast("Mapped[int]", col(column))


class _Row(Protocol):
    id: int | None


def stored_id(row: _Row) -> int:
    """The id of a row read from the database or flushed to it (a table's `id` is None only before that)."""
    if row.id is None:
        raise ValueError(f"this {type(row).__name__} was never stored: it has no id yet")
    return row.id


def _json(nullable: bool = False) -> Any:
    return Field(default=None if nullable else ..., sa_column=Column(JSON, nullable=nullable))


class _Table(SQLModel):
    """The base of every table class. A table row is built without validation (SQLModel's rule for tables) and
    never dumped through pydantic, so pydantic's validator and serializer of a table class are built only if
    something asks for one (`defer_build`) instead of at import, where all 26 of them cost every command ~0.02 s."""

    model_config = SQLModelConfig(defer_build=True)


class SchemaVersion(_Table, table=True):
    __tablename__ = "schema_version"
    version: int = Field(primary_key=True)
    name: str
    applied_at: datetime = Field(default_factory=utcnow)


class Vocabulary(_Table, table=True):
    __tablename__ = "vocabularies"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    content_hash: str  # sha256 of the canonical class list; two datasets share a vocabulary only if equal
    n_classes: int
    created_at: datetime = Field(default_factory=utcnow)


class VocabClass(_Table, table=True):
    __tablename__ = "vocab_classes"
    __table_args__ = (
        UniqueConstraint("vocabulary_id", "index"),
        UniqueConstraint("vocabulary_id", "name"),
    )
    id: int | None = Field(default=None, primary_key=True)
    vocabulary_id: int = Field(foreign_key="vocabularies.id", index=True)
    index: int  # 0-based; for ImageNet-1k the sorted-wnid order
    wnid: str | None = None
    name: str  # unique display name within the vocabulary
    synonyms: list[str] = _json()
    gloss: str = ""


class Dataset(_Table, table=True):
    __tablename__ = "datasets"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    root: str | None = None  # absolute directory; image paths are relative to it
    vocabulary_id: int = Field(foreign_key="vocabularies.id")
    created_at: datetime = Field(default_factory=utcnow)


class Image(_Table, table=True):
    __tablename__ = "images"
    __table_args__ = (
        UniqueConstraint("dataset_id", "path"),
        Index("ix_images_dataset_stem", "dataset_id", "stem"),
    )
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    path: str  # POSIX path relative to the dataset root
    stem: str  # file name without extension: the key label files use (ILSVRC2012_val_00000001)
    status: ImageStatus = ImageStatus.missing
    reason: str = ""  # why an image is missing or unreadable
    notes: str = ""  # what a reviewer should know about a readable image (CMYK, 16-bit, EXIF rotation, ...)
    sha256: str | None = Field(default=None, index=True)
    bytes: int | None = Field(default=None, sa_column=Column(BigInteger))
    mtime_ns: int | None = Field(
        default=None, sa_column=Column(BigInteger)
    )  # with `bytes`, lets a re-ingest skip files it has already checked
    width: int | None = None  # as displayed, after EXIF orientation
    height: int | None = None
    format: str | None = None
    mode: str | None = None
    exif_orientation: int | None = None
    ingested_at: datetime = Field(default_factory=utcnow)


class LabelSource(_Table, table=True):
    __tablename__ = "label_sources"
    __table_args__ = (UniqueConstraint("dataset_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    name: str  # "imgt" for the original labels; "real", "shankar", "mturk", ... for priors
    kind: SourceKind
    format: str  # the import format that produced it
    origin: str = ""  # file it was read from
    sha256: str = ""  # of that file
    n_labels: int = 0
    imported_at: datetime = Field(default_factory=utcnow)


class Label(_Table, table=True):
    __tablename__ = "labels"
    __table_args__ = (UniqueConstraint("source_id", "image_id"),)
    id: int | None = Field(default=None, primary_key=True)
    source_id: int = Field(foreign_key="label_sources.id")
    image_id: int = Field(foreign_key="images.id", index=True)
    classes: list[int] = _json()  # empty = the source excludes the image (ReaL) or no class fits (Z)
    certainty: list[float] | None = _json(nullable=True)  # parallel to `classes`, in [0, 1]
    category: str | None = None  # the source's own category, when it has one (Shankar A/B/M/Z)
    extra: dict[str, Any] | None = _json(nullable=True)  # source-specific detail (MTurk vote counts, ...)


class VoteSource(_Table, table=True):
    """One imported file of workers' answers (ReaL's raters, MTurk's five votes, a team's own round)."""

    __tablename__ = "vote_sources"
    __table_args__ = (UniqueConstraint("dataset_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    name: str
    format: str  # the import format that produced it
    origin: str = ""  # file it was read from
    sha256: str = ""  # of that file
    # False when a worker name is only a ballot (MTurk's five anonymous votes per record): it then says which
    # answers one person gave on one image, not who answered across images
    workers_identified: bool = True
    n_votes: int = 0
    n_workers: int = 0
    n_images: int = 0
    imported_at: datetime = Field(default_factory=utcnow)


class VoteWorker(_Table, table=True):
    """A worker of one vote source (a rater's id, or an anonymous ballot's name), numbered 0.. in the code point
    order of the names; only workers who answered something are stored."""

    __tablename__ = "vote_workers"
    source_id: int = Field(foreign_key="vote_sources.id", primary_key=True)
    number: int = Field(primary_key=True)
    name: str


class VotePair(_Table, table=True):
    """Every answer of one vote source on one (image, class) pair, packed (`db.vote_packing`): the workers' numbers
    (`VoteWorker.number`, ascending) and their answers. Never updated; a re-import replaces the whole source."""

    __tablename__ = "vote_pairs"
    source_id: int = Field(foreign_key="vote_sources.id", primary_key=True)
    image_id: int = Field(foreign_key="images.id", primary_key=True)
    class_index: int = Field(primary_key=True)  # index in the dataset's vocabulary
    workers: bytes = Field(sa_column=Column(LargeBinary, nullable=False))  # int32 little-endian, one per answer
    answers: bytes = Field(sa_column=Column(LargeBinary, nullable=False))  # a byte per answer: 0 no, 1 maybe, 2 yes


class ModelRun(_Table, table=True):
    __tablename__ = "model_runs"
    __table_args__ = (UniqueConstraint("dataset_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    name: str
    model: str
    protocol: str  # "supervised", "ow", "mc", "cw", "cwplus", "imported", ...
    params: dict[str, Any] = _json()
    prompt_hash: str | None = None
    origin: str = ""  # the file imported, or the adapter that produced the run
    tool_version: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class Prediction(_Table, table=True):
    __tablename__ = "predictions"
    __table_args__ = (UniqueConstraint("run_id", "image_id"),)
    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="model_runs.id")
    image_id: int = Field(foreign_key="images.id", index=True)
    status: PredictionStatus = PredictionStatus.ok
    reason: str = ""
    raw_output: str = ""  # the model's own words, before mapping to classes
    classes: list[int] = _json()  # ranked, best first
    scores: list[float] | None = _json(nullable=True)  # parallel to `classes`
    details: dict[str, Any] | None = _json(nullable=True)  # protocol detail: out-of-prompt, mapping similarity, ...
    created_at: datetime = Field(default_factory=utcnow)


class User(_Table, table=True):
    __tablename__ = "users"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(unique=True)
    role: Role = Role.annotator
    password_hash: str | None = None
    created_at: datetime = Field(default_factory=utcnow)
    # False: disabled by a lead (`relabel users disable`); the user cannot sign in or decide, their decisions stay
    active: bool = Field(default=True, sa_column_kwargs={"server_default": true()})


class QueueLease(_Table, table=True):
    """An image of the review queue held open by a user until `expires_at`, so that every studio process on the
    database serves it to no more users than the overlap allows. Deleted when the user decides, skips or moves
    on; an expired row holds nothing and is replaced by the next claim."""

    __tablename__ = "queue_leases"
    __table_args__ = (
        UniqueConstraint("image_id", "user_id"),
        Index("ix_queue_leases_dataset_user", "dataset_id", "user_id"),
    )
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    image_id: int = Field(foreign_key="images.id")
    user_id: int = Field(foreign_key="users.id")
    expires_at: datetime  # wall-clock UTC (not a process's monotonic clock): the same in every process and host


class StudioSession(_Table, table=True):
    """A signed-in studio session, shared by every studio process on the database: the browser's cookie holds the
    token, the database only its sha256. Deleted at sign-out, when the user is disabled, and once expired."""

    __tablename__ = "studio_sessions"
    id: int | None = Field(default=None, primary_key=True)
    token_hash: str = Field(unique=True)  # sha256 hex of the cookie's token, never the token itself
    user_id: int = Field(foreign_key="users.id", index=True)
    created_at: datetime = Field(default_factory=utcnow)
    expires_at: datetime  # wall-clock UTC; an idle session's moves on with use, a remembered one's is fixed
    last_seen: datetime = Field(default_factory=utcnow)
    remember: bool = False  # "keep me signed in": a fixed, longer expiry and a persistent cookie


class CardToken(_Table, table=True):
    """A card served to a user, named by the one-time token its decision must carry (`relabel.review.tokens`), so
    that any studio process on the database can check a decision on it. The oldest rows of a user beyond their
    pool's size are deleted when a new card is served."""

    __tablename__ = "card_tokens"
    __table_args__ = (Index("ix_card_tokens_user", "user_id", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    token: str = Field(unique=True)  # as a decision made on the card stores it (`Annotation.client_token`)
    user_id: int = Field(foreign_key="users.id")
    image_id: int = Field(foreign_key="images.id")
    served_at: datetime  # wall-clock UTC: the time on the card is measured from it, in whichever process
    suggestion_id: int | None = None
    suggested_class: int | None = None
    original: list[int] = _json()
    last_event: int | None = None  # id of the user's newest decision or undo on the image when served


class SignInFailure(_Table, table=True):
    """Failed sign-ins counted against one typed name or one client address (`relabel.review.sign_in_throttle`),
    shared by every studio process on the database, so N processes lock a name out after as many failures as one.
    Deleted when the name signs in, and once its failures are old and its lockout over."""

    __tablename__ = "sign_in_failures"
    __table_args__ = (Index("ix_sign_in_failures_last_failed", "last_failed"),)
    kind: str = Field(primary_key=True)  # "user" (a typed name, known or not) or "address"
    key: str = Field(primary_key=True)
    failures: int = 0
    last_failed: datetime  # wall-clock UTC of the newest counted attempt
    locked_until: datetime | None = None  # wall-clock UTC; None or past: not locked


class Annotation(_Table, table=True):
    """One decision event. Never updated: an undo is a new row with verdict `retract`."""

    __tablename__ = "annotations"
    __table_args__ = (Index("ix_annotations_image_user", "image_id", "user_id"),)
    id: int | None = Field(default=None, primary_key=True)
    image_id: int = Field(foreign_key="images.id")
    user_id: int = Field(foreign_key="users.id")
    verdict: Verdict
    classes: list[int] = _json()
    flags: list[str] = _json()
    note: str = ""
    seconds_on_item: float | None = None
    suggestion_id: int | None = Field(default=None, foreign_key="predictions.id")
    suggestion_action: SuggestionAction = SuggestionAction.none
    is_adjudication: bool = False
    retracts_id: int | None = Field(default=None, foreign_key="annotations.id")
    client_token: str | None = Field(default=None, unique=True)  # a resent request stores nothing twice
    created_at: datetime = Field(default_factory=utcnow)


class Snapshot(_Table, table=True):
    __tablename__ = "snapshots"
    __table_args__ = (UniqueConstraint("dataset_id", "name"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    name: str
    content_hash: str  # sha256 over (image path, classes, category) in path order
    base_source: str  # labels undecided images take under the "keep" policy
    undecided_policy: str  # "keep" or "exclude"
    n_images: int
    counts: dict[str, int] = _json()  # per category
    created_by: str = ""
    tool_version: str = ""
    created_at: datetime = Field(default_factory=utcnow)
    # how the consensus was reached: {"rule": "unanimous", "min_votes": 1} or, for a probabilistic snapshot,
    # {"rule": "ds", "threshold": 0.9, "vote_sources": [...], "with_model": null, ...}; None: older snapshots,
    # which were all unanimous
    consensus: dict[str, Any] | None = _json(nullable=True)


class SnapshotPosterior(_Table, table=True):
    """P(class present) of one (image, class) pair, as the consensus of a probabilistic snapshot fitted it.

    Immutable like the snapshot. Pairs nobody was asked about are not stored: they count as absent (0), except the
    classes of `snapshot_labels` taken from a decision or the base labels, which count as present (1)."""

    __tablename__ = "snapshot_posteriors"
    snapshot_id: int = Field(foreign_key="snapshots.id", primary_key=True)
    image_id: int = Field(foreign_key="images.id", primary_key=True)
    class_index: int = Field(primary_key=True)
    posterior: float


class ResponseCacheEntry(_Table, table=True):
    """A finished model response, keyed by a hash of (model, prompt version, image hashes, decoding settings)."""

    __tablename__ = "response_cache"
    key: str = Field(primary_key=True)
    model: str
    response: dict[str, Any] = _json()
    created_at: datetime = Field(default_factory=utcnow)


class SnapshotLabel(_Table, table=True):
    __tablename__ = "snapshot_labels"
    snapshot_id: int = Field(foreign_key="snapshots.id", primary_key=True)
    image_id: int = Field(foreign_key="images.id", primary_key=True)
    classes: list[int] = _json()  # empty = excluded from multi-label scoring
    category: Category
    origin: str  # "adjudication", "consensus" or "base"


class EvaluationRecord(_Table, table=True):
    """One stored evaluation: model runs scored against references, or a robustness run of a model.

    Never updated. `result` is the self-describing JSON that the report is written from, so a later release can
    show how each model's score moved across labeling rounds without re-running anything.
    """

    __tablename__ = "evaluations"
    __table_args__ = (Index("ix_evaluations_dataset_kind", "dataset_id", "kind", "created_at"),)
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id")
    kind: str  # "scores" (stored runs against references) or "robustness" (a model run on perturbed images)
    reference_hashes: dict[str, str] = _json()  # reference name -> content hash (a snapshot's, or of the labels)
    runs: list[dict[str, Any]] = _json()  # [{"id", "name", "model", "protocol"}]; robustness: the model only
    result: dict[str, Any] = _json()
    tool_version: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class Assignment(_Table, table=True):
    """An image, or every image whose original (ImGT) labels hold a class, assigned to one annotator by a lead
    (`relabel.review.assignments`): the review queue serves an assigned image only to its assignees, first. Exactly
    one of `image_id` and `class_key` is set. Deleted when the lead removes it; ids are never reused (SQLite
    AUTOINCREMENT), so a studio process sees any change in (count, newest id)."""

    __tablename__ = "assignments"
    __table_args__ = (
        UniqueConstraint("user_id", "image_id"),
        UniqueConstraint("dataset_id", "user_id", "class_key"),
        CheckConstraint("(image_id IS NULL) <> (class_key IS NULL)", name="ck_assignments_image_or_class"),
        {"sqlite_autoincrement": True},
    )
    id: int | None = Field(default=None, primary_key=True)
    dataset_id: int = Field(foreign_key="datasets.id", index=True)
    user_id: int = Field(foreign_key="users.id")
    image_id: int | None = Field(default=None, foreign_key="images.id")
    class_key: str | None = None  # the class's wnid, or its display name when it has no wnid
    created_at: datetime = Field(default_factory=utcnow)
    created_by: str = ""  # the lead's user name


class Guidelines(_Table, table=True):
    """One version of the labeling guidelines a lead wrote (Markdown, shown on the review card's G key). Never
    updated: saving new guidelines adds a row, and the newest row (highest id) is the current text; the older rows
    are the history (`relabel.review.guidelines`)."""

    __tablename__ = "guidelines"
    id: int | None = Field(default=None, primary_key=True)
    text: str
    author_id: int = Field(foreign_key="users.id")
    created_at: datetime = Field(default_factory=utcnow)


class ImageComment(_Table, table=True):
    """A comment a user left on an image from its card (`relabel.review.comments`). Never updated."""

    __tablename__ = "image_comments"
    __table_args__ = (Index("ix_image_comments_image", "image_id", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    image_id: int = Field(foreign_key="images.id")
    user_id: int = Field(foreign_key="users.id", index=True)
    text: str
    created_at: datetime = Field(default_factory=utcnow)
