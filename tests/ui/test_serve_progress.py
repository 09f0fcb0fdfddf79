"""Long commands say what they are doing on stderr (on a terminal, or with RELABEL_PROGRESS=1 as here): `relabel
serve` while it opens the workspace, loads Gradio and builds the studio; `relabel predictions import` while it
reads, matches and stores; `--quiet` silences the latter; a failing step says so instead of leaving a half line;
without a terminal nothing but errors reaches stderr."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from relabel.cli import cli
from relabel.common.stages import stage
from tests.studio_workspace import build_workspace


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELABEL_PROGRESS", "1")


def test_serve_start_up_shows_each_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, progress: None) -> None:
    import ui.app

    build_workspace(tmp_path / "ws")
    launched: list[object] = []
    monkeypatch.setattr(ui.app, "launch_app", lambda studio, **kw: launched.append(studio))
    result = CliRunner().invoke(cli, ["--workspace", str(tmp_path / "ws"), "serve", "--port", str(free_port())])
    assert result.exit_code == 0, result.output
    assert len(launched) == 1
    err = result.stderr.splitlines()
    assert err[0].startswith("opening the workspace: dataset, runs and the review queue ... ") and err[0].endswith(" s")
    assert err[1].startswith("loading the web framework (Gradio) ... ") and err[1].endswith(" s")
    assert err[2] == "building the studio's pages and starting the server ..."
    assert "images to review" in result.stdout  # the summary stays on stdout, after the loading steps


def test_predictions_import_shows_each_step(tmp_path: Path, progress: None) -> None:
    build_workspace(tmp_path / "ws")
    ws = ["--workspace", str(tmp_path / "ws")]
    rng = np.random.default_rng(0)
    keys = ["n01440764_tench.jpg", "n02123045_tabby.jpg"]
    np.savez(tmp_path / "p.npz", scores=rng.random((2, 1000)).astype(np.float32), ids=np.array(keys))
    args = [*ws, "predictions", "import", str(tmp_path / "p.npz"), "--run", "vit", "--skip-unknown", "--keep-scores"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    steps = [line.split(" ... ")[0] for line in result.stderr.splitlines()]
    assert steps == [
        "reading p.npz",
        "matching 2 rows to the images of 'photos'",
        "keeping 1,000 scores per image",
        "storing 2 predictions as run 'vit'",
    ]
    quiet = CliRunner().invoke(cli, [*args[:-1], "--replace", "--quiet"])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stderr == ""


def test_a_failing_step_ends_its_line(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    with stage("no terminal"):
        pass
    assert capsys.readouterr().err == ""  # stderr is not a terminal and RELABEL_PROGRESS is unset
    monkeypatch.setenv("RELABEL_PROGRESS", "1")
    with pytest.raises(ValueError), stage("reading x"):
        raise ValueError("bad")
    assert capsys.readouterr().err == "reading x ... failed\n"
    with stage("quiet", enabled=False):
        pass
    assert capsys.readouterr().err == ""
