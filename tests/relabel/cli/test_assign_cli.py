"""`relabel assign add/list/remove`: names checked, one-line errors, nothing half-written, and the queue follows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from db.models import Assignment, pk
from relabel.cli import cli
from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Engine, list[str]]:
    engine = build_workspace(tmp_path / "ws")
    return engine, ["--workspace", str(tmp_path / "ws")]


def relabel(where: list[str], *args: str) -> Result:
    return CliRunner().invoke(cli, [*where, *args])


def one_line_error(result: Result, *parts: str) -> None:
    assert result.exit_code != 0, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for part in parts:
        assert part in result.stderr, result.stderr


def rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count(pk(Assignment.id)))).scalar() or 0)


def test_add_list_remove_a_class_and_images(workspace, tmp_path: Path) -> None:
    engine, where = workspace
    listed = tmp_path / "ids.txt"
    listed.write_text("# hard cases\nn01440764_tench.jpg\nn07920052_espresso\n")
    r = relabel(where, "assign", "add", "--user", "alice", "--class", "tabby")
    assert r.exit_code == 0 and "1 new assignment" in r.output, r.output
    r = relabel(where, "assign", "add", "--user", "bob", "--images", str(listed))
    assert r.exit_code == 0 and "assigned 2 image(s) to 'bob'" in r.output, r.output
    out = relabel(where, "assign", "list").output
    assert "tabby (n02123045)" in out and "n01440764_tench.jpg" in out and out.count("bob") == 2
    assert "alice" not in relabel(where, "assign", "list", "--user", "bob").output
    studio = Studio(engine, cache_dir=tmp_path / "cache")
    card, _ = studio.next_card("bob")
    assert card is not None and Path(card.image.path).stem in {"n01440764_tench", "n07920052_espresso"}
    r = relabel(where, "assign", "remove", "--user", "bob", "--all")
    assert r.exit_code == 0 and "ended 2" in r.output and rows(engine) == 1


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["add", "--user", "zed", "--class", "tabby"], "unknown user 'zed'"),
        (["add", "--user", "alice", "--class", "no-such-class"], "'no-such-class'"),
        (["add", "--user", "alice", "--images", "LIST"], "'missing_photo.jpg'"),
        (["add", "--user", "alice"], "either --class or --images"),
        (["remove", "--user", "alice", "--class", "tabby"], "no such assignment"),
        (["remove", "--user", "alice", "--all", "--class", "tabby"], "--all"),
    ],
)
def test_bad_names_are_one_line_errors_and_store_nothing(workspace, tmp_path: Path, args, named) -> None:
    engine, where = workspace
    listed = tmp_path / "ids.txt"
    listed.write_text("n01440764_tench.jpg\nmissing_photo.jpg\n")
    one_line_error(relabel(where, "assign", *[str(listed) if a == "LIST" else a for a in args]), named)
    assert rows(engine) == 0


def test_queue_lists_what_each_user_is_served(workspace, tmp_path: Path) -> None:
    """`relabel queue --user` lists the user's assigned images first, as the studio serves them; a newcomer's
    listing (no --user) and another user's leave out images assigned only to someone else."""
    engine, where = workspace
    listed = tmp_path / "ids.txt"
    listed.write_text("n07920052_espresso\n")
    assert relabel(where, "assign", "add", "--user", "bob", "--images", str(listed)).exit_code == 0

    def files(*args: str) -> list[str]:
        r = relabel(where, "queue", "--limit", "100", "--json", *args)
        assert r.exit_code == 0, r.output
        return [Path(e["path"]).stem for e in json.loads(r.output)["images"]]

    bob, alice, newcomer = files("--user", "bob"), files("--user", "alice"), files()
    assert bob[0] == "n07920052_espresso"
    assert "n07920052_espresso" not in alice and "n07920052_espresso" not in newcomer
    assert sorted(bob) == sorted([*newcomer, "n07920052_espresso"]) and alice == newcomer
    studio = Studio(engine, cache_dir=tmp_path / "cache")
    card, _ = studio.next_card("bob")
    assert card is not None and Path(card.image.path).stem == bob[0]
    one_line_error(relabel(where, "queue", "--user", "nobody-here"), "unknown user", "nobody-here")
