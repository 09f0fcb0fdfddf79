"""`relabel suggest --run`, `--no-cache` and `--threads` on the command line, in process, against a stub server."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from relabel.cli import cli
from tests import images
from tests.stub_server import StubServer


def relabel(tmp_path: Path, *args: str) -> Result:
    env = {"HF_HUB_OFFLINE": "1", "OPENAI_API_KEY": "EMPTY"}
    return CliRunner().invoke(cli, ["--workspace", str(tmp_path / "ws"), *args], env=env)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    images.photo(root / "n02123045_a.jpg")
    images.photo(root / "n01440764_b.jpg", color=(9, 9, 9))
    assert relabel(tmp_path, "ingest", str(root), "--quiet").exit_code == 0
    return root


def test_a_new_run_asks_afresh_and_no_cache_stores_nothing(tmp_path: Path, dataset: Path) -> None:
    with StubServer(answer="tabby") as stub:
        args = ["suggest", "--model", "openai:stub-model", "--base-url", stub.url, "--protocol", "cw", "--quiet"]
        first = relabel(tmp_path, *args)
        assert first.exit_code == 0, first.output
        second = relabel(tmp_path, *args, "--run", "second")
        assert "now 2 ok" in second.output and "from cache" not in second.output
        assert len(stub.chat_requests) == 4
        third = relabel(tmp_path, *args, "--run", "third", "--no-cache")
        fourth = relabel(tmp_path, *args, "--run", "fourth")  # third stored nothing: fourth asks again too
        assert "from cache" not in third.output + fourth.output and len(stub.chat_requests) == 8


def test_threads_below_one_is_refused_before_any_work(tmp_path: Path, dataset: Path) -> None:
    r = relabel(tmp_path, "suggest", "--threads", "0")
    assert r.exit_code == 2 and "--threads must be at least 1, got 0" in r.output, r.output


def test_help_names_the_new_options() -> None:
    text = " ".join(CliRunner().invoke(cli, ["suggest", "--help"]).output.split())  # as wrapped to any width
    assert "--no-cache" in text and "--threads" in text and "default: the model's own" in text
