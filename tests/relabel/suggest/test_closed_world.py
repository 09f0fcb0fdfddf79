"""Closed world: an answer is in-prompt only when it is a listed display name; synonym leniency is a recorded
setting, and the strict out-of-prompt rate is stored with the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.models import ModelRun
from relabel.common.errors import InputError
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.suggest.protocols import ProtocolContext, get_protocol, listed_key
from relabel.suggest.runner import SuggestJob, run_suggestions
from relabel.suggest.setup import SuggestSettings, build_job
from relabel.suggest.types import ImageRef, ModelOutput
from tests import images
from tests.fakes import ScriptedChatModel

FILES = ["n02012849_crane.jpg", "n03126707_crane.jpg", "n03710721_maillot.jpg", "n02123045_tabby.jpg"]


def parse_cw(text: str, vocab, *, accept_synonyms: bool = False):
    protocol = get_protocol("cw")
    ctx = ProtocolContext(vocab, accept_synonyms=accept_synonyms)
    pending = protocol.build([ImageRef(1, Path("x.jpg"), "", "x.jpg")], ctx)[0]
    return protocol.parse(ModelOutput(text=text), pending, ctx)[0]


@pytest.mark.parametrize(
    ("text", "index"),
    [
        ("crane (bird)", 134),
        ("Crane (Bird).", 134),
        ("  crane   (machine) ", 517),
        ("**maillot (tank suit)**", 639),
        ('"maillot"', 638),
        ("carpenter’s kit", 477),
        ("jack-o'-lantern", 607),
        ("TABBY", 281),
    ],
)
def test_listed_names_are_in_prompt_as_written(vocab, text: str, index: int) -> None:
    answer = parse_cw(text, vocab)
    assert answer.classes == [index] and answer.details == {"oop": False}


@pytest.mark.parametrize("text", ["crane", "crane bird", "tank suit", "tabby cat", "n02123045", "a tabby", "281"])
def test_unlisted_synonyms_wnids_and_indices_are_out_of_prompt_by_default(vocab, text: str) -> None:
    answer = parse_cw(text, vocab)
    assert answer.classes == [] and answer.details == {"oop": True} and answer.to_map is None


@pytest.mark.parametrize(
    ("text", "index", "kind"),
    [
        ("tabby cat", 281, "synonym"),
        ("a tabby cat.", 281, "synonym"),
        ("N02123045", 281, "wnid"),
        ("tank suit", 639, "synonym"),
    ],
)
def test_accept_synonyms_maps_them_but_keeps_them_out_of_prompt(vocab, text: str, index: int, kind: str) -> None:
    answer = parse_cw(text, vocab, accept_synonyms=True)
    assert answer.classes == [index] and answer.details == {"oop": True, "accepted": kind}


@pytest.mark.parametrize("text", ["crane", "42", "a big bird"])
def test_accept_synonyms_refuses_ambiguous_names_and_indices(vocab, text: str) -> None:
    assert parse_cw(text, vocab, accept_synonyms=True).classes == []


def test_every_listed_name_is_in_prompt_and_every_other_synonym_is_not(vocab) -> None:
    ctx = ProtocolContext(vocab)
    assert all(ctx.listed_names[listed_key(c.name)] == c.index for c in vocab.classes)
    listed = {listed_key(c.name) for c in vocab.classes}
    unlisted = {listed_key(s) for c in vocab.classes for s in c.synonyms} - listed
    assert len(unlisted) > 800  # ImageNet's synonyms that the prompt never shows
    assert not any(parse_cw(s, vocab).classes for s in sorted(unlisted)[::40])


@pytest.fixture
def ws(engine, vocab, tmp_path: Path):
    return images.ingest_photos(engine, vocab, tmp_path / "r", FILES)


ANSWERS = {"n02012849": "crane (bird)", "n03126707": "crane", "n03710721": "tank suit", "n02123045": "tabby cat"}


def run_cw(engine, vocab, name: str, **ctx) -> dict:
    model = ScriptedChatModel(lambda r: ANSWERS[r.images[0].key[:9]])
    job = SuggestJob(engine, model, get_protocol("cw"), ProtocolContext(vocab, **ctx))
    summary = run_suggestions(job, dataset=None, run_name=name, show_progress=False)
    with Session(engine) as s:
        params = s.scalars(select(ModelRun.params).where(ModelRun.name == name)).one()
    assert summary.oop == 3 and summary.measured == params["measured"]
    return params


def test_run_records_the_setting_and_the_strict_oop_rate(ws, vocab) -> None:
    strict = run_cw(ws, vocab, "strict")
    assert strict["accept_synonyms"] is False
    assert strict["measured"] == {
        "answered": 4,
        "oop_strict": 3,
        "oop_strict_rate": 0.75,
        "accepted_synonym_or_wnid": 0,
        "oop_lenient_rate": 0.75,
    }
    lenient = run_cw(ws, vocab, "lenient", accept_synonyms=True)
    assert lenient["accept_synonyms"] is True
    assert lenient["measured"]["oop_strict_rate"] == 0.75 and lenient["measured"]["oop_lenient_rate"] == 0.25


def test_accept_synonyms_is_refused_outside_closed_world(sqlite_engine, vocab, tmp_path: Path) -> None:
    root = tmp_path / "r"
    images.photo(root / FILES[0])
    ingest_dataset(
        sqlite_engine, plan_ingest(root, vocab), dataset="d", root=root, vocab=vocab, show_progress=False, workers=1
    )
    with pytest.raises(InputError, match="accept-synonyms"):
        build_job(SuggestSettings(model="openai:x", protocol="ow", accept_synonyms=True), sqlite_engine, None)
