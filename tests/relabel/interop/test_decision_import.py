"""Importing annotators' decisions from CSV, JSONL and Label Studio: each row through the studio's own decision
check, every row or none, one-line errors naming the row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import col

from db.enums import Verdict
from db.models import Annotation, Image, User, pk
from relabel.common.errors import InputError, NotFoundError, RelabelError
from relabel.decisions.annotations import store_annotation
from relabel.interop.decisions import UserMap, import_decisions
from relabel.interop.rows import DecisionRow
from tests.studio_workspace import build_workspace

TABBY, TIGER_CAT, EGYPTIAN, ESPRESSO, CUP = 281, 282, 285, 967, 968


@pytest.fixture
def ws(tmp_path: Path, db_url: str) -> Engine:
    """The studio test workspace: six photos (n02123045_tabby.jpg, ...), annotators alice and bob, lead lena."""
    return build_workspace(tmp_path, db_url)


def stored(engine: Engine) -> list[tuple[str, str, str, list[int], str, float | None]]:
    """(image path, user, verdict, classes, note, seconds) of every stored decision, oldest first."""
    query = (
        select(
            col(Image.path),
            col(User.name),
            col(Annotation.verdict),
            col(Annotation.classes),
            col(Annotation.note),
            col(Annotation.seconds_on_item),
        )
        .join(Image, col(Image.id) == col(Annotation.image_id))
        .join(User, col(User.id) == col(Annotation.user_id))
        .order_by(col(Annotation.id))
    )
    with engine.connect() as conn:
        return [(p, u, Verdict(v).value, list(c), n, s) for p, u, v, c, n, s in conn.execute(query)]


def count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(Annotation)).scalar_one())


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def image_ids(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {p: i for p, i in conn.execute(select(col(Image.path), pk(Image.id)))}


class TestTables:
    def test_csv_rows_are_stored_as_the_studio_stores_a_decision(self, ws: Engine, tmp_path: Path) -> None:
        f = write(
            tmp_path / "d.csv",
            "image,user,classes,note\n"
            "n02123045_tabby.jpg,alice,tabby;n02123159,two cats\n"  # a name and a wnid
            "n07920052_espresso,bob,967,\n"  # a stem and an index
            "n07920052_espresso.jpg,alice,cup|espresso,\n",
        )
        r = import_decisions(ws, f, fmt="csv", show_progress=False)
        assert (r.rows, r.stored, r.images, r.users, r.already) == (3, 3, 2, 2, 0)
        assert stored(ws) == [
            ("n02123045_tabby.jpg", "alice", "labels", [TABBY, TIGER_CAT], "two cats", None),
            ("n07920052_espresso.jpg", "bob", "labels", [ESPRESSO], "", None),
            ("n07920052_espresso.jpg", "alice", "labels", [CUP, ESPRESSO], "", None),
        ]

    def test_jsonl_takes_class_lists_and_image_ids(self, ws: Engine, tmp_path: Path) -> None:
        tench = image_ids(ws)["n01440764_tench.jpg"]
        rows = [
            {"image": tench, "user": "bob", "classes": ["n01440764", 1]},
            {"image": str(tench), "user": "alice", "classes": [0], "note": "a tench"},
        ]
        f = write(tmp_path / "d.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        r = import_decisions(ws, f, fmt="jsonl", show_progress=False)
        assert (r.stored, r.images, r.users) == (2, 1, 2)
        assert [(u, c, n) for _, u, _, c, n, _ in stored(ws)] == [("bob", [0, 1], ""), ("alice", [0], "a tench")]

    def test_user_given_on_the_command_line_fills_a_table_without_a_user_column(
        self, ws: Engine, tmp_path: Path
    ) -> None:
        f = write(tmp_path / "d.csv", "image,classes\nn01440764_tench.jpg,tench\n")
        with pytest.raises(InputError, match=r"d\.csv:2: names no user"):
            import_decisions(ws, f, fmt="csv", show_progress=False)
        assert import_decisions(ws, f, fmt="csv", users=["lena"], show_progress=False).stored == 1
        assert stored(ws)[0][1] == "lena"

    def test_an_empty_set_is_stored_only_when_told_what_it_means(self, ws: Engine, tmp_path: Path) -> None:
        f = write(tmp_path / "d.csv", "image,user,classes\nn01440764_tench.jpg,alice,\n")
        with pytest.raises(InputError, match=r"d\.csv:2: a 'labels' decision needs at least one class.*--empty-as"):
            import_decisions(ws, f, fmt="csv", show_progress=False)
        import_decisions(ws, f, fmt="csv", empty_as="none-fit", show_progress=False)
        assert [(v, c) for _, _, v, c, _, _ in stored(ws)] == [("none_fit", [])]

    def test_the_same_file_again_stores_nothing_twice(self, ws: Engine, tmp_path: Path) -> None:
        f = write(tmp_path / "d.csv", "image,user,classes\nn01440764_tench.jpg,alice,tench\nn02123045_tabby,bob,281\n")
        assert import_decisions(ws, f, fmt="csv", show_progress=False).stored == 2
        again = import_decisions(ws, f, fmt="csv", show_progress=False)
        assert (again.stored, again.already, count(ws)) == (0, 2, 2)
        changed = write(tmp_path / "d.csv", "image,user,classes\nn01440764_tench.jpg,alice,goldfish\n")
        assert import_decisions(ws, changed, fmt="csv", show_progress=False).stored == 1
        assert stored(ws)[-1][:4] == ("n01440764_tench.jpg", "alice", "labels", [1])


GOOD = "n01440764_tench.jpg,alice,tench\nn02123045_tabby.jpg,bob,tabby\n"
BAD_ROWS = {  # a third row, and the error it must raise: (exception, words of the one line)
    "unknown image": ("n99999999_zebra.jpg,alice,tench", InputError, "image 'n99999999_zebra.jpg' is not in dataset"),
    "unknown class": ("n01440764_tench.jpg,bob,tench;unicorn", InputError, "unknown class 'unicorn'"),
    "unknown user": ("n01440764_tench.jpg,carol,tench", NotFoundError, "unknown user 'carol'"),
    "empty set": ("n01440764_tench.jpg,bob,", InputError, "needs at least one class"),
    "duplicate": ("n01440764_tench,alice,goldfish", InputError, "a second decision on image 'n01440764_tench.jpg'"),
    "class out of range": ("n01440764_tench.jpg,bob,1000", InputError, "out of range 0..999"),
    "note too long": (f"n01440764_tench.jpg,bob,tench,{'x' * 2001}", InputError, "the note"),
}


class TestAllOrNothing:
    @pytest.mark.parametrize("case", list(BAD_ROWS))
    def test_a_bad_third_row_is_named_and_nothing_is_stored(self, ws: Engine, tmp_path: Path, case: str) -> None:
        row, error, words = BAD_ROWS[case]
        note = "" if row.count(",") == 3 else ","
        f = write(tmp_path / "d.csv", "image,user,classes,note\n" + GOOD.replace("\n", ",\n") + row + note + "\n")
        with pytest.raises(error) as caught:
            import_decisions(ws, f, fmt="csv", show_progress=False)
        message = str(caught.value)
        assert message.startswith("d.csv:4: ") and words in message and "\n" not in message, message
        assert count(ws) == 0

    def test_the_transaction_rolls_back_rows_already_written(self, ws: Engine, tmp_path: Path) -> None:
        """An unknown user is found by the studio's check inside the transaction, after two rows were inserted."""
        store_annotation(ws, image_id=image_ids(ws)["n04266014_shuttle.jpg"], user="lena", verdict=Verdict.unclear)
        f = write(tmp_path / "d.csv", "image,user,classes\n" + GOOD + "n07920052_espresso.jpg,nobody,cup\n")
        with pytest.raises(NotFoundError, match=r"d\.csv:4: unknown user 'nobody'.*nothing stored"):
            import_decisions(ws, f, fmt="csv", show_progress=False)
        assert [(p, u) for p, u, *_ in stored(ws)] == [("n04266014_shuttle.jpg", "lena")]

    def test_an_empty_file_stores_nothing(self, ws: Engine, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="holds no decisions"):
            import_decisions(ws, write(tmp_path / "d.jsonl", "\n"), fmt="jsonl", show_progress=False)


def label_studio(tasks: list[dict[str, Any]], tmp_path: Path) -> Path:
    return write(tmp_path / "project.json", json.dumps(tasks))


def choices(*values: str) -> dict[str, Any]:
    return {"from_name": "label", "to_name": "image", "type": "choices", "value": {"choices": list(values)}}


class TestLabelStudio:
    TASKS: list[dict[str, Any]] = [
        {
            "id": 11,
            "data": {"image": "/data/upload/3/1a2b3c4d-n02123045_tabby.jpg"},
            "annotations": [
                {
                    "completed_by": 7,
                    "lead_time": 4.25,
                    "result": [
                        choices("n02123045", "tiger cat"),
                        {"type": "textarea", "value": {"text": ["sleeping"]}},
                    ],
                },
                {"completed_by": 9, "was_cancelled": True, "result": []},
            ],
        },
        {
            "id": 12,
            "data": {"image": "http://files.example/photos/n07920052_espresso.jpg?x=1"},
            "annotations": [{"completed_by": {"id": 9, "email": "b@example.org"}, "result": [choices("cup")]}],
        },
    ]

    def test_completed_by_ids_are_mapped_to_studio_users(self, ws: Engine, tmp_path: Path) -> None:
        f = label_studio(self.TASKS, tmp_path)
        r = import_decisions(ws, f, fmt="label-studio", users=["7=alice", "9=bob"], show_progress=False)
        assert (r.rows, r.stored, r.images, r.users) == (2, 2, 2, 2)  # the cancelled annotation is no decision
        assert stored(ws) == [
            ("n02123045_tabby.jpg", "alice", "labels", [TABBY, TIGER_CAT], "sleeping", 4.25),
            ("n07920052_espresso.jpg", "bob", "labels", [CUP], "", None),
        ]

    def test_an_unmapped_id_is_an_unknown_user_named_by_task(self, ws: Engine, tmp_path: Path) -> None:
        with pytest.raises(NotFoundError, match=r"project\.json: task 2 \(id 12\), annotation 1: unknown user '9'"):
            import_decisions(ws, label_studio(self.TASKS, tmp_path), fmt="label-studio", users=["7=alice"])
        assert count(ws) == 0

    def test_one_user_for_the_whole_file(self, ws: Engine, tmp_path: Path) -> None:
        f = label_studio(self.TASKS, tmp_path)
        import_decisions(ws, f, fmt="label-studio", users=["lena"], show_progress=False)
        assert {u for _, u, *_ in stored(ws)} == {"lena"}

    @pytest.mark.parametrize(
        ("task", "words"),
        [
            ({"data": {"text": "x"}, "annotations": []}, "data has neither 'image' nor 'image_id'"),
            ({"data": {"image_id": "7"}, "annotations": []}, "data.image_id is '7'"),
            (
                {
                    "data": {"image": "n01440764_tench.jpg"},
                    "annotations": [{"completed_by": 7, "result": [{"type": "rectanglelabels"}]}],
                },
                "is not a class choice",
            ),
            ({"data": {"image": "n01440764_tench.jpg"}, "annotations": {"a": 1}}, "'annotations' is"),
        ],
    )
    def test_a_malformed_task_is_named(self, ws: Engine, tmp_path: Path, task: dict[str, Any], words: str) -> None:
        with pytest.raises(InputError, match=r"project\.json: task 2") as caught:
            import_decisions(ws, label_studio([self.TASKS[1], task], tmp_path), fmt="label-studio", users=["bob"])
        assert words in str(caught.value)
        assert count(ws) == 0

    def test_not_a_project_export(self, ws: Engine, tmp_path: Path) -> None:
        with pytest.raises(InputError, match="a list of tasks"):
            import_decisions(ws, write(tmp_path / "p.json", '{"tasks": []}'), fmt="label-studio")


class TestUserMap:
    def test_plain_name_or_pairs_not_both(self) -> None:
        row = DecisionRow("f:2", "x.jpg", "7", "cat")
        assert UserMap.parse(["alice"]).name(row) == "alice"
        assert UserMap.parse(["7=alice", "8=bob"]).name(row) == "alice"
        assert UserMap.parse(["8=bob"]).name(row) == "7"
        for bad in (["alice", "7=bob"], ["alice", "bob"], ["7="], [""]):
            with pytest.raises(RelabelError, match="--user"):
                UserMap.parse(bad)
