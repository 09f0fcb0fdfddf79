"""Dashboard numbers on a hand-built workspace: every expected value is worked out by hand in the comments.

The workspace (ImGT label, status):
    a tabby ok    b tabby ok    c tench ok    d tench ok    e espresso ok    f (no label) ok
    g tench unreadable (zero bytes)    h tench missing (not on disk)
Users ann and bob (annotators), lead (lead) and idle (an annotator without events). Model runs effnet and qwen.
The events, with explicit times on 2024-05-01 UTC; "now" is 12:30. `#n` is the n-th event stored (its id order):

    #1  09:00:00 ann  a labels [281]        20 s  effnet accepted
    #2  09:00:30 ann  b labels [281]        25 s  effnet accepted
    #3  09:01:30 ann  c labels [0, 1]       40 s  effnet edited
    #4  09:02:00 ann  c labels [1]          15 s  effnet accepted    (undone by #5: #3 stands again)
    #5  09:02:20 ann  undo #4
    #6  09:30:00 ann  d none_fit            10 s  qwen rejected
    #7  11:10:00 ann  e none_fit            12 s
    #8  10:00:00 bob  a labels [281]        30 s  effnet accepted
    #9  10:01:00 bob  b labels [285]        50 s  effnet rejected    (b: disputed)
    #10 10:02:00 bob  c labels [1, 0]       —     qwen edited        (c: same set as ann's, consensus M)
    #11 10:04:00 bob  d unclear             20 s                     (d: ann and bob disagree...)
    #12 12:10:00 bob  f labels [5]           8 s  accepted, no prediction recorded
    #13 10:05:00 bob  g labels [0]           5 s                     (stored after #12, earlier in time)
    #14 12:00:00 lead d labels [0]          60 s  qwen accepted, adjudication (... and the lead settles d: A)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.engine import session_scope
from db.enums import Role, SuggestionAction, Verdict
from db.models import Annotation, Dataset, Image, Prediction, User
from relabel.common.errors import InputError
from relabel.common.vocabulary import Vocabulary
from relabel.decisions.annotations import add_user
from relabel.decisions.log import current_decisions
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.ingest.layouts import LayoutOptions
from relabel.review.dashboard import (
    NO_RUN,
    RATE_MIN_ACTIVE_S,
    ClassProgress,
    LiveCategories,
    LogRow,
    Progress,
    SuggestionUse,
    active_seconds,
    annotator_throughput,
    dashboard,
    hourly_decisions,
    load_events,
    standing_decisions,
)
from relabel.snapshots.freeze import create_snapshot
from relabel.sources.bulk import store_run
from tests import images

DAY = datetime(2024, 5, 1, tzinfo=timezone.utc)
NOW = DAY.replace(hour=12, minute=30)
TABBY, EGYPTIAN_CAT, TENCH, GOLDFISH, ELECTRIC_RAY, ESPRESSO = 281, 285, 0, 1, 5, 967
NONE, ACC, ED, REJ = (
    SuggestionAction.none,
    SuggestionAction.accepted,
    SuggestionAction.edited,
    SuggestionAction.rejected,
)


def at(hhmmss: str) -> datetime:
    h, m, s = map(int, hhmmss.split(":"))
    return DAY.replace(hour=h, minute=m, second=s)


@dataclass
class Studio:
    engine: Engine
    dataset_id: int
    image: dict[str, int]  # "a" -> image id
    user: dict[str, int]


def build_workspace(engine: Engine, vocab: Vocabulary, tmp_path: Path) -> Studio:
    root = tmp_path / "r"
    labels = {"a": "tabby", "b": "tabby", "c": "tench", "d": "tench", "e": "espresso", "f": "", "g": "tench"}
    for i, name in enumerate("abcdef"):
        images.photo(root / f"{name}.jpg", color=(i * 40, 20, 20))
    images.zero_bytes(root / "g.jpg")
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,label\n" + "".join(f"{n}.jpg,{lab}\n" for n, lab in {**labels, "h": "tench"}.items()))
    plan = plan_ingest(root, vocab, "manifest", LayoutOptions(manifest=manifest))
    ingest_dataset(engine, plan, dataset="d", root=root, vocab=vocab, show_progress=False, workers=1)
    for name, role in (("ann", Role.annotator), ("bob", Role.annotator), ("lead", Role.lead), ("idle", Role.annotator)):
        add_user(engine, name, role)
    with Session(engine) as s:
        ids = {p.removesuffix(".jpg"): i for p, i in s.execute(select(Image.path, Image.id))}
        users = {n: i for n, i in s.execute(select(User.name, User.id))}
        dataset_id = s.execute(select(Dataset.id)).scalar_one()
    return Studio(engine, dataset_id, ids, users)


def add_predictions(studio: Studio) -> dict[tuple[str, str], int]:
    """Run effnet predicts a, b, c; run qwen predicts c, d. Returns (run, image) -> prediction id."""
    out = {}
    with session_scope(studio.engine) as s:
        for run_name, names in (("effnet", "abc"), ("qwen", "cd")):
            predictions = [{"image_id": studio.image[name], "classes": [TABBY]} for name in names]
            run = store_run(
                s, dataset_id=studio.dataset_id, name=run_name, protocol="supervised", predictions=predictions
            )
            query = select(Prediction.image_id, Prediction.id).where(Prediction.run_id == run.id)
            stored = dict(s.execute(query).all())
            out.update({(run_name, name): stored[studio.image[name]] for name in names})
    return out


def add_event(studio: Studio, user: str, image: str, verdict: Verdict, classes=(), **fields) -> int:
    with session_scope(studio.engine) as s:
        row = Annotation(
            image_id=studio.image[image],
            user_id=studio.user[user],
            verdict=verdict,
            classes=list(classes),
            flags=[],
            **fields,
        )
        s.add(row)
        s.flush()
        return row.id


@pytest.fixture
def studio(engine: Engine, vocab: Vocabulary, tmp_path: Path) -> Studio:
    st = build_workspace(engine, vocab, tmp_path)
    pred = add_predictions(st)
    L, Z, X = Verdict.labels, Verdict.none_fit, Verdict.unclear

    def ev(user, image, verdict, classes, time, secs, run=None, action=NONE, **extra):
        suggestion = pred[run, image] if run else None
        fields = {"created_at": at(time), "seconds_on_item": secs, "suggestion_action": action, **extra}
        return add_event(st, user, image, verdict, classes, suggestion_id=suggestion, **fields)

    ev("ann", "a", L, [TABBY], "09:00:00", 20, "effnet", ACC)
    ev("ann", "b", L, [TABBY], "09:00:30", 25, "effnet", ACC)
    ev("ann", "c", L, [TENCH, GOLDFISH], "09:01:30", 40, "effnet", ED)
    fourth = ev("ann", "c", L, [GOLDFISH], "09:02:00", 15, "effnet", ACC)
    ev("ann", "c", Verdict.retract, [], "09:02:20", None, retracts_id=fourth)
    ev("ann", "d", Z, [], "09:30:00", 10, "qwen", REJ)
    ev("ann", "e", Z, [], "11:10:00", 12)
    ev("bob", "a", L, [TABBY], "10:00:00", 30, "effnet", ACC)
    ev("bob", "b", L, [EGYPTIAN_CAT], "10:01:00", 50, "effnet", REJ)
    ev("bob", "c", L, [GOLDFISH, TENCH], "10:02:00", None, "qwen", ED)
    ev("bob", "d", X, [], "10:04:00", 20)
    ev("bob", "f", L, [ELECTRIC_RAY], "12:10:00", 8, None, ACC)
    ev("bob", "g", L, [TENCH], "10:05:00", 5)
    ev("lead", "d", L, [TENCH], "12:00:00", 60, "qwen", ACC, is_adjudication=True)
    return st


def test_progress_counts_reviewable_images_and_reports_the_others_apart(studio: Studio) -> None:
    # Reviewable a-f. Consensus a, c (same set in another order), e (one vote), f; d adjudicated; b disputed.
    # Two annotators decided a, b, c, d (the lead's adjudication on d is not a vote); g is not reviewable.
    got = dashboard(studio.engine, "d", overlap=2, now=NOW).progress
    assert got == Progress(
        total=8,
        reviewable=6,
        unreadable=1,
        missing=1,
        with_decision=6,
        with_overlap=4,
        overlap=2,
        consensus=4,
        adjudicated=1,
        disputed=1,
        undecided=0,
    )
    assert got.decided == 5
    # With two votes needed, e and f (one vote each) fall back to undecided.
    strict = dashboard(studio.engine, "d", min_votes=2, overlap=3, now=NOW).progress
    assert (strict.consensus, strict.adjudicated, strict.disputed, strict.undecided) == (2, 1, 1, 2)
    assert strict.with_overlap == 0


def test_per_class_progress_groups_by_the_first_imgt_class(studio: Studio, vocab) -> None:
    # tench: c (consensus), d (adjudicated); tabby: a (consensus), b (disputed); espresso: e (consensus).
    # f has no ImGT label; g and h are not reviewable.
    got = dashboard(studio.engine, "d", now=NOW).classes
    assert got == [
        ClassProgress(TENCH, vocab.classes[TENCH].name, images=2, decided=2, disputed=0),
        ClassProgress(TABBY, vocab.classes[TABBY].name, images=2, decided=1, disputed=1),
        ClassProgress(ESPRESSO, vocab.classes[ESPRESSO].name, images=1, decided=1, disputed=0),
    ]
    assert [c.fraction_decided for c in got] == [1.0, 0.5, 1.0]


def test_live_categories_are_what_a_snapshot_taken_now_would_count(studio: Studio) -> None:
    # a A; b U (disputed); c M; d A (lead's tench = ImGT tench); e Z; f B (no ImGT label); g A (not reviewable,
    # but a snapshot holds every image); h U (nobody decided).
    got = dashboard(studio.engine, "d", now=NOW).categories
    assert got == LiveCategories({"A": 3, "B": 1, "M": 1, "Z": 1, "X": 0, "U": 2}, disputed=1)
    frozen = create_snapshot(studio.engine, "now")
    assert frozen.counts == {k: n for k, n in got.counts.items() if n}
    # With two votes needed, e, f and g (one vote each) become U as well.
    strict = dashboard(studio.engine, "d", min_votes=2, now=NOW).categories
    assert strict == LiveCategories({"A": 2, "B": 0, "M": 1, "Z": 0, "X": 0, "U": 5}, disputed=1)
    assert create_snapshot(studio.engine, "strict", min_votes=2).counts == {"A": 2, "M": 1, "U": 5}


def test_suggestion_use_counts_standing_annotator_decisions_only(studio: Studio) -> None:
    # Standing with a suggestion: #1 #2 #8 accepted, #3 edited, #9 rejected (effnet); #10 edited, #6 rejected
    # (qwen); #12 accepted without a recorded prediction. #4 (undone) and #14 (an adjudication) do not count.
    got = dashboard(studio.engine, "d", now=NOW).suggestions
    assert got.overall == SuggestionUse(shown=8, accepted=4, edited=2, rejected=2)
    assert got.overall.rates == {"accepted": 0.5, "edited": 0.25, "rejected": 0.25}
    assert got.by_run == {
        NO_RUN: SuggestionUse(1, 1, 0, 0),
        "effnet": SuggestionUse(5, 3, 1, 1),
        "qwen": SuggestionUse(2, 0, 1, 1),
    }
    assert all(math.isnan(r) for r in SuggestionUse(0, 0, 0, 0).rates.values())


def test_annotator_throughput(studio: Studio) -> None:
    got = {a.name: a for a in dashboard(studio.engine, "d", now=NOW).annotators}
    assert list(got) == ["ann", "bob", "lead"]  # idle has no events
    ann, bob, lead = got["ann"], got["bob"], got["lead"]
    # ann: 6 decisions and 1 undo; standing on a b c d e. Times 20 25 40 15 10 12 -> median (15 + 20) / 2.
    # Active: first item 20 s + gaps 30 60 30 20, then 27:40 and 1:40:00 capped at 5 min each = 760 s.
    assert (ann.decisions, ann.undos, ann.images_decided, ann.median_seconds) == (6, 1, 5, 17.5)
    assert ann.active_seconds == pytest.approx(760) and ann.active_minutes == pytest.approx(760 / 60)
    assert ann.images_per_hour == pytest.approx(6 / (760 / 3600))  # 12.7 active minutes: enough for a rate
    # bob, in time order a b c d g f: times 30 50 — 20 5 8 -> median 20. Active: 30 s + gaps 60 60 120 60, then
    # 2:05:00 capped at 5 min = 630 s (g was stored after f but happened before it).
    assert (bob.decisions, bob.undos, bob.images_decided, bob.median_seconds) == (6, 0, 6, 20)
    assert bob.active_seconds == pytest.approx(630)
    assert bob.images_per_hour == pytest.approx(6 / (630 / 3600))
    assert (lead.role, lead.decisions, lead.images_decided, lead.median_seconds) == (Role.lead, 1, 1, 60)
    # one decision in its own 60 s: 60 per hour would be an extrapolation, so no rate
    assert lead.active_seconds == 60 and math.isnan(lead.images_per_hour)
    assert dict(ann.hourly)[at("09:00:00")] == 5 and dict(ann.hourly)[at("11:00:00")] == 1
    assert sum(n for _, n in ann.hourly) == 6


def test_hourly_series_covers_the_last_24_clock_hours(studio: Studio) -> None:
    got = dashboard(studio.engine, "d", now=NOW).hourly
    assert len(got) == 24
    assert got[0][0] == at("12:00:00") - timedelta(hours=23) and got[-1][0] == at("12:00:00")
    # 09h: #1 #2 #3 #4 #6 (the undo #5 is not a decision); 10h: bob's #8-#11 and #13; 11h: #7; 12h: #12 and #14,
    # which is exactly on the hour.
    assert {t.hour: n for t, n in got if n} == {9: 5, 10: 5, 11: 1, 12: 2}


def test_the_fast_log_reader_agrees_with_the_per_image_query(studio: Studio) -> None:
    with studio.engine.connect() as conn:
        ids = list(range(1, 100))
        expected = current_decisions(conn, studio.dataset_id, image_ids=ids)  # the read filtered to image ids
        got = standing_decisions(load_events(conn, studio.dataset_id))
    assert {i: set(ds) for i, ds in got.items()} == {i: set(ds) for i, ds in expected.items()}
    assert len(got) == 7  # every image but the missing one


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_votes": 0}, "min_votes must be at least 1, got 0"),
        ({"overlap": -1}, "overlap must be at least 1, got -1"),
    ],
)
def test_bad_parameters_are_refused(engine, kwargs, message: str) -> None:
    with pytest.raises(InputError, match=message):
        dashboard(engine, "d", **kwargs)


def test_a_workspace_without_decisions(engine: Engine, vocab: Vocabulary, tmp_path: Path) -> None:
    build_workspace(engine, vocab, tmp_path)
    got = dashboard(engine, now=NOW)
    assert (got.progress.with_decision, got.progress.undecided, got.categories.counts["U"]) == (0, 6, 8)
    assert got.annotators == [] and got.suggestions.by_run == {} and got.suggestions.overall.shown == 0
    assert [n for _, n in got.hourly] == [0] * 24


def event(i: int, when: datetime, verdict: Verdict = Verdict.labels, secs: float | None = None) -> LogRow:
    return LogRow(i, 1, 1, verdict, (0,), False, None, when.timestamp(), secs, SuggestionAction.none, None)


def test_a_rate_needs_ten_minutes_of_active_time() -> None:
    t0 = at("09:00:00")
    users = {1: ("ann", Role.annotator)}
    # 3 decisions in 5 s, the first timed at 1 s: 2,160 per hour if extrapolated
    quick = [event(i, t0 + timedelta(seconds=2 * i), secs=1) for i in range(3)]
    [row] = annotator_throughput(quick, {}, users, now=NOW)
    assert (row.decisions, row.active_seconds) == (3, 5) and math.isnan(row.images_per_hour)
    # 11 decisions a minute apart, the first timed at 0 s: exactly 10 active minutes, 66 per hour
    steady = [event(i, t0 + timedelta(minutes=i), secs=0) for i in range(11)]
    [row] = annotator_throughput(steady, {}, users, now=NOW)
    assert row.active_seconds == RATE_MIN_ACTIVE_S == 600 and row.images_per_hour == pytest.approx(66)
    assert math.isnan(annotator_throughput(steady[:-1], {}, users, now=NOW)[0].images_per_hour)  # 9 minutes


def test_hourly_buckets_are_the_24_clock_hours_up_to_now() -> None:
    events = [
        event(1, NOW - timedelta(hours=24)),  # 12:30 the day before: older than the first hour, which starts at 13:00
        event(2, DAY - timedelta(hours=11)),  # 13:00 the day before: first hour
        event(3, NOW),  # last hour
        event(4, NOW + timedelta(minutes=29, seconds=59)),  # still in the hour that holds now
        event(5, at("13:00:00")),  # the next hour: not shown
        event(6, NOW, Verdict.retract),  # an undo is not a decision
    ]
    got = hourly_decisions(events, now=NOW.replace(tzinfo=None))  # naive means UTC
    assert got[0] == (DAY - timedelta(hours=11), 1) and got[-1] == (at("12:00:00"), 2)
    assert sum(n for _, n in got) == 3


def test_active_time_caps_breaks_and_counts_the_first_item_when_timed() -> None:
    t0 = at("09:00:00")
    assert active_seconds([]) == 0.0
    assert active_seconds([event(1, t0)]) == 0.0  # one untimed event: no active time
    assert active_seconds([event(1, t0, secs=900), event(2, t0 + timedelta(minutes=1))]) == 300 + 60
    assert active_seconds([event(1, t0, secs=7), event(2, t0 + timedelta(hours=3))]) == 7 + 300
