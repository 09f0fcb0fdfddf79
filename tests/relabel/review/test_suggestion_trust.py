"""Suggestion trust on the dashboard's hand-built workspace (tests/relabel/review/test_dashboard.py) and on small
tables."""

from __future__ import annotations

import pytest

from db.enums import SuggestionAction, Verdict
from relabel.decisions.rules import Decision
from relabel.review.suggestion_trust import (
    NO_SCORE,
    Share,
    Use,
    confidence_bin,
    share_text,
    suggestion_trust,
    trust_rows,
    uses_from,
)
from tests.relabel.review.test_dashboard import studio  # noqa: F401  (the fixture)

ACC, ED, REJ = SuggestionAction.accepted, SuggestionAction.edited, SuggestionAction.rejected


def test_rows_count_standing_annotator_decisions_with_a_recorded_suggestion(studio) -> None:  # noqa: F811
    # As the dashboard's suggestion use, less #12 (no prediction recorded): effnet #1 #2 #8 accepted, #3 edited,
    # #9 rejected; qwen #10 edited, #6 rejected. #4 (undone) and #14 (an adjudication) do not count.
    rows = {(r.group, r.name): r for r in suggestion_trust(studio.engine, "d")}
    effnet, qwen = rows["run", "effnet (effnet, supervised)"], rows["run", "qwen (qwen, supervised)"]
    assert (effnet.shown, effnet.accepted.k, effnet.edited.k, effnet.rejected.k) == (5, 3, 1, 1)
    assert (qwen.shown, qwen.accepted.k, qwen.edited.k, qwen.rejected.k) == (2, 0, 1, 1)
    assert effnet.taken_up.k == 4 and effnet.taken_up.value == pytest.approx(0.8)
    protocol = rows["protocol", "supervised"]
    assert protocol.shown == 7 and protocol.taken_up.k == 5
    assert rows["confidence", NO_SCORE].shown == 7  # the runs stored no scores
    # d's adjudication (tench) follows only a rejected suggestion: nothing taken up was judged
    assert all(r.survives.n == 0 and r.survives.value is None for r in rows.values())


def test_survival_reads_the_adjudication_that_stands() -> None:
    standing = {
        1: [Decision(10, 7, Verdict.labels, (3,), False), Decision(20, 9, Verdict.labels, (3, 4), True)],
        2: [Decision(11, 7, Verdict.labels, (5,), False), Decision(21, 9, Verdict.labels, (6,), True)],
        3: [Decision(12, 7, Verdict.labels, (8,), False)],
    }
    rows = [
        (10, 1, "accepted", [3], [0.9], "r", "m", "ow"),  # kept by the adjudication (3, 4)
        (11, 2, "edited", [5, 1], [0.6, 0.2], "r", "m", "ow"),  # left out by the adjudication (6)
        (12, 3, "accepted", [8], None, "r", "m", "ow"),  # not adjudicated
        (13, 3, "accepted", [8], [0.99], "r", "m", "ow"),  # not standing (superseded): left out
        (20, 1, "rejected", [4], [0.3], "r", "m", "ow"),  # the adjudication's own id: not an annotator's
    ]
    uses = uses_from(rows, standing)
    assert [(u.action, u.survived, u.score) for u in uses] == [(ACC, True, 0.9), (ED, False, 0.6), (ACC, None, None)]
    (run, *_rest) = trust_rows(uses)
    assert run.survives == Share.of(1, 2) and run.taken_up.k == 3 and run.shown == 3


def test_confidence_bins_and_shares() -> None:
    assert [confidence_bin(s) for s in (0.0, 0.49, 0.5, 0.8, 0.949, 0.95, 1.0, None)] == [
        "0.00-0.50",
        "0.00-0.50",
        "0.50-0.80",
        "0.80-0.95",
        "0.80-0.95",
        "0.95-1.00",
        "0.95-1.00",
        NO_SCORE,
    ]
    half = Share.of(5, 10)  # Wilson 95 %: 0.5 ± 1.96·sqrt(0.25/10 + 1.96²/400) / (1 + 1.96²/10)
    assert (
        half.value == 0.5
        and half.low == pytest.approx(0.2366, abs=1e-4)
        and half.high == pytest.approx(0.7634, abs=1e-4)
    )
    assert share_text(half) == "50 % (24-76 %, 5 of 10)" and share_text(Share.of(0, 0)) == "—"


def test_rows_are_grouped_by_run_protocol_model_and_confidence() -> None:
    uses = [Use("a", "m1", "ow", 1, 0.9, ACC, None), Use("b", "m2", "mc", 2, 0.3, REJ, None)]
    assert [(r.group, r.name, r.shown) for r in trust_rows(uses)] == [
        ("run", "a (m1, ow)", 1),
        ("run", "b (m2, mc)", 1),
        ("protocol", "mc", 1),
        ("protocol", "ow", 1),
        ("model", "m1", 1),
        ("model", "m2", 1),
        ("confidence", "0.00-0.50", 1),
        ("confidence", "0.80-0.95", 1),
    ]
