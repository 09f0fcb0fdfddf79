"""Where a user sees an mc run's distractors: `relabel stats`, the evaluation tables, and robustness runs, which
draw their mc options from the same registry as `relabel suggest` (hard by default)."""

from __future__ import annotations

from pathlib import Path

import pytest

from relabel.cli import render
from relabel.common.errors import NotFoundError
from relabel.common.vocabulary import load_builtin
from relabel.evaluation import evaluate, text
from relabel.evaluation.report import write_robustness_report
from relabel.evaluation.robustness import run_robustness
from relabel.evaluation.robustness_summary import build_robustness_summary
from relabel.review.stats import workspace_stats
from relabel.suggest.distractor_sources import DEFAULT_HARD, SourceInputs, build_distractors
from relabel.suggest.protocols import LETTERS, ProtocolContext, get_protocol
from relabel.suggest.runner import SuggestJob, run_suggestions
from relabel.suggest.types import ChatRequest
from tests import evaluation_workspace as ws
from tests.fakes import ScriptedChatModel

VOCAB = load_builtin()
TRUTH = {"a": ws.TENCH, "b": ws.TENCH, "c": ws.GOLDFISH, "d": ws.TABBY, "e": ws.TABBY}
WORDNET_LINE = "distractors: wordnet"
HARD_LINE = "distractors: imagenet-confusions in turns with real-proposals, then wordnet"


@pytest.fixture
def five(sqlite_engine, tmp_path: Path) -> dict[str, int]:
    return ws.build(sqlite_engine, tmp_path)


def options(request: ChatRequest) -> list[int]:
    """The classes an mc prompt offers, in order."""
    return [VOCAB.resolve(ln[3:]) for ln in request.prompt.splitlines() if ln[1:3] == ". " and ln[0] in LETTERS]


def right_answer(request: ChatRequest) -> str:
    truth = TRUTH[request.images[0].key.split("_")[1][0]]
    return LETTERS[options(request).index(truth)]


def ask_mc(engine, run_name: str, spec: str) -> None:
    distractors = build_distractors(spec, SourceInputs(VOCAB, "chat", engine))
    ctx = ProtocolContext(VOCAB, mc_options=4, distractors=distractors)
    job = SuggestJob(engine, ScriptedChatModel(right_answer, name="chat"), get_protocol("mc"), ctx)
    run_suggestions(job, dataset=None, run_name=run_name, show_progress=False)


def test_stats_show_each_mc_runs_distractors(sqlite_engine, five, capsys: pytest.CaptureFixture[str]) -> None:
    ask_mc(sqlite_engine, "mc-wordnet", "wordnet")
    ask_mc(sqlite_engine, "mc-random", "random")
    [stats] = workspace_stats(sqlite_engine)
    assert stats.run_notes == {"mc-wordnet": WORDNET_LINE, "mc-random": "distractors: random"}  # m5, m1: none
    render.stats([stats])
    shown = capsys.readouterr().out
    assert f"    mc-wordnet: {WORDNET_LINE}\n" in shown and "m5: distractors" not in shown


def test_evaluation_tables_show_the_protocol_with_its_distractors(sqlite_engine, five) -> None:
    ask_mc(sqlite_engine, "mc-wordnet", "wordnet")
    ev = evaluate(sqlite_engine, n_boot=0, store=False)
    protocols = {row[0]: row[1] for row in text.scores_table(ev)[1]}
    assert protocols["mc-wordnet"] == "mc (wordnet)" and protocols["m1"] == "cw"


def test_robustness_mc_draws_hard_distractors_and_reports_them(sqlite_engine, five, tmp_path: Path) -> None:
    model = ScriptedChatModel(right_answer, name="chat")
    result = run_robustness(sqlite_engine, adapter=model, protocol="mc", perturbations=["typo"], severities=[1],
                            show_progress=False, store=False)  # fmt: skip
    assert result.protocol["distractors"] == DEFAULT_HARD
    default = build_distractors("hard", SourceInputs(VOCAB, "other", sqlite_engine))
    assert default is not None
    merged = default.sources[0][1].by_class
    for request in model.requests[:5]:  # the clean pass: each image's three most confusable classes
        truth = TRUTH[request.images[0].key.split("_")[1][0]]
        assert sorted(options(request)) == sorted([truth, *merged[truth][:3]])
    summary = build_robustness_summary(result)
    assert HARD_LINE in text.render_robustness(summary)
    report = write_robustness_report(summary, tmp_path / "report").markdown.read_text(encoding="utf-8")
    assert HARD_LINE in report


def test_robustness_mc_takes_any_registered_source_and_refuses_unknown_ones(sqlite_engine, five) -> None:
    model = ScriptedChatModel(right_answer, name="chat")
    result = run_robustness(sqlite_engine, adapter=model, protocol="mc", perturbations=["typo"], severities=[1],
                            distractors="random", show_progress=False, store=False)  # fmt: skip
    assert result.protocol["distractors"] == "random" and "distractor_sources" not in result.protocol
    asked = len(model.requests)
    with pytest.raises(NotFoundError, match="unknown distractor source 'confusables'"):
        run_robustness(sqlite_engine, adapter=model, protocol="mc", distractors="confusables", show_progress=False,
                       store=False)  # fmt: skip
    assert len(model.requests) == asked  # refused before the model is asked anything
