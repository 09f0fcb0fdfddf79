"""Images and classes a lead assigns to annotators, and what the review queue makes of them.

A lead assigns an image to a user (`relabel assign add --user alice --images ids.txt`, or the studio's Images tab),
or a class: then every image whose original (ImGT) labels hold that class is assigned to the user. An image
assigned, directly or through a class, to one or more users is **served only to them**, and it comes **first in
their queue** (in the queue's own order, before every unassigned image). An image nobody is assigned goes to every
annotator as before. Assigning an image to fewer users than the overlap therefore caps its opinions at that many.

The queue's rule is `AssignedImages.allows` (who may be served an image) and `AssignedImages.first_for` (a user's
assigned images in queue order). Leases still decide who holds an image (`relabel.review.leases`): an assignment
narrows the users an image may go to, and never lets more users than the overlap hold or decide it.

Assignments are rows of `db.models.Assignment`, shared by every studio process on the database: before serving,
each queue asks `DbAssignments.current`, which reads them again only when their (count, newest id) changed (ids are
never reused), so an assignment made by the command line or another process is honoured on the next card.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from sqlalchemy import Select, delete, func, or_, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from db.models import Assignment, Dataset, Image, User, VocabClass, pk
from relabel.common.errors import ConflictError, InputError, NotFoundError, brief, examples
from relabel.common.textfiles import read_lines
from relabel.common.vocabulary import Vocabulary

if TYPE_CHECKING:
    from relabel.review.image_evidence import Evidence

MAX_IMAGES = 100_000  # image names or ids in one assignment


class AssignmentRow(NamedTuple):
    """One assignment as the queue reads it: to `user_id`, of an image or of every image of a class (an index)."""

    user_id: int
    image_id: int | None
    class_index: int | None


@dataclass(frozen=True)
class AssignedImages:
    """Who each assigned image goes to, and each user's assigned images in queue order."""

    users: Mapping[int, frozenset[int]] = field(default_factory=dict)  # image -> its assignees
    first: Mapping[int, tuple[int, ...]] = field(default_factory=dict)  # user -> assigned images, queue order

    def allows(self, image_id: int, user_id: int) -> bool:
        """Whether the queue may serve `image_id` to `user_id`: nobody is assigned it, or they are."""
        users = self.users.get(image_id)
        return users is None or user_id in users

    def first_for(self, user_id: int) -> tuple[int, ...]:
        """The images assigned to `user_id`, in queue order: served before any other."""
        return self.first.get(user_id, ())


NO_ASSIGNMENTS = AssignedImages()


def assigned_images(
    rows: Iterable[AssignmentRow], originals: Mapping[int, Sequence[int]], order: Sequence[int]
) -> AssignedImages:
    """Resolve `rows` over the queue's images: `originals` maps each image to its original (ImGT) classes, `order`
    is the queue's order (images not in it are left out: unreadable, or of no interest to the queue)."""
    direct: dict[int, set[int]] = {}
    by_class: dict[int, set[int]] = {}
    for user_id, image_id, class_index in rows:
        if image_id is not None:
            direct.setdefault(image_id, set()).add(user_id)
        elif class_index is not None:
            by_class.setdefault(class_index, set()).add(user_id)
    users: dict[int, frozenset[int]] = {}
    first: dict[int, list[int]] = {}
    for image_id in order:
        found = set(direct.get(image_id, ()))
        for c in originals.get(image_id, ()):
            found |= by_class.get(c, set())
        if found:
            users[image_id] = frozenset(found)
            for u in found:
                first.setdefault(u, []).append(image_id)
    return AssignedImages(users, {u: tuple(ids) for u, ids in first.items()})


def candidates(first: Sequence[int], order: Sequence[int], start: int) -> Iterator[tuple[int | None, int]]:
    """The order in which the queue looks at images for a user: their assigned images `first` (position None),
    then the whole `order` once from position `start` round (position, image)."""
    for image_id in first:
        yield None, image_id
    n = len(order)
    for step in range(n):
        pos = (start + step) % n
        yield pos, order[pos]


class DbAssignments:
    """A dataset's assignments read from the database, read again only when they changed (the module docstring)."""

    def __init__(self, engine: Engine, dataset_id: int) -> None:
        self.engine, self.dataset_id = engine, dataset_id
        self._signature: tuple[int, int] | None = None
        self._order: Sequence[int] | None = None
        self._current = NO_ASSIGNMENTS

    def current(
        self, order: Sequence[int], evidence: Mapping[int, Evidence], *, signature: tuple[int, int] | None = None
    ) -> AssignedImages:
        """The assignments now, over the queue's `order` and `evidence` (for the images' original classes).
        `signature`: their (count, newest id) just read by the caller (`assignment_signature`); None: read here."""
        with self.engine.connect() as conn:
            if signature is None:
                row = conn.execute(assignment_signature(self.dataset_id)).one()
                signature = int(row[0] or 0), int(row[1] or 0)
            if signature == self._signature and order is self._order:
                return self._current
            rows = load_rows(conn, self.dataset_id) if signature[0] else []
        originals = {i: e.original_labels for i, e in evidence.items()}
        self._current = assigned_images(rows, originals, order) if rows else NO_ASSIGNMENTS
        self._signature, self._order = signature, order
        return self._current


def assignment_signature(dataset_id: int) -> Select[int, int]:
    """The count and the newest id of the dataset's assignments: they changed when these did (ids are never
    reused)."""
    return select(func.count(pk(Assignment.id)), func.max(pk(Assignment.id))).where(
        col(Assignment.dataset_id) == dataset_id
    )


def load_rows(conn: Connection, dataset_id: int) -> list[AssignmentRow]:
    """The dataset's assignments, each class named by its index in the dataset's vocabulary."""
    rows = conn.execute(
        select(col(Assignment.user_id), col(Assignment.image_id), col(Assignment.class_key)).where(
            col(Assignment.dataset_id) == dataset_id
        )
    ).all()
    keys = {k for _, _, k in rows if k is not None}
    index: dict[str, int] = {}
    if keys:
        vocabulary_id = select(col(Dataset.vocabulary_id)).where(col(Dataset.id) == dataset_id).scalar_subquery()
        for wnid, name, i in conn.execute(
            select(col(VocabClass.wnid), col(VocabClass.name), col(VocabClass.index)).where(
                col(VocabClass.vocabulary_id) == vocabulary_id,
                or_(col(VocabClass.wnid).in_(keys), col(VocabClass.name).in_(keys)),
            )
        ):
            index[wnid or name] = i
    return [
        AssignmentRow(u, image, index.get(k) if k is not None else None)
        for u, image, k in rows
        if image is not None or (k is not None and k in index)
    ]


# -- what a lead does: add, list, remove ----------------------------------------------------------------------------


def class_key(vocab: Vocabulary, index: int) -> str:
    """How an assignment stores class `index`: its wnid, or its display name when it has none."""
    c = vocab.classes[index]
    return c.wnid or c.name


@dataclass(frozen=True)
class Listed:
    """One assignment as `relabel assign list` and the studio show it."""

    user: str
    what: str  # "image" or "class"
    target: str  # the image's path, or the class as "name (wnid)"
    image_id: int | None
    created_at: datetime
    created_by: str


def user_id_of(conn: Connection, name: str) -> int:
    found = conn.execute(select(pk(User.id)).where(col(User.name) == name)).scalar()
    if found is None:
        raise NotFoundError(f"unknown user {brief(name, 70)}; add one with `relabel users add NAME --role annotator`")
    return int(found)


def read_image_tokens(path: Path) -> list[str]:
    """The image ids, relative paths, file names or stems listed in `path`, one a line ('#' starts a comment)."""
    tokens = [line.strip() for _, line in read_lines(path) if not line.strip().startswith("#")]
    if not tokens:
        raise InputError(f"{path}: lists no image (one id, path or file name a line)")
    if len(tokens) > MAX_IMAGES:
        raise InputError(f"{path}: lists {len(tokens):,} images; at most {MAX_IMAGES:,} at once")
    return tokens


def resolve_images(engine: Engine, dataset_id: int, tokens: Sequence[str]) -> list[int]:
    """The ids of the dataset's images named by `tokens` (an id, a relative path, a file name or a stem), in order,
    each once. Raises NotFoundError naming the tokens that name no image of the dataset."""
    from relabel.common.workspace import ImageIndex

    with engine.connect() as conn:
        rows = conn.execute(select(col(Image.path), pk(Image.id)).where(col(Image.dataset_id) == dataset_id)).all()
    index = ImageIndex({p: i for p, i in rows})
    ids = {i for _, i in rows}
    found: list[int] = []
    unknown: list[str] = []
    for token in tokens:
        image_id = index.lookup(token)
        if image_id is None and token.isdigit() and int(token) in ids:
            image_id = int(token)
        if image_id is None:
            unknown.append(token)
        else:
            found.append(image_id)
    if unknown:
        raise NotFoundError(f"{len(unknown)} unknown image(s) in this dataset: {examples(unknown)}; nothing assigned")
    return list(dict.fromkeys(found))


def add_assignments(
    engine: Engine,
    dataset_id: int,
    user: str,
    *,
    image_ids: Sequence[int] = (),
    class_index: int | None = None,
    vocab: Vocabulary | None = None,
    by: str = "",
) -> int:
    """Assign the images `image_ids`, or the class `class_index` of `vocab`, to `user`, in one transaction.
    Returns how many assignments are new (one already there is kept as it is)."""
    _one_target(image_ids, class_index)
    with Session(engine) as s, s.begin():
        user_id = user_id_of(s.connection(), user)
        if class_index is not None:
            if vocab is None:
                raise InputError("a class assignment needs the dataset's vocabulary")
            key = class_key(vocab, class_index)
            taken = s.scalars(
                select(pk(Assignment.id)).where(
                    col(Assignment.dataset_id) == dataset_id,
                    col(Assignment.user_id) == user_id,
                    col(Assignment.class_key) == key,
                )
            ).first()
            if taken is None:
                s.add(Assignment(dataset_id=dataset_id, user_id=user_id, class_key=key, created_by=by))
            return int(taken is None)
        _require_images(s.connection(), dataset_id, image_ids)
        have: set[int | None] = set()
        for chunk in _chunks(list(image_ids)):
            have |= set(
                s.scalars(
                    select(col(Assignment.image_id)).where(
                        col(Assignment.user_id) == user_id, col(Assignment.image_id).in_(chunk)
                    )
                )
            )
        new = [i for i in dict.fromkeys(image_ids) if i not in have]
        s.add_all(Assignment(dataset_id=dataset_id, user_id=user_id, image_id=i, created_by=by) for i in new)
        return len(new)


def remove_assignments(
    engine: Engine,
    dataset_id: int,
    user: str,
    *,
    image_ids: Sequence[int] = (),
    class_index: int | None = None,
    vocab: Vocabulary | None = None,
    everything: bool = False,
) -> int:
    """End `user`'s assignments of `image_ids`, of class `class_index`, or (`everything`) all of theirs in the
    dataset. Returns how many ended; ConflictError when none of those named was assigned."""
    if not everything:
        _one_target(image_ids, class_index)
    with engine.begin() as conn:
        user_id = user_id_of(conn, user)
        where = [col(Assignment.dataset_id) == dataset_id, col(Assignment.user_id) == user_id]
        if everything:
            ended = conn.execute(delete(Assignment).where(*where)).rowcount
        elif class_index is not None:
            if vocab is None:
                raise InputError("a class assignment needs the dataset's vocabulary")
            key = col(Assignment.class_key) == class_key(vocab, class_index)
            ended = conn.execute(delete(Assignment).where(*where, key)).rowcount
        else:
            ended = sum(
                conn.execute(delete(Assignment).where(*where, col(Assignment.image_id).in_(chunk))).rowcount
                for chunk in _chunks(list(image_ids))
            )
    if not ended:
        raise ConflictError(f"user {user!r} has no such assignment in this dataset; see `relabel assign list`")
    return int(ended)


def list_assignments(engine: Engine, dataset_id: int, vocab: Vocabulary, user: str | None = None) -> list[Listed]:
    """The dataset's assignments (of `user` only, if given), by user, then newest first."""
    query = (
        select(
            col(User.name),
            col(Assignment.image_id),
            col(Assignment.class_key),
            col(Image.path),
            col(Assignment.created_at),
            col(Assignment.created_by),
        )
        .join(User, pk(User.id) == col(Assignment.user_id))
        .outerjoin(Image, pk(Image.id) == col(Assignment.image_id))
        .where(col(Assignment.dataset_id) == dataset_id)
        .order_by(col(User.name), pk(Assignment.id).desc())
    )
    with engine.connect() as conn:
        if user is not None:
            user_id_of(conn, user)
            query = query.where(col(User.name) == user)
        rows = conn.execute(query).all()
    out = []
    for name, image_id, key, path, created_at, by in rows:
        if image_id is not None:
            out.append(Listed(name, "image", path or "", image_id, created_at, by))
        else:
            index = vocab.try_resolve(key or "")
            shown = vocab.describe(index) if index is not None else f"{key} (not in the vocabulary)"
            out.append(Listed(name, "class", shown, None, created_at, by))
    return out


def _one_target(image_ids: Sequence[int], class_index: int | None) -> None:
    if (class_index is None) == (not image_ids):
        raise InputError("name either a class or some images, not both and not neither")


def _require_images(conn: Connection, dataset_id: int, image_ids: Sequence[int]) -> None:
    ids = list(dict.fromkeys(image_ids))
    known: set[int] = set()
    for chunk in _chunks(ids):
        known |= set(
            conn.execute(
                select(pk(Image.id)).where(pk(Image.id).in_(chunk), col(Image.dataset_id) == dataset_id)
            ).scalars()
        )
    missing = [i for i in ids if i not in known]
    if missing:
        raise NotFoundError(f"image id(s) {examples(missing)} are not in this dataset; nothing assigned")


def _chunks(ids: list[int], size: int = 5000) -> Iterator[list[int]]:
    """`ids` in pieces small enough for one IN (...) on SQLite."""
    for start in range(0, len(ids), size):
        yield ids[start : start + size]
