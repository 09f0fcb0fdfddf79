"""Presence and CHAIR rows of stored pope and caption runs, with failures, against ImGT and the `team` prior:
every number counted by hand (tests/evaluation_workspace.py: ImGT a, b tench; c goldfish; d, e tabby; team a
{tench, goldfish}, b {goldfish}, c {} (excluded), d {tabby, tiger cat}, e {tiger cat})."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import create_db_engine, init_db
from relabel.evaluation import evaluate
from relabel.evaluation.report import write_report
from relabel.evaluation.tasks_text import render_tasks
from tests import evaluation_workspace as ws

TENCH, GOLDFISH, TABBY, TIGER_CAT = ws.TENCH, ws.GOLDFISH, ws.TABBY, ws.TIGER_CAT
HTTP_400 = {"retryable": False, "reason": "HTTP 400: image too large"}  # the model's side: scored as wrong
HTTP_503 = {"retryable": True, "reason": "HTTP 503: overloaded"}  # infrastructure: left out


def probe(cls: int, tables: list[str], answer: str) -> dict:
    return {"class": cls, "in": tables, "answer": answer}


POPE = {
    "a": ([TENCH], "ok", {"probes": [probe(TENCH, ["positive"], "yes"), probe(5, ["random"], "no")]}),
    "b": ([], "error", {**HTTP_400, "probes": [probe(TENCH, ["positive"], "error")]}),
    "c": ([], "error", {**HTTP_503, "probes": [probe(GOLDFISH, ["positive"], "error")]}),
    "d": ([6], "ok", {"probes": [probe(TABBY, ["positive"], "unparseable"), probe(6, ["random"], "yes")]}),
    "e": ([], "ok", {"probes": [probe(TABBY, ["positive"], "no"), probe(TIGER_CAT, ["random", "adversarial"], "no")]}),
}
CAPTIONS = {
    "a": ([], "ok", {"mentions": [{"text": "tench", "class": TENCH, "similarity": 1.0},
                                  {"text": "lawn", "class": 9, "similarity": 0.3}]}),
    "b": ([], "error", {"retryable": False, "reason": "empty caption: the reply had no text"}),
    "c": ([], "ok", {"mentions": []}),
    "d": ([], "ok", {"mentions": [{"text": "tiger cat", "class": TIGER_CAT, "similarity": 0.97}]}),
    "e": ([], "error", HTTP_503),
}  # fmt: skip


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'relabel.db'}")
    init_db(engine)
    ids = ws.build(engine, tmp_path)
    ws.add_run(engine, "p", "vlm", "pope", POPE, ids)
    ws.add_run(engine, "k", "vlm", "caption", CAPTIONS, ids)
    return engine


def test_presence_rows_count_failures_as_wrong_and_leave_infrastructure_out(engine: Engine) -> None:
    ev = evaluate(engine, references=["imgt", "team"], n_boot=0, store=False)
    assert ev.tasks is not None and [r.name for r in ev.runs] == ["m1", "m5"]
    rows = {(r.sampling, r.reference): r for r in ev.tasks.presence}
    imgt = rows["random", "imgt"].score
    # a: TP, TN; b: the 400 is the model's, a failed positive; c (503) left out; d: failed positive, FP; e: FN, TN
    assert (imgt.n_tp, imgt.n_tn, imgt.n_fn, imgt.n_fp, imgt.n_failed_positive, imgt.n_scored) == (1, 2, 1, 1, 2, 7)
    assert rows["random", "imgt"].n_images == 4
    assert imgt.accuracy == pytest.approx(3 / 7) and imgt.precision == pytest.approx(1 / 2)
    assert imgt.recall == pytest.approx(1 / 4) and imgt.yes_ratio == pytest.approx(2 / 7)
    # team, on a, b, d, e: a TP, TN; b tench is absent: a failed negative; d failed positive, FP; e tabby absent:
    # TN, and tiger cat present: FN
    team = rows["random", "team"]
    s = team.score
    assert (s.n_tp, s.n_tn, s.n_fn, s.n_fp, s.n_failed_positive, s.n_failed_negative) == (1, 2, 1, 1, 1, 1)
    assert team.versus is not None and team.versus.difference == pytest.approx(3 / 7 - 3 / 7)
    assert team.versus.hallucinated_a_true_b == 0
    adversarial = rows["adversarial", "imgt"].score  # positives, and e's tiger cat
    assert (adversarial.n_tp, adversarial.n_tn, adversarial.n_fn, adversarial.n_failed_positive) == (1, 1, 1, 2)
    assert ev.tasks.n_left_out == {"p": 1, "k": 1}


def test_chair_rows_count_unmapped_mentions_and_failed_captions_apart(engine: Engine) -> None:
    ev = evaluate(engine, references=["imgt", "team"], n_boot=0, store=False)
    assert ev.tasks is not None
    imgt, team = ev.tasks.chair
    # imgt: captions a, b (failed), c, d; mentions tench (right), tiger cat on d (hallucinated); lawn unmapped
    i = imgt.score
    assert (i.n_captions, i.n_mentions, i.n_hallucinated, i.n_unmapped, i.n_failed) == (4, 2, 1, 1, 1)
    assert (i.chair_i, i.chair_s, i.coverage) == (0.5, 0.5, 0.25)
    # team: a, b, d (c's set is empty); nothing hallucinated, b failed; 2 of 5 classes covered; d's tiger cat true
    t = team.score
    assert (t.n_captions, t.n_mentions, t.n_hallucinated, t.chair_s, t.coverage) == (3, 2, 0, 1 / 3, 0.4)
    assert team.versus is not None and team.versus.hallucinated_a_true_b == 1
    text = "\n".join(render_tasks(ev.tasks))
    assert "run 'k': 1 image(s) got no answer" in text and "not an exhaustive object list" in text


def test_the_task_rows_are_in_the_reports_json(engine: Engine, tmp_path: Path) -> None:
    ev = evaluate(engine, references=["imgt", "team"], n_boot=0, store=False)
    written = write_report(ev, tmp_path / "report")
    tasks = json.loads(written.data.read_text())["tasks"]
    assert tasks["chair"][1]["score"]["coverage"] == 0.4 and tasks["n_left_out"] == {"p": 1, "k": 1}
    assert [r["sampling"] for r in tasks["presence"][:2]] == ["random", "random"]
