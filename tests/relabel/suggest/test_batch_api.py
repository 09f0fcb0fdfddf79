"""`relabel suggest --batch-api` against the stub server's Batch API: the same requests and answers as the online
path, resume after an interruption without a second batch, failed lines stored as failures, and a batch that ends
failed or expired reported on one line with its id. No real sleeping."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.models import Image, ModelRun, Prediction
from relabel.common.errors import RelabelError
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.suggest.adapters.openai_api import OpenAIChatAdapter
from relabel.suggest.batch_api import BatchProgress, run_batch_suggestions
from relabel.suggest.cache import DbResponseCache
from relabel.suggest.protocols import ProtocolContext, get_protocol
from relabel.suggest.runner import RunSummary, SuggestJob, run_suggestions
from tests import images
from tests.cli_process import run_relabel
from tests.stub_server import Fault, StubServer

N_IMAGES = 10
NAMES = ["tabby", "tiger cat", "Persian cat", "Siamese cat"]


def answer_by_image(body: dict[str, Any]) -> str:
    """A class name that depends on the image sent, so that a mix-up of requests and images shows."""
    url = body["messages"][-1]["content"][0]["image_url"]["url"]
    return NAMES[int(hashlib.sha256(url.encode()).hexdigest(), 16) % len(NAMES)]


@pytest.fixture
def ws(engine: Engine, vocab, tmp_path: Path) -> Engine:
    root = tmp_path / "r"
    for i in range(N_IMAGES):
        images.photo(root / f"n02123045_{i}.jpg", color=(25 * i, 90, 40 + 10 * i))
    plan = plan_ingest(root, vocab)
    ingest_dataset(engine, plan, dataset="d", root=root, vocab=vocab, show_progress=False, workers=1)
    return engine


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(answer=answer_by_image, models=["stub-model"]) as server:
        yield server


def make_job(engine: Engine, vocab, stub: StubServer) -> SuggestJob:
    adapter = OpenAIChatAdapter(
        "stub-model",
        base_url=stub.url,
        api_key="EMPTY",
        concurrency=2,
        max_retries=0,
        cache=DbResponseCache(engine),
        price_per_1k_input=1.0,
        price_per_1k_output=2.0,
    )
    return SuggestJob(engine, adapter, get_protocol("cw"), ProtocolContext(vocab), chunk_size=4)


class Batch:
    """`relabel suggest --batch-api` in process, each call with a new job, as a new command would."""

    def __init__(self, engine: Engine, vocab, stub: StubServer) -> None:
        self.engine, self.vocab, self.stub = engine, vocab, stub
        self.polls: list[BatchProgress] = []
        self.sleeps: list[float] = []

    def __call__(self, run: str = "batch", *, interrupt: bool = False) -> RunSummary:
        def on_poll(progress: BatchProgress) -> None:
            self.polls.append(progress)
            if interrupt:
                raise KeyboardInterrupt

        job = make_job(self.engine, self.vocab, self.stub)
        return run_batch_suggestions(
            job,
            dataset="d",
            run_name=run,
            poll_seconds=0.05,
            show_progress=False,
            on_poll=on_poll,
            sleep=self.sleeps.append,
        )


@pytest.fixture
def batch(ws: Engine, vocab, stub: StubServer) -> Batch:
    return Batch(ws, vocab, stub)


def rows(engine: Engine, run: str) -> dict[str, tuple[str, list[int] | None, str]]:
    """The run's predictions by image path: (status, classes, reason)."""
    with Session(engine) as s:
        found = s.execute(
            select(col(Image.path), col(Prediction.status), col(Prediction.classes), col(Prediction.reason))
            .join(Image, col(Image.id) == col(Prediction.image_id))
            .join(ModelRun, col(ModelRun.id) == col(Prediction.run_id))
            .where(col(ModelRun.name) == run)
        ).all()
    return {path: (status.value, classes, reason) for path, status, classes, reason in found}


def run_params(engine: Engine, run: str) -> dict[str, Any]:
    with Session(engine) as s:
        return s.scalars(select(col(ModelRun.params)).where(col(ModelRun.name) == run)).one()


def canonical(bodies: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(b, sort_keys=True) for b in bodies)


class TestBatchJob:
    def test_stores_the_answers_the_online_path_stores_from_the_same_requests(self, batch: Batch, stub, ws, vocab):
        online = run_suggestions(make_job(ws, vocab, stub), dataset="d", run_name="online", show_progress=False)
        assert (online.ok, online.errors) == (N_IMAGES, 0)
        r = batch()
        assert (r.total, r.ok, r.errors, r.not_started, r.cached) == (N_IMAGES, N_IMAGES, 0, 0, 0)
        assert len(stub.batch.batches) == 1
        assert canonical(stub.batch.bodies) == canonical([q.body for q in stub.chat_requests if q.body])
        stored, expected = rows(ws, "batch"), rows(ws, "online")
        assert len(stored) == N_IMAGES and stored == expected
        assert len({classes[0] for _, classes, _ in stored.values() if classes}) > 1  # answers differ by image

    def test_the_input_file_names_each_request_once_with_a_stable_id(self, batch: Batch, stub: StubServer):
        batch()
        [(_, content)] = [f for f in stub.batch.files.values() if not f[0].startswith(("output", "error"))]
        lines = [json.loads(x) for x in content.decode().splitlines()]
        assert len(lines) == N_IMAGES and {x["url"] for x in lines} == {"/v1/chat/completions"}
        assert {x["method"] for x in lines} == {"POST"} and len({x["custom_id"] for x in lines}) == N_IMAGES
        created = next(iter(stub.batch.batches.values()))
        assert (created["endpoint"], created["completion_window"]) == ("/v1/chat/completions", "24h")

    def test_polls_until_done_and_records_usage_at_the_batch_price(self, batch: Batch, ws: Engine):
        r = batch()
        assert [p.statuses for p in batch.polls] == [["validating"], ["completed"]]
        assert batch.sleeps == [0.05]
        assert batch.polls[-1].line().startswith(f"batch batch_stub1: completed, {N_IMAGES}/{N_IMAGES} done, 0 failed")
        usage = run_params(ws, "batch")["usage"]
        assert (usage["prompt_tokens"], usage["completion_tokens"], usage["calls"]) == (
            100 * N_IMAGES,
            5 * N_IMAGES,
            N_IMAGES,
        )
        online_cost = (100 * N_IMAGES * 1.0 + 5 * N_IMAGES * 2.0) / 1000
        assert usage["cost_usd"] == pytest.approx(online_cost / 2) and r.cost == pytest.approx(online_cost / 2)

    def test_a_job_over_the_file_limit_goes_as_several_batches(self, batch: Batch, stub, ws, monkeypatch):
        monkeypatch.setattr("relabel.suggest.batch_api.MAX_FILE_BYTES", 1)  # every request its own file
        r = batch()
        assert (r.ok, r.errors) == (N_IMAGES, 0)
        assert len(stub.batch.batches) == N_IMAGES and len(stub.batch.bodies) == N_IMAGES
        assert batch.polls[-1].line().startswith(f"batch batch_stub1 and {N_IMAGES - 1} more: completed, 10/10 done")


class TestResume:
    def test_an_interrupted_call_is_picked_up_without_a_second_batch(self, batch: Batch, stub: StubServer, ws):
        with pytest.raises(KeyboardInterrupt):
            batch(interrupt=True)
        assert rows(ws, "batch") == {}
        state = run_params(ws, "batch")["batch_api"]
        assert [b["batch_id"] for b in state["pending"]] == ["batch_stub1"]
        r = batch()
        assert (r.ok, r.errors, r.not_started) == (N_IMAGES, 0, 0)
        assert len(stub.batch.batches) == 1 and len(stub.batch.bodies) == N_IMAGES
        assert len(rows(ws, "batch")) == N_IMAGES
        assert run_params(ws, "batch")["batch_api"] == {"pending": [], "collected": ["batch_stub1"]}
        again = batch()
        assert (again.done_before, again.ok) == (N_IMAGES, 0) and len(stub.batch.batches) == 1

    def test_answers_already_in_the_cache_are_not_sent(self, batch: Batch, stub: StubServer, ws):
        batch()
        with Session(ws) as s:  # as a call killed before storing leaves them: answered, not stored
            s.execute(delete(Prediction))
            s.commit()
        r = batch()
        assert (r.ok, r.cached) == (N_IMAGES, N_IMAGES) and len(stub.batch.batches) == 1


class TestFailures:
    def test_a_failed_line_is_stored_as_a_failure_and_sent_again_only_when_it_may_pass(self, batch: Batch, stub, ws):
        refused = Fault(400, b'{"error": {"message": "Invalid image", "code": "invalid_image"}}')
        stub.inject(None, refused, None, Fault.server_error(503))
        r = batch()
        assert (r.ok, r.errors, r.retryable) == (N_IMAGES - 2, 2, 1)
        reasons = sorted(reason for status, _, reason in rows(ws, "batch").values() if status == "error")
        assert reasons == ["HTTP 400: Invalid image", "HTTP 503: The server had an error while processing your request"]
        again = batch()
        assert (again.ok, again.retried) == (1, 1) and len(stub.batch.batches) == 2
        assert len(stub.batch.bodies) == N_IMAGES + 1

    def test_a_dropped_line_is_a_retryable_failure(self, batch: Batch, stub: StubServer, ws):
        stub.inject(Fault.drop_connection())
        r = batch()
        assert (r.ok, r.errors, r.retryable) == (N_IMAGES - 1, 1, 1)
        [reason] = [reason for status, _, reason in rows(ws, "batch").values() if status == "error"]
        assert reason == "no output from the batch: no response"

    @pytest.mark.parametrize("outcome", ["expired", "failed"])
    def test_a_batch_that_does_not_complete_is_one_line_naming_it(self, outcome: str, batch: Batch, stub, ws):
        stub.batch.outcome = outcome
        with pytest.raises(RelabelError) as caught:
            batch()
        message = str(caught.value)
        assert message.startswith(f"batch batch_stub1 ended {outcome}") and "\n" not in message
        if outcome == "failed":  # the API's first error says why
            assert message.startswith("batch batch_stub1 ended failed (line 1: the model stub-x does not exist); ")
        answered = N_IMAGES // 2 if outcome == "expired" else 0  # an expired batch returns what it finished
        assert len(rows(ws, "batch")) == answered
        assert f"{answered} answer(s) stored, {N_IMAGES - answered} image(s) without one" in message
        assert run_params(ws, "batch")["batch_api"]["pending"] == []
        stub.batch.outcome = "completed"
        r = batch()
        assert (r.ok, r.done_before) == (N_IMAGES - answered, answered) and len(stub.batch.batches) == 2


def test_the_command_line_runs_a_batch_job(tmp_path: Path) -> None:
    root = tmp_path / "data"
    images.photo(root / "n02123045_a.jpg")
    images.photo(root / "n01440764_b.jpg", color=(9, 9, 9))
    env = {"HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": "EMPTY"}
    base = ["--workspace", str(tmp_path / "ws")]
    assert run_relabel([*base, "ingest", str(root), "--quiet"], env=env).returncode == 0  # in this process
    with StubServer(answer="tabby") as stub:
        args = ["suggest", "--model", "openai:stub-model", "--base-url", stub.url, "--protocol", "cw"]
        r = run_relabel([*base, *args, "--batch-api", "--poll-seconds", "0.05"], env=env)
        assert r.returncode == 0, r.stderr
        assert "2 image(s), 0 done before, now 2 ok, 0 error(s)" in r.stdout
        assert "batch batch_stub1: completed, 2/2 done, 0 failed" in r.stderr
        assert len(stub.batch.batches) == 1 and len(stub.batch.bodies) == 2 and not stub.chat_requests
