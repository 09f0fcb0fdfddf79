"""The studio service: what the review UI calls. Plain methods, no web framework, so tests call them directly.

Every write names its user from the caller's authenticated session (the UI passes the server-side login, never a
form field). Each card view gets a one-time token; a decision carries it, so a resent request stores nothing twice,
and the server measures the time on the item from when it served the card.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.enums import ImageStatus, Role, SourceKind, SuggestionAction, Verdict
from db.models import Annotation, Image, Label, LabelSource, User
from relabel.annotations import current_decisions, retract_annotation, store_annotation, verify_password
from relabel.errors import ConflictError, InputError, NotFoundError
from relabel.review.cards import IMAGE_COLUMNS, Card, RunChoice, load_card, pick_runs
from relabel.review.display import DisplayCache, StoredImage, forget_resolved_paths
from relabel.review.evidence import load_evidence
from relabel.review.queue import Evidence, QueueFilter, ReviewQueue
from relabel.vocabulary import Vocabulary
from relabel.workspace import IMGT, dataset_vocabulary, get_dataset

CARD_CACHE_SIZE = 4096  # cards kept in memory; with N-way overlap each image is served N times
ACTIONS = ("original", "suggestion", "both", "labels", "none_fit", "unclear")
MAX_NOTE = 2000


@dataclass(frozen=True)
class Shown:
    """A card as it was served: who saw which image when, and what it suggested."""

    user_id: int
    image_id: int
    at: float
    suggestion_id: int | None
    suggested_class: int | None
    original: tuple[int, ...]


@dataclass(frozen=True)
class Saved:
    annotation_id: int
    image_id: int
    duplicate: bool  # the token had been used: nothing new was stored


class Studio:
    """One dataset under review. Thread-safe: the queue has its own lock and every write is one transaction."""

    def __init__(
        self,
        engine: Engine,
        dataset: str | None = None,
        *,
        cache_dir: Path,
        overlap: int = 1,
        suggestion_run: str | None = None,
        classifier_run: str | None = None,
        seed: int = 0,
    ) -> None:
        self.engine, self.overlap, self.seed = engine, overlap, seed
        with engine.connect() as conn:
            with Session(bind=conn) as s:
                ds = get_dataset(s, dataset)
                self.vocab: Vocabulary = dataset_vocabulary(s, ds)
            self.dataset_id: int = ds.id  # type: ignore[assignment]
            self.dataset_name, self.root = ds.name, ds.root
            self.runs: RunChoice = pick_runs(conn, self.dataset_id, suggestion_run, classifier_run)
        self._run_names = (suggestion_run, classifier_run)
        self.display = DisplayCache(cache_dir / "display")
        self._shown: dict[str, Shown] = {}
        self._shown_lock = threading.Lock()
        self._users: dict[str, tuple[int, Role]] = {}
        self._prefetch = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self._cards: OrderedDict[int, Card] = OrderedDict()  # recent cards: their labels and suggestions
        self._cards_lock = threading.Lock()
        # SQLite has one writer at a time; queueing writers here is cheaper than SQLite's sleeping busy handler
        self._write_lock: threading.Lock | nullcontext[None] = (
            threading.Lock() if engine.dialect.name == "sqlite" else nullcontext()
        )
        self.refresh()

    # -- users ---------------------------------------------------------------------------------------------------

    def login(self, name: str, password: str) -> bool:
        """True when `name` exists and `password` matches its stored hash."""
        with self.engine.connect() as conn:
            stored = conn.execute(select(User.password_hash).where(User.name == name)).scalar()
        return verify_password(password, stored)

    def user(self, name: str | None) -> tuple[int, Role]:
        """(id, role) of a logged-in user; cached, users are never deleted or renamed."""
        if not name:
            raise ConflictError("not logged in")
        if name not in self._users:
            with self.engine.connect() as conn:
                row = conn.execute(select(User.id, User.role).where(User.name == name)).first()
            if row is None:
                raise NotFoundError(f"unknown user {name!r}")
            self._users[name] = (row.id, Role(row.role))
        return self._users[name]

    def require_lead(self, name: str | None) -> int:
        user_id, role = self.user(name)
        if role is not Role.lead:
            raise ConflictError(f"user {name!r} is an annotator; this action is for leads")
        return user_id

    # -- queue ---------------------------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Rebuild the queue from the database (after imports or suggestion runs, or on start). Runs picked by
        default (the newest) are picked again; runs named at start stay."""
        if hasattr(self, "queue"):
            with self.engine.connect() as conn:
                self.runs = pick_runs(conn, self.dataset_id, self._run_names[0], self._run_names[1])
        self.queue = ReviewQueue(self._evidence(), overlap=self.overlap, seed=self.seed)
        self.examples = self._examples()
        with self._cards_lock:
            self._cards.clear()
        forget_resolved_paths()

    def next_card(self, user: str, flt: QueueFilter = QueueFilter()) -> tuple[Card | None, str]:
        """The next card for `user` and its token; (None, "") when nothing is left under `flt`."""
        user_id, _ = self.user(user)
        image_id = self.queue.next_image(user_id, flt)
        if image_id is None:
            return None, ""
        card, token = self.open_card(user, image_id)
        self._prefetch_next(user_id, flt)
        return card, token

    def open_card(self, user: str, image_id: int, *, hold: bool = False) -> tuple[Card, str]:
        """The card of one image as `user` sees it, with a fresh token for the decision on it."""
        user_id, _ = self.user(user)
        with self._cards_lock:
            cached = self._cards.get(image_id)
        with self.engine.connect() as conn:
            card = load_card(conn, image_id, self.runs, user, cached)
        with self._cards_lock:
            self._cards[image_id] = card
            self._cards.move_to_end(image_id)
            while len(self._cards) > CARD_CACHE_SIZE:
                self._cards.popitem(last=False)
        if hold:
            self.queue.hold(image_id, user_id)
        used = card.suggestion_used
        token = secrets.token_hex(12)
        with self._shown_lock:
            self._shown[token] = Shown(
                user_id,
                image_id,
                time.monotonic(),
                used.prediction_id if used else None,
                card.suggested_class,
                card.original,
            )
        return card, token

    def stored_image(self, image_id: int) -> StoredImage:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(Image.id, Image.path, Image.sha256).where(
                    Image.id == image_id, Image.dataset_id == self.dataset_id
                )
            ).first()
        if row is None:
            raise NotFoundError(f"image id {image_id} is not in dataset {self.dataset_name!r}")
        return StoredImage(row.id, self.root, row.path, row.sha256)

    def decided_by(self, user: str) -> int:
        return self.queue.decided_by(self.user(user)[0])

    def disputed_images(self, limit: int = 500) -> list[tuple[int, str, tuple[int, ...], int]]:
        """(image id, path, original classes, decisions) of disputed images, in priority order."""
        ids = self.queue.disputed()[:limit]
        if not ids:
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(select(Image.id, Image.path).where(Image.id.in_(ids))).all()  # type: ignore[attr-defined]
        paths: dict[int, str] = {r.id: r.path for r in rows}
        out: list[tuple[int, str, tuple[int, ...], int]] = []
        for i in ids:
            e = self.queue.evidence[i]
            out.append((i, paths.get(i, ""), () if e.original is None else (e.original,), len(e.voters)))
        return out

    def skip(self, user: str, image_id: int) -> None:
        self.queue.skip(image_id, self.user(user)[0])

    # -- decisions -----------------------------------------------------------------------------------------------

    def decide(
        self,
        user: str,
        token: str,
        image_id: int,
        action: str,
        *,
        classes: Iterable[int] = (),
        flags: Iterable[str] = (),
        note: str = "",
        adjudicate: bool = False,
    ) -> Saved:
        """Store `user`'s decision on `image_id`. `action` is one of ACTIONS; "labels" takes `classes`.

        A token seen before returns the first decision stored with it and stores nothing.
        """
        user_id, _ = self.user(user)
        if adjudicate:
            self.require_lead(user)
        shown = self._shown_for(token, user_id, image_id)
        verdict, chosen = self._resolve_action(action, list(classes), shown)
        if len(note) > MAX_NOTE:
            raise InputError(f"the note has {len(note)} characters; at most {MAX_NOTE} are kept")
        seconds = round(time.monotonic() - shown.at, 3) if shown.at else None
        with self._write_lock:
            annotation_id, created = store_annotation(
                self.engine,
                image_id=image_id,
                user=user,
                verdict=verdict,
                classes=chosen,
                flags=list(flags),
                note=note.strip(),
                seconds_on_item=seconds,
                suggestion_id=shown.suggestion_id,
                suggestion_action=suggestion_action(chosen, shown.suggested_class),
                adjudicate=adjudicate,
                client_token=token,
                n_classes=len(self.vocab),
            )
        if created:
            self.queue.record(image_id, user_id, (verdict, frozenset(chosen)), adjudication=adjudicate)
        return Saved(annotation_id, image_id, not created)

    def undo(self, user: str) -> int | None:
        """Undo `user`'s most recent standing decision in this dataset; returns its image id (None: nothing)."""
        user_id, _ = self.user(user)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    Annotation.id,
                    Annotation.image_id,
                    Annotation.verdict,
                    Annotation.retracts_id,
                    Annotation.is_adjudication,
                )
                .join(Image, Image.id == Annotation.image_id)
                .where(Annotation.user_id == user_id, Image.dataset_id == self.dataset_id)
                .order_by(Annotation.id.desc())  # type: ignore[attr-defined]
                .limit(200)
            ).all()
        undone = {r.retracts_id for r in rows if r.verdict == Verdict.retract}
        target = next((r for r in rows if r.verdict != Verdict.retract and r.id not in undone), None)
        if target is None:
            return None
        with self._write_lock:
            retract_annotation(self.engine, target.id, user=user)
        self.queue.record(target.image_id, user_id, None, adjudication=bool(target.is_adjudication))
        self._restore_previous(target.image_id, user_id)
        return int(target.image_id)

    # -- internals -----------------------------------------------------------------------------------------------

    def _shown_for(self, token: str, user_id: int, image_id: int) -> Shown:
        if not token or len(token) > 64:
            raise InputError("a decision needs the token of the card it answers; reload the card")
        with self._shown_lock:
            shown = self._shown.get(token)
        if shown is None:  # served before a restart: still a valid decision, without time on item
            with self.engine.connect() as conn:
                if conn.execute(select(Image.id).where(Image.id == image_id)).first() is None:
                    raise NotFoundError(f"image id {image_id} does not exist")
                original = conn.execute(
                    select(Label.classes)
                    .join(LabelSource, LabelSource.id == Label.source_id)
                    .where(Label.image_id == image_id, LabelSource.kind == SourceKind.original)
                ).scalar()
            return Shown(user_id, image_id, 0.0, None, None, tuple(original or ()))
        if shown.user_id != user_id or shown.image_id != image_id:
            raise ConflictError(f"token was issued for another card than image {image_id}; reload the card")
        return shown

    def _resolve_action(self, action: str, classes: list[int], shown: Shown) -> tuple[Verdict, list[int]]:
        if action not in ACTIONS:
            raise InputError(f"unknown action {action!r}; known: {', '.join(ACTIONS)}")
        if action == "none_fit":
            return Verdict.none_fit, []
        if action == "unclear":
            return Verdict.unclear, []
        if action == "labels":
            if not classes:
                raise InputError("pick at least one class, or use 'no class fits' / 'unclear'")
            return Verdict.labels, classes
        picked = {
            "original": list(shown.original),
            "suggestion": [shown.suggested_class] if shown.suggested_class is not None else [],
            "both": list(
                dict.fromkeys(
                    [*shown.original, *([shown.suggested_class] if shown.suggested_class is not None else [])]
                )
            ),
        }[action]
        if not picked:
            what = "an original label" if action == "original" else "a suggestion"
            raise InputError(f"image {shown.image_id} has no {what}; pick classes instead")
        return Verdict.labels, picked

    def _restore_previous(self, image_id: int, user_id: int) -> None:
        """After an undo the user's earlier decision on the image (if any) stands again: tell the queue."""
        with self.engine.connect() as conn:
            standing = current_decisions(conn, self.dataset_id, image_ids=[image_id]).get(image_id, [])
        for d in standing:
            if d.user_id == user_id:
                self.queue.record(image_id, user_id, d.key, adjudication=d.is_adjudication)

    def _prefetch_next(self, user_id: int, flt: QueueFilter) -> None:
        """Render the display image of the card likely to come next, off the request path."""

        def warm() -> None:
            try:
                image_id = self.queue.peek(user_id, flt)
                if image_id is not None:
                    with self.engine.connect() as conn:
                        row = conn.execute(
                            select(Image.id, Image.path, Image.sha256).where(Image.id == image_id)
                        ).first()
                    if row is not None:
                        self.display.path_for(StoredImage(row.id, self.root, row.path, row.sha256))
            except Exception:  # a bad file shows its error when its card is opened; nothing to do here
                pass

        self._prefetch.submit(warm)

    def _evidence(self) -> list[Evidence]:
        with self.engine.connect() as conn:
            return load_evidence(conn, self.dataset_id, self.runs)

    def _examples(self) -> dict[int, StoredImage]:
        """A reference image per original class: the first readable image (by id) labelled with it."""
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(Label.classes, *IMAGE_COLUMNS)
                .join(LabelSource, LabelSource.id == Label.source_id)
                .join(Image, Image.id == Label.image_id)  # type: ignore[arg-type]
                .where(LabelSource.dataset_id == self.dataset_id, LabelSource.name == IMGT)
                .where(Image.status == ImageStatus.ok)
                .order_by(Label.image_id)
            )
            out: dict[int, StoredImage] = {}
            for classes, *image in rows:
                if classes and classes[0] not in out:
                    out[classes[0]] = StoredImage(image[0], self.root, *image[1:])
        return out


def suggestion_action(chosen: list[int], suggested: int | None) -> SuggestionAction:
    """How a decision treated the suggestion: taken alone, kept among others, or left out."""
    if suggested is None:
        return SuggestionAction.none
    if chosen == [suggested]:
        return SuggestionAction.accepted
    return SuggestionAction.edited if suggested in chosen else SuggestionAction.rejected
