"""Hard MC distractors: the registry of sources, what each builds, what a run records, and what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.models import ModelRun
from relabel.common.errors import InputError, NotFoundError
from relabel.common.vocabulary import ClassInfo, Vocabulary
from relabel.suggest.distractor_sources import (
    DEFAULT_HARD,
    DISTRACTOR_SOURCES,
    SourceInputs,
    build_distractors,
    distractor_summaries,
    distractors_line,
    interleave,
    parse_distractors,
    same_model,
)
from relabel.suggest.distractors import (
    DistractorSource,
    Neighbours,
    confusion_from_predictions,
    summarize_distractors,
    text_neighbours,
)
from relabel.suggest.protocols import ProtocolContext, get_protocol, mc_options
from relabel.suggest.runner import SuggestJob, run_suggestions
from relabel.suggest.setup import SuggestSettings, build_job
from tests import images
from tests.conftest import shared
from tests.fakes import ScriptedChatModel, ScriptedScorer, TrigramEncoder

FILES = ["n02123045_cat.jpg", "n07920052_espresso.jpg", "n03773504_missile.jpg", "n01440764_tench.jpg"]
CAT_WNIDS = {  # tabby, tiger cat, Persian cat and Egyptian cat are domestic cats; lynx a wild one; tench a fish
    "tabby": "n02123045",
    "tench": "n01440764",
    "lynx": "n02127052",
    "tiger cat": "n02123159",
    "Persian cat": "n02123394",
    "Egyptian cat": "n02124075",
}


@pytest.fixture
def ws(engine, vocab, tmp_path: Path):
    return images.ingest_photos(engine, vocab, tmp_path / "r", FILES)


def tiny_vocab() -> Vocabulary:
    return Vocabulary("cats", [ClassInfo(i, name, wnid) for i, (name, wnid) in enumerate(CAT_WNIDS.items())])


def stored_run(ws, vocab, model: str) -> None:
    """A top-5 run named `model` in which each photo's top-1 is a wrong class (the cat is taken for an Egyptian)."""
    wrong = {"n02123045": 285, "n07920052": 967, "n03773504": 744, "n01440764": 0}
    scorer = ScriptedScorer(lambda im: wrong[im.key[:9]], name=model)
    job = SuggestJob(ws, scorer, get_protocol("topk"), ProtocolContext(vocab))
    run_suggestions(job, dataset=None, run_name=f"{model}@topk", show_progress=False)


def test_every_source_builds_distinct_distractors_without_the_reference(ws, vocab, tmp_path: Path) -> None:
    stored_run(ws, vocab, "other-model")
    np.save(tmp_path / "m.npy", np.eye(1000, k=1) * 3)
    specs = {
        "imagenet-confusions",
        "real-proposals",
        "wordnet",
        "run:other-model@topk",
        f"file:{tmp_path / 'm.npy'}",
        "text",
    }
    assert {s.partition(":")[0] for s in specs} == set(DISTRACTOR_SOURCES)  # a new source needs a line here
    inputs = SourceInputs(vocab, "model-under-test", ws, encoder=TrigramEncoder, cache_dir=tmp_path)
    references = {1: [281], 2: [0], 3: [817, 511], 4: [999]}
    for spec in sorted(specs):
        ctx = ProtocolContext(vocab, reference=references, mc_options=5, distractors=build_distractors(spec, inputs))
        hard = 0
        for image, ref in references.items():
            q = mc_options(image, ctx)
            assert q is not None and len(set(q.classes)) == 5 and q.classes.count(ref[0]) == 1, spec
            assert not set(ref[1:]) & set(q.classes), spec
            hard += sum(s == spec.partition(":")[0] for s in q.sources)
        assert hard > 0, spec


def test_wordnet_source_picks_siblings_first() -> None:
    source = build_distractors("wordnet", SourceInputs(tiny_vocab(), "m"))
    assert source is not None
    names = list(CAT_WNIDS)
    linked = [names[c] for c in source.sources[0][1].by_class[0]]  # tabby
    assert sorted(linked[:3]) == ["Egyptian cat", "Persian cat", "tiger cat"]  # siblings under domestic cat
    assert linked[3] == "lynx" and linked[4] == "tench"  # then the cousin, then the fish


def test_imagenet_confusions_rank_the_cat_family_first(vocab) -> None:
    source = build_distractors("imagenet-confusions", SourceInputs(vocab, "m"))
    assert source is not None
    tabby = source.sources[0][1].by_class[vocab.resolve("tabby")]
    assert {vocab.classes[c].name for c in tabby[:2]} == {"tiger cat", "Egyptian cat"}
    assert "cleanlab" in source.describe()["distractor_sources"][0]["origin"]


def test_real_proposals_rank_the_cat_family_first(vocab) -> None:
    source = build_distractors("real-proposals", SourceInputs(vocab, "m"))
    assert source is not None
    tabby = source.sources[0][1].by_class[vocab.resolve("tabby")]
    assert {vocab.classes[c].name for c in tabby[:2]} == {"tiger cat", "Egyptian cat"}
    record = source.describe()["distractor_sources"][0]
    assert "reassessed-imagenet" in record["origin"] and record["images"] == 24_889


def test_merged_sources_take_turns_by_rank_without_repeats(vocab) -> None:
    a, b = Neighbours({1: [2, 3, 4], 7: [8]}, "a", {"file": "a.json"}), Neighbours({1: [3, 5], 9: [1]}, "b")
    merged = interleave([("file", a), ("wordnet", b)])
    assert merged.by_class == {1: [2, 3, 5, 4], 7: [8], 9: [1]}
    assert merged.record["merged"] == [
        {"source": "file", "origin": "a", "file": "a.json"},
        {"source": "wordnet", "origin": "b"},
    ]
    ctx = ProtocolContext(vocab, reference={10: [1]}, mc_options=4, distractors=DistractorSource((("a|b", merged),)))
    question = mc_options(10, ctx)
    assert question is not None and sorted(question.classes) == [1, 2, 3, 5]  # two from a, one from b
    assert sorted(question.sources) == ["a|b", "a|b", "a|b", "reference"]


def test_the_default_merges_the_two_tables_then_wordnet(vocab) -> None:
    source = build_distractors("hard", SourceInputs(vocab, "m"))
    assert source is not None and source.names == ["imagenet-confusions|real-proposals", "wordnet"]
    params = source.describe()
    assert params["distractors"] == DEFAULT_HARD
    first = params["distractor_sources"][0]
    assert [r["source"] for r in first["merged"]] == ["imagenet-confusions", "real-proposals"]
    assert distractors_line(params) == "distractors: imagenet-confusions in turns with real-proposals, then wordnet"
    tabby = vocab.resolve("tabby")
    confusions = build_distractors("imagenet-confusions", SourceInputs(vocab, "m"))
    proposals = build_distractors("real-proposals", SourceInputs(vocab, "m"))
    assert confusions is not None and proposals is not None
    firsts = [confusions.sources[0][1].by_class[tabby][0], proposals.sources[0][1].by_class[tabby][0]]
    assert source.sources[0][1].by_class[tabby][:2] == list(dict.fromkeys(firsts))[:2]


def test_a_run_of_the_model_under_test_is_refused(ws, vocab) -> None:
    stored_run(ws, vocab, "efficientnet-lite0")
    inputs = SourceInputs(vocab, "EfficientNet-Lite0", ws)
    with pytest.raises(InputError, match="the model under test"):
        build_distractors("run:efficientnet-lite0@topk+wordnet", inputs)
    settings = SuggestSettings(model="efficientnet-lite0", protocol="mc", distractors="run:efficientnet-lite0@topk")
    with pytest.raises(InputError, match="'efficientnet-lite0', the model under test"):
        build_job(settings, ws, None)
    with pytest.raises(InputError, match="no model run 'nope'"):
        build_distractors("run:nope", inputs)
    assert same_model("stub-model", "openai:stub-model") and same_model("Qwen/Q-VL", "hf-vlm:qwen/q-vl")
    assert not same_model("efficientnet-lite0", "clip:openai/clip-vit-base-patch32")


def test_unknown_source_lists_the_known_ones() -> None:
    with pytest.raises(NotFoundError) as err:
        parse_distractors("wordnet+confusables")
    assert "unknown distractor source 'confusables'; known: " in str(err.value)
    for name in distractor_summaries():
        assert name in str(err.value)
    with pytest.raises(InputError, match="write it as run:NAME"):
        parse_distractors("run")
    assert parse_distractors("hard") == parse_distractors(DEFAULT_HARD)
    assert parse_distractors("imagenet-confusions|real-proposals+run:x") == [
        [("imagenet-confusions", ""), ("real-proposals", "")],
        [("run", "x")],
    ]
    with pytest.raises(NotFoundError, match="unknown distractor source 'confusables'"):
        parse_distractors("wordnet|confusables")
    assert parse_distractors("random") == []
    assert set(distractor_summaries()) == {"random", "hard", "run:NAME", "file:PATH", *DISTRACTOR_SOURCES} - {
        "run",
        "file",
    }


def pick_a(request) -> str:
    return "A"


def params(engine, run: str) -> dict:
    with Session(engine) as s:
        return s.scalars(select(ModelRun.params).where(ModelRun.name == run)).one()


def test_the_run_records_its_sources_and_their_share(ws, vocab) -> None:
    stored_run(ws, vocab, "other-model")
    inputs = SourceInputs(vocab, ScriptedChatModel(pick_a).name, ws)
    for name, spec in [("random", "random"), ("hard", "run:other-model@topk+wordnet")]:
        ctx = ProtocolContext(vocab, mc_options=4, distractors=build_distractors(spec, inputs))
        job = SuggestJob(ws, ScriptedChatModel(pick_a), get_protocol("mc"), ctx)
        summary = run_suggestions(job, dataset=None, run_name=name, show_progress=False)
        assert summary.measured["questions"] == 4
    hard, random = params(ws, "hard"), params(ws, "random")
    assert hard["distractors"] == "run:other-model@topk+wordnet"
    assert [r["source"] for r in hard["distractor_sources"]] == ["run", "wordnet"]
    assert hard["distractor_sources"][0] | {"origin": ""} == {
        "source": "run",
        "origin": "",
        "run": "other-model@topk",
        "model": "other-model",
    }
    assert hard["measured"]["hard_distractor_share"] == 1.0
    assert set(hard["measured"]["distractors_by_source"]) <= {"run", "wordnet"}
    assert distractors_line(hard) == "distractors: run:other-model@topk (a run of other-model), then wordnet"
    assert random["distractors"] == "random" and random["measured"]["hard_distractor_share"] == 0.0
    assert distractors_line(random) == "distractors: random"


def test_sources_fill_in_order_then_random(vocab) -> None:
    source = DistractorSource((("a", Neighbours({1: [2]}, "c")), ("b", Neighbours({1: [2, 3, 4]}, "t"))))
    ctx = ProtocolContext(vocab, reference={10: [1]}, mc_options=4, distractors=source)
    question = mc_options(10, ctx)
    assert question is not None
    assert dict(zip(question.classes, question.sources)) == {1: "reference", 2: "a", 3: "b", 4: "b"}
    ctx.mc_options = 6  # both sources run out after three classes: the last two slots are random
    question = mc_options(10, ctx)
    assert question is not None and sorted(question.sources).count("random") == 2
    assert summarize_distractors([question.sources]) == {
        "questions": 1,
        "distractors": 5,
        "distractors_by_source": {"a": 1, "b": 2, "random": 2},
        "hard_distractor_share": 0.6,
    }
    with pytest.raises(InputError, match="name no source"):
        DistractorSource((("random", Neighbours({}, "x")),))


def test_spread_one_always_takes_the_most_confusable(vocab) -> None:
    ranked = Neighbours({1: [5, 6, 7, 8, 9, 10]}, "c")
    for spread, expected in [(1, {5, 6, 7}), (2, {5, 6, 7, 8, 9, 10})]:
        ctx = ProtocolContext(vocab, reference={}, mc_options=4, distractors=DistractorSource((("c", ranked),), spread))
        seen: set[int] = set()
        for image in range(30):
            ctx.reference[image] = [1]
            q = mc_options(image, ctx)
            assert q is not None
            seen |= set(q.classes) - {1}
        assert seen == expected


def test_confusions_use_the_whole_top5_ranked_by_score() -> None:
    rows = [(5, [5, 9, 7, 8, 3], [0.5, 0.3, 0.1, 0.06, 0.04]), (9, [9, 5, 1, 2, 4], None)]
    src = confusion_from_predictions(rows, 10, "run:x")
    # 5: its own top-5 (9: 0.3, 7, 8, 3) plus image 9 ranking 5 second (1/2): 9 first, every other pair kept
    assert src.by_class[5] == [9, 7, 8, 3]
    assert src.by_class[9] == [5, 1, 2, 4]  # 5: 1/2 + 0.3; then 1/3, 1/4, 1/5
    assert 5 not in src.by_class[5] and src.by_class[0] == []


def test_text_neighbours_are_the_nearest_other_classes_and_cached(vocab, tmp_path: Path) -> None:
    encoder = TrigramEncoder()
    found = text_neighbours(encoder, vocab, tmp_path, k=5)
    assert all(len(n) == 5 and c not in n for c, n in found.by_class.items())
    assert list(tmp_path.glob("text-embeddings/test_trigram-*/*.npz"))  # in the cache folder it was given
    again = text_neighbours(encoder, vocab, tmp_path, k=5)
    assert len(encoder.calls) == 1 and again.by_class == found.by_class
    assert found.origin == "test:trigram, 5 per class"


def test_summary_of_no_questions_has_no_share() -> None:
    assert summarize_distractors([])["hard_distractor_share"] is None
    assert np.isclose(summarize_distractors([["reference", "text", "random"]])["hard_distractor_share"], 0.5)


def test_readme_lists_every_source() -> None:
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    for name, kind in DISTRACTOR_SOURCES.items():
        shown = f"{name}:{kind.argument}" if kind.argument else name
        assert f"| `{shown}` |" in readme, shown
    assert f"`hard` is `{DEFAULT_HARD}`" in readme


def test_the_shipped_real_proposals_table_is_the_release_counted_again(vocab) -> None:
    from scripts.build_real_proposals_table import count_proposals, original_by_file

    paths = json.loads(shared("imagenet-val", "index_to_filepath.json").read_text(encoding="utf-8"))
    original = original_by_file(np.load(shared("imagenet-val", "original_labels_by_index.npy")), paths)
    with np.load(shared("imagenet-val", "real_raters.npz")) as raters:
        pairs = raters["info"]
    table, images = count_proposals(pairs, original, [c.wnid or "" for c in vocab.classes])
    shipped = json.loads((Path(__file__).resolve().parents[3] / "relabel/resources/imagenet1k_real_proposals.json")
                         .read_text(encoding="utf-8"))  # fmt: skip
    assert shipped["confusions"] == table and shipped["images"] == images == 24_889
    assert shipped["proposals"] == 160_073 and "Apache" in shipped["license"]
    tabby = table[vocab.classes[vocab.resolve("tabby")].wnid or ""]
    assert list(tabby)[:2] == ["n02123159", "n02124075"]  # tiger cat, Egyptian cat: the most often proposed


def test_a_run_offers_the_photos_own_ranked_classes_before_the_class_links(vocab) -> None:
    # two photos of class 1: the run ranked 7 and 8 for photo 10, 4 and 5 for photo 11; the class links are 2 and 3
    run = Neighbours({1: [2, 3]}, "run", by_image={10: [1, 7, 8], 11: [4, 5, 1]})
    assert run.linked(1, 10) == [1, 7, 8, 2, 3] and run.linked(1, 11) == [4, 5, 1, 2, 3]
    assert run.linked(1) == run.linked(1, 99) == [2, 3]  # an image the run never scored: the class links
    ctx = ProtocolContext(vocab, reference={10: [1], 11: [1], 12: [1]}, mc_options=3)
    ctx.distractors = DistractorSource((("run", run),))
    chosen = {image: set(q.classes) - {1} for image in (10, 11, 12) if (q := mc_options(image, ctx))}
    assert chosen == {10: {7, 8}, 11: {4, 5}, 12: {2, 3}}  # the reference is never its own distractor


def test_merged_sources_take_turns_per_photo(vocab) -> None:
    run = Neighbours({1: [2]}, "run", by_image={10: [7, 8]})
    table = Neighbours({1: [3, 4]}, "table")
    merged = interleave([("run", run), ("table", table)])
    assert merged.linked(1, 10) == [7, 3, 8, 4, 2] and merged.linked(1, 11) == [2, 3, 4]
    assert merged.by_class == {1: [2, 3, 4]}  # the per-class view is unchanged


def test_the_run_source_reads_each_photos_ranking(ws, vocab) -> None:
    stored_run(ws, vocab, "other-model")
    source = build_distractors("run:other-model@topk", SourceInputs(vocab, "model-under-test", ws))
    assert source is not None
    run = source.sources[0][1]
    assert run.by_image and all(len(ranked) == 5 for ranked in run.by_image.values())
    egyptian = vocab.resolve("Egyptian cat")
    cat_photo = next(i for i, ranked in run.by_image.items() if ranked[0] == egyptian)
    assert run.linked(vocab.resolve("tabby"), cat_photo)[0] == egyptian
