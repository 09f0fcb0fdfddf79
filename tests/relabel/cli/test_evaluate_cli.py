"""`relabel evaluate` on the command line: the table, the report, the history, and one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlmodel import Session

from db import create_db_engine, init_db
from db.models import ModelRun
from relabel.cli import main
from tests import evaluation_workspace as ws


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ws.build(engine, tmp_path)
    engine.dispose()
    return folder


def relabel(workspace: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of one command run in this process."""
    try:
        main(["--workspace", str(workspace), *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_evaluate_prints_the_table_and_writes_the_report(workspace: Path, capsys) -> None:
    main(["--workspace", str(workspace), "evaluate", "--reference", "imgt", "--reference", "team", "--boot", "0"])
    out = capsys.readouterr().out

    assert "dataset 'five': 2 run(s) × 2 reference(s), stored as evaluation #1" in out
    m5_imgt = next(line.split() for line in out.splitlines() if line.split()[:3] == ["m5", "topk", "imgt"])
    # predicted, scored, top-1, its Wilson interval, excluding failures, top-5 (--boot 0 skips only the bootstrap)
    assert m5_imgt[3:9] == ["5", "4", "50.00", "15.00–85.00", "50.00", "100.00"]
    m1_team = next(line.split() for line in out.splitlines() if line.split()[:3] == ["m1", "cw", "team"])
    assert m1_team[5:7] == ["50.00", "15.00–85.00"] and m1_team[7] == "66.67"  # d's broken reply counts as wrong
    assert "paired with imgt on the images both score" in out
    assert "ranking imgt -> team" in out and "Reliability, after ARGUS (weights P=1, CDC=1, RR=1, E=1)" in out
    report = Path(out.strip().splitlines()[-1].removeprefix("report: "))
    assert report.parent.parent == workspace / "reports" and report.is_file()
    assert (report.parent / "evaluation.json").is_file() and (report.parent / "accuracy_by_reference.png").is_file()


def test_history_shows_each_evaluation(workspace: Path, capsys) -> None:
    base = ["--workspace", str(workspace), "evaluate"]
    main([*base, "--no-report", "--boot", "0"])
    main([*base, "--no-report", "--boot", "0", "--reference", "team", "--run", "m1"])
    capsys.readouterr()

    main([*base, "--history"])
    out = capsys.readouterr().out

    assert "stored evaluations (oldest first)" in out and "#" in out
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[-2:]}
    assert rows["m1"] == ["40.00", "50.00"] and rows["m5"] == ["50.00", "—"]  # m1's broken reply counts as wrong
    assert not (workspace / "reports").exists()


def test_bad_input_is_one_line_and_stores_nothing(workspace: Path, tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.csv").write_text("image,label\nn01440764_a.jpg,tench\nghost.jpg,tench\n")
    (tmp_path / "range.csv").write_text("image,label\nn01440764_a.jpg,1000\n")
    cases = [
        (["predictions", "import", str(tmp_path / "bad.csv"), "--run", "x"], "not in the dataset: 'ghost.jpg'"),
        (["predictions", "import", str(tmp_path / "range.csv"), "--run", "x"], "class index 1000 is out of range"),
        (["evaluate", "--reference", "nope"], "unknown label source of dataset 'five' 'nope'"),
        (["evaluate", "--weights", "P=1,Q=2"], "expected NAME=NUMBER with NAME one of P, CDC, RR, E"),
        (["evaluate", "robustness", "--perturbations", "blizzard"], "unknown perturbation 'blizzard'"),
        (["evaluate", "--metric", "shankar"], "--metric shankar needs a source imported with --format shankar"),
        (["evaluate", "--metric", "ashankar"], "unknown metric 'ashankar'; known: shankar"),
        (["evaluate", "robustness", "--severities", "9"], "must lie in 1..5"),
    ]
    for args, expected in cases:
        code, _, err = relabel(workspace, capsys, *args)
        assert code != 0, args
        assert err.count("\n") == 1 and err.startswith("error: ") and expected in err, err
    assert relabel(workspace, capsys, "evaluate", "--history")[1].startswith("no stored evaluation yet")
    with Session(create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")) as s:
        assert sorted(s.scalars(select(ModelRun.name))) == ["m1", "m5"]


def test_each_step_says_what_it_does_on_stderr_unless_quiet(workspace: Path, capsys, monkeypatch) -> None:
    """On a terminal (here: RELABEL_PROGRESS=1) every step of an evaluation names itself and its seconds; --quiet
    and a pipe keep stderr for errors; stdout is the same either way."""
    monkeypatch.setenv("RELABEL_PROGRESS", "1")
    args = ("evaluate", "--reference", "imgt", "--reference", "team", "--boot", "0", "--no-report")
    code, out, err = relabel(workspace, capsys, *args)
    steps = [line.rsplit(" ... ", 1) for line in err.splitlines()]
    assert code == 0 and [what for what, _ in steps] == [
        "reading the references and runs of dataset 'five'",
        "scoring 2 run(s) × 2 reference(s)",
        "reliability (P, CDC, RR, E)",
        "label sensitivity and what each difference is made of",
    ]
    assert all(took.endswith(" s") and float(took[:-2]) >= 0 for _, took in steps)
    code, quiet_out, quiet_err = relabel(workspace, capsys, *args, "--quiet")
    assert code == 0 and quiet_err == ""
    assert quiet_out.replace("#2", "#1") == out
    monkeypatch.delenv("RELABEL_PROGRESS")
    assert relabel(workspace, capsys, *args)[2] == ""  # not a terminal
