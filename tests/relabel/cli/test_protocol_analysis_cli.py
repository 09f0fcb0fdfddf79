"""`relabel suggest --protocol cw` at 1, 2 and 4 images per request against the stub, whose answers lose accuracy
down a multi-image request (tests.stub_labels.LabelAnswers), then `relabel evaluate --protocol-analysis`.

The five-image workspace (tests/evaluation_workspace.py): ImGT a, b tench; c goldfish; d, e tabby. The stub knows
every image's ImGT class and, with drop_per_position = 1, answers every image after the first of a request wrong.
Five images in the run's order: 1 per request: 5 of 5 right; 2 per request: requests of 2, 2, 1, so 3 of 5
right; 4 per request: requests of 4, 1, so 2 of 5 right.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from db import create_db_engine, init_db
from relabel.cli import main
from relabel.suggest.adapters.openai_api import encode_image
from tests import evaluation_workspace as ws
from tests.stub_labels import LabelAnswers, digest_fraction
from tests.stub_server import StubServer, image_digest

IMGT = {"a": "tench", "b": "tench", "c": "goldfish", "d": "tabby", "e": "tabby"}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ws.build(engine, tmp_path)
    engine.dispose()
    return folder


def relabel(workspace: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(["--workspace", str(workspace), *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def digests(tmp_path: Path) -> dict[str, str]:
    return {n.split("_")[1][0]: image_digest(encode_image(tmp_path / "photos" / n, 1024)) for n in ws.FILES}


def row(out: str, run: str) -> list[str]:
    """The cells after the run's name in its row of the batch-size table."""
    found = [line.split() for line in out.splitlines() if line.split()[:2] == ["stub-model", "cw"]]
    cells = next((c for c in found if run in c), None)
    assert cells is not None, (run, out)
    return cells[cells.index(run) + 1 :]


def test_batch_size_ablation_shows_the_stub_s_drop(workspace: Path, tmp_path: Path, capsys) -> None:
    answers = LabelAnswers({d: IMGT[k] for k, d in digests(tmp_path).items()}, drop_per_position=1.0)
    with StubServer(answer=answers) as stub:
        for k in (1, 2, 4):
            code, out, err = relabel(workspace, capsys, "suggest", "--model", "openai:stub-model", "--quiet",
                                     "--base-url", stub.url, "--protocol", "cw", "--run", f"cw{k}",
                                     "--images-per-request", str(k), "--concurrency", "1")  # fmt: skip
            assert code == 0, err
            assert "now 5 ok, 0 error(s)" in out, out
        sizes = [len(r.image_urls) for r in stub.chat_requests]
        assert (sizes[:5], sorted(sizes[5:8]), sorted(sizes[8:])) == ([1] * 5, [1, 2, 2], [1, 4]), sizes
    report = tmp_path / "report"
    code, out, err = relabel(workspace, capsys, "evaluate", "--reference", "imgt", "--protocol-analysis",
                             "--boot", "200", "--out", str(report))  # fmt: skip
    assert code == 0, err
    assert "batch-size ablation" in out
    # images, top-1, its Wilson interval, Δ against 1 per request, its paired interval
    assert row(out, "cw1")[:3] == ["5", "100.00", "56.55–100.00"] and row(out, "cw1")[3] == "—"
    assert row(out, "cw2")[:4] == ["5", "60.00", "23.07–88.24", "-40.00"]
    assert row(out, "cw4")[:4] == ["5", "40.00", "11.76–76.93", "-60.00"]
    assert float(row(out, "cw4")[6]) < 0  # the paired interval's upper end: a drop, not noise
    markdown = (report / "report.md").read_text()
    assert "## Protocol analysis" in markdown and "![batches](protocol_batches.png)" in markdown
    assert (report / "protocol_batches.png").read_bytes()[:4] == b"\x89PNG"
    assert "| stub-model | cw | 4 | cw4 | 5 | 40.00 |" in markdown


def test_the_stub_s_drop_grows_down_a_request() -> None:
    """With drop_per_position 0.25 the p-th image of a request is wrong for the images whose fraction is below
    0.25 (p - 1): none first, then about a quarter, a half, three quarters; the same images every time."""
    labels = {f"{i:064x}": "tabby" for i in range(400)}
    answers = LabelAnswers(labels, drop_per_position=0.25)
    wrong = [sum(answers.answer(d, p) != "tabby" for d in labels) for p in (1, 2, 3, 4)]
    assert wrong == [sum(digest_fraction(d) < 0.25 * (p - 1) for d in labels) for p in (1, 2, 3, 4)]
    assert wrong[0] == 0 and 70 < wrong[1] < 130 and 170 < wrong[2] < 230 and 270 < wrong[3] < 330
    body = {"messages": [{"content": [{"type": "image_url", "image_url": {"url": "x"}}] * 2}]}
    assert LabelAnswers({image_digest("x"): "tabby"}, drop_per_position=1.0)(body) == "1: tabby\n2: goldfish"
