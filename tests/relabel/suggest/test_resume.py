"""A suggestion run through an OpenAI-compatible stub server that fails: retryable errors are asked again by the
next run, final ones only with `retry_errors`, an outage stops the run early with unstarted images left without a
row, and answers already received are never requested twice. On SQLite and PostgreSQL; no real sleeping."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.models import Image, ModelRun, Prediction
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.suggest.adapters.openai_api import OpenAIChatAdapter
from relabel.suggest.cache import DbResponseCache
from relabel.suggest.failures import needs_retry
from relabel.suggest.protocols import ProtocolContext, get_protocol
from relabel.suggest.runner import RunSummary, SuggestJob, run_suggestions
from tests import images
from tests.stub_server import Fault, StubServer

N_IMAGES = 10
RUN = "stub@cw"


@pytest.fixture
def ws(engine: Engine, vocab, tmp_path: Path) -> Engine:
    root = tmp_path / "r"
    for i in range(N_IMAGES):
        images.photo(root / f"n02123045_{i}.jpg", color=(20 * i, 90, 90))
    plan = plan_ingest(root, vocab)
    ingest_dataset(engine, plan, dataset="d", root=root, vocab=vocab, show_progress=False, workers=1)
    return engine


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(answer="tabby", models=["stub-model"]) as server:
        yield server


class Suggest:
    """Runs `relabel suggest` in process, each time with a new adapter, as a new command would."""

    def __init__(self, engine: Engine, vocab, stub: StubServer, **adapter_options: object) -> None:
        self.engine, self.vocab, self.stub = engine, vocab, stub
        self.options = {"concurrency": 1, "max_retries": 1, "stop_after_failures": 3, **adapter_options}
        self.sleeps: list[float] = []

    def __call__(self, *, retry_errors: bool = False, images_per_request: int = 1) -> RunSummary:
        adapter = OpenAIChatAdapter(
            "stub-model",
            base_url=self.stub.url,
            api_key="EMPTY",
            cache=DbResponseCache(self.engine),
            sleep=self.sleeps.append,
            **self.options,
        )
        ctx = ProtocolContext(self.vocab, images_per_request=images_per_request)
        job = SuggestJob(self.engine, adapter, get_protocol("cw"), ctx, chunk_size=4)
        return run_suggestions(job, dataset="d", run_name=RUN, retry_errors=retry_errors, show_progress=False)


@pytest.fixture
def suggest(ws: Engine, vocab, stub: StubServer) -> Suggest:
    return Suggest(ws, vocab, stub)


def rows(engine: Engine) -> dict[str, tuple[int, str, dict | None]]:
    """The run's predictions by image path: (prediction id, status, details)."""
    with Session(engine) as s:
        found = s.execute(
            select(Image.path, Prediction.id, Prediction.status, Prediction.details)
            .join(Image, Image.id == Prediction.image_id)
            .join(ModelRun, ModelRun.id == Prediction.run_id)
            .where(ModelRun.name == RUN)
        ).all()
    return {path: (pid, status.value, details) for path, pid, status, details in found}


def sent_digests(stub: StubServer) -> list[str]:
    return [d for r in stub.chat_requests for d in r.image_digests]


class TestServerDiesMidRun:
    def test_the_run_stops_early_and_unstarted_images_get_no_row(self, suggest: Suggest, stub: StubServer, ws):
        stub.die_after = 3
        r = suggest()
        assert r.stopped is not None and r.stopped.startswith(f"the server at {stub.url} cannot be reached")
        assert (r.ok, r.errors, r.retryable, r.not_started) == (3, 1, 1, N_IMAGES - 4)
        message = r.stop_message()
        assert "\n" not in message and message.startswith("stopped early: the server at")
        assert message.endswith("; 3 image(s) done, 1 failed, 6 not started; run the same command again to resume")
        stored = rows(ws)
        assert len(stored) == 4  # the six images never sent have no row
        assert sorted(status for _, status, _ in stored.values()) == ["error", "ok", "ok", "ok"]
        [(_, _, details)] = [v for v in stored.values() if v[1] == "error"]
        assert details is not None and details["retryable"] is True

    def test_the_rerun_completes_the_unstarted_and_retries_the_failed(self, suggest: Suggest, stub: StubServer, ws):
        stub.die_after = 3
        suggest()
        before = rows(ws)
        answered = set(sent_digests(stub)[:3])
        [failed] = [path for path, (_, status, _) in before.items() if status == "error"]
        stub.come_back()
        stub.reset()
        r = suggest()
        assert (r.stopped, r.done_before, r.ok, r.errors, r.retried) == (None, 3, N_IMAGES - 3, 0, 1)
        assert len(stub.chat_requests) == N_IMAGES - 3  # six never sent and the one that failed; nothing twice
        assert not answered & set(sent_digests(stub))
        after = rows(ws)
        assert len(after) == N_IMAGES and {status for _, status, _ in after.values()} == {"ok"}
        assert after[failed][0] == before[failed][0]  # retried in place: the prediction keeps its id

    def test_answers_in_the_cache_are_not_requested_again(self, suggest: Suggest, stub: StubServer, ws):
        stub.die_after = 3
        suggest()
        with Session(ws) as s:  # as a run killed before committing its chunk leaves them: answered, not stored
            s.execute(Prediction.__table__.delete().where(Prediction.status == "ok"))
            s.commit()
        stub.come_back()
        stub.reset()
        r = suggest()
        assert (r.ok, r.cached, r.errors) == (N_IMAGES, 3, 0)
        assert len(stub.chat_requests) == N_IMAGES - 3

    def test_failures_in_a_row_stop_the_run(self, suggest: Suggest, stub: StubServer, ws):
        stub.inject(*[Fault.server_error(503)] * 6)  # three requests, each tried twice
        r = suggest()
        assert r.stopped is not None and r.stopped.startswith(
            f"3 requests in a row to {stub.url} failed (last: HTTP 503"
        )
        assert (r.ok, r.errors, r.not_started) == (0, 3, N_IMAGES - 3)
        assert len(stub.chat_requests) == 6 and len(rows(ws)) == 3
        again = suggest()
        assert (again.stopped, again.ok, again.retried) == (None, N_IMAGES, 3)
        assert len(stub.chat_requests) == 6 + N_IMAGES


class TestRetryErrors:
    def test_final_errors_stay_until_asked_for(self, suggest: Suggest, stub: StubServer, ws):
        stub.inject(Fault(400, b'{"error": {"message": "Image too large"}}'))
        first = suggest()
        assert (first.ok, first.errors, first.retryable) == (N_IMAGES - 1, 1, 0)
        [(row_id, _, details)] = [v for v in rows(ws).values() if v[1] == "error"]
        assert details is not None and details["retryable"] is False
        rerun = suggest()
        assert (rerun.done_before, rerun.ok + rerun.errors) == (N_IMAGES, 0)
        assert len(stub.chat_requests) == N_IMAGES  # a final error is not asked again by a plain rerun
        retried = suggest(retry_errors=True)
        assert (retried.done_before, retried.ok, retried.retried) == (N_IMAGES - 1, 1, 1)
        assert len(stub.chat_requests) == N_IMAGES + 1
        assert {status for _, status, _ in rows(ws).values()} == {"ok"}
        assert row_id in {pid for pid, _, _ in rows(ws).values()}

    def test_unreadable_answers_are_read_again_from_the_cache(self, suggest: Suggest, stub: StubServer, ws):
        stub.answer = "1: tabby"  # one line for two images
        first = suggest(images_per_request=2)
        assert (first.errors, first.retryable) == (N_IMAGES, 0)
        assert len(stub.chat_requests) == N_IMAGES // 2
        stub.answer = "1: tabby\n2: tabby"  # a new request would now be answered well
        again = suggest(images_per_request=2, retry_errors=True)
        assert (again.retried, again.errors, again.cached) == (N_IMAGES, N_IMAGES, N_IMAGES)
        assert len(stub.chat_requests) == N_IMAGES // 2  # the answers were paid for once: read from the cache

    def test_errors_stored_without_a_mark_are_retried_once(self, suggest: Suggest, stub: StubServer, ws):
        stub.inject(Fault(400, b'{"error": {"message": "Image too large"}}'))
        suggest()
        with Session(ws) as s:  # as a version that did not record retryability left it
            s.execute(update(Prediction).where(Prediction.status == "error").values(details=None))
            s.commit()
        r = suggest()
        assert (r.retried, r.ok) == (1, 1) and len(stub.chat_requests) == N_IMAGES + 1


@pytest.mark.parametrize(
    "details, retry_errors, expected",
    [
        ({"retryable": True}, False, True),
        ({"retryable": False}, False, False),
        ({"retryable": False}, True, True),
        (None, False, True),
        ({"cached": False}, False, True),
    ],
)
def test_which_stored_errors_are_asked_again(details: dict | None, retry_errors: bool, expected: bool) -> None:
    assert needs_retry(details, retry_errors=retry_errors) is expected
