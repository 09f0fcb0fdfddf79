"""Hard MC distractors: confusions from a run's top-5, topped up from text neighbours, and the recorded share."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.models import ModelRun
from relabel.errors import InputError
from relabel.suggest.distractors import (
    DistractorSource,
    Neighbours,
    confusion_from_predictions,
    summarize_distractors,
    text_neighbours,
)
from relabel.suggest.protocols import ProtocolContext, get_protocol, mc_options
from relabel.suggest.runner import SuggestJob, run_suggestions
from relabel.suggest.setup import SuggestSettings, _confusion
from tests import images
from tests.fakes import ScriptedChatModel, ScriptedScorer, TrigramEncoder

FILES = ["n02123045_cat.jpg", "n07920052_espresso.jpg", "n03773504_missile.jpg", "n01440764_tench.jpg"]


def test_confusions_use_the_whole_top5_ranked_by_score() -> None:
    rows = [(5, [5, 9, 7, 8, 3], [0.5, 0.3, 0.1, 0.06, 0.04]), (9, [9, 5, 1, 2, 4], None)]
    src = confusion_from_predictions(rows, 10, "run:x")
    # 5: its own top-5 (9: 0.3, 7, 8, 3) plus image 9 ranking 5 second (1/2): 9 first, every other pair kept
    assert src.by_class[5] == [9, 7, 8, 3]
    assert src.by_class[9] == [5, 1, 2, 4]  # 5: 1/2 + 0.3; then 1/3, 1/4, 1/5
    assert 5 not in src.by_class[5] and src.by_class[0] == []


def test_hard_distractors_come_from_confusion_then_text_then_random(vocab) -> None:
    source = DistractorSource(Neighbours({1: [2]}, "c"), Neighbours({1: [2, 3, 4]}, "t"))
    ctx = ProtocolContext(vocab, reference={10: [1]}, mc_options=4, distractors=source)
    question = mc_options(10, ctx)
    assert question is not None
    by_class = dict(zip(question.classes, question.sources))
    assert by_class == {1: "reference", 2: "confusion", 3: "text", 4: "text"}
    ctx.mc_options = 6  # both sources run out after three classes: the last two slots are random
    question = mc_options(10, ctx)
    assert question is not None and sorted(question.sources).count("random") == 2
    assert summarize_distractors([question.sources]) == {
        "questions": 1,
        "distractors": 5,
        "distractors_by_source": {"confusion": 1, "text": 2, "random": 2},
        "hard_distractor_share": 0.6,
    }


def test_reference_labels_are_never_hard_distractors(vocab) -> None:
    source = DistractorSource(Neighbours({1: [2, 3]}, "c"), Neighbours({1: [3, 4, 5, 6]}, "t"))
    ctx = ProtocolContext(vocab, reference={10: [1, 3]}, mc_options=4, distractors=source)
    for seed in range(10):
        ctx.seed = seed
        question = mc_options(10, ctx)
        assert (
            question is not None
            and 3 not in question.classes
            and set(question.sources)
            <= {
                "reference",
                "confusion",
                "text",
            }
        )


def test_text_neighbours_are_the_nearest_other_classes_and_cached(vocab, tmp_path: Path) -> None:
    encoder = TrigramEncoder()
    found = text_neighbours(encoder, vocab, tmp_path, k=5)
    assert all(len(n) == 5 and c not in n for c, n in found.by_class.items())
    assert list(tmp_path.glob("class-descriptions-*.npy"))
    again = text_neighbours(encoder, vocab, tmp_path, k=5)
    assert len(encoder.calls) == 1 and again.by_class == found.by_class
    assert found.origin == "test:trigram, 5 per class"


@pytest.fixture
def ws(engine, vocab, tmp_path: Path):
    return images.ingest_photos(engine, vocab, tmp_path / "r", FILES)


def pick_a(request) -> str:
    return "A"


def measured(engine, run: str) -> dict:
    with Session(engine) as s:
        return s.scalars(select(ModelRun.params).where(ModelRun.name == run)).one()


def test_runs_record_their_hard_distractor_share(ws, vocab) -> None:
    text = Neighbours({c: [(c + d) % 1000 for d in range(1, 11)] for c in range(1000)}, "toy, 10 per class")
    for name, source in [("random", None), ("hard", DistractorSource(None, text))]:
        ctx = ProtocolContext(vocab, mc_options=4, distractors=source)
        job = SuggestJob(ws, ScriptedChatModel(pick_a), get_protocol("mc"), ctx)
        summary = run_suggestions(job, dataset=None, run_name=name, show_progress=False)
        assert summary.measured["questions"] == 4
    hard, random = measured(ws, "hard"), measured(ws, "random")
    assert hard["distractors"] == "hard" and hard["text_neighbours"] == "toy, 10 per class"
    assert hard["measured"]["hard_distractor_share"] == 1.0
    assert hard["measured"]["distractors_by_source"] == {"confusion": 0, "text": 12, "random": 0}
    assert random["distractors"] == "random" and random["measured"]["hard_distractor_share"] == 0.0


def test_run_confusion_reads_the_top5_of_a_stored_run(ws, vocab) -> None:
    wrong = {"n02123045": 285, "n07920052": 967, "n03773504": 744, "n01440764": 0}  # cat -> Egyptian cat
    scorer = ScriptedScorer(lambda im: wrong[im.key[:9]])
    run_suggestions(SuggestJob(ws, scorer, get_protocol("topk"), ProtocolContext(vocab)), dataset=None, run_name="cls")
    found = _confusion(SuggestSettings(model="x", distractors="hard", confusion="run:cls"), ws, 1000)
    assert found is not None and found.origin == "run:cls"
    assert found.by_class[281][0] == 285 and len(found.by_class[281]) == 5  # the top-5, best first
    assert all(len(found.by_class[vocab.resolve(w)]) >= 4 for w in wrong)
    with pytest.raises(InputError, match="only with --distractors hard"):
        _confusion(SuggestSettings(model="x", confusion="run:cls"), ws, 1000)
    with pytest.raises(InputError, match="no model run 'nope'"):
        _confusion(SuggestSettings(model="x", distractors="hard", confusion="run:nope"), ws, 1000)


def test_summary_of_no_questions_has_no_share() -> None:
    assert summarize_distractors([])["hard_distractor_share"] is None
    assert np.isclose(summarize_distractors([["reference", "text", "random"]])["hard_distractor_share"], 0.5)
