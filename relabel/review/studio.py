"""The studio service: what the review UI calls. Plain methods, no web framework, so tests call them directly.

Every write names its user from the caller's authenticated session (the UI passes the server-side login, never a
form field). Each card view gets a one-time token; a decision carries it, so a resent request stores nothing twice,
and the server measures the time on the item from when it served the card.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext, suppress
from dataclasses import dataclass, replace
from operator import attrgetter
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from db.enums import Role, SuggestionAction, Verdict
from db.models import Annotation, Image, User, stored_id
from relabel.common.errors import ConflictError, InputError, NotFoundError, StaleCardError
from relabel.common.storable import storable_text
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import dataset_vocabulary, get_dataset
from relabel.decisions.annotations import retract_annotation, store_annotation, verify_password
from relabel.decisions.log import current_decisions
from relabel.decisions.rules import Decision, decision_key, standing
from relabel.review.benefit import ReviewBenefit, class_names, load_benefit
from relabel.review.cards import IMAGE_COLUMNS, Card, RunChoice, load_card, load_cards, pick_runs
from relabel.review.display import DisplayCache, StoredImage
from relabel.review.evidence import load_evidence
from relabel.review.examples import load_examples
from relabel.review.leases import DbLeases
from relabel.review.queue import QueueFilter, ReviewQueue
from relabel.review.ranking import by_benefit
from relabel.review.tokens import CardTokens, DbCardTokens, Shown

CARD_CACHE_SIZE = 4096  # cards kept in memory; with N-way overlap each image is served N times
IMAGE_BATCH = 64  # image rows read at once when one is asked for: it and the next ones in queue order
ACTIONS = ("original", "suggestion", "both", "labels", "none_fit", "unclear")
MAX_NOTE = 2000


@dataclass(frozen=True)
class Answer:
    """One annotator's standing answer on a disputed image."""

    annotation_id: int
    user: str
    verdict: Verdict
    classes: tuple[int, ...]


@dataclass(frozen=True)
class Disputed:
    """A disputed image: its path, original classes and every annotator's answer, oldest first."""

    image_id: int
    path: str
    original: tuple[int, ...]
    answers: tuple[Answer, ...]


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
            self.dataset_id: int = stored_id(ds)
            self.dataset_name, self.root = ds.name, ds.root
            self.runs: RunChoice = pick_runs(conn, self.dataset_id, suggestion_run, classifier_run)
        self._run_names = (suggestion_run, classifier_run)
        self.display = DisplayCache(cache_dir / "display")
        self._user_locks: dict[int, threading.Lock] = {}
        self._users: dict[str, tuple[int, Role]] = {}
        self._prefetch = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prefetch")
        self._cards: OrderedDict[int, Card] = OrderedDict()  # recent cards: their labels and suggestions
        self._images: OrderedDict[int, StoredImage] = OrderedDict()  # image rows, as the display cache wants them
        self._history_at: dict[int, int] = {}  # image -> the queue's version of it when its card's history was read
        self._cards_lock = threading.Lock()
        # SQLite has one writer at a time; queueing writers here is cheaper than SQLite's sleeping busy handler
        self._write_lock: threading.Lock | nullcontext[None] = (
            threading.Lock() if engine.dialect.name == "sqlite" else nullcontext()
        )
        self.tokens: CardTokens | DbCardTokens = DbCardTokens(engine, write_lock=self._write_lock)
        self.refresh()

    # -- users ---------------------------------------------------------------------------------------------------

    def login(self, name: str, password: str) -> bool:
        """True when `name` exists, is not disabled and `password` matches its stored hash. An unknown or disabled
        name costs the same scrypt work (`verify_password`) and gets the same False, so neither the answer nor its
        timing tells which names exist. Blocks for the hash (~50 ms): the web studio calls it off its event loop,
        throttled (`ui.login`). A sign-in reads the user's role afresh (`relabel users role`)."""
        query = select(col(User.password_hash)).where(col(User.name) == name, col(User.active))
        with self.engine.connect() as conn:
            stored = conn.execute(query).scalar()
        ok = verify_password(password, stored)  # after the connection went back to the pool
        if ok:
            self._users.pop(name, None)
        return ok

    def user(self, name: str | None) -> tuple[int, Role]:
        """(id, role) of a logged-in user; cached until their next sign-in (users are never deleted or renamed)."""
        if not name:
            raise ConflictError("not logged in")
        if name not in self._users:
            with self.engine.connect() as conn:
                row = conn.execute(select(col(User.id), col(User.role)).where(col(User.name) == name)).first()
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
        # leases and decisions shared with every studio process on this database; made before the evidence is read,
        # so a decision stored meanwhile is taken again rather than missed
        shared = DbLeases(self.engine, self.dataset_id, write_lock=self._write_lock)
        with self.engine.connect() as conn:
            self.benefit: ReviewBenefit | None = load_benefit(conn, self.dataset_id)
            evidence = load_evidence(conn, self.dataset_id, self.runs, self.benefit)
        self.queue = ReviewQueue(evidence, overlap=self.overlap, seed=self.seed, shared=shared)
        with self.engine.connect() as conn:
            self.examples = load_examples(conn, self.dataset_id, self.root)
        with self._cards_lock:
            self._cards.clear()
            self._images.clear()
            self._history_at.clear()

    def next_card(self, user: str, flt: QueueFilter = QueueFilter()) -> tuple[Card | None, str]:
        """The next card for `user` and its token; (None, "") when nothing is left under `flt`."""
        user_id, _ = self.user(user)
        image_id = self.queue.next_image(user_id, flt)
        if image_id is None:
            return None, ""
        card, token = self.open_card(user, image_id)
        self._prefetch_next(user_id, flt)
        return card, token

    def may_open(self, user: str, image_id: int) -> bool:
        """Whether `user` may open `image_id` directly (a shared link, Back): a lead any image of the dataset; an
        annotator an image they decided, hold, or that the queue would serve them now."""
        user_id, role = self.user(user)
        if role is Role.lead:
            return image_id in self.queue.evidence or self._in_dataset(image_id)
        return self.queue.may_serve(image_id, user_id)

    def open_card(self, user: str, image_id: int, *, hold: bool = False) -> tuple[Card, str]:
        """The card of one image as `user` sees it, with a fresh token for the decision on it."""
        user_id, _ = self.user(user)
        version = self.queue.version(image_id)  # read before the history: a change meanwhile makes it stale
        with self._cards_lock:
            cached = self._cards.get(image_id)
            current = version is not None and self._history_at.get(image_id) == version
        if cached is not None and current:  # no decision on the image since its history was read
            card = replace(cached, viewer=user)
        else:
            with self.engine.connect() as conn:
                if cached is None:  # this card and the next ones in queue order, read together
                    cached = self._load_cards(conn, [image_id, *self.queue.following(image_id, IMAGE_BATCH - 1)])
                card = load_card(conn, image_id, self.runs, user, cached)
        if card.dataset != self.dataset_name:
            raise NotFoundError(f"image id {image_id} is not in dataset {self.dataset_name!r}")
        with self._cards_lock:
            self._keep_card(card)
            if version is not None:
                self._history_at[image_id] = version
        if hold:
            self.queue.hold(image_id, user_id)
        used = card.suggestion_used
        token = self.tokens.issue(
            user_id,
            image_id,
            suggestion_id=used.prediction_id if used else None,
            suggested_class=card.suggested_class,
            original=card.original,
            last_event=max((e.annotation_id for e in card.history if e.user == user), default=None),
        )
        return card, token

    def review_reason(self, image_id: int) -> str | None:
        """Why the queue ranks `image_id` where it does, in one line ("P(tabby cat) = 0.55; changes 3 runs'
        top-1"), when it ranks it by its expected benefit (`relabel.review.queue`); None otherwise."""
        e = self.queue.evidence.get(image_id)
        if self.benefit is None or e is None or not by_benefit(e):
            return None
        return self.benefit.reason(image_id, class_names(self.vocab))

    def stored_image(self, image_id: int) -> StoredImage:
        """The image's row as the display cache wants it. Rows do not change while the studio runs (`refresh`
        forgets them): one read fetches the image and the next IMAGE_BATCH - 1 in queue order, the cards likely to
        be asked for next."""
        with self._cards_lock:
            found = self._images.get(image_id)
        if found is not None:
            return found
        wanted = [image_id, *self.queue.following(image_id, IMAGE_BATCH - 1)]
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(*IMAGE_COLUMNS).where(col(Image.id).in_(wanted), col(Image.dataset_id) == self.dataset_id)
            ).all()
        with self._cards_lock:
            for row in rows:
                self._keep_image(StoredImage(row[0], self.root, *row[1:]))
            found = self._images.get(image_id)
        if found is None:
            raise NotFoundError(f"image id {image_id} is not in dataset {self.dataset_name!r}")
        return found

    def upcoming_display(self, user: str, flt: QueueFilter = QueueFilter()) -> Path | None:
        """The display file of the card likely to come after the one `user` holds, if it is ready (the page
        fetches it ahead, so the next card's image shows at once); None when there is none or it is not ready."""
        image_id = self.queue.peek(self.user(user)[0], flt)
        if image_id is None:
            return None
        try:
            return self.display.ready_path(self.stored_image(image_id))
        except Exception:  # a bad file shows its error when its card is opened; nothing to fetch ahead
            return None

    def standing_answer(self, image_id: int, annotation_id: int) -> Decision:
        """An annotator's standing (not undone, not superseded) answer on `image_id`, by its id."""
        with self.engine.connect() as conn:
            standing = current_decisions(conn, self.dataset_id, image_ids=[image_id]).get(image_id, [])
        found = next((d for d in standing if d.annotation_id == annotation_id and not d.is_adjudication), None)
        if found is None:
            raise NotFoundError(f"decision #{annotation_id} is not a standing answer on image {image_id}")
        return found

    def decided_by(self, user: str) -> int:
        return self.queue.decided_by(self.user(user)[0])

    def disputed_images(self, limit: int = 500) -> list[Disputed]:
        """Disputed images in priority order, each with every annotator's standing answer."""
        ids = self.queue.disputed()[:limit]
        if not ids:
            return []
        with self.engine.connect() as conn:
            rows = conn.execute(select(col(Image.id), col(Image.path)).where(col(Image.id).in_(ids))).all()
            standing = current_decisions(conn, self.dataset_id, image_ids=ids)
            names: dict[int, str] = {r.id: r.name for r in conn.execute(select(col(User.id), col(User.name)))}
        paths: dict[int, str] = {r.id: r.path for r in rows}
        out: list[Disputed] = []
        for i in ids:
            e = self.queue.evidence[i]
            answers = tuple(
                Answer(d.annotation_id, names.get(d.user_id, f"user {d.user_id}"), d.verdict, d.classes)
                for d in sorted(standing.get(i, []), key=lambda d: d.annotation_id)
                if not d.is_adjudication
            )
            out.append(Disputed(i, paths.get(i, ""), e.original_labels, answers))
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

        A token seen before returns the first decision stored with it and stores nothing, in any process and also
        after a restart (the decision stored with it names it, even once the token itself was dropped): a request
        resent because its answer was lost is answered "already saved", not "decide again".
        """
        user_id, _ = self.user(user)
        if adjudicate:
            self.require_lead(user)
        try:
            shown = self.tokens.check(token, user_id, image_id)
        except StaleCardError:
            stored = self._stored_with(token, user_id, image_id)
            if stored is None:
                raise
            return Saved(stored, image_id, duplicate=True)
        if not adjudicate and not self.queue.may_serve(image_id, user_id):
            raise StaleCardError(
                f"image {image_id} went to other annotators after you left it and has the opinions it needs; "
                "your answer was not saved"
            )
        verdict, chosen = self._resolve_action(action, list(classes), shown)
        storable_text(note, "the note", max_length=MAX_NOTE)
        seconds = round(max(0.0, time.time() - shown.at), 3)  # wall clock: served maybe by another process

        def refuse_if_stale(latest: int | None) -> None:
            if latest != shown.last_event:
                raise StaleCardError(
                    f"you answered image {image_id} again since this card was shown (another tab or window); "
                    "the card has been reloaded with your newest answer"
                )

        with self._user_lock(user_id), self._write_lock:
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
                stale_check=refuse_if_stale,
                dataset_id=self.dataset_id,
            )
        if created:
            key = decision_key(verdict, chosen)
            self.queue.record(image_id, user_id, key, adjudication=adjudicate, annotation_id=annotation_id)
        return Saved(annotation_id, image_id, not created)

    def undo(self, user: str) -> int | None:
        """Undo `user`'s most recent standing decision in this dataset; returns its image id (None: nothing)."""
        user_id, _ = self.user(user)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(
                    col(Annotation.id),
                    col(Annotation.image_id),
                    col(Annotation.verdict),
                    col(Annotation.retracts_id),
                    col(Annotation.is_adjudication),
                )
                .join(Image, col(Image.id) == col(Annotation.image_id))
                .where(col(Annotation.user_id) == user_id, col(Image.dataset_id) == self.dataset_id)
                .order_by(col(Annotation.id).desc())
                .limit(200)
            ).all()
        # the newest of the user's standing decisions; a newer event supersedes or undoes it, so the window holds
        # everything that decides whether it stands
        stand = standing(rows[::-1], attrgetter("image_id", "is_adjudication")).values()
        target = max(stand, key=attrgetter("id"), default=None)
        if target is None:
            return None
        with self._write_lock:
            retract_annotation(self.engine, target.id, user=user)
        with self.engine.connect() as conn:  # the decision before it, if any, stands again
            now = current_decisions(conn, self.dataset_id, image_ids=[target.image_id]).get(target.image_id, [])
        self.queue.update(target.image_id, user_id, now)
        return int(target.image_id)

    # -- internals -----------------------------------------------------------------------------------------------

    def _user_lock(self, user_id: int) -> threading.Lock:
        """One lock per user: two tabs of one user save one after the other, so the stale check holds."""
        with self._cards_lock:
            return self._user_locks.setdefault(user_id, threading.Lock())

    def _stored_with(self, token: str, user_id: int, image_id: int) -> int | None:
        """The id of `user_id`'s decision on `image_id` stored with card token `token`, if any (only theirs on that
        image: a token never tells one user about another's decisions)."""
        with self.engine.connect() as conn:
            found = conn.execute(
                select(col(Annotation.id)).where(
                    col(Annotation.client_token) == token,
                    col(Annotation.user_id) == user_id,
                    col(Annotation.image_id) == image_id,
                )
            ).scalar()
        return None if found is None else int(found)

    def _in_dataset(self, image_id: int) -> bool:
        with self.engine.connect() as conn:
            found = conn.execute(
                select(col(Image.id)).where(col(Image.id) == image_id, col(Image.dataset_id) == self.dataset_id)
            ).first()
        return found is not None

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

    def _load_cards(self, conn: Connection, image_ids: list[int]) -> Card | None:
        """Read and keep the cards of `image_ids` not kept yet (without history); the first one's, if it exists."""
        with self._cards_lock:
            missing = [i for i in image_ids if i not in self._cards]
        cards = load_cards(conn, missing, self.runs, "") if missing else {}
        with self._cards_lock:
            for card in cards.values():
                if card.dataset == self.dataset_name:
                    self._keep_card(card)
            return cards.get(image_ids[0]) or self._cards.get(image_ids[0])

    def _keep_card(self, card: Card) -> None:
        """Remember a card and its image row (lock held), the oldest forgotten beyond CARD_CACHE_SIZE."""
        self._keep_image(card.image)
        self._cards[card.image_id] = card
        self._cards.move_to_end(card.image_id)
        while len(self._cards) > CARD_CACHE_SIZE:
            self._history_at.pop(self._cards.popitem(last=False)[0], None)

    def _keep_image(self, image: StoredImage) -> None:
        """Remember an image row (lock held), the oldest forgotten beyond CARD_CACHE_SIZE."""
        self._images[image.image_id] = image
        self._images.move_to_end(image.image_id)
        while len(self._images) > CARD_CACHE_SIZE:
            self._images.popitem(last=False)

    def _prefetch_next(self, user_id: int, flt: QueueFilter) -> None:
        """Prepare the display image of the card likely to come next, off the request path (the queue is asked
        here, in the request, so that the background thread reads nothing of the database)."""
        try:
            image_id = self.queue.peek(user_id, flt)
            if image_id is None:
                return
            image = self.stored_image(image_id)
        except NotFoundError:
            return

        def warm() -> None:
            with suppress(Exception):  # a bad file shows its error when its card is opened; nothing to do here
                self.display.path_for(image)

        self._prefetch.submit(warm)


def suggestion_action(chosen: list[int], suggested: int | None) -> SuggestionAction:
    """How a decision treated the suggestion: taken alone, kept among others, or left out."""
    if suggested is None:
        return SuggestionAction.none
    if chosen == [suggested]:
        return SuggestionAction.accepted
    return SuggestionAction.edited if suggested in chosen else SuggestionAction.rejected
