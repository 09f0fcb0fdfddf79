"""`relabel users`: list, disable and enable, passwd, role; what a disabled user can no longer do in the studio; the
migration that adds `users.active` to an existing workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import event, inspect, select, text
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db import SCHEMA_VERSION, create_db_engine, init_db
from db.enums import Role, Verdict
from db.migrations import MIGRATIONS, current_version
from db.models import Image, User, pk
from relabel.cli import cli
from relabel.common.errors import ConflictError
from relabel.decisions.annotations import record_annotation, retract_annotation, verify_password
from relabel.review.studio import Studio
from relabel.review.users import list_users
from tests.studio_workspace import PASSWORD, build_workspace

NEW_PASSWORD = "a brand new passphrase"


@pytest.fixture
def workspace(tmp_path: Path, db_url: str) -> tuple[Engine, list[str]]:
    """The studio test workspace (annotators alice and bob, lead lena) and the options that point `relabel` at it."""
    engine = build_workspace(tmp_path / "ws", db_url)
    return engine, ["--workspace", str(tmp_path / "ws"), "--db", db_url]


def relabel(where: list[str], *args: str, env: dict[str, str] | None = None, prompt: str | None = None) -> Result:
    environment: dict[str, str | None] = {"RELABEL_PASSWORD": None, **(env or {})}
    return CliRunner().invoke(cli, [*where, *args], env=environment, input=prompt)


def one_line_error(result: Result, code: int, *parts: str) -> None:
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    for part in parts:
        assert part in result.stderr, result.stderr


def image_ids(engine: Engine) -> list[int]:
    with Session(engine) as s:
        return list(s.scalars(select(pk(Image.id)).order_by(pk(Image.id))))


def studio(engine: Engine, tmp_path: Path) -> Studio:
    return Studio(engine, cache_dir=tmp_path / "cache")


class TestList:
    def test_the_table_and_json_show_role_status_and_decisions(self, workspace, tmp_path: Path) -> None:
        engine, where = workspace
        first, second, third = image_ids(engine)[:3]
        for image in (first, second):
            record_annotation(engine, image_id=image, user="alice", verdict=Verdict.labels, classes=[0])
        undone = record_annotation(engine, image_id=third, user="alice", verdict=Verdict.unclear)
        retract_annotation(engine, undone, user="alice")  # the undo is not a decision; the decision it undid is
        record_annotation(engine, image_id=first, user="lena", verdict=Verdict.none_fit)
        assert relabel(where, "users", "disable", "bob").exit_code == 0

        listed = json.loads(relabel(where, "users", "list", "--json").stdout)
        assert [(u["name"], u["role"], u["active"], u["decisions"]) for u in listed] == [
            ("alice", "annotator", True, 3),
            ("bob", "annotator", False, 0),
            ("lena", "lead", True, 1),
        ]
        assert all(u["created_at"][:4].isdigit() for u in listed)
        table = relabel(where, "users", "list")
        assert table.exit_code == 0
        lines = table.stdout.splitlines()
        assert lines[0].split() == ["name", "role", "status", "created", "decisions"]
        rows = [line.split() for line in lines[1:]]
        assert [(r[0], r[1], r[2], r[-1]) for r in rows] == [
            ("alice", "annotator", "active", "3"),
            ("bob", "annotator", "disabled", "0"),
            ("lena", "lead", "active", "1"),
        ]

    def test_one_query_whatever_the_number_of_users(self, workspace) -> None:
        engine, where = workspace
        for k in range(12):
            assert relabel(where, "users", "add", f"user{k:02d}", env={"RELABEL_PASSWORD": PASSWORD}).exit_code == 0
        statements: list[str] = []
        event.listen(engine, "before_cursor_execute", lambda *a: statements.append(a[2]))
        users = list_users(engine)
        assert len(users) == 15 and len(statements) == 1, statements

    def test_an_empty_workspace_says_how_to_add_a_user(self, tmp_path: Path) -> None:
        where = ["--workspace", str(tmp_path / "empty")]
        assert "relabel users add" in relabel(where, "users", "list").stdout
        assert relabel(where, "users", "list", "--json").stdout.strip() == "[]"


class TestDisable:
    def test_a_disabled_user_cannot_sign_in_or_decide_and_keeps_their_decisions(self, workspace, tmp_path) -> None:
        engine, where = workspace
        image = image_ids(engine)[0]
        kept = record_annotation(engine, image_id=image, user="bob", verdict=Verdict.labels, classes=[281])
        s = studio(engine, tmp_path)
        assert s.login("bob", PASSWORD)

        disabled = relabel(where, "users", "disable", "bob")
        assert disabled.exit_code == 0 and disabled.stdout == "disabled 'bob'\n"
        assert not s.login("bob", PASSWORD)  # the same False as a wrong password or an unknown name
        assert not s.login("bob", "a wrong password") and not s.login("nobody", PASSWORD)
        with pytest.raises(ConflictError, match="user 'bob' is disabled; .*relabel users enable bob"):
            record_annotation(engine, image_id=image, user="bob", verdict=Verdict.unclear)
        with pytest.raises(ConflictError, match="user 'bob' is disabled"):
            retract_annotation(engine, kept, user="bob")
        assert [u.decisions for u in list_users(engine) if u.name == "bob"] == [1]
        assert relabel(where, "users", "disable", "bob").stdout == "'bob' was already disabled\n"

        enabled = relabel(where, "users", "enable", "bob")
        assert enabled.exit_code == 0 and enabled.stdout == "enabled 'bob'\n"
        assert s.login("bob", PASSWORD)
        assert record_annotation(engine, image_id=image, user="bob", verdict=Verdict.unclear) > kept
        assert relabel(where, "users", "enable", "bob").stdout == "'bob' was already enabled\n"

    def test_the_last_active_lead_cannot_be_disabled(self, workspace) -> None:
        engine, where = workspace
        one_line_error(relabel(where, "users", "disable", "lena"), 4, "cannot disable 'lena'", "last active lead")
        assert all(u.active for u in list_users(engine))
        assert relabel(where, "users", "role", "alice", "lead").exit_code == 0
        assert relabel(where, "users", "disable", "lena").exit_code == 0  # alice leads now
        one_line_error(relabel(where, "users", "disable", "alice"), 4, "cannot disable 'alice'")


class TestPasswd:
    def check_password(self, engine: Engine, name: str, password: str) -> bool:
        with Session(engine) as s:
            stored = s.scalars(select(col(User.password_hash)).where(col(User.name) == name)).one()
        return verify_password(password, stored)

    @pytest.mark.parametrize(
        ("args", "env", "prompt"),
        [
            (["--password", NEW_PASSWORD], None, None),
            ([], {"RELABEL_PASSWORD": NEW_PASSWORD}, None),
            ([], None, f"{NEW_PASSWORD}\n{NEW_PASSWORD}\n"),
        ],
        ids=["option", "environment", "prompt"],
    )
    def test_a_new_password_replaces_the_old(
        self, workspace, tmp_path: Path, args: list[str], env: dict[str, str] | None, prompt: str | None
    ) -> None:
        engine, where = workspace
        result = relabel(where, "users", "passwd", "alice", *args, env=env, prompt=prompt)
        assert result.exit_code == 0 and result.stdout.endswith("password of 'alice' changed\n"), result.output
        assert NEW_PASSWORD not in result.stdout  # the prompt hides what is typed
        s = studio(engine, tmp_path)
        assert s.login("alice", NEW_PASSWORD) and not s.login("alice", PASSWORD)
        assert self.check_password(engine, "bob", PASSWORD)  # nobody else's changed

    def test_a_short_password_is_refused_naming_where_it_came_from(self, workspace) -> None:
        engine, where = workspace
        from_env = relabel(where, "users", "passwd", "alice", env={"RELABEL_PASSWORD": "short"})
        assert from_env.exit_code == 2
        assert "RELABEL_PASSWORD" in from_env.stderr and "--password" not in from_env.stderr.replace("passwd", "")
        assert "password too short: 5 characters" in from_env.stderr
        from_option = relabel(where, "users", "passwd", "alice", "--password", "short")
        assert from_option.exit_code == 2 and "'--password'" in from_option.stderr
        assert "RELABEL_PASSWORD" not in from_option.stderr
        prompted = relabel(where, "users", "passwd", "alice", prompt=f"tiny-pw\n{NEW_PASSWORD}\n{NEW_PASSWORD}\n")
        assert prompted.exit_code == 0 and "password too short" in prompted.output  # asked again
        assert self.check_password(engine, "alice", NEW_PASSWORD)

    def test_an_unknown_user_is_refused_before_the_password_is_asked_for(self, workspace) -> None:
        _, where = workspace
        refused = relabel(where, "users", "passwd", "nobody", prompt=f"{NEW_PASSWORD}\n{NEW_PASSWORD}\n")
        one_line_error(refused, 3, "unknown user 'nobody'")
        assert "Password" not in refused.stdout


class TestRole:
    def test_promote_and_demote(self, workspace, tmp_path: Path) -> None:
        engine, where = workspace
        s = studio(engine, tmp_path)
        assert s.user("alice")[1] is Role.annotator
        promoted = relabel(where, "users", "role", "alice", "lead")
        assert promoted.exit_code == 0 and promoted.stdout == "'alice' is now lead\n"
        assert s.user("alice")[1] is Role.annotator  # a running studio keeps the role until the next sign-in
        assert s.login("alice", PASSWORD) and s.user("alice")[1] is Role.lead
        assert relabel(where, "users", "role", "alice", "lead").stdout == "'alice' was already lead\n"
        assert relabel(where, "users", "role", "lena", "annotator").exit_code == 0
        assert {u.name: u.role for u in list_users(engine)} == {
            "alice": Role.lead,
            "bob": Role.annotator,
            "lena": Role.annotator,
        }

    def test_the_last_active_lead_cannot_be_demoted(self, workspace) -> None:
        engine, where = workspace
        one_line_error(relabel(where, "users", "role", "lena", "annotator"), 4, "cannot demote 'lena'", "last active")
        assert relabel(where, "users", "role", "alice", "lead").exit_code == 0
        assert relabel(where, "users", "disable", "alice").exit_code == 0
        # a disabled lead leads nobody: lena is still the last active one
        one_line_error(relabel(where, "users", "role", "lena", "annotator"), 4, "last active lead")
        assert {u.name: u.role for u in list_users(engine)}["lena"] is Role.lead

    def test_an_unknown_role_lists_the_roles(self, workspace) -> None:
        _, where = workspace
        refused = relabel(where, "users", "role", "alice", "boss")
        assert refused.exit_code == 2 and "'boss' is not one of 'annotator', 'lead'" in refused.stderr


@pytest.mark.parametrize("command", [["disable"], ["enable"], ["role", "lead"], ["passwd", "--password", PASSWORD]])
def test_an_unknown_user_is_one_line_naming_them(workspace, command: list[str]) -> None:
    engine, where = workspace
    name, *rest = ["ghost", *command[1:]]
    one_line_error(relabel(where, "users", command[0], name, *rest), 3, "unknown user 'ghost'")
    assert [u.name for u in list_users(engine)] == ["alice", "bob", "lena"]


def test_an_older_workspace_gains_the_active_column_in_place(tmp_path: Path, empty_db_url: str) -> None:
    """A workspace of schema 4 (no `users.active`) with a user in it: the next command upgrades it, the user stays
    able to sign in, and can then be disabled."""
    engine = create_db_engine(empty_db_url)
    init_db(engine, MIGRATIONS[:4])
    with engine.begin() as conn:
        conn.execute(text("ALTER TABLE users DROP COLUMN active"))
        conn.execute(
            text("INSERT INTO users (name, role, password_hash, created_at) VALUES ('old', 'lead', NULL, :t)"),
            {"t": "2025-01-02 03:04:05"},
        )
        conn.execute(
            text("INSERT INTO users (name, role, created_at) VALUES ('older', 'annotator', :t)"), {"t": "2025-01-02"}
        )
    assert "active" not in {c["name"] for c in inspect(engine).get_columns("users")}
    where = ["--workspace", str(tmp_path / "ws"), "--db", empty_db_url]

    listed = json.loads(relabel(where, "users", "list", "--json").stdout)
    assert [(u["name"], u["role"], u["active"]) for u in listed] == [
        ("old", "lead", True),
        ("older", "annotator", True),
    ]
    with engine.connect() as conn:
        assert current_version(conn) == SCHEMA_VERSION
    assert relabel(where, "users", "disable", "older").exit_code == 0
    assert [u.active for u in list_users(engine)] == [True, False]
    assert init_db(engine) == SCHEMA_VERSION  # a second upgrade changes nothing
    assert [u.active for u in list_users(engine)] == [True, False]
