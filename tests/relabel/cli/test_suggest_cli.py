"""`relabel suggest` end to end: an OpenAI-compatible stub server, the offline classifier, and fast failures."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests import images
from tests.cli_process import run_relabel
from tests.stub_server import Fault, StubServer

KEY = {"OPENAI_API_KEY": "EMPTY"}


def relabel(tmp_path: Path, *args: str, env: Mapping[str, str | None] | None = None) -> subprocess.CompletedProcess:
    """`relabel --workspace tmp_path/ws ARGS` as the executable runs it, in this process (tests/cli_process.py)."""
    return run_relabel(["--workspace", str(tmp_path / "ws"), *args], env={"HF_HUB_OFFLINE": "1", **(env or {})})


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    images.photo(root / "n02123045_a.jpg")
    images.photo(root / "n01440764_b.jpg", color=(9, 9, 9))
    assert relabel(tmp_path, "ingest", str(root), "--quiet").returncode == 0
    return root


def test_closed_world_run_through_a_stub_server_resumes_without_new_requests(tmp_path: Path, dataset: Path) -> None:
    with StubServer(answer="tabby") as stub:
        args = ["suggest", "--model", "openai:stub-model", "--base-url", stub.url, "--protocol", "cw", "--quiet"]
        first = relabel(tmp_path, *args, env={"OPENAI_API_KEY": "EMPTY"})
        assert first.returncode == 0, first.stderr
        assert "2 image(s), 0 done before, now 2 ok, 0 error(s)" in first.stdout
        assert len(stub.chat_requests) == 2 and "tabby" in stub.chat_requests[0].prompt
        again = relabel(tmp_path, *args, env={"OPENAI_API_KEY": "EMPTY"})
        assert "2 done before, now 0 ok" in again.stdout and len(stub.chat_requests) == 2
        stats = relabel(tmp_path, "stats")
    assert "openai:stub-model@cw: ok 2" in stats.stdout


def test_missing_api_key_fails_before_any_work(tmp_path: Path, dataset: Path) -> None:
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("OPENAI_")}
    r = relabel(tmp_path, "suggest", "--model", "openai:gpt-4o", "--protocol", "cw", env=env)
    assert r.returncode != 0 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
    assert "OPENAI_API_KEY" in r.stderr


def test_unknown_model_kind_lists_the_known_ones(tmp_path: Path, dataset: Path) -> None:
    r = relabel(tmp_path, "suggest", "--model", "gpt5:x")
    assert r.returncode != 0 and "unknown model kind 'gpt5'" in r.stderr and "efficientnet-lite0" in r.stderr


def test_offline_classifier_suggests_top5(tmp_path: Path, dataset: Path) -> None:
    r = relabel(tmp_path, "suggest", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "run 'efficientnet-lite0@topk': 2 image(s), 0 done before, now 2 ok" in r.stdout


@pytest.fixture
def six(tmp_path: Path) -> Path:
    root = tmp_path / "six"
    for i in range(6):
        images.photo(root / f"n02123045_{i}.jpg", color=(40 * i, 60, 60))
    assert relabel(tmp_path, "ingest", str(root), "--quiet").returncode == 0
    return root


def test_outage_stops_early_and_the_same_command_resumes(tmp_path: Path, six: Path) -> None:
    with StubServer(answer="tabby") as stub:
        stub.die_after = 2
        args = ["suggest", "--model", "openai:stub-model", "--base-url", stub.url, "--protocol", "cw", "--quiet"]
        args += ["--concurrency", "1", "--max-retries", "0", "--stop-after-failures", "2"]  # no backoff to wait
        first = relabel(tmp_path, *args, env=KEY)
        assert first.returncode == 75, first.stderr
        assert first.stderr.startswith(f"error: stopped early: the server at {stub.url} cannot be reached")
        assert first.stderr.count("\n") == 1
        counts = re.search(
            r"; 2 image\(s\) done, (\d) failed, (\d) not started; run the same command again", first.stderr
        )
        assert counts is not None and int(counts[1]) + int(counts[2]) == 4 and int(counts[2]) >= 1
        assert f"{counts[1]} error(s) ({counts[1]} retryable: run again), {counts[2]} not started" in first.stdout
        stub.come_back()
        stub.reset()
        again = relabel(tmp_path, *args, env=KEY)
        assert again.returncode == 0, again.stderr
        assert f"6 image(s), 2 done before, now 4 ok, 0 error(s), {counts[1]} earlier error(s) retried" in again.stdout
        assert len(stub.chat_requests) == 4  # the images answered before were not asked again
        stats = relabel(tmp_path, "stats")
    assert "openai:stub-model@cw: ok 6" in stats.stdout


def test_retry_errors_asks_again_for_final_errors(tmp_path: Path, dataset: Path) -> None:
    with StubServer(answer="tabby") as stub:
        stub.inject(Fault(400, b'{"error": {"message": "Image too large"}}'))
        args = ["suggest", "--model", "openai:stub-model", "--base-url", stub.url, "--protocol", "cw", "--quiet"]
        first = relabel(tmp_path, *args, env=KEY)
        assert first.returncode == 0, first.stderr
        assert "now 1 ok, 1 error(s) (1 final: --retry-errors)" in first.stdout
        plain = relabel(tmp_path, *args, env=KEY)
        assert "2 done before, now 0 ok, 0 error(s)" in plain.stdout and len(stub.chat_requests) == 2
        retried = relabel(tmp_path, *args, "--retry-errors", env=KEY)
        assert retried.returncode == 0, retried.stderr
        assert "1 done before, now 1 ok, 0 error(s), 1 earlier error(s) retried" in retried.stdout
        assert len(stub.chat_requests) == 3


def test_help_shows_how_to_retry_errors(tmp_path: Path) -> None:
    r = relabel(tmp_path, "suggest", "--help")
    assert r.returncode == 0
    assert re.search(r"^ +relabel suggest .*--retry-errors$", r.stdout, re.MULTILINE)  # an example
    assert "--stop-after-failures" in r.stdout
