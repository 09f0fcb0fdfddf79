"""Votes as data: the importers (good and malformed files, SQLite and PostgreSQL), the studio's decisions and a
model run as votes, the `relabel votes` commands, reliability in `relabel stats`, and the ReaL raters end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select
from sqlmodel import Session

from db.enums import Role, Verdict
from db.models import VotePair, VoteSource, VoteWorker
from relabel.cli import cli
from relabel.common.errors import ConflictError, InputError, NotFoundError
from relabel.decisions.annotations import add_user, record_annotation, retract_annotation
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.sources.labels import import_source
from relabel.votes.aggregation import MAYBE, NO, YES, aggregate
from relabel.votes.importing import import_votes
from relabel.votes.report import aggregate_dataset, worker_reliability
from relabel.votes.table import collect_votes
from tests import evaluation_workspace as five
from tests.conftest import shared
from tests.relabel.sources.test_sources import val_dataset

NUMBERS = [1, 2, 3]  # val images 1..3; ImGT of val n is class n % 1000 (see `val_dataset`)


def stored(engine) -> tuple[int, int]:
    """(vote sources, votes) in the workspace."""
    with Session(engine) as s:
        answers = s.scalars(select(VotePair.answers)).all()
        return s.scalar(select(func.count()).select_from(VoteSource)), sum(map(len, answers))


def table(engine, **kwargs):
    with engine.connect() as conn:
        return collect_votes(conn, 1, **kwargs)


def answers_by_pair(t) -> dict[tuple[int, int, str], int]:
    """(image number 0.., class, worker name) -> answer code."""
    v = t.votes
    return {
        (int(v.item_image[i]), int(t.pairs[i, 1]), t.workers[w]): int(a) for i, w, a in zip(v.item, v.worker, v.answer)
    }


HEAD = "worker,image,label,answer\nann,1,1,yes\n"  # a good first row


class TestLongTables:
    def test_answers_and_label_sets_import_on_sqlite_and_postgres(self, engine, vocab, tmp_path: Path) -> None:
        val_dataset(engine, vocab, tmp_path, NUMBERS)
        (tmp_path / "round.csv").write_text(
            "worker,image,label,answer\nann,ILSVRC2012_val_00000001.JPEG,1,yes\nann,2,goldfish,no\n"
            "bob,ILSVRC2012_val_00000001,n01443537,Maybe\nbob,2,2,yes\n"
        )
        r = import_votes(engine, tmp_path / "round.csv", fmt="long", name="round")
        assert (r.votes, r.workers, r.images, r.items) == (4, 2, 2, 3)
        assert r.answers == {"no": 1, "maybe": 1, "yes": 2}
        t = table(engine)
        assert t.workers == ("round:ann", "round:bob") and t.worker_kinds == ("rater", "rater")
        assert t.sources == ("round", "studio") and t.pairs[:, 1].tolist() == [1, 1, 2]
        assert answers_by_pair(t) == {
            (0, 1, "round:ann"): YES, (1, 1, "round:ann"): NO, (0, 1, "round:bob"): MAYBE, (1, 2, "round:bob"): YES
        }  # fmt: skip
        # a set per worker: yes to those, no to the other classes any worker named on that image
        (tmp_path / "sets.jsonl").write_text(
            '{"worker": "ann", "image": "ILSVRC2012_val_00000001", "labels": [1, 7]}\n'
            '{"worker": "bob", "image": "ILSVRC2012_val_00000001", "labels": "tench"}\n'
            '{"worker": "bob", "image": 2, "labels": []}\n{"worker": "cy", "image": 2, "labels": [2]}\n'
        )
        r = import_votes(engine, tmp_path / "sets.jsonl", fmt="long", name="sets")
        assert r.answers == {"no": 4, "maybe": 0, "yes": 4}
        got = answers_by_pair(table(engine, sources=["sets"]))
        assert got == {
            (0, 0, "sets:ann"): NO, (0, 1, "sets:ann"): YES, (0, 7, "sets:ann"): YES,
            (0, 0, "sets:bob"): YES, (0, 1, "sets:bob"): NO, (0, 7, "sets:bob"): NO,
            (1, 2, "sets:bob"): NO, (1, 2, "sets:cy"): YES,
        }  # fmt: skip
        assert stored(engine) == (2, 12)

    def test_workers_are_numbered_in_the_order_the_database_sorts_their_names(
        self, engine, vocab, tmp_path: Path
    ) -> None:
        val_dataset(engine, vocab, tmp_path, NUMBERS)
        names = ["zed", "Ann", "bob", "ann", "_x", "Émile", "b-2", "b10", "b9"]
        rows = "".join(f"{w},{1 + k % 3},{k % 5},yes\n" for k, w in enumerate(names))
        (tmp_path / "order.csv").write_text("worker,image,label,answer\n" + rows)
        import_votes(engine, tmp_path / "order.csv", fmt="long", name="order")
        with engine.connect() as conn:
            ordered = conn.execute(select(VoteWorker.name).order_by(VoteWorker.name)).scalars().all()
        t = table(engine, studio=False)
        assert t.workers == tuple(f"order:{w}" for w in ordered) and len(ordered) == len(names)
        if engine.url.get_backend_name() == "sqlite":  # stored workers in code point order, as SQLite sorts them
            key = np.lexsort((t.votes.worker, t.votes.item))
            assert key.tolist() == list(range(len(key)))
        assert answers_by_pair(t) == {
            (int(np.searchsorted(np.unique(t.pairs[:, 0]), 1 + k % 3)), k % 5, f"order:{w}"): YES
            for k, w in enumerate(names)
        }

    def test_a_name_is_taken_until_replaced(self, engine, vocab, tmp_path: Path) -> None:
        val_dataset(engine, vocab, tmp_path, NUMBERS)
        (tmp_path / "a.csv").write_text("worker,image,label,answer\nann,1,1,yes\nann,2,2,yes\n")
        (tmp_path / "b.csv").write_text("worker,image,label,answer\nbob,3,3,no\n")
        import_votes(engine, tmp_path / "a.csv", fmt="long", name="r")
        with pytest.raises(ConflictError, match="already has a vote source 'r'; pass --replace"):
            import_votes(engine, tmp_path / "b.csv", fmt="long", name="r")
        assert stored(engine) == (1, 2)
        import_votes(engine, tmp_path / "b.csv", fmt="long", name="r", replace=True)
        assert stored(engine) == (1, 1) and table(engine).workers == ("r:bob",)
        with Session(engine) as s:  # the first file's workers went with its votes
            assert s.scalars(select(VoteWorker.name)).all() == ["bob"]

    @pytest.mark.parametrize(
        ("content", "pattern"),
        [
            (f"{HEAD}ann,2,2\n", r"round.csv:3: 3 field\(s\) where the header has 4"),
            (f"{HEAD}ann,2,unicornfish,no\n", r"round.csv:3: unknown class 'unicornfish'"),
            (f"{HEAD}ann,2,2,probably\n", r"round.csv:3: answer 'probably' is not one of no, maybe, yes"),
            (f"{HEAD}ann,1,n01443537,no\n",
             r"round.csv:3: worker 'ann' answers image 'ILSVRC2012_val_00000001' class 1 again \(first at round.csv:2"),
            (f"{HEAD}ann,9,2,no\n", r"round.csv:3: image 'ILSVRC2012_val_00000009' is not in the dataset"),
            (f"{HEAD}ann,1,1000,no\n", r"round.csv:3: class index 1000 is out of range 0..999"),
            ("worker,image,label,answer,labels\nann,1,1,yes,1\n",
             r"round.csv:2: a vote table has worker, image and either label and answer, or labels"),
            ("worker,image,lable,answer\nann,1,1,yes\n", r"unknown column\(s\) 'lable'"),
            ("worker,image,label,answer\n,1,1,yes\n", r"round.csv:2: worker is ''; expected a non-empty name"),
            ("worker,image,label,answer\n", r"round.csv: holds no votes"),
        ],
        ids=["truncated", "unknown-class", "bad-answer", "duplicate", "unknown-image", "class-range", "both-shapes",
             "typo-column", "no-worker", "empty"],
    )  # fmt: skip
    def test_a_malformed_table_is_one_line_and_writes_nothing(
        self, sqlite_engine, vocab, tmp_path: Path, content: str, pattern: str
    ) -> None:
        val_dataset(sqlite_engine, vocab, tmp_path, NUMBERS)
        (tmp_path / "round.csv").write_text(content)
        with pytest.raises(InputError, match=pattern) as info:
            import_votes(sqlite_engine, tmp_path / "round.csv", fmt="long", name="round")
        assert "\n" not in str(info.value)
        assert stored(sqlite_engine) == (0, 0)

    def test_unknown_format_and_source_are_named(self, sqlite_engine, vocab, tmp_path: Path) -> None:
        val_dataset(sqlite_engine, vocab, tmp_path, NUMBERS)
        (tmp_path / "round.csv").write_text("worker,image,label,answer\nann,1,1,yes\n")
        with pytest.raises(NotFoundError, match="unknown vote format 'wide'; known: long, mturk, real-raters"):
            import_votes(sqlite_engine, tmp_path / "round.csv", fmt="wide")
        import_votes(sqlite_engine, tmp_path / "round.csv", fmt="long")
        with pytest.raises(NotFoundError, match="unknown vote source 'real'; known: long"):
            table(sqlite_engine, sources=["real"])


def rater_file(path: Path, tensor: np.ndarray, info: list[tuple[str, str]], ids: list[int]) -> Path:
    np.savez(path, tensor=tensor, info=np.array(info, dtype="<U28"), ids=np.array(ids))
    return path


def one_hot(codes: list[list[int]]) -> np.ndarray:
    """Raters x pairs one-hot no/maybe/yes; -1: no answer."""
    arr = np.array(codes)
    out = np.zeros((*arr.shape, 3))
    r, p = np.nonzero(arr >= 0)
    out[r, p, arr[r, p]] = 1
    return out


class TestRaterFiles:
    INFO = [
        ("ILSVRC2012_val_00000001.JPEG", "1"),
        ("ILSVRC2012_val_00000001.JPEG", "5"),
        ("ILSVRC2012_val_00000002.JPEG", "2"),
    ]

    def test_the_published_layout_imports(self, engine, vocab, tmp_path: Path) -> None:
        val_dataset(engine, vocab, tmp_path, NUMBERS)
        path = rater_file(tmp_path / "r.npz", one_hot([[2, 0, -1], [1, -1, 2]]), self.INFO, [17, 42])
        r = import_votes(engine, path, fmt="real-raters", name="real-raters")
        assert (r.votes, r.workers, r.images, r.items) == (4, 2, 2, 3)
        assert answers_by_pair(table(engine)) == {
            (0, 1, "real-raters:17"): YES, (0, 5, "real-raters:17"): NO,
            (0, 1, "real-raters:42"): 1, (1, 2, "real-raters:42"): YES,
        }  # fmt: skip

    @pytest.mark.parametrize(
        ("tensor", "info", "ids", "pattern"),
        [
            ([[2, 0, -1], [1, -1, 2]], INFO[:2], [17, 42], r"info is <U28 \(2, 2\); expected \(3, 2\)"),
            ([[2, 0, -1], [1, -1, 2]], [*INFO[:2], ("ILSVRC2012_val_00000002.JPEG", "1000")], [17, 42],
             r"r.npz pair 2: class '1000' is not a class index 0..999"),
            ([[2, 0, -1], [1, -1, 2]], [*INFO[:2], ("ILSVRC2012_val_00000002.JPEG", "x")], [17, 42],
             r"r.npz pair 2: class 'x' is not a class index"),
            ([[2, 0, -1], [1, -1, 2]], [*INFO[:2], ("ILSVRC2012_val_00000009.JPEG", "2")], [17, 42],
             r"r.npz pair 2 rater 42: image 'ILSVRC2012_val_00000009' is not in the dataset"),
            ([[2, 0, -1], [1, -1, 2]], [*INFO[:2], INFO[0]], [17, 42],
             r"rater 42: worker '42' answers image 'ILSVRC2012_val_00000001' class 1 again"),
            ([[2, 0, -1], [1, -1, 2]], INFO, [17, 17], r"ids repeat a rater id"),
        ],
        ids=["short-info", "class-range", "class-text", "unknown-image", "duplicate-pair", "repeated-id"],
    )  # fmt: skip
    def test_a_damaged_file_is_one_line_and_writes_nothing(
        self, sqlite_engine, vocab, tmp_path: Path, tensor, info, ids, pattern: str
    ) -> None:
        val_dataset(sqlite_engine, vocab, tmp_path, NUMBERS)
        path = rater_file(tmp_path / "r.npz", one_hot(tensor), info, ids)
        with pytest.raises(InputError, match=pattern):
            import_votes(sqlite_engine, path, fmt="real-raters")
        assert stored(sqlite_engine) == (0, 0)

    def test_answers_must_be_one_hot_and_the_archive_whole(self, sqlite_engine, vocab, tmp_path: Path) -> None:
        val_dataset(sqlite_engine, vocab, tmp_path, NUMBERS)
        tensor = one_hot([[2, 0, -1], [1, -1, 2]])
        tensor[1, 2, 0] = 1  # rater 42 answers yes and no on pair 2
        with pytest.raises(InputError, match=r"r.npz pair 2 rater 42: answer \[1.0, 0.0, 1.0\] is not one-hot"):
            import_votes(sqlite_engine, rater_file(tmp_path / "r.npz", tensor, self.INFO, [17, 42]), fmt="real-raters")
        np.savez(tmp_path / "partial.npz", tensor=tensor)
        with pytest.raises(InputError, match="lacks info, ids; a ReaL raters file holds tensor, info and ids"):
            import_votes(sqlite_engine, tmp_path / "partial.npz", fmt="real-raters")
        whole = (tmp_path / "r.npz").read_bytes()
        (tmp_path / "cut.npz").write_bytes(whole[: len(whole) // 2])
        with pytest.raises(InputError, match=r"cut.npz: not a readable .npz archive"):
            import_votes(sqlite_engine, tmp_path / "cut.npz", fmt="real-raters")
        assert stored(sqlite_engine) == (0, 0)


def mturk_records(*votes: tuple[int, int, int, int]) -> str:
    """Records for val images 1.. with given = ImGT (n % 1000), guessed 999; votes (given, guessed, both, neither)."""
    return json.dumps(
        [
            {
                "id": n,
                "given_original_label": n,
                "our_guessed_label": 999,
                "mturk": dict(zip(("given", "guessed", "both", "neither"), v)),
            }
            for n, v in enumerate(votes, start=1)
        ]  # fmt: skip
    )


def test_mturk_votes_become_five_anonymous_ballots_per_image(engine, vocab, tmp_path: Path) -> None:
    val_dataset(engine, vocab, tmp_path, NUMBERS)
    (tmp_path / "m.json").write_text(mturk_records((3, 1, 1, 0), (0, 0, 2, 3)))
    r = import_votes(engine, tmp_path / "m.json", fmt="mturk")
    assert (r.votes, r.workers, r.images) == (20, 5, 2) and r.answers == {"no": 10, "maybe": 0, "yes": 10}
    with Session(engine) as s:
        assert s.scalars(select(VoteSource.workers_identified)).one() is False
    t = table(engine)
    assert len(t.workers) == 10  # a ballot is a worker of one image only
    got = answers_by_pair(t)
    first = [(got[(0, 1, w)], got[(0, 999, w)]) for w in t.workers if got.get((0, 1, w)) is not None]
    assert first == [(YES, NO)] * 3 + [(NO, YES), (YES, YES)]
    # set-majority reads whole ballots as MTurk's majority does: image 1 keeps its given label, image 2 none
    accepted = aggregate(t.votes, "set-majority").accepted
    assert {tuple(t.pairs[i]) for i in np.flatnonzero(accepted)} == {(t.pairs[0, 0], 1)}


def test_mturk_given_labels_must_be_the_datasets_imgt(sqlite_engine, vocab, tmp_path: Path) -> None:
    val_dataset(sqlite_engine, vocab, tmp_path, NUMBERS)
    records = json.loads(mturk_records((5, 0, 0, 0)))
    records[0]["given_original_label"] = 7
    (tmp_path / "m.json").write_text(json.dumps(records))
    with pytest.raises(InputError, match="state an original label other than the dataset's ImGT label"):
        import_votes(sqlite_engine, tmp_path / "m.json", fmt="mturk")
    assert stored(sqlite_engine) == (0, 0)


@pytest.fixture
def studio(sqlite_engine, tmp_path: Path) -> dict[str, int]:
    """The five-image workspace (tests/evaluation_workspace.py) with two annotators and a lead."""
    ids = five.build(sqlite_engine, tmp_path)
    for name, role in (("ann", Role.annotator), ("bob", Role.annotator), ("lead", Role.lead)):
        add_user(sqlite_engine, name, role, "password1")
    return ids


def decide(engine, image_id: int, user: str, verdict: Verdict, classes: list[int], **kw) -> int:
    return record_annotation(engine, image_id=image_id, user=user, verdict=verdict, classes=classes, **kw)


class TestStudioVotes:
    def test_decisions_vote_on_the_candidate_classes_a_card_showed(self, sqlite_engine, studio) -> None:
        a, d = studio["a"], studio["d"]
        decide(sqlite_engine, a, "ann", Verdict.labels, [five.TENCH, 7])  # 7: picked, no run suggested it
        decide(sqlite_engine, a, "bob", Verdict.none_fit, [])
        decide(sqlite_engine, d, "ann", Verdict.unclear, [])  # abstains
        decide(sqlite_engine, d, "lead", Verdict.labels, [five.TABBY], adjudicate=True)  # settles, no vote
        retracted = decide(sqlite_engine, studio["e"], "bob", Verdict.labels, [five.TABBY])
        retract_annotation(sqlite_engine, retracted, user="bob")  # an undone decision is no vote
        t = table(sqlite_engine)
        assert t.workers == ("studio:ann", "studio:bob") and t.worker_kinds == ("annotator", "annotator")
        # image a: ImGT tench, m5's top-5 (goldfish, tench, 2, 3, 4), m1's tench, and class 7 that ann picked
        assert set(t.pairs[:, 0].tolist()) == {a} and t.pairs[:, 1].tolist() == [0, 1, 2, 3, 4, 7]
        got = answers_by_pair(t)
        assert [got[(0, c, "studio:ann")] for c in (0, 1, 2, 3, 4, 7)] == [YES, NO, NO, NO, NO, YES]
        assert [got[(0, c, "studio:bob")] for c in (0, 1, 2, 3, 4, 7)] == [NO] * 6
        assert len(table(sqlite_engine, studio=False).pairs) == 0

    def test_a_model_run_votes_as_one_more_worker(self, sqlite_engine, studio) -> None:
        decide(sqlite_engine, studio["d"], "ann", Verdict.labels, [five.TABBY])
        t = table(sqlite_engine, with_model="m5")
        assert t.workers[-1] == "model:m5" and t.worker_kinds[-1] == "model" and t.sources == ("studio", "model:m5")
        got = answers_by_pair(t)
        # m5 ranks tiger cat first on d: yes to it, no to tabby and its other ranked classes
        assert got[(0, five.TIGER_CAT, "model:m5")] == YES
        assert [got[(0, c, "model:m5")] for c in (2, 3, 4, five.TABBY)] == [NO] * 4
        assert got[(0, five.TIGER_CAT, "studio:ann")] == NO
        with pytest.raises(NotFoundError, match="unknown run 'nope' for --with-model; known runs: m1, m5"):
            table(sqlite_engine, with_model="nope")
        # a generative run: yes to its classes (m1 failed on d: no vote there; it answered tiger cat on e)
        decide(sqlite_engine, studio["e"], "ann", Verdict.labels, [five.TABBY])
        got = answers_by_pair(table(sqlite_engine, with_model="m1"))
        assert not any(w == "model:m1" for i, _, w in got if i == 0)
        assert got[(1, five.TIGER_CAT, "model:m1")] == YES and got[(1, five.TABBY, "model:m1")] == NO


def synthetic_round(tmp_path: Path, rng: np.random.Generator) -> tuple[Path, set[tuple[int, int]]]:
    """A long table: 300 val images x 3 candidate classes; one true class per image; four good workers
    (sensitivity 0.9, specificity 0.95) and a spammer answering yes half of the time."""
    truth = {(n, n % 1000) for n in range(1, 301)}
    lines = ["worker,image,label,answer"]
    for n in range(1, 301):
        for c in (n % 1000, (n + 1) % 1000, (n + 2) % 1000):
            present = (n, c) in truth
            for w in ("w1", "w2", "w3", "w4"):
                yes = rng.random() < (0.9 if present else 0.05)
                lines.append(f"{w},{n},{c},{'yes' if yes else 'no'}")
            lines.append(f"spam,{n},{c},{'yes' if rng.random() < 0.5 else 'no'}")
    (tmp_path / "round.csv").write_text("\n".join(lines) + "\n")
    return tmp_path / "round.csv", truth


def test_reliability_is_recovered_and_a_spammer_is_flagged(sqlite_engine, vocab, tmp_path: Path) -> None:
    val_dataset(sqlite_engine, vocab, tmp_path, list(range(1, 301)))
    path, _ = synthetic_round(tmp_path, np.random.default_rng(7))
    import_votes(sqlite_engine, path, fmt="long", name="round")
    rows = {r.name: r for r in worker_reliability(sqlite_engine, sort="name")}
    for w in ("w1", "w2", "w3", "w4"):
        r = rows[f"round:{w}"]
        assert abs(r.sensitivity - 0.9) <= 0.05 and abs(r.specificity - 0.95) <= 0.05 and not r.flag
        assert r.total == 900
    assert rows["round:spam"].flag == "spammer" and rows["round:spam"].evidence < 0.3
    report = aggregate_dataset(sqlite_engine, method="ds", threshold=0.9, compare=None)
    assert report.items == 900 and report.workers == 5 and 280 <= report.accepted <= 310
    # `relabel stats` shows the same table
    out = CliRunner().invoke(cli, ["--db", str(sqlite_engine.url), "stats"])
    assert out.exit_code == 0, out.output
    assert "worker reliability (Dawid-Skene on 4,500 votes)" in out.output and "round:spam" in out.output
    assert "spammer" in out.output
    assert all(r.flag == "" for r in reliability_rows_of_few(sqlite_engine, tmp_path))  # too few answers to judge


def reliability_rows_of_few(engine, tmp_path: Path) -> list:
    """A worker answering yes to everything, but only 3 times, is not flagged yet."""
    (tmp_path / "few.csv").write_text("worker,image,label,answer\nnew,1,5,yes\nnew,2,5,yes\nnew,3,5,yes\n")
    import_votes(engine, tmp_path / "few.csv", fmt="long", name="few")
    return [r for r in worker_reliability(engine) if r.name.startswith("few:")]


def invoke(engine, *args: str):
    result = CliRunner().invoke(cli, ["--db", str(engine.url), *args], catch_exceptions=False)
    return result


def test_the_votes_commands(sqlite_engine, vocab, tmp_path: Path) -> None:
    val_dataset(sqlite_engine, vocab, tmp_path, list(range(1, 301)))
    path, truth = synthetic_round(tmp_path, np.random.default_rng(3))
    (tmp_path / "ref.csv").write_text("image,labels\n" + "".join(f"ILSVRC2012_val_{n:08d},{c}\n" for n, c in truth))
    import_source(sqlite_engine, tmp_path / "ref.csv", fmt="csv", name="truth")
    out = invoke(sqlite_engine, "votes", "import", str(path), "--format", "long", "--name", "round", "--quiet")
    assert out.exit_code == 0 and "vote source 'round': 4,500 vote(s) from 5 worker(s) on 900" in out.output
    assert "votes/s" in out.output
    assert "round  (long)  4,500 votes, 5 workers, 300 images" in invoke(sqlite_engine, "votes", "list").output
    out = invoke(sqlite_engine, "votes", "aggregate", "--compare", "truth")
    assert out.exit_code == 0, out.output
    assert "method ds (threshold 0.9, original classes kept at >= 0.5) on sources round, studio" in out.output
    assert "vs truth [ds]:" in out.output and "vs truth [majority]:" in out.output
    assert "caution" not in out.output  # every rater answered 900 pairs that the others answered too
    ds_pairs = float(out.output.split("vs truth [ds]: ")[1].split("%")[0])
    assert ds_pairs >= 99.0
    out = invoke(sqlite_engine, "votes", "workers", "--sort", "evidence", "--limit", "2")
    lines = out.output.splitlines()
    assert len(lines) == 3 and lines[1].startswith("round:spam") and lines[1].endswith("spammer")
    assert invoke(sqlite_engine, "votes", "aggregate", "--with-model", "nope").exit_code == 3
    out = invoke(sqlite_engine, "votes", "aggregate", "--sources", "round,gone", "--no-studio")
    assert out.exit_code == 3 and "unknown vote source 'gone'; known: round" in out.output
    (tmp_path / "bad.csv").write_text("worker,image,label,answer\nann,1,1,perhaps\n")
    out = invoke(sqlite_engine, "votes", "import", str(tmp_path / "bad.csv"), "--format", "long", "--quiet")
    assert out.exit_code == 2 and "error: " in out.output and "answer 'perhaps' is not one of" in out.output


@pytest.mark.slow
def test_real_raters_through_the_cli_reproduce_real(tmp_path: Path) -> None:
    """ReaL's 924,810 rater answers on a workspace of the 50,000 val images (no pixels): Dawid-Skene agrees with
    ReaL on >= 98.5 % of the 184,962 rated pairs and >= 90 % of the 24,889 rated label sets; majority beside."""
    from db import create_db_engine, init_db
    from relabel.common.vocabulary import load_builtin

    engine = create_db_engine(f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}")
    init_db(engine)
    root, vocab = tmp_path / "not-mounted", load_builtin()
    ingest_dataset(engine, plan_ingest(root, vocab, "imagenet-val"), dataset="val", root=root, vocab=vocab)
    import_source(engine, shared("imagenet-val", "real.json"), fmt="real")
    mturk = import_source(engine, shared("imagenet-val", "mturk_label_errors.json"), fmt="mturk")
    assert mturk.categories == {"A": 2524, "B": 1428, "M": 597, "X": 598, "Z": 293}  # unchanged beside the votes
    raters = shared("imagenet-val", "real_raters.npz")
    out = invoke(engine, "votes", "import", str(raters), "--format", "real-raters", "--name", "real-raters", "--quiet")
    assert "924,810 vote(s) from 85 worker(s) on 184,962 (image, class) pair(s) of 24,889 image(s)" in out.output
    out = invoke(engine, "votes", "aggregate", "--compare", "real", "--sources", "real-raters")
    figures = {
        m: [float(x.split("%")[0]) for x in out.output.split(f"vs real [{m}]: ")[1].split("\n")[0].split("; ")]
        for m in ("ds", "majority")
    }
    assert figures["ds"][0] >= 98.5 and figures["ds"][1] >= 90.0, out.output
    assert figures["majority"] == pytest.approx([93.0, 58.0], abs=0.1), out.output
    assert "of 184,962 rated pairs agree" in out.output and "of 24,889 rated images" in out.output


class _Lead:
    """What `ui.dashboard_tab.reliability_values` needs of the studio."""

    def __init__(self, engine) -> None:
        self.engine, self.dataset_name = engine, "five"

    def require_lead(self, user: str) -> None:
        assert user == "lead"


def test_the_dashboard_lists_annotators_and_raters_as_text(sqlite_engine, studio, tmp_path: Path) -> None:
    from ui.dashboard_tab import RELIABILITY_HEADERS, reliability_values

    assert reliability_values(_Lead(sqlite_engine), "lead") == (
        "no votes yet: decisions in the studio and imported votes (relabel votes import) count",
        [],
    )
    for image in ("a", "b", "d", "e"):
        decide(sqlite_engine, studio[image], "ann", Verdict.labels, [five.TENCH])
        decide(sqlite_engine, studio[image], "bob", Verdict.none_fit, [])
    (tmp_path / "r.csv").write_text(
        "worker,image,label,answer\n<b>eve</b>,n01440764_a.jpg,tench,yes\n<b>eve</b>,n02123045_d.jpg,tabby,maybe\n"
    )
    import_votes(sqlite_engine, tmp_path / "r.csv", fmt="long", name="team")
    line, rows = reliability_values(_Lead(sqlite_engine), "lead")
    assert line.startswith("Dawid-Skene on ") and "3 workers" in line
    assert all(len(r) == len(RELIABILITY_HEADERS) for r in rows)
    by_name = {r[0]: r for r in rows}
    assert set(by_name) == {"studio:ann", "studio:bob", "team:<b>eve</b>"}  # the name as text, never markup
    assert by_name["studio:ann"][1] == "annotator" and by_name["team:<b>eve</b>"][1] == "rater"
    assert by_name["team:<b>eve</b>"][4:6] == [2, "0 / 1 / 1"]
