"""`relabel suggest`'s settings as the job receives them: the response cache keyed by run and server, no cache at
all, torch threads for local models, the adapter's own batch size, and model loading without progress bars."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from sqlalchemy import delete, func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.models import Prediction, ResponseCacheEntry
from relabel.common.errors import InputError
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.suggest import setup
from relabel.suggest.adapters.openai_api import OpenAIChatAdapter
from relabel.suggest.cache import MemoryResponseCache, normalise_base_url, request_key
from relabel.suggest.runner import RunSummary, run_suggestions
from relabel.suggest.setup import SuggestSettings, build_job, default_threads
from relabel.suggest.types import ChatRequest, ImageRef
from tests import images
from tests.stub_server import StubServer
from tests.tiny_models import save_tiny_clip

N_IMAGES = 4


@pytest.fixture
def ws(sqlite_engine: Engine, vocab, tmp_path: Path) -> Engine:
    root = tmp_path / "r"
    for i in range(N_IMAGES):
        images.photo(root / f"n02123045_{i}.jpg", color=(30 * i, 90, 90))
    plan = plan_ingest(root, vocab)
    ingest_dataset(sqlite_engine, plan, dataset="d", root=root, vocab=vocab, show_progress=False, workers=1)
    return sqlite_engine


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(answer="tabby", models=["stub-model"]) as server:
        yield server


@pytest.fixture
def torch_threads() -> Iterator[int]:
    """torch's thread count before the test, restored after it (set_num_threads holds for the whole process)."""
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def suggest(engine: Engine, stub: StubServer, run: str, **settings: object) -> RunSummary:
    """`relabel suggest --model openai:stub-model --protocol cw --run RUN` in process, as a new command would."""
    s = SuggestSettings(model="openai:stub-model", protocol="cw", dataset="d", base_url=stub.url, **settings)  # type: ignore[arg-type]
    return run_suggestions(build_job(s, engine, None), dataset="d", run_name=run, show_progress=False)


def cache_rows(engine: Engine) -> int:
    with Session(engine) as s:
        return s.scalar(select(func.count()).select_from(ResponseCacheEntry)) or 0


class TestCacheKey:
    def test_every_part_of_the_request_and_the_run_changes_the_key(self) -> None:
        base = {
            "run": "a",
            "model": "m",
            "base_url": "http://h/v1",
            "prompt_version": "p1",
            "image_hashes": ["x"],
            "params": {"temperature": 0.0},
        }
        changed = [
            {"run": "b"},
            {"model": "m2"},
            {"base_url": "http://h2/v1"},
            {"prompt_version": "p2"},
            {"image_hashes": ["y"]},
            {"params": {"temperature": 0.7}},
        ]
        keys = {request_key(**base)} | {request_key(**{**base, **change}) for change in changed}  # type: ignore[arg-type]
        assert len(keys) == 1 + len(changed)

    def test_one_server_written_two_ways_is_one_key(self) -> None:
        assert normalise_base_url("HTTP://LocalHost:80/v1/") == "http://localhost/v1"
        assert normalise_base_url("https://api.openai.com:443/v1") == "https://api.openai.com/v1"
        assert normalise_base_url("http://127.0.0.1:8000/v1//") == "http://127.0.0.1:8000/v1"
        assert normalise_base_url("http://[::1]:8000/v1") == "http://[::1]:8000/v1"
        common = {"run": "a", "model": "m", "prompt_version": "", "image_hashes": [], "params": {}}
        assert request_key(base_url="HTTP://Host:80/v1/", **common) == request_key(base_url="http://host/v1", **common)  # type: ignore[arg-type]


class TestCacheByRun:
    def test_a_new_run_name_asks_the_server_again(self, ws: Engine, stub: StubServer) -> None:
        first = suggest(ws, stub, "first")
        assert (first.ok, first.cached, len(stub.chat_requests)) == (N_IMAGES, 0, N_IMAGES)
        second = suggest(ws, stub, "second")
        assert (second.ok, second.cached, len(stub.chat_requests)) == (N_IMAGES, 0, 2 * N_IMAGES)
        assert cache_rows(ws) == 2 * N_IMAGES

    def test_the_same_run_reads_its_answers_from_the_cache(self, ws: Engine, stub: StubServer) -> None:
        suggest(ws, stub, "first")
        with Session(ws) as s, s.begin():  # the run lost its rows (an interrupted chunk): its answers stay cached
            s.execute(delete(Prediction))
        again = suggest(ws, stub, "first")
        assert (again.done_before, again.ok, again.cached, len(stub.chat_requests)) == (0, N_IMAGES, N_IMAGES, N_IMAGES)

    def test_no_cache_neither_reads_nor_writes(self, ws: Engine, stub: StubServer) -> None:
        s = SuggestSettings(model="openai:stub-model", protocol="cw", dataset="d", base_url=stub.url, use_cache=False)
        assert build_job(s, ws, None).adapter.cache is None  # type: ignore[union-attr]
        uncached = suggest(ws, stub, "plain", use_cache=False)
        assert (uncached.ok, len(stub.chat_requests), cache_rows(ws)) == (N_IMAGES, N_IMAGES, 0)


class TestCacheByServer:
    def requests(self, tmp_path: Path) -> list[ChatRequest]:
        path = images.photo(tmp_path / "a.jpg")
        return [ChatRequest((ImageRef(1, path, "sha-a", "a.jpg"),), "what is this?")]

    def test_another_server_is_asked_even_for_the_same_run(self, tmp_path: Path) -> None:
        cache, requests = MemoryResponseCache(), self.requests(tmp_path)
        with StubServer(answer="tabby") as one, StubServer(answer="tiger cat") as two:
            for stub in (one, two, one):
                adapter = OpenAIChatAdapter("m", base_url=stub.url, api_key="EMPTY", cache=cache, run="r")
                adapter.generate(requests)
            assert (len(one.chat_requests), len(two.chat_requests), len(cache.entries)) == (1, 1, 2)

    def test_the_same_server_written_otherwise_hits_the_cache(self, tmp_path: Path) -> None:
        cache, requests = MemoryResponseCache(), self.requests(tmp_path)
        with StubServer(answer="tabby") as stub:
            OpenAIChatAdapter("m", base_url=stub.url, api_key="EMPTY", cache=cache, run="r").generate(requests)
            other = stub.url.replace("http://", "HTTP://") + "/"
            outputs = OpenAIChatAdapter("m", base_url=other, api_key="EMPTY", cache=cache, run="r").generate(requests)
            assert (outputs[0].text, outputs[0].cached, len(stub.chat_requests)) == ("tabby", True, 1)


class TestLocalModels:
    def test_threads_reach_torch(self, ws: Engine, torch_threads: int) -> None:
        torch.set_num_threads(2)
        job = build_job(SuggestSettings(model="efficientnet-lite0", dataset="d", threads=1), ws, None)
        assert (torch.get_num_threads(), job.adapter.threads) == (1, 1)  # type: ignore[union-attr]

    def test_threads_reach_torch_for_an_adapter_without_the_option(
        self, ws: Engine, tmp_path: Path, torch_threads: int
    ) -> None:
        torch.set_num_threads(2)
        build_job(SuggestSettings(model=f"clip:{save_tiny_clip(tmp_path / 'clip')}", dataset="d", threads=1), ws, None)
        assert torch.get_num_threads() == 1

    def test_default_threads_follow_the_load(self, monkeypatch: pytest.MonkeyPatch, torch_threads: int) -> None:
        monkeypatch.setattr(setup.os, "sched_getaffinity", lambda _pid: {0, 1}, raising=False)
        torch.set_num_threads(4)  # torch's default on a machine with more cores than this process may use
        monkeypatch.setattr(setup.os, "getloadavg", lambda: (2.0, 0.0, 0.0))
        assert default_threads() == 1
        monkeypatch.setattr(setup.os, "getloadavg", lambda: (1.5, 0.0, 0.0))
        assert default_threads() == 2

    def test_the_batch_size_defaults_to_the_adapters_own(self, ws: Engine, torch_threads: int) -> None:
        own = build_job(SuggestSettings(model="efficientnet-lite0", dataset="d"), ws, None)
        given = build_job(SuggestSettings(model="efficientnet-lite0", dataset="d", batch_size=3), ws, None)
        assert (own.adapter.batch_size, given.adapter.batch_size) == (8, 3)  # type: ignore[union-attr]
        with pytest.raises(InputError, match="--batch-size must be at least 1, got 0"):
            build_job(SuggestSettings(model="efficientnet-lite0", dataset="d", batch_size=0), ws, None)
        with pytest.raises(InputError, match="--threads must be at least 1, got 0"):
            build_job(SuggestSettings(model="efficientnet-lite0", dataset="d", threads=0), ws, None)

    def test_loading_a_transformers_model_prints_no_progress_bar(
        self, ws: Engine, tmp_path: Path, torch_threads: int, capfd: pytest.CaptureFixture[str]
    ) -> None:
        from transformers.utils import logging as hf_logging

        folder = save_tiny_clip(tmp_path / "clip")
        capfd.readouterr()
        verbosity = hf_logging.get_verbosity()
        try:
            build_job(SuggestSettings(model=f"clip:{folder}", dataset="d", threads=1), ws, None)  # check() loads it
            assert not hf_logging.is_progress_bar_enabled()
        finally:
            hf_logging.enable_progress_bar()
            hf_logging.set_verbosity(verbosity)
        out, err = capfd.readouterr()
        assert "Loading weights" not in err and "%|" not in err and out == ""
