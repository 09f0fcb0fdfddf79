"""The review queue's shared state in the database, so that any number of studio processes on one database serve
as one queue.

Leases. Before a queue serves image X to user U it *claims* X in one transaction (`DbLeases.claim`): it counts
the users with an unexpired lease on X other than U and the users with a standing decision on X (both read from
the database), and writes U's lease only while they are fewer than the limit (the overlap). On PostgreSQL the
transaction first locks X's image row (`FOR NO KEY UPDATE SKIP LOCKED`: a row another process is claiming is
skipped, and the queue moves on to its next image; decisions, whose foreign key takes only a key-share lock, are not
held up); on SQLite `BEGIN IMMEDIATE` takes the database's write lock, which serializes every claim. A user holds
one lease per dataset: a claim drops the one they held before. A lease expires at a wall-clock UTC time, so a
process that dies holding one blocks its image only until then.

Decisions. `DbLeases.pull` returns the images whose decisions changed since the newest annotation id it has seen,
with their standing decisions now: one query on the annotations' primary key, which finds nothing when nothing is
new. PostgreSQL numbers rows when they are inserted, not when they commit, so an id below the newest one seen may
still appear: ids skipped over are asked for again for `GAP_SECONDS`.

Assignments. `DbLeases.assigned` gives the queue the images leads assigned to annotators
(`relabel.review.assignments.DbAssignments`), read again whenever they changed, by any process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from sqlalchemy import (
    CompoundSelect,
    DateTime,
    Select,
    bindparam,
    cast,
    delete,
    func,
    literal,
    null,
    or_,
    select,
    true,
    union_all,
    update,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import BindParameter
from sqlmodel import col

from db.enums import Verdict
from db.models import Annotation, Image, QueueLease, pk
from relabel.decisions.log import current_decisions
from relabel.decisions.rules import Decision
from relabel.review.assignments import AssignedImages, DbAssignments, assignment_signature

if TYPE_CHECKING:
    from relabel.review.image_evidence import Evidence

GAP_SECONDS = 60.0  # how long an annotation id skipped by a pull is looked for again (a transaction in flight)
MAX_GAPS = 1000


def wall_time(clock: Callable[[], float]) -> datetime:
    """`clock()` (seconds since 1970) as a UTC datetime, the form `QueueLease.expires_at` is stored in."""
    return datetime.fromtimestamp(clock(), timezone.utc)


class DbLeases:
    """Leases and decisions of one dataset's review queue, shared through the database (the module docstring).

    `write_lock`: what the process holds around its SQLite writes (`relabel.review.studio.Studio`), so its own
    writers queue in memory instead of in SQLite's busy handler. `clock`: wall-clock seconds since 1970 (tests
    move it)."""

    def __init__(
        self,
        engine: Engine,
        dataset_id: int,
        *,
        write_lock: AbstractContextManager[object] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.engine, self.dataset_id, self.clock = engine, dataset_id, clock
        self.sqlite = engine.dialect.name == "sqlite"
        self._write_lock = write_lock if write_lock is not None else nullcontext()
        with engine.connect() as conn:  # read before the queue loads its decisions: a pull repeats, never misses
            self._seen: int = conn.execute(select(func.max(pk(Annotation.id)))).scalar() or 0
        self._gaps: dict[int, float] = {}  # annotation id skipped by a pull -> clock time to stop looking for it
        self._granted: dict[int, tuple[int, float]] = {}  # user -> (image, clock time its lease expires)
        self._assignments = DbAssignments(engine, dataset_id)
        self._signature: tuple[int, int] | None = None  # the assignments' signature read by the last pull
        self._applied: set[int] = set()  # ids of decisions this process stored that the queue already took
        self._released: dict[int, int] = {}  # user -> image whose lease they left, its row not deleted yet
        # the statements run on every request, built once: making one costs more than running it
        self._pull = {gaps: _pull_query(dataset_id, gaps=gaps) for gaps in (False, True)}  # by whether ids lag
        self._holders_query = _holders_query()
        self._lease_writes = {new: _lease_writes(dataset_id, renew=new, sqlite=self.sqlite) for new in (False, True)}

    # -- leases --------------------------------------------------------------------------------------------------

    def claim(self, image_id: int, user_id: int, limit: int, seconds: float, *, force: bool = False) -> bool:
        """Lease `image_id` to `user_id` for `seconds` if fewer than `limit` other users hold it or decided it
        (`force`: whatever they are); the user's other lease in the dataset ends. False: taken, decided by the
        user, or (PostgreSQL) being claimed by another process right now; nothing is written then. A lease this
        object granted with more than half its time left is kept as it is: a reload writes nothing."""
        image, until = self._granted.get(user_id, (None, 0.0))
        if not force and image == image_id and until > self.clock() + seconds / 2:
            return True
        with self._write_lock, self.engine.begin() as conn:
            if not self._lock_image(conn, image_id):
                return False
            now = wall_time(self.clock)
            leased, decided = self._holders(conn, image_id)
            held = {u for u, expires in leased if expires > now}
            if not force:
                if user_id in decided:
                    return False
                if user_id not in held and len(decided | (held - {user_id})) >= limit:
                    return False
            until = self.clock() + seconds
            self._write_lease(
                conn, image_id, user_id, wall_time(lambda: until), renew=user_id in {u for u, _ in leased}
            )
        self._granted[user_id] = (image_id, until)
        self._released.pop(user_id, None)  # its row went with the others, or is this lease again
        return True

    def admits(self, image_id: int, user_id: int, limit: int) -> bool:
        """Whether `user_id` may decide `image_id` now: they decided it or hold an unexpired lease on it, or fewer
        than `limit` other users hold or decided it. Reads only."""
        now = wall_time(self.clock)
        with self.engine.connect() as conn:
            leased, decided = self._holders(conn, image_id)
        held = {u for u, expires in leased if expires > now}
        return user_id in held or user_id in decided or len(decided | held) < limit

    def release(self, image_id: int, user_id: int, *, later: bool = False) -> None:
        """End `user_id`'s lease on `image_id`, if this object granted it (a user holds one lease per dataset).
        `later`: the row goes with the user's next claim, which deletes their other lease anyway, or at `flush`
        (the end of the request), whichever comes first; until then it counts the user once beside their
        decision, as it would without the row."""
        if self._granted.get(user_id, (None, 0.0))[0] != image_id:
            return
        del self._granted[user_id]
        if later:
            self._released[user_id] = image_id
        else:
            self._delete(image_id, user_id)

    def flush(self) -> None:
        """Delete the leases released `later` that no claim has deleted since."""
        pending, self._released = self._released, {}
        for user_id, image_id in pending.items():
            self._delete(image_id, user_id)

    def _delete(self, image_id: int, user_id: int) -> None:
        with self._write_lock, self.engine.begin() as conn:
            conn.execute(
                delete(QueueLease).where(col(QueueLease.image_id) == image_id, col(QueueLease.user_id) == user_id)
            )

    # -- decisions -----------------------------------------------------------------------------------------------

    def applied(self, annotation_id: int) -> None:
        """The queue already took decision `annotation_id`, stored by this process: a pull that finds only such
        decisions on an image reads nothing more of it."""
        self._applied.add(annotation_id)

    def pull(self) -> dict[int, list[Decision]]:
        """The dataset's images with a decision stored (by any process) since the last pull, each with its standing
        decisions now (empty: every one was undone). The same statement reads the assignments' signature, which
        the next `assigned` uses instead of asking again."""
        now = self.clock()
        self._gaps = {i: until for i, until in self._gaps.items() if until > now}
        with self.engine.connect() as conn:
            if self._gaps:
                result = conn.execute(self._pull[True], {"seen": self._seen, "gaps": list(self._gaps)}).all()
            else:
                result = conn.execute(self._pull[False], {"seen": self._seen}).all()
            self._signature = (int(result[0][0] or 0), int(result[0][1] or 0))
            rows = [(i, image, dataset) for _, _, i, image, dataset in result if i is not None]
            if not rows:
                return {}
            changed = self._changed(rows, now)
            if not changed:
                return {}
            standing = current_decisions(conn, self.dataset_id, image_ids=changed)
        return {image: standing.get(image, []) for image in changed}

    def _changed(self, rows: list[tuple[int, int, int]], now: float) -> list[int]:
        """The dataset's images among `rows` (new annotations: id, image, dataset) that changed in a way the queue
        does not know yet; notes the ids seen and the ones skipped over (`GAP_SECONDS`)."""
        found = {r[0] for r in rows}
        for i in found:
            self._gaps.pop(i, None)
        newest = max(found)
        skipped = range(self._seen + 1, newest)
        if len(skipped) <= MAX_GAPS:  # more: a sequence jump (a server restart), not transactions in flight
            self._gaps.update((i, now + GAP_SECONDS) for i in skipped if i not in found)
        self._seen = max(self._seen, newest)
        changed = sorted({image for i, image, dataset in rows if dataset == self.dataset_id and i not in self._applied})
        self._applied = {i for i in self._applied if i > self._seen}
        return changed

    def assigned(self, order: list[int], evidence: dict[int, Evidence]) -> AssignedImages:
        """Who may be served which image, and each user's assigned images in `order` (read when they changed),
        by the signature the last `pull` read, if it was not used yet."""
        signature, self._signature = self._signature, None
        return self._assignments.current(order, evidence, signature=signature)

    # -- internals -----------------------------------------------------------------------------------------------

    def _lock_image(self, conn: Connection, image_id: int) -> bool:
        """Take the lock that serializes claims on `image_id`; False when another transaction holds it."""
        if self.sqlite:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
            return True
        query = select(pk(Image.id)).where(pk(Image.id) == image_id).with_for_update(skip_locked=True, key_share=True)
        return conn.execute(query).first() is not None

    def _write_lease(self, conn: Connection, image_id: int, user_id: int, expires: datetime, *, renew: bool) -> None:
        """Give `user_id` the lease on `image_id` until `expires` (`renew`: their row is there already) and end
        their other lease in the dataset: one statement on PostgreSQL, two on SQLite (`_lease_writes`)."""
        values = {"lease_image": image_id, "lease_user": user_id, "lease_until": expires}
        for statement in self._lease_writes[renew]:
            conn.execute(statement, values)

    def _holders(self, conn: Connection, image_id: int) -> tuple[list[tuple[int, datetime]], set[int]]:
        """(user, expiry) of every lease on `image_id`, and the users with a standing annotator decision (not an
        adjudication) on it, in one statement (`_holders_query`)."""
        leased: list[tuple[int, datetime]] = []
        decided: set[int] = set()
        for user_id, expires, is_voter in conn.execute(self._holders_query, {"image_id": image_id}):
            if is_voter:
                decided.add(user_id)
            else:
                leased.append((user_id, _utc(expires)))
        return leased, decided


def _pull_query(dataset_id: int, *, gaps: bool) -> Select[Any]:
    """The statement of `DbLeases.pull`: the assignments' signature, outer-joined with the annotations newer than
    :seen or (`gaps`) among :gaps. The form without gaps is the usual one, and is run as compiled: an expanding
    list is written into the SQL text again on every run."""
    newer = pk(Annotation.id) > bindparam("seen")
    where = or_(newer, pk(Annotation.id).in_(bindparam("gaps", expanding=True))) if gaps else newer
    new = (
        select(pk(Annotation.id).label("id"), col(Annotation.image_id), col(Image.dataset_id))
        .join(Image, col(Image.id) == col(Annotation.image_id))
        .where(where)
        .subquery()
    )
    signature = assignment_signature(dataset_id).subquery()
    return select(signature, new).select_from(signature.outerjoin(new, true()))


def _lease_writes(dataset_id: int, *, renew: bool, sqlite: bool) -> tuple[Any, ...]:
    """The statements of `DbLeases._write_lease` on :lease_image, :lease_user and :lease_until, built once:
    the deletion of the user's other lease in the dataset, then the new row or the renewed expiry; on PostgreSQL
    the deletion rides along as a data-modifying WITH clause of the one statement."""
    image_id: BindParameter[int] = bindparam("lease_image")
    user_id: BindParameter[int] = bindparam("lease_user")
    until: BindParameter[datetime] = bindparam("lease_until")
    others = delete(QueueLease).where(
        col(QueueLease.dataset_id) == dataset_id,
        col(QueueLease.user_id) == user_id,
        col(QueueLease.image_id) != image_id,
    )
    table = QueueLease.__table__  # type: ignore[attr-defined]
    write: Any
    if renew:
        write = update(QueueLease).where(col(QueueLease.image_id) == image_id, col(QueueLease.user_id) == user_id)
        write = write.values(expires_at=until)
    else:
        write = table.insert().values(dataset_id=dataset_id, image_id=image_id, user_id=user_id, expires_at=until)
    return (others, write) if sqlite else (write.add_cte(others.cte("others")),)


def _holders_query() -> CompoundSelect:
    """The leases on the image `:image_id` and its standing annotator decisions: a decision stands unless it is
    an undo or an undo names it (`relabel.decisions.rules.standing`)."""
    image_id: BindParameter[int] = bindparam("image_id")
    undone = select(col(Annotation.retracts_id)).where(
        col(Annotation.image_id) == image_id, col(Annotation.retracts_id).is_not(None)
    )
    voters = select(col(Annotation.user_id), cast(null(), DateTime), literal(True)).where(
        col(Annotation.image_id) == image_id,
        col(Annotation.is_adjudication).is_(False),
        col(Annotation.verdict) != Verdict.retract,
        pk(Annotation.id).not_in(undone),
    )
    leases = select(col(QueueLease.user_id), col(QueueLease.expires_at), literal(False)).where(
        col(QueueLease.image_id) == image_id
    )
    return union_all(leases, voters)


def _utc(moment: datetime) -> datetime:
    """`moment` as an aware UTC time (SQLite hands back naive times stored as UTC)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
