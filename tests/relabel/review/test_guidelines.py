"""Labeling guidelines (`relabel.review.guidelines`, `relabel guidelines`): versioned saves by leads only, the
64 KiB limit, the Markdown subset the studio shows, and the migration that adds the tables to an older workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import func, inspect, select, text
from sqlalchemy.engine import Engine
from sqlmodel import col

from db import SCHEMA_VERSION, create_db_engine, init_db
from db.migrations import MIGRATIONS, current_version
from db.models import Guidelines
from relabel.cli import cli
from relabel.common.errors import ConflictError, InputError, NotFoundError
from relabel.review.guidelines import (
    MAX_GUIDELINES_BYTES,
    Block,
    current_guidelines,
    guideline_blocks,
    guidelines_history,
    save_guidelines,
)
from tests.studio_workspace import build_workspace

HOSTILE = "# Heading\n<img src=x onerror=alert(1)>\n- **bold** point\n"


@pytest.fixture
def workspace(tmp_path: Path, db_url: str) -> tuple[Engine, list[str]]:
    engine = build_workspace(tmp_path / "ws", db_url)
    return engine, ["--workspace", str(tmp_path / "ws"), "--db", db_url]


def rows(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count(col(Guidelines.id)))).scalar_one())


def relabel(where: list[str], *args: str) -> Result:
    return CliRunner().invoke(cli, [*where, *args])


def one_line_error(result: Result, code: int, *parts: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for part in parts:
        assert part in result.stderr, result.stderr


class TestSave:
    def test_each_save_is_a_version_and_the_newest_is_current(self, workspace) -> None:
        engine, _ = workspace
        assert current_guidelines(engine) is None
        first, added = save_guidelines(engine, "# v1\n", author="lena")
        assert added
        second, added = save_guidelines(engine, HOSTILE, author="lena")
        assert added and second.id > first.id
        current = current_guidelines(engine)
        assert current is not None and current.text == HOSTILE and current.author == "lena"
        assert [v.text for v in guidelines_history(engine)] == [HOSTILE, "# v1\n"]
        assert current.created_at.year >= 2024

    def test_saving_the_current_text_again_adds_no_version(self, workspace) -> None:
        engine, _ = workspace
        version, _ = save_guidelines(engine, HOSTILE, author="lena")
        again, added = save_guidelines(engine, HOSTILE, author="lena")
        assert not added and again.id == version.id and rows(engine) == 1

    def test_an_annotator_or_unknown_user_saves_nothing(self, workspace) -> None:
        engine, _ = workspace
        with pytest.raises(ConflictError, match="'alice' is an annotator"):
            save_guidelines(engine, HOSTILE, author="alice")
        with pytest.raises(NotFoundError, match="unknown user 'mallory'"):
            save_guidelines(engine, HOSTILE, author="mallory")
        assert rows(engine) == 0

    @pytest.mark.parametrize(
        ("text", "reason"),
        [
            ("", "empty"),
            (" \n\t\n", "empty"),
            ("é" * (MAX_GUIDELINES_BYTES // 2 + 1), "bytes of UTF-8"),  # few characters, too many bytes
            ("x" * (MAX_GUIDELINES_BYTES + 1), "characters"),
            ("a\0b", "NUL"),
            ("a\ud800b", "surrogate"),
        ],
    )
    def test_unusable_text_is_one_line_naming_the_guidelines(self, workspace, text: str, reason: str) -> None:
        engine, _ = workspace
        with pytest.raises(InputError) as err:
            save_guidelines(engine, text, author="lena")
        assert "guidelines" in str(err.value) and reason in str(err.value) and "\n" not in str(err.value)
        assert rows(engine) == 0

    def test_exactly_64_kib_is_kept(self, workspace) -> None:
        engine, _ = workspace
        version, _ = save_guidelines(engine, "x" * MAX_GUIDELINES_BYTES, author="lena")
        assert len(version.text) == MAX_GUIDELINES_BYTES


class TestBlocks:
    def test_headings_bullets_bold_and_paragraphs(self) -> None:
        blocks = guideline_blocks(
            "# Title\nintro line\nsecond line\n\n- **mouse** is the computer mouse\n* two\n#### deep"
        )
        assert blocks == [
            Block("h1", (("Title", False),)),
            Block("p", (("intro line\nsecond line", False),)),
            Block("li", (("mouse", True), (" is the computer mouse", False))),
            Block("li", (("two", False),)),
            Block("h3", (("deep", False),)),
        ]

    def test_markup_stays_text(self) -> None:
        blocks = guideline_blocks(HOSTILE)
        assert blocks[1] == Block("p", (("<img src=x onerror=alert(1)>", False),))
        assert guideline_blocks("#not a heading") == [Block("p", (("#not a heading", False),))]


class TestCli:
    def test_set_show_and_history(self, workspace, tmp_path: Path) -> None:
        engine, where = workspace
        md = tmp_path / "guidelines.md"
        md.write_text(HOSTILE, encoding="utf-8")
        result = relabel(where, "guidelines", "set", str(md), "--author", "lena")
        assert result.exit_code == 0, result.output
        assert "saved guidelines version" in result.stdout
        assert relabel(where, "guidelines", "set", str(md), "--author", "lena").stdout.startswith("unchanged")
        assert relabel(where, "guidelines", "show").stdout == HOSTILE
        md.write_text("# second\n", encoding="utf-8")
        assert relabel(where, "guidelines", "set", str(md), "--author", "lena").exit_code == 0
        table = relabel(where, "guidelines", "history").stdout.splitlines()
        assert len(table) == 3 and "lena" in table[1]
        history = json.loads(relabel(where, "guidelines", "history", "--json").stdout)
        assert [h["text"] for h in history] == ["# second\n", HOSTILE]

    def test_refusals_are_one_line_and_write_nothing(self, workspace, tmp_path: Path) -> None:
        engine, where = workspace
        md, big, empty = tmp_path / "g.md", tmp_path / "big.md", tmp_path / "empty.md"
        md.write_text(HOSTILE, encoding="utf-8")
        big.write_text("x" * (4 * MAX_GUIDELINES_BYTES + 1), encoding="utf-8")
        empty.write_text("\n\n", encoding="utf-8")
        one_line_error(relabel(where, "guidelines", "set", str(md), "--author", "alice"), 4, "annotator")
        one_line_error(relabel(where, "guidelines", "set", str(big), "--author", "lena"), 2, "big.md", "64 KiB")
        one_line_error(relabel(where, "guidelines", "set", str(empty), "--author", "lena"), 2, "empty.md", "empty")
        one_line_error(relabel(where, "guidelines", "set", "/dev/zero", "--author", "lena"), 2, "not a regular file")
        assert rows(engine) == 0
        assert relabel(where, "guidelines", "show").stdout == ""


def test_the_migration_adds_the_tables_to_an_older_workspace(tmp_path: Path) -> None:
    """A workspace stamped with version 9, before the guidelines and comments existed, gets both tables."""
    engine = create_db_engine(f"sqlite:///{tmp_path / 'old.db'}")
    init_db(engine)
    with engine.begin() as conn:
        conn.execute(text("DROP TABLE guidelines"))
        conn.execute(text("DROP TABLE image_comments"))
        conn.execute(text("DELETE FROM schema_version WHERE version >= 10"))
        assert current_version(conn) == 9
    assert init_db(engine) == SCHEMA_VERSION
    with engine.connect() as conn:
        assert inspect(conn).has_table("guidelines") and inspect(conn).has_table("image_comments")
        assert current_version(conn) == SCHEMA_VERSION
    assert MIGRATIONS[[m.version for m in MIGRATIONS].index(10)].name == "labeling guidelines and comments on images"
