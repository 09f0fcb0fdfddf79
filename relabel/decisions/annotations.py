"""Users, and annotators' decisions written to an append-only event log.

A decision is never updated: a newer decision by the same annotator supersedes the older one, an undo is a new
`retract` event, and `client_token` makes a resent request harmless. Which decisions stand and what they settle
is decided in `relabel.decisions.rules`; `relabel.decisions.log` reads them back.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from collections.abc import Callable, Iterable
from typing import Any

from sqlalchemy import bindparam, func, insert, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col

from db.engine import session_scope
from db.enums import Role, SuggestionAction, Verdict
from db.models import Annotation, Dataset, Image, Prediction, User, pk, stored_id, utcnow
from relabel.common.errors import ConflictError, InputError, NotFoundError, StaleCardError
from relabel.common.storable import one_line_name, storable_text
from relabel.common.workspace import dataset_vocabulary
from relabel.decisions.card_flags import check_flags

MAX_NOTE = 2000  # characters of a decision's note
MIN_PASSWORD_LENGTH = 8  # for new passwords (`relabel users add`); existing hashes are not checked
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}
_DUMMY_SALT = os.urandom(16)  # hashed against when there is no stored hash: the same work, a certain "no"


def check_new_password(password: str) -> str:
    """`password` when it may be given to a new user; raises InputError naming the rule otherwise."""
    storable_text(password, "the password", max_length=1024)
    if len(password.strip()) < MIN_PASSWORD_LENGTH:
        raise InputError(
            f"password too short: {len(password.strip())} characters besides spaces; use at least "
            f"{MIN_PASSWORD_LENGTH} (a passphrase of a few words is easiest to remember)"
        )
    return password


def hash_password(password: str) -> str:
    salt = os.urandom(16)
    return f"scrypt${salt.hex()}${_derive(password, salt).hex()}"


def verify_password(password: str, stored: str | None) -> bool:
    """True when `password` matches the stored hash. With no usable stored hash (an unknown user, a user without
    a password) it does the same scrypt work before saying False, so the time taken does not tell them apart."""
    salt, digest = _parse_hash(stored)
    candidate = _derive(password, salt or _DUMMY_SALT)
    return salt is not None and hmac.compare_digest(candidate, digest)


def _parse_hash(stored: str | None) -> tuple[bytes | None, bytes]:
    """(salt, digest) of a stored "scrypt$salt$digest" hash; (None, b"") when there is none or it is malformed."""
    parts = (stored or "").split("$")
    if len(parts) != 3 or parts[0] != "scrypt":
        return None, b""
    try:
        return bytes.fromhex(parts[1]), bytes.fromhex(parts[2])
    except ValueError:
        return None, b""


def _derive(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, **_SCRYPT)


def add_user(engine: Engine, name: str, role: Role, password: str | None = None) -> User:
    """Create a user; the password is stored as a salted scrypt hash. A name is one printable line of at most 64
    characters without spaces around it (the sign-in form strips them), and differs from every other user's name
    in more than letter case."""
    one_line_name(name, "user name", max_length=64)
    with session_scope(engine) as s:
        taken = [n for n in s.scalars(select(col(User.name))) if n.casefold() == name.casefold()]
        if taken:
            raise ConflictError(
                f"user {taken[0]!r} already exists"
                + ("" if taken[0] == name else f"; {name!r} differs only in letter case")
            )
        user = User(name=name, role=role, password_hash=hash_password(password) if password else None)
        s.add(user)
    return user


def get_user(session: Session, name: str) -> User:
    row = session.scalars(select(User).where(col(User.name) == name)).first()
    if row is None:
        raise NotFoundError(f"unknown user {name!r}; add one with `relabel users add NAME --role annotator`")
    return row


def disabled_user(name: str) -> ConflictError:
    """The refusal of a decision or undo by a disabled user (one still signed in when a lead disabled them)."""
    return ConflictError(f"user {name!r} is disabled; a lead can enable them with `relabel users enable {name}`")


def _by_token(session: Session, client_token: str | None) -> int | None:
    """The decision already stored under `client_token`, if any: a resent request returns it."""
    if not client_token:
        return None
    return session.scalars(select(col(Annotation.id)).where(col(Annotation.client_token) == client_token)).first()


# the lookups made for every saved decision, built once
_TOKEN = select(col(Annotation.id)).where(col(Annotation.client_token) == bindparam("token"))
_USER = select(col(User.id), col(User.role), col(User.active)).where(col(User.name) == bindparam("name"))
_IMAGE_DATASET = select(col(Image.dataset_id)).where(col(Image.id) == bindparam("image_id"))
_SUGGESTION_IMAGE = select(col(Prediction.image_id)).where(col(Prediction.id) == bindparam("suggestion_id"))
_INSERT = insert(Annotation).returning(pk(Annotation.id))  # values as parameters: compiled once, not per decision
_LAST_EVENT = select(func.max(col(Annotation.id))).where(
    col(Annotation.image_id) == bindparam("image_id"), col(Annotation.user_id) == bindparam("user_id")
)


def last_event_id(conn: Connection, image_id: int, user_id: int) -> int | None:
    """The id of `user_id`'s newest decision or undo on `image_id` (None: they never acted on it)."""
    found = conn.execute(_LAST_EVENT, {"image_id": image_id, "user_id": user_id}).scalar()
    return None if found is None else int(found)


def record_annotation(engine: Engine, **decision: Any) -> int:
    """Append one decision and return its id; a resent `client_token` returns the first id and stores nothing.

    Takes `store_annotation`'s keywords. `n_classes` (the vocabulary size, when the caller knows it) saves reading
    the vocabulary to check `classes`.
    """
    return store_annotation(engine, **decision)[0]


def insert_decision(
    conn: Connection,
    *,
    image_id: int,
    user: str,
    verdict: Verdict,
    classes: Iterable[int] = (),
    flags: Iterable[str] = (),
    note: str = "",
    seconds_on_item: float | None = None,
    suggestion_id: int | None = None,
    suggestion_action: SuggestionAction = SuggestionAction.none,
    adjudicate: bool = False,
    client_token: str | None = None,
    n_classes: int | None = None,
    stale_check: Callable[[int | None], None] | None = None,
    dataset_id: int | None = None,
) -> tuple[int, bool]:
    """Check and append one decision inside the caller's transaction `conn`: the studio stores a decision in a
    transaction of its own (`store_annotation`), an importer a whole file in one (`relabel.interop.decisions`).
    Returns (id, True), or (the first id, False) when `client_token` had been used; raises a RelabelError saying
    why a decision is refused, writing nothing.

    `dataset_id`, when given, is the dataset the caller serves: an image of another dataset is refused (its classes
    would be checked against the wrong vocabulary); `n_classes` is trusted only together with it. `stale_check`,
    when given, is called inside the transaction with the id of the user's newest event on the image (None: none)
    and raises to refuse the decision (a card answered since in another tab).

    Runs on SQLAlchemy Core (three keyed lookups and one INSERT ... RETURNING): it is on the path of every decision
    an annotator saves.
    """
    classes, flags = list(dict.fromkeys(classes)), list(dict.fromkeys(flags))
    client_token = client_token or None  # an empty token is no token: it must not collide with another
    if verdict is Verdict.labels and not classes:
        raise InputError("a 'labels' decision needs at least one class")
    if verdict in (Verdict.none_fit, Verdict.unclear, Verdict.retract) and classes:
        raise InputError(f"a {verdict.value!r} decision carries no classes")
    check_flags(flags)
    storable_text(note, "the note", max_length=MAX_NOTE)
    prior = _token_id(conn, client_token)
    if prior is not None:
        return prior, False
    u = conn.execute(_USER, {"name": user}).first()
    if u is None:
        raise NotFoundError(f"unknown user {user!r}; add one with `relabel users add NAME --role annotator`")
    if not u.active:
        raise disabled_user(user)
    if adjudicate and u.role is not Role.lead:
        raise ConflictError(f"user {user!r} is an annotator; only leads adjudicate")
    if stale_check is not None:
        stale_check(last_event_id(conn, image_id, u.id))
    if suggestion_id is not None:
        shown_for = conn.execute(_SUGGESTION_IMAGE, {"suggestion_id": suggestion_id}).scalar()
        if shown_for != image_id:  # the run was re-imported since the card was served (ids may be reused)
            raise StaleCardError(
                f"suggestion #{suggestion_id} is not a prediction for image {image_id} (its run was "
                "re-imported since the card was shown); reload the card and decide again"
            )
    image_dataset = conn.execute(_IMAGE_DATASET, {"image_id": image_id}).scalar()
    if image_dataset is None or (dataset_id is not None and image_dataset != dataset_id):
        raise NotFoundError(f"image id {image_id} does not exist in this dataset")
    if n_classes is None or dataset_id is None:
        with Session(bind=conn) as s:
            n_classes = len(dataset_vocabulary(s, s.get(Dataset, image_dataset)))  # type: ignore[arg-type]
    out_of_range = [c for c in classes if not 0 <= c < n_classes]
    if out_of_range:
        raise InputError(f"classes {out_of_range} are outside 0..{n_classes - 1}")
    row = {
        "image_id": image_id,
        "user_id": u.id,
        "verdict": verdict,
        "classes": classes,
        "flags": flags,
        "note": note,
        "seconds_on_item": seconds_on_item,
        "suggestion_id": suggestion_id,
        "suggestion_action": suggestion_action,
        "is_adjudication": adjudicate,
        "client_token": client_token,
        "created_at": utcnow(),
    }
    new_id = conn.execute(_INSERT, row).scalar_one()
    return int(new_id), True


def store_annotation(engine: Engine, **decision: Any) -> tuple[int, bool]:
    """`record_annotation`, also saying whether this call stored the row (False: its token had been used):
    `insert_decision` (whose keywords it takes) in a transaction of its own."""
    client_token = decision.get("client_token") or None
    image_id = decision.get("image_id")
    try:
        with engine.begin() as conn:
            return insert_decision(conn, **decision)
    except IntegrityError as exc:  # the same token raced in from another request: that request's row stands
        with engine.connect() as conn:
            existing = _token_id(conn, client_token)
        if existing is None:  # not a token race: a reference that does not exist (a suggestion id)
            reason = str(exc.orig).splitlines()[0] if exc.orig else "integrity error"
            raise InputError(f"decision on image {image_id} refused by the database: {reason}") from exc
        return existing, False


def _token_id(conn: Connection, client_token: str | None) -> int | None:
    if not client_token:
        return None
    return conn.execute(_TOKEN, {"token": client_token}).scalar()


def retract_annotation(engine: Engine, annotation_id: int, *, user: str, client_token: str | None = None) -> int:
    """Undo one of `user`'s own decisions by appending a `retract` event; returns the new event's id."""
    with session_scope(engine) as s:
        prior = _by_token(s, client_token)
        if prior is not None:
            return prior
        u = get_user(s, user)
        if not u.active:
            raise disabled_user(user)
        target = s.get(Annotation, annotation_id)
        if target is None or target.verdict is Verdict.retract:
            raise NotFoundError(f"decision {annotation_id} does not exist or is itself an undo")
        if target.user_id != u.id:
            raise ConflictError(f"decision {annotation_id} belongs to another user; {user!r} cannot undo it")
        row = Annotation(
            image_id=target.image_id,
            user_id=u.id,
            verdict=Verdict.retract,
            classes=[],
            flags=[],
            is_adjudication=target.is_adjudication,
            retracts_id=annotation_id,
            client_token=client_token,
        )
        s.add(row)
        s.flush()
        return stored_id(row)
