"""`relabel suggest` end to end: an OpenAI-compatible stub server, the offline classifier, and fast failures."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import images
from tests.suggest.stub_server import StubServer


def relabel(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "relabel", "--workspace", str(tmp_path / "ws"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=full_env,
    )


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
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "relabel",
            "--workspace",
            str(tmp_path / "ws"),
            "suggest",
            "--model",
            "openai:gpt-4o",
            "--protocol",
            "cw",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode != 0 and r.stderr.startswith("error: ") and r.stderr.count("\n") == 1
    assert "OPENAI_API_KEY" in r.stderr


def test_unknown_model_kind_lists_the_known_ones(tmp_path: Path, dataset: Path) -> None:
    r = relabel(tmp_path, "suggest", "--model", "gpt5:x")
    assert r.returncode != 0 and "unknown model kind 'gpt5'" in r.stderr and "efficientnet-lite0" in r.stderr


def test_offline_classifier_suggests_top5(tmp_path: Path, dataset: Path) -> None:
    r = relabel(tmp_path, "suggest", "--quiet")
    assert r.returncode == 0, r.stderr
    assert "run 'efficientnet-lite0@topk': 2 image(s), 0 done before, now 2 ok" in r.stdout
