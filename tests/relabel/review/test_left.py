"""What is left for each user, counted for all users in one pass (`relabel.review.left`), against the serve rule
asked image by image: random queues with decisions, disputes, adjudications, leases (live and expired) and
assignments, under every filter."""

from __future__ import annotations

import random

import pytest

from db.enums import Verdict
from relabel.review.assignments import AssignedImages
from relabel.review.queue import CATEGORIES, STATUSES, Evidence, QueueFilter, ReviewQueue

KEYS = [(Verdict.labels, frozenset({c})) for c in (1, 2, 3)] + [(Verdict.unclear, frozenset())]


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def random_queue(seed: int) -> tuple[ReviewQueue, list[int]]:
    rng = random.Random(seed)
    clock = Clock()
    n, users = rng.randint(1, 40), list(range(1, rng.randint(2, 7)))
    q = ReviewQueue(
        [Evidence(i, original=rng.randint(1, 3)) for i in range(1, n + 1)],
        overlap=rng.randint(1, 4),
        lease_seconds=60,
        clock=clock,
    )
    for image_id in range(1, n + 1):
        for user_id in rng.sample(users, rng.randint(0, len(users))):
            q.record(image_id, user_id, rng.choice(KEYS))
        if rng.random() < 0.1:
            q.record(image_id, 99, rng.choice(KEYS), adjudication=True)
    for user_id in users:  # leases taken at different times: some expire before the count
        clock.now = rng.uniform(0, 100)
        for s in rng.sample(STATUSES[:2], 1):
            q.next_image(user_id, QueueFilter(status=s))
    clock.now = 110.0
    if rng.random() < 0.5:
        picked = [i for i in range(1, n + 1) if rng.random() < 0.3]
        assigned = {i: frozenset(rng.sample(users, rng.randint(1, len(users)))) for i in picked}
        first: dict[int, list[int]] = {}
        for image_id in q.order:
            for user_id in assigned.get(image_id, ()):
                first.setdefault(user_id, []).append(image_id)
        q.use_assignments(AssignedImages(assigned, {u: tuple(ids) for u, ids in first.items()}))
    return q, [*users, 99, 1000]


def by_rule(q: ReviewQueue, user_id: int, flt: QueueFilter) -> int:
    now = q.clock()
    return sum(q._eligible(i, user_id, flt, now) for i in q.order)


FILTERS = [
    QueueFilter(),
    *(QueueFilter(status=s) for s in STATUSES),
    QueueFilter(class_index=2),
    QueueFilter(status="disputed", class_index=1),
    *(QueueFilter(category=c) for c in CATEGORIES),
]


@pytest.mark.parametrize("seed", range(60))
def test_one_pass_counts_what_the_serve_rule_admits_for_every_user(seed: int) -> None:
    q, users = random_queue(seed)
    for flt in FILTERS:
        left, decided = q.left_by_user(flt)
        for user_id in users:
            assert left.of(user_id) == by_rule(q, user_id, flt) == q.remaining(user_id, flt), (flt, user_id)
            assert decided.get(user_id, 0) == q.decided_by(user_id)


def test_the_random_queues_hold_every_case_the_count_distinguishes() -> None:
    """The generator reaches leased images at and below their limit, assigned images and adjudicated ones."""
    seen = set()
    for seed in range(60):
        q, users = random_queue(seed)
        now = q.clock()
        for image_id in q.order:
            e = q.evidence[image_id]
            holders = {u for u, t in q._leases.get(image_id, {}).items() if t > now}
            busy = len(holders | set(e.voters))
            if holders:
                seen.add("at limit" if busy == q.overlap else "below limit" if busy < q.overlap else "over")
            if q._assigned.users.get(image_id):
                seen.add("assigned")
            if e.adjudications:
                seen.add("adjudicated")
    assert {"at limit", "below limit", "assigned", "adjudicated"} <= seen
