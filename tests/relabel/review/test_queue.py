"""The review queue on its own: disputed-first order, N-way overlap, leases, skips, undo and filters."""

from __future__ import annotations

import pytest

from db.enums import Verdict
from relabel.common.errors import InputError
from relabel.review.queue import Evidence, QueueFilter, ReviewQueue, priority
from relabel.review.ranking import WEIGHTS

CAT = (Verdict.labels, frozenset({281}))
DOG = (Verdict.labels, frozenset({207}))


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def evidence(n: int = 6) -> list[Evidence]:
    return [Evidence(i, original=i % 3) for i in range(1, n + 1)]


class TestPriority:
    def test_each_signal_adds_its_weight(self) -> None:
        assert priority(Evidence(1, original=5)) == 0
        assert priority(Evidence(1, original=5, suggestion=6)) == WEIGHTS["suggestion"]
        assert priority(Evidence(1, original=5, original_confidence=0.25)) == pytest.approx(0.75)
        assert priority(Evidence(1, original=5, priors=[[5], [6, 7]])) == pytest.approx(0.5)
        assert priority(Evidence(1, original=5, voters={1: CAT, 2: DOG})) == WEIGHTS["annotators"]
        assert priority(Evidence(1, original=None)) == sum(WEIGHTS.values())

    def test_disputed_images_come_first_and_ties_keep_a_seeded_order(self) -> None:
        rows = [Evidence(i, original=1) for i in range(1, 21)]
        rows[13].suggestion = 2  # image 14
        rows[6].original_confidence = 0.0  # image 7
        rows[6].suggestion = 3
        q1, q2 = ReviewQueue(rows, seed=4), ReviewQueue(rows, seed=4)
        assert q1.order[:2] == [7, 14] and q1.order == q2.order
        assert ReviewQueue(rows, seed=5).order[2:] != q1.order[2:]


class TestAssignment:
    def test_overlap_one_never_serves_an_image_twice(self) -> None:
        q = ReviewQueue(evidence(4), overlap=1)
        served = [q.next_image(u) for u in (1, 2, 3, 4)]
        assert sorted(served) == [1, 2, 3, 4] and q.next_image(5) is None

    def test_three_way_overlap_serves_each_image_to_three_distinct_users(self) -> None:
        q = ReviewQueue(evidence(2), overlap=3)
        first = [q.next_image(u) for u in (1, 2, 3)]
        assert len(set(first)) == 1  # the top image goes to three annotators before the next one
        assert q.next_image(4) != first[0]
        for u in (1, 2, 3):
            q.record(first[0], u, CAT)
        assert q.counts()["complete"] == 1 and q.next_image(5) != first[0]

    def test_a_user_gets_the_same_card_back_until_they_decide(self) -> None:
        q = ReviewQueue(evidence(3))
        image = q.next_image(1)
        assert q.next_image(1) == image  # a reload resumes where they left off
        q.record(image, 1, CAT)
        assert q.next_image(1) not in (image, None)
        assert q.decided_by(1) == 1

    def test_an_expired_lease_frees_the_image_for_someone_else(self) -> None:
        clock = Clock()
        q = ReviewQueue(evidence(1), overlap=1, lease_seconds=60, clock=clock)
        assert q.next_image(1) == 1 and q.next_image(2) is None
        clock.now = 61
        assert q.next_image(2) == 1

    def test_skipped_images_come_back_when_nothing_else_is_left(self) -> None:
        q = ReviewQueue(evidence(2))
        first = q.next_image(1)
        q.skip(first, 1)
        second = q.next_image(1)
        assert second != first
        q.record(second, 1, CAT)
        assert q.next_image(1) == first

    def test_undo_makes_the_image_eligible_again(self) -> None:
        q = ReviewQueue(evidence(2))
        first = q.next_image(1)
        q.record(first, 1, CAT)
        q.record(q.next_image(1), 1, DOG)
        assert q.next_image(1) is None
        q.record(first, 1, None)  # undone
        assert q.next_image(1) == first and q.decided_by(1) == 1


class TestFilters:
    def test_class_filter(self) -> None:
        q = ReviewQueue(evidence(6))
        served = {q.next_image(u, QueueFilter(class_index=2)) for u in range(1, 4)}
        assert served == {2, 5, None}

    def test_disputed_filter_takes_one_opinion_beyond_the_overlap(self) -> None:
        rows = evidence(3)
        rows[0].voters = {1: CAT, 2: DOG}
        q = ReviewQueue(rows, overlap=2)
        assert q.counts()["disputed"] == 1
        assert q.next_image(3) != 1  # the plain queue: image 1 already has its two annotators
        assert q.next_image(4, QueueFilter(status="disputed")) == 1
        assert q.disputed() == [1]

    def test_mine_and_decided_filters(self) -> None:
        q = ReviewQueue(evidence(3))
        image = q.next_image(1)
        q.record(image, 1, CAT)
        assert q.next_image(1, QueueFilter(status="mine")) == image
        assert q.next_image(2, QueueFilter(status="decided")) == image

    def test_category_filter_follows_the_current_consensus(self) -> None:
        rows = [Evidence(i, original=281) for i in range(1, 6)]
        rows[0].voters = {1: CAT, 2: CAT}  # A: the original confirmed
        rows[1].voters = {1: DOG}  # B
        rows[2].voters = {1: (Verdict.labels, frozenset({281, 207}))}  # M
        rows[3].voters = {1: (Verdict.none_fit, frozenset())}  # Z
        rows[4].voters = {1: CAT, 2: DOG}  # disputed: no category ...
        q = ReviewQueue(rows, overlap=1)
        decided = {c: q.next_image(9, QueueFilter(status="decided", category=c)) for c in "ABMZX"}
        assert decided == {"A": 1, "B": 2, "M": 3, "Z": 4, "X": None}
        q.record(5, 7, (Verdict.unclear, frozenset()), adjudication=True)  # ... until a lead decides: X
        assert q.next_image(8, QueueFilter(status="decided", category="X")) == 5
        with pytest.raises(InputError, match="unknown category 'Q'"):
            QueueFilter(category="Q")

    def test_adjudicated_images_leave_the_queue(self) -> None:
        rows = evidence(1)
        rows[0].voters = {1: CAT, 2: DOG}
        q = ReviewQueue(rows, overlap=2)
        q.record(1, 9, CAT, adjudication=True)
        assert q.disputed() == [] and q.counts()["adjudicated"] == 1
        assert q.next_image(3, QueueFilter(status="disputed")) is None

    def test_bad_settings_are_input_errors(self) -> None:
        with pytest.raises(InputError, match="unknown queue status 'later'.*open"):
            QueueFilter(status="later")
        with pytest.raises(InputError, match="overlap"):
            ReviewQueue([], overlap=0)
