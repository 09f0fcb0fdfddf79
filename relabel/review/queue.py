"""The review queue: the images most worth a look first, N-way blind overlap, and who is looking at what.

Order: `relabel.review.ranking` (by expected benefit, then by the evidence that the original label is wrong).

Whether an image is disputed or adjudicated, and the category its consensus has, follow `relabel.decisions.rules` (the
rules a snapshot applies), kept per image and worked out again whenever one of its decisions changes.

Assignment: an image needs `overlap` annotators. It is served to a user who has not decided it, while fewer than
`overlap` users have decided it or hold it open (a lease that expires after `lease_seconds`), so two annotators
are not served the same image beyond the overlap. State lives in memory, guarded by one lock; decisions live in the
database, and `Studio.refresh` rebuilds everything from it after a restart. With `shared` (`SharedLeases`, the
database's `relabel.review.leases.DbLeases` in the studio), several processes on one database act as one queue:
before it serves, the queue takes the decisions other processes stored (once per request of the studio, in a
`one_look` block), and an image it picks is served only once the database grants the lease (`SharedLeases.claim`);
when it is refused, the scan moves on to the next image.

Assignments (`relabel.review.assignments`, read through `SharedLeases.assigned`): an image a lead assigned to some
annotators, directly or through its original class, is served only to them, and before any unassigned image.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from itertools import islice
from typing import Protocol

import numpy as np

from db.enums import Category
from relabel.common.errors import InputError
from relabel.decisions.rules import DECIDED_CATEGORIES, Decision, DecisionKey, Outcome
from relabel.review.assignments import NO_ASSIGNMENTS, AssignedImages, candidates
from relabel.review.image_evidence import Evidence, Settled
from relabel.review.left import QueueLeft, left_by_user
from relabel.review.ranking import priority, rank_key

STATUSES = ("open", "disputed", "decided", "mine")  # the queue's status filter: see ReviewQueue._eligible
# of the current consensus, as a snapshot assigns them; U: no consensus yet (undecided, disputed or uncertain)
CATEGORIES = tuple(c.value for c in (*DECIDED_CATEGORIES, Category.U))
DEFAULT_LEASE_SECONDS = 600.0
NOBODY = -1  # a user id no user has: what the queue would serve someone who decided nothing (`upcoming`)


@dataclass
class _Look:
    """The queues that took other processes' decisions in the current `one_look` block (by id), and those that
    left leases to delete at its end."""

    synced: set[int] = field(default_factory=set)
    releasing: list[ReviewQueue] = field(default_factory=list)


_LOOKED: ContextVar[_Look | None] = ContextVar("queue_looked", default=None)


@contextmanager
def one_look() -> Iterator[None]:
    """Within this block (one request of the studio), a queue with `shared` leases asks the database for other
    processes' decisions and assignments once, on its first use, not on every call: a request reads the queue
    several times (serve, progress, what comes next), and a decision stored elsewhere a millisecond later changes
    nothing the database's lease does not already guard. A lease left in the block (a decision, a skip) is
    deleted by the next claim of the same user, or at the block's end. Nested blocks are one block."""
    if _LOOKED.get() is not None:
        yield
        return
    look = _Look()
    token = _LOOKED.set(look)
    try:
        yield
    finally:
        _LOOKED.reset(token)
        for queue in look.releasing:
            queue.flush()


class SharedLeases(Protocol):
    """Leases and decisions shared by every queue on one database (`relabel.review.leases.DbLeases`), called with
    the queue's lock held."""

    def claim(self, image_id: int, user_id: int, limit: int, seconds: float, *, force: bool = False) -> bool: ...
    def admits(self, image_id: int, user_id: int, limit: int) -> bool: ...
    def release(self, image_id: int, user_id: int, *, later: bool = False) -> None: ...
    def flush(self) -> None: ...
    def pull(self) -> dict[int, list[Decision]]: ...
    def applied(self, annotation_id: int) -> None: ...
    def assigned(self, order: list[int], evidence: dict[int, Evidence]) -> AssignedImages: ...


@dataclass(frozen=True)
class QueueFilter:
    """Which images a user wants: an original class, a status (STATUSES), a consensus category (CATEGORIES)."""

    class_index: int | None = None
    status: str = "open"
    category: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise InputError(f"unknown queue status {self.status!r}; known: {', '.join(STATUSES)}")
        if self.category is not None and self.category not in CATEGORIES:
            raise InputError(f"unknown category {self.category!r}; known: {', '.join(CATEGORIES)}")


class ReviewQueue:
    """Which image to serve each user next. Thread-safe; every public method takes the lock once."""

    def __init__(
        self,
        evidence: Iterable[Evidence],
        *,
        overlap: int = 1,
        seed: int = 0,
        lease_seconds: float = DEFAULT_LEASE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        shared: SharedLeases | None = None,
    ) -> None:
        if overlap < 1:
            raise InputError(f"overlap must be at least 1, got {overlap}")
        rows = list(evidence)
        self._settled = {e.image_id: e.settle() for e in rows}  # kept up to date by _count
        self.priority = {e.image_id: priority(e, self._settled[e.image_id].outcome is Outcome.disputed) for e in rows}
        tiebreak = np.random.default_rng(seed).permutation(len(rows))
        keys = [rank_key(e, self.priority[e.image_id]) for e in rows]
        ranked = sorted(range(len(rows)), key=lambda i: (keys[i], tiebreak[i]))
        self.order = [rows[i].image_id for i in ranked]
        self._position = {image_id: pos for pos, image_id in enumerate(self.order)}
        self.evidence = {e.image_id: e for e in rows}
        self.overlap, self.lease_seconds, self.clock, self.shared = overlap, lease_seconds, clock, shared
        self._lock = threading.Lock()
        self._leases: dict[int, dict[int, float]] = {}  # image -> user -> expiry
        self._current: dict[int, int] = {}  # user -> image they hold open
        self._cursor: dict[tuple[int, QueueFilter], int] = {}
        self._skipped: dict[int, set[int]] = {}
        self._counts = {"images": len(rows), "needs_votes": 0, "complete": 0, "disputed": 0, "adjudicated": 0}
        self._decided: dict[int, int] = {}  # user -> images with a standing decision of theirs
        self._assigned = NO_ASSIGNMENTS  # read again from `shared` before each serve
        self._versions: dict[int, int] = {}  # image -> how often its decisions changed since the queue was built
        for e in rows:
            self._count(e, +1, settled=True)

    # -- state changes -------------------------------------------------------------------------------------------

    def record(
        self,
        image_id: int,
        user_id: int,
        key: DecisionKey | None,
        adjudication: bool = False,
        *,
        annotation_id: int | None = None,
    ) -> None:
        """`user_id` stored a decision (key None: undid theirs, with no earlier one to stand again), whose id is
        `annotation_id` when known: `shared` then reads nothing more of it. Releases the user's lease."""
        with self._lock:
            e = self.evidence.get(image_id)
            if e is None:
                return
            if annotation_id is not None and self.shared is not None:
                self.shared.applied(annotation_id)
            self._changed(image_id)
            self._count(e, -1)
            if adjudication:
                e.adjudications.pop(user_id, None)  # the newest adjudication goes last
                if key is not None:
                    e.adjudications[user_id] = key
            elif key is None:
                e.voters.pop(user_id, None)
                self._rewind(user_id)
            else:
                e.voters[user_id] = key
            self._count(e, +1)
            self._release(image_id, user_id)

    def update(self, image_id: int, user_id: int, decisions: Iterable[Decision]) -> None:
        """`user_id` changed the image's standing decisions in a way only the log tells (an undo brings back their
        decision before): take all of them as the log gives them now. Releases the user's lease."""
        with self._lock:
            e = self.evidence.get(image_id)
            if e is None:
                return
            self._changed(image_id)
            self._count(e, -1)
            e.take(decisions)
            self._count(e, +1)
            self._rewind(user_id)
            self._release(image_id, user_id)

    def skip(self, image_id: int, user_id: int) -> None:
        with self._lock:
            self._skipped.setdefault(user_id, set()).add(image_id)
            self._release(image_id, user_id)

    def hold(self, image_id: int, user_id: int) -> None:
        """Lease `image_id` to `user_id` (an image opened directly, e.g. from the history or after an undo)."""
        with self._lock:
            if self.shared is not None:
                self.shared.claim(image_id, user_id, self.overlap, self.lease_seconds, force=True)
            self._hold(image_id, user_id)

    # -- serving -------------------------------------------------------------------------------------------------

    def next_image(self, user_id: int, flt: QueueFilter = QueueFilter()) -> int | None:
        """The image to show `user_id` now: the one they hold open if it still matches, else the first eligible
        image in priority order after their cursor (one wrap-around, then skipped images again). None: done."""
        with self._lock:
            self._sync()
            now = self.clock()
            held = self._current.get(user_id)
            if held is not None and self._eligible(held, user_id, flt, now, True) and self._take(held, user_id, flt):
                self._hold(held, user_id)
                return held
            found = self._scan(user_id, flt, now)
            if found is None and self._skipped.pop(user_id, set()):
                found = self._scan(user_id, flt, now)
            if found is not None:
                self._hold(found, user_id)
            return found

    def peek(self, user_id: int, flt: QueueFilter = QueueFilter()) -> int | None:
        """The image `next_image` would serve after the one `user_id` holds now, without leasing it."""
        with self._lock:
            self._sync()
            now = self.clock()
            held = self._current.get(user_id)
            start = self._cursor.get((user_id, flt), 0)
            skipped = self._skipped.get(user_id, set())
            first = self._assigned.first_for(user_id)
            for _, image_id in islice(candidates(first, self.order, start), len(first) + 10_000):
                if image_id != held and image_id not in skipped and self._eligible(image_id, user_id, flt, now):
                    return image_id
            return None

    def may_serve(self, image_id: int, user_id: int) -> bool:
        """Whether `user_id` may open or decide `image_id` now: they decided it, hold an unexpired lease on it, or
        the queue would serve it to them as an image to review or a disputed one. An image left (skipped, or the
        lease run out) and since given all its opinions by others is no longer theirs."""
        with self._lock:
            self._sync()
            e = self.evidence.get(image_id)
            if e is None:
                return False
            now = self.clock()
            if user_id in e.voters:
                return True
            ok = self._leases.get(image_id, {}).get(user_id, 0.0) > now or any(
                self._eligible(image_id, user_id, QueueFilter(status=s), now) for s in ("open", "disputed")
            )
            if ok and self.shared is not None:  # another process's users may hold it: the database says
                return self.shared.admits(image_id, user_id, self._limit(image_id, QueueFilter(status="disputed")))
            return ok

    def upcoming(self, limit: int, flt: QueueFilter = QueueFilter(), user_id: int = NOBODY) -> list[int]:
        """The first `limit` images the queue would serve to `user_id` (leases held now count): their assigned
        images first, then the rest in queue order. The default, NOBODY, is a newcomer who has decided nothing
        and has nothing assigned: images assigned to others are not theirs."""
        with self._lock:
            self._sync()
            now = self.clock()
            out: list[int] = []
            seen: set[int] = set()
            for _, image_id in candidates(self._assigned.first_for(user_id), self.order, 0):
                if len(out) >= limit:
                    break
                if image_id not in seen and self._eligible(image_id, user_id, flt, now):
                    out.append(image_id)
                seen.add(image_id)
            return out

    def following(self, image_id: int, n: int) -> list[int]:
        """The `n` images after `image_id` in queue order (whoever they would be served to); [] for an image
        not in the queue. The order never changes, so no lock is taken."""
        pos = self._position.get(image_id)
        return [] if pos is None else self.order[pos + 1 : pos + 1 + n]

    def version(self, image_id: int) -> int | None:
        """A number that changes whenever a decision on `image_id` is stored or undone, by this process or (as
        far as the queue has taken them) another; None for an image not in the queue. A copy of the image's
        decision history made at one version is current while the version stays."""
        with self._lock:
            self._sync()
            return self._versions.get(image_id, 0) if image_id in self.evidence else None

    def flush(self) -> None:
        """Delete the leases left in a `one_look` block that no claim deleted since."""
        if self.shared is not None:
            with self._lock:
                self.shared.flush()

    def use_assignments(self, assigned: AssignedImages) -> None:
        """Serve by `assigned` (a queue with `shared` leases reads them from the database before each serve)."""
        with self._lock:
            self._assigned = assigned

    def remaining(self, user_id: int, flt: QueueFilter = QueueFilter()) -> int:
        """Images still eligible for `user_id` under `flt` (a full pass: for progress displays, not per card)."""
        return self.left_by_user(flt)[0].of(user_id)

    def left_by_user(self, flt: QueueFilter = QueueFilter()) -> tuple[QueueLeft, dict[int, int]]:
        """Images still eligible for every user under `flt`, in one full pass (`relabel.review.left`), and each
        user's count of standing decisions at that moment (`decided_by`)."""
        with self._lock:
            self._sync()
            left = left_by_user(
                self.order,
                self.evidence,
                self._settled,
                self._leases,
                self._assigned,
                self.overlap,
                class_index=flt.class_index,
                status=flt.status,
                category=flt.category,
                now=self.clock(),
            )
            return left, dict(self._decided)

    def counts(self) -> dict[str, int]:
        """Images by queue state: needing votes, complete (overlap reached), disputed, adjudicated."""
        with self._lock:
            self._sync()
            return dict(self._counts)

    def decided_by(self, user_id: int) -> int:
        """Images on which `user_id` has a standing (not undone) decision."""
        with self._lock:
            self._sync()
            return self._decided.get(user_id, 0)

    def disputed(self) -> list[int]:
        """Disputed images (`relabel.decisions.rules.Outcome.disputed`), in priority order."""
        with self._lock:
            self._sync()
            return [i for i in self.order if self._settled[i].outcome is Outcome.disputed]

    def settled(self, image_id: int) -> Settled:
        """The consensus of `image_id` now and its category, as a snapshot taken now would have them."""
        with self._lock:
            return self._settled[image_id]

    # -- internals (lock held) -----------------------------------------------------------------------------------

    def _count(self, e: Evidence, sign: int, settled: bool = False) -> None:
        """Add (+1) or remove (-1) one image's contribution to the counters; adding settles the image again first
        (unless `settled`: done already)."""
        if sign > 0 and not settled:
            self._settled[e.image_id] = e.settle()
        outcome = self._settled[e.image_id].outcome
        adjudicated = outcome is Outcome.adjudication
        state = "adjudicated" if adjudicated else "complete" if len(e.voters) >= self.overlap else "needs_votes"
        self._counts[state] += sign
        self._counts["disputed"] += sign * (outcome is Outcome.disputed)
        for user_id in e.voters:
            self._decided[user_id] = self._decided.get(user_id, 0) + sign

    def _scan(self, user_id: int, flt: QueueFilter, now: float) -> int | None:
        """The user's assigned images first, then the queue order from their cursor (`candidates`)."""
        start = self._cursor.get((user_id, flt), 0)
        skipped = self._skipped.get(user_id, set())
        for pos, image_id in candidates(self._assigned.first_for(user_id), self.order, start):
            if (
                image_id not in skipped
                and self._eligible(image_id, user_id, flt, now)
                and self._take(image_id, user_id, flt)
            ):
                if pos is not None:
                    self._cursor[(user_id, flt)] = pos
                return image_id
        return None

    def _eligible(self, image_id: int, user_id: int, flt: QueueFilter, now: float, holding: bool = False) -> bool:
        e, settled = self.evidence[image_id], self._settled[image_id]
        if flt.class_index is not None and e.original != flt.class_index:
            return False
        if flt.category is not None and settled.category.value != flt.category:
            return False
        mine = user_id in e.voters
        adjudicated = settled.outcome is Outcome.adjudication
        if flt.status == "mine":
            return mine
        if flt.status == "decided":
            return mine or (adjudicated or len(e.voters) >= self.overlap)
        if mine or adjudicated or not self._assigned.allows(image_id, user_id):
            return False
        disputed = settled.outcome is Outcome.disputed
        if flt.status == "disputed" and not disputed:
            return False
        others = {u for u, expiry in self._leases.get(image_id, {}).items() if expiry > now and u != user_id}
        busy = len(set(e.voters) | others)
        limit = self._limit(image_id, flt)
        return busy < limit or (holding and busy <= limit and user_id in self._leases.get(image_id, {}))

    def _limit(self, image_id: int, flt: QueueFilter) -> int:
        """How many users may hold or decide the image: the overlap, and for a disputed image served as such one
        more opinion, so a majority can form."""
        disputed = self._settled[image_id].outcome is Outcome.disputed
        return self.overlap + (1 if disputed and flt.status == "disputed" else 0)

    def _sync(self) -> None:
        """Take the decisions other processes stored since the last look (`SharedLeases.pull`), as `update` does."""
        if self.shared is None:
            return
        look = _LOOKED.get()
        if look is not None:
            if id(self) in look.synced:
                return
            look.synced.add(id(self))
        for image_id, decisions in self.shared.pull().items():
            e = self.evidence.get(image_id)
            if e is not None:
                self._changed(image_id)
                self._count(e, -1)
                e.take(decisions)
                self._count(e, +1)
        self._assigned = self.shared.assigned(self.order, self.evidence)  # by the signature the pull read

    def _changed(self, image_id: int) -> None:
        self._versions[image_id] = self._versions.get(image_id, 0) + 1

    def _take(self, image_id: int, user_id: int, flt: QueueFilter) -> bool:
        """Whether `shared` grants `user_id` the lease on `image_id` (always, without it)."""
        limit = self._limit(image_id, flt)
        return self.shared is None or self.shared.claim(image_id, user_id, limit, self.lease_seconds)

    def _hold(self, image_id: int, user_id: int) -> None:
        previous = self._current.get(user_id)
        if previous is not None and previous != image_id:
            self._leases.get(previous, {}).pop(user_id, None)
        self._leases.setdefault(image_id, {})[user_id] = self.clock() + self.lease_seconds
        self._current[user_id] = image_id

    def _release(self, image_id: int, user_id: int) -> None:
        self._leases.get(image_id, {}).pop(user_id, None)
        if self.shared is not None:
            look = _LOOKED.get()
            if look is not None and self not in look.releasing:
                look.releasing.append(self)
            self.shared.release(image_id, user_id, later=look is not None)
        if self._current.get(user_id) == image_id:
            del self._current[user_id]

    def _rewind(self, user_id: int) -> None:
        """After an undo, images before the cursor may be eligible again: scan from the top next time."""
        for key in [k for k in self._cursor if k[0] == user_id]:
            self._cursor[key] = 0
