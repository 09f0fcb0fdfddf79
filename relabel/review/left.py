"""How many images the review queue still holds for each user, for every user in one pass over the queue.

The serve rule (`ReviewQueue._eligible`) admits an image to user u under an "open" or "disputed" filter when u has
not decided it, it is not adjudicated, u may have it (nobody is assigned it, or u is) and fewer than its limit of
users hold or decided it, u apart: |V ∪ L| − [u ∈ L] < limit, with V its voters and L the users holding an
unexpired lease on it (for u outside V, taking u out of L takes u out of the union exactly when u holds a lease).
So an image nobody is assigned counts for every user outside V when |V ∪ L| < limit, and only for the lease
holders outside V when |V ∪ L| = limit; an assigned image counts for each of its assignees the rule admits. A
pass therefore keeps one count shared by all users and, per user, what differs from it: a display of what is
left for 16 annotators costs one pass instead of 16.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from relabel.decisions.rules import Outcome
from relabel.review.assignments import AssignedImages
from relabel.review.image_evidence import Evidence, Settled


@dataclass(frozen=True)
class QueueLeft:
    """The images left under one filter: `shared` for a user who decided, holds and is assigned nothing, and
    each other user's difference from it."""

    shared: int
    differs: Mapping[int, int]

    def of(self, user_id: int) -> int:
        return self.shared + self.differs.get(user_id, 0)


def left_by_user(
    order: Iterable[int],
    evidence: Mapping[int, Evidence],
    settled: Mapping[int, Settled],
    leases: Mapping[int, Mapping[int, float]],
    assigned: AssignedImages,
    overlap: int,
    *,
    class_index: int | None,
    status: str,
    category: str | None,
    now: float,
) -> QueueLeft:
    """What the serve rule admits for each user under the filter (module docstring), in one pass over `order`."""
    shared, differs = 0, dict[int, int]()
    for image_id in order:
        e, s = evidence[image_id], settled[image_id]
        if (class_index is not None and e.original != class_index) or (
            category is not None and s.category.value != category
        ):
            continue
        voters, adjudicated = e.voters, s.outcome is Outcome.adjudication
        if status == "mine" or (status == "decided" and not (adjudicated or len(voters) >= overlap)):
            for user_id in voters:
                differs[user_id] = differs.get(user_id, 0) + 1
            continue
        if status == "decided":
            shared += 1
            continue
        disputed = s.outcome is Outcome.disputed
        if adjudicated or (status == "disputed" and not disputed):
            continue
        held = leases.get(image_id)
        holders = {u for u, expiry in held.items() if expiry > now} if held else set()
        busy = len(holders.union(voters)) if holders else len(voters)
        limit = overlap + (1 if disputed and status == "disputed" else 0)
        assignees = assigned.users.get(image_id)
        if assignees is not None:
            for user_id in assignees:
                if user_id not in voters and busy - (user_id in holders) < limit:
                    differs[user_id] = differs.get(user_id, 0) + 1
        elif busy < limit:
            shared += 1
            for user_id in voters:
                differs[user_id] = differs.get(user_id, 0) - 1
        elif busy == limit:
            for user_id in holders.difference(voters):
                differs[user_id] = differs.get(user_id, 0) + 1
    return QueueLeft(shared, differs)
