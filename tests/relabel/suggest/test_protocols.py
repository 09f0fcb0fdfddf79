"""Protocols, answer parsing, OOP mapping and the suggestion runner (resume, errors), with scripted models."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.models import Image, ModelRun, Prediction
from relabel.common.errors import ConflictError, InputError
from relabel.suggest.class_texts import normalize_answer
from relabel.suggest.distractors import DistractorSource, confusion_from_predictions, load_confusion
from relabel.suggest.protocol_base import split_lines
from relabel.suggest.protocols import ProtocolContext, get_protocol, mc_options, parse_choice
from relabel.suggest.runner import SuggestJob, run_suggestions
from relabel.suggest.textmap import ClassNameIndex
from tests import images
from tests.fakes import ScriptedChatModel, ScriptedScorer, TrigramEncoder

FILES = ["n02123045_cat.jpg", "n07920052_espresso.jpg", "n03773504_missile.jpg", "n01440764_tench.jpg"]


@pytest.fixture
def ws(engine, vocab, tmp_path: Path):
    return images.ingest_photos(engine, vocab, tmp_path / "r", FILES)


@pytest.fixture(scope="module")
def mapper(vocab):
    return ClassNameIndex(TrigramEncoder(), vocab)


def job(engine, vocab, adapter, protocol: str, mapper=None, **ctx) -> SuggestJob:
    return SuggestJob(engine, adapter, get_protocol(protocol), ProtocolContext(vocab, **ctx), mapper, chunk_size=2)


def stored(engine, run: str) -> dict[str, tuple[str, list[int], str, dict | None]]:
    with Session(engine) as s:
        rid = s.scalars(select(ModelRun.id).where(ModelRun.name == run)).one()
        rows = s.execute(
            select(Image.path, Prediction.status, Prediction.classes, Prediction.raw_output, Prediction.details)
            .join(Image, Image.id == Prediction.image_id)
            .where(Prediction.run_id == rid)
        ).all()
    return {p: (st.value, c, raw, d) for p, st, c, raw, d in rows}


OW_ANSWERS = {"cat": "A tabby cat.", "espresso": "espresso", "missile": "missile", "tench": "tench fish"}


def answer_by_key(table: dict[str, str]):
    return lambda r: table[r.images[0].key.split("_")[1].split(".")[0]]


def test_open_world_maps_free_answers(ws, vocab, mapper) -> None:
    model = ScriptedChatModel(answer_by_key(OW_ANSWERS))
    summary = run_suggestions(job(ws, vocab, model, "ow", mapper), dataset=None, run_name="ow", show_progress=False)
    assert (summary.ok, summary.errors) == (4, 0)
    got = stored(ws, "ow")
    assert got["n02123045_cat.jpg"][1] == [281] and got["n02123045_cat.jpg"][2] == "A tabby cat."
    assert got["n01440764_tench.jpg"][1] == [0] and got["n01440764_tench.jpg"][3]["mapped"] is True
    assert model.requests[0].prompt.startswith("What is the main object")


def test_closed_world_counts_out_of_prompt_answers_and_cwplus_maps_them(ws, vocab, mapper) -> None:
    table = {"cat": "Tabby", "espresso": "An espresso", "missile": "rocket launcher", "tench": "tench."}
    cw = run_suggestions(
        job(ws, vocab, ScriptedChatModel(answer_by_key(table)), "cw"), dataset=None, run_name="cw", show_progress=False
    )
    assert cw.oop == 2
    got = stored(ws, "cw")
    assert got["n07920052_espresso.jpg"][1] == [] and got["n07920052_espresso.jpg"][3]["oop"] is True
    assert got["n02123045_cat.jpg"][1] == [281]
    plus = run_suggestions(
        job(ws, vocab, ScriptedChatModel(answer_by_key(table)), "cwplus", mapper),
        dataset=None,
        run_name="cwplus",
        show_progress=False,
    )
    assert plus.oop == 2
    mapped = stored(ws, "cwplus")["n07920052_espresso.jpg"]
    assert mapped[1] == [967] and mapped[3]["oop"] is True and 0 < mapped[3]["similarity"] <= 1


def test_closed_world_prompt_lists_every_class_name(ws, vocab) -> None:
    model = ScriptedChatModel(lambda r: "tench")
    run_suggestions(job(ws, vocab, model, "cw"), dataset=None, run_name="cw", limit=1, show_progress=False)
    prompt = model.requests[0].prompt
    assert all(f"\n{c.name}\n" in prompt or prompt.endswith(c.name) or f"\n{c.name}" in prompt for c in vocab.classes)


def test_multiple_choice_options_and_letters(ws, vocab) -> None:
    def pick_true(r):  # answers the letter of the option that matches the file's wnid
        wnid = r.images[0].key[:9]
        lines = [ln for ln in r.prompt.splitlines() if re.match(r"^[A-D]\. ", ln)]
        return next(ln[0] for ln in lines if vocab.classes[vocab.resolve(ln[3:])].wnid == wnid)

    model = ScriptedChatModel(pick_true)
    run_suggestions(job(ws, vocab, model, "mc", seed=7), dataset=None, run_name="mc", show_progress=False)
    got = stored(ws, "mc")
    for path, (status, classes, _, details) in got.items():
        assert status == "ok" and vocab.classes[classes[0]].wnid == path[:9]
        assert len(details["options"]) == 4 and classes[0] in details["options"]
    again = ScriptedChatModel(pick_true)
    run_suggestions(job(ws, vocab, again, "mc", seed=7), dataset=None, run_name="mc-again", show_progress=False)
    assert [r.prompt for r in again.requests] == [r.prompt for r in model.requests]  # seeded


def test_mc_distractors_exclude_every_reference_label(vocab) -> None:
    ctx = ProtocolContext(vocab, reference={1: [281, 282, 285]}, mc_options=4)
    for seed in range(20):
        ctx.seed = seed
        question = mc_options(1, ctx)
        assert question is not None and 281 in question.classes and not {282, 285} & set(question.classes)
        assert sorted(question.sources) == ["random", "random", "random", "reference"]
        assert question.sources[question.classes.index(281)] == "reference"
    assert mc_options(2, ctx) is None


def test_hard_distractors_from_clusters_and_confusion(vocab, tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(
        json.dumps(
            [{"category": [1], "classes": {"281": "tabby", "282": "tiger cat", "285": "Egyptian cat", "287": "lynx"}}]
        )
    )
    source = DistractorSource((("file", load_confusion(tmp_path / "c.json", 1000)),))
    ctx = ProtocolContext(vocab, reference={1: [281]}, mc_options=4, distractors=source)
    question = mc_options(1, ctx)
    assert question is not None and sorted(question.classes) == [281, 282, 285, 287]
    assert sorted(question.sources) == ["file", "file", "file", "reference"]
    src = confusion_from_predictions([(5, [6], None), (5, [7], None), (5, [6], None), (6, [5], None)], 1000, "run:x")
    assert src.by_class[5][:2] == [6, 7]
    with pytest.raises(InputError, match="1000×1000"):
        np.save(tmp_path / "m.npy", np.zeros((3, 3)))
        load_confusion(tmp_path / "m.npy", 1000)


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("B", 1),
        ("(c)", 2),
        ("Answer: D.", 3),
        ("b) tabby", 1),
        ("Egyptian cat", 2),
        ("It is a tabby.", 1),
        ("E", None),
        ("cat", None),
    ],
)
def test_parse_choice(text: str, index: int | None) -> None:
    assert parse_choice(text, ["tench", "tabby", "Egyptian cat", "lynx"]) == index


def test_multi_image_requests_and_malformed_lists(ws, vocab, mapper) -> None:
    def numbered(r):
        return "\n".join(f"{i + 1}: {OW_ANSWERS[im.key.split('_')[1].split('.')[0]]}" for i, im in enumerate(r.images))

    model = ScriptedChatModel(numbered)
    run_suggestions(
        job(ws, vocab, model, "ow", mapper, images_per_request=2), dataset=None, run_name="ow2", show_progress=False
    )
    assert len(model.requests) == 2 and all(len(r.images) == 2 for r in model.requests)
    assert "exactly 2 lines" in model.requests[0].prompt
    assert stored(ws, "ow2")["n02123045_cat.jpg"][1] == [281]
    bad = ScriptedChatModel(lambda r: "1: tabby")
    s = run_suggestions(
        job(ws, vocab, bad, "ow", mapper, images_per_request=2), dataset=None, run_name="bad", show_progress=False
    )
    assert s.errors == 4
    with Session(ws) as session:
        reasons = set(session.scalars(select(Prediction.reason).where(Prediction.status == "error")))
    assert len(reasons) == 1 and "expected 2 numbered answers" in reasons.pop()
    assert split_lines("1: a\n2) b\nImage 3 - c", 3) == ["a", "b", "c"]


def test_failures_are_stored_as_errors_and_the_run_resumes(ws, vocab, mapper) -> None:
    model = ScriptedChatModel(answer_by_key(OW_ANSWERS), fail={"n03773504_missile.jpg": "HTTP 500 after 5 retries"})
    first = run_suggestions(
        job(ws, vocab, model, "ow", mapper), dataset=None, run_name="r", limit=2, show_progress=False
    )
    assert first.ok + first.errors == 2
    seen = {im.key for r in model.requests for im in r.images}
    second = run_suggestions(job(ws, vocab, model, "ow", mapper), dataset=None, run_name="r", show_progress=False)
    assert (second.done_before, second.ok + second.errors) == (2, 2)
    keys = [im.key for r in model.requests for im in r.images]
    assert len(keys) == 4 and len(set(keys)) == 4 and seen <= set(keys)  # nothing asked twice
    failed = stored(ws, "r")["n03773504_missile.jpg"]
    assert failed[0] == "error" and failed[1] == []


def test_run_settings_must_match_to_resume(ws, vocab, mapper) -> None:
    run_suggestions(
        job(ws, vocab, ScriptedChatModel(lambda r: "tench"), "ow", mapper),
        dataset=None,
        run_name="x",
        limit=1,
        show_progress=False,
    )
    with pytest.raises(ConflictError, match="exists with other settings"):
        run_suggestions(
            job(ws, vocab, ScriptedChatModel(lambda r: "tench"), "cw"), dataset=None, run_name="x", show_progress=False
        )


def test_scoring_models_use_topk_and_generative_protocols_refuse_them(ws, vocab) -> None:
    scorer = ScriptedScorer(lambda im: vocab.resolve(im.key[:9]))
    s = run_suggestions(job(ws, vocab, scorer, "topk"), dataset=None, run_name="cls", show_progress=False)
    assert s.ok == 4
    got = stored(ws, "cls")["n02123045_cat.jpg"]
    assert got[1][0] == 281 and len(got[1]) == 5
    with pytest.raises(InputError, match="needs a generative model"):
        run_suggestions(job(ws, vocab, scorer, "ow"), dataset=None, run_name="bad", show_progress=False)


def test_suspect_selection(ws, vocab) -> None:
    scorer = ScriptedScorer(lambda im: 0)  # says tench for everything
    run_suggestions(job(ws, vocab, scorer, "topk"), dataset=None, run_name="cls", show_progress=False)
    model = ScriptedChatModel(lambda r: "tench")
    run_suggestions(job(ws, vocab, model, "cw"), dataset=None, run_name="cw", which="suspect", show_progress=False)
    assert sorted(im.key for r in model.requests for im in r.images) == sorted(f for f in FILES if "tench" not in f)


def test_answer_normalisation_and_distinct_answers_embedded_once(vocab) -> None:
    assert normalize_answer("  A Tabby cat. ") == "tabby cat"
    encoder = TrigramEncoder()
    index = ClassNameIndex(encoder, vocab)
    calls = len(encoder.calls)
    index.map(["tabby", "Tabby.", "a tabby", "goldfish", "orange fish", "An orange fish."])
    assert encoder.calls[calls:] == [["orange fish"]]  # class names reuse their cached embeddings


@pytest.mark.slow
def test_minilm_maps_common_answers(vocab, user_cache: Path) -> None:
    from relabel.suggest.textmap import load_encoder

    index = ClassNameIndex(load_encoder("minilm"), vocab)  # the session's user cache: built once, read after
    m = index.map(["a tabby cat", "golden retriever dog", "espresso", "a bowl of guacamole"])
    assert [vocab.classes[c].name for c in m.classes] == ["tabby", "golden retriever", "espresso", "guacamole"]
    assert list(user_cache.glob("text-embeddings/st_sentence-transformers_all-MiniLM-L6-v2-*/*.npz"))
