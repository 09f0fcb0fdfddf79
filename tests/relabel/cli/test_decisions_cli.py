"""`relabel snapshot export --format label-studio` and `relabel decisions import`: a snapshot written as Label
Studio tasks and read back as one annotator's decisions gives the snapshot's label sets; a refused file is one line
on stderr and stores nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.enums import Verdict
from db.models import Annotation, Image, User
from relabel.cli import cli
from relabel.common.workspace import get_dataset
from relabel.decisions.annotations import store_annotation
from relabel.snapshots.freeze import create_snapshot
from relabel.snapshots.reader import get_snapshot, snapshot_rows
from tests.studio_workspace import build_workspace

RUN = "efficientnet-lite0@topk"


@pytest.fixture
def workspace(tmp_path: Path, db_url: str) -> tuple[Engine, list[str]]:
    """The studio test workspace with a snapshot `r1` of varied label sets (A, B, M, Z and undecided images)."""
    engine = build_workspace(tmp_path / "ws", db_url)
    with engine.connect() as conn:
        ids = {p: i for p, i in conn.execute(select(col(Image.path), col(Image.id)))}
    decided = {
        "n02123045_tabby.jpg": (Verdict.labels, [281, 282]),  # M
        "n07920052_espresso.jpg": (Verdict.labels, [968]),  # B
        "n01440764_tench.jpg": (Verdict.labels, [0]),  # A
        "n04266014_shuttle.jpg": (Verdict.none_fit, []),  # Z
    }
    for path, (verdict, classes) in decided.items():
        for user in ("alice", "bob"):
            store_annotation(engine, image_id=ids[path], user=user, verdict=verdict, classes=classes)
    create_snapshot(engine, "r1", created_by="lena")
    return engine, ["--workspace", str(tmp_path / "ws"), "--db", db_url]


def relabel(where: list[str], *args: str) -> Result:
    return CliRunner().invoke(cli, [*where, *args])


def label_sets(engine: Engine, user: str) -> dict[str, list[int]]:
    """Image path -> the classes of `user`'s stored decisions."""
    query = (
        select(col(Image.path), col(Annotation.classes))
        .join(Image, col(Image.id) == col(Annotation.image_id))
        .join(User, col(User.id) == col(Annotation.user_id))
        .where(col(User.name) == user)
    )
    with engine.connect() as conn:
        return {p: list(c) for p, c in conn.execute(query)}


def snapshot_sets(engine: Engine, name: str) -> dict[str, list[int]]:
    with Session(engine) as s:
        snapshot_id = get_snapshot(s, get_dataset(s, None), name).id
        return {r.path: r.classes for r in snapshot_rows(s.connection(), snapshot_id)}  # type: ignore[arg-type]


def decisions(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(Annotation)).scalar_one())


def test_a_label_studio_export_imported_back_gives_the_snapshot_label_sets(
    workspace: tuple[Engine, list[str]], tmp_path: Path
) -> None:
    engine, where = workspace
    out = tmp_path / "tasks.json"
    result = relabel(where, "snapshot", "export", "r1", "--format", "label-studio", "--run", RUN, "--out", str(out))
    assert result.exit_code == 0, result.output
    tasks = json.loads(out.read_text())
    expected = snapshot_sets(engine, "r1")
    assert len(tasks) == len(expected) == 6
    assert sorted(map(len, expected.values())) == [0, 1, 1, 1, 1, 2]  # Z, A, B, undecided, M
    tabby = next(t for t in tasks if t["data"]["image"] == "n02123045_tabby.jpg")
    assert tabby["annotations"][0]["result"][0]["value"]["choices"] == ["n02123045", "n02123159"]
    assert tabby["predictions"] == [
        {
            "model_version": RUN,
            "score": 0.7,
            "result": [
                {"from_name": "label", "to_name": "image", "type": "choices", "value": {"choices": ["n02123045"]}}
            ],
        }
    ]
    before = decisions(engine)

    result = relabel(
        where,
        "decisions",
        "import",
        str(out),
        "--format",
        "label-studio",
        "--user",
        "lena",
        "--empty-as",
        "none-fit",
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("6 decision(s) stored for 6 image(s) by 1 user(s)")
    assert label_sets(engine, "lena") == expected
    assert decisions(engine) == before + 6

    again = relabel(
        where,
        "decisions",
        "import",
        str(out),
        "--format",
        "label-studio",
        "--user",
        "lena",
        "--empty-as",
        "none-fit",
        "--quiet",
    )
    assert again.exit_code == 0 and "0 decision(s) stored" in again.stdout and "6 already stored" in again.stdout
    assert decisions(engine) == before + 6


def test_an_image_root_prefixes_the_paths_and_is_stripped_on_the_way_back(
    workspace: tuple[Engine, list[str]], tmp_path: Path
) -> None:
    engine, where = workspace
    out, root = tmp_path / "tasks.json", "https://files.example/photos dir/"
    result = relabel(
        where, "snapshot", "export", "r1", "--format", "label-studio", "--image-root", root, "--out", str(out)
    )
    assert result.exit_code == 0, result.output
    tasks = json.loads(out.read_text())
    assert tasks[0]["data"]["image"] == "https://files.example/photos dir/n01440764_tench.jpg"
    assert "predictions" not in tasks[0]
    result = relabel(
        where,
        "decisions",
        "import",
        str(out),
        "--format",
        "label-studio",
        "--user",
        "bob",
        "--image-root",
        root,
        "--empty-as",
        "none-fit",
        "--quiet",
    )
    assert result.exit_code == 0, result.output
    assert set(label_sets(engine, "bob")) == set(snapshot_sets(engine, "r1"))


def test_a_refused_file_is_one_line_and_stores_nothing(workspace: tuple[Engine, list[str]], tmp_path: Path) -> None:
    engine, where = workspace
    before = decisions(engine)
    f = tmp_path / "d.csv"
    f.write_text("image,user,classes\nn01440764_tench.jpg,alice,tench\nn01440764_tench.jpg,alice,goldfish\n")
    result = relabel(where, "decisions", "import", str(f), "--format", "csv")
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: d.csv:3: a second decision on image") and result.stderr.count("\n") == 1
    assert decisions(engine) == before


def test_only_label_studio_takes_run_and_image_root(workspace: tuple[Engine, list[str]], tmp_path: Path) -> None:
    _, where = workspace
    out = tmp_path / "r1.csv"
    result = relabel(where, "snapshot", "export", "r1", "--format", "csv", "--run", RUN, "--out", str(out))
    assert result.exit_code == 2 and "takes no --run; formats that do: label-studio" in result.stderr
    result = relabel(where, "snapshot", "export", "r1", "--format", "label-studio", "--run", "nope", "--out", str(out))
    assert result.exit_code == 3 and f"unknown run 'nope' for --run; known runs: {RUN}" in result.stderr
    assert not out.exists()
