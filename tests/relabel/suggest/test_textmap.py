"""Mapping free answers to classes: the object-phrase extractor, word evidence, and the mapper on tuning answers."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from relabel.common.vocabulary import ClassInfo, UnknownClassError, Vocabulary
from relabel.suggest.class_texts import class_descriptors, class_names, normalize_answer
from relabel.suggest.lexical import Bm25Index, name_key, stem
from relabel.suggest.phrases import core_phrase, head_phrase, object_phrase
from relabel.suggest.textmap import (
    DEFAULT_ENCODER,
    MAPPER_VERSION,
    WEIGHTS,
    WEIGHTS_WITHOUT_DESCRIPTORS,
    ClassNameIndex,
)
from tests.conftest import REPO
from tests.fakes import TrigramEncoder

DATA = REPO / "tests" / "data"


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        ("It looks like a slip-on shoe in the picture.", "slip-on shoe"),
        ("This photo shows a mountain.", "mountain"),
        ("It looks like a bullock cart", "bullock cart"),
        ("This image shows a red fox.", "red fox"),
        ("The main object is a Loafer.", "loafer"),
        ("The main object in the image is a tabby cat.", "tabby cat"),
        ("I see a golden retriever.", "golden retriever"),
        ("I can see two zebras in the photo.", "zebras"),
        ("There is a teapot in the image.", "teapot"),
        ("It appears to be a Komodo dragon.", "komodo dragon"),
        ("I think it looks like a tabby cat (probably).", "tabby cat"),
        ("**Golden Retriever**", "golden retriever"),
        ("Answer: teddy bear", "teddy bear"),
        ("Sure! It is a St. Bernard dog.", "st. bernard dog"),
        ("Bananas! A bunch of ripe yellow bananas.", "bananas"),
        ("A tabby cat lying on a sofa. It has brown stripes.", "tabby cat lying on a sofa"),
        ("That's a sports car.", "sports car"),
        ("In this image, there is a cup of coffee.", "cup of coffee"),
        ("A close-up photo of a silver salmon.", "silver salmon"),
        ("Probably a Porsche sports car.", "porsche sports car"),
        ("espresso", "espresso"),
    ],
)
def test_object_phrase_removes_the_frames_chat_models_use(answer: str, phrase: str) -> None:
    assert object_phrase(answer) == phrase


@pytest.mark.parametrize(
    ("phrase", "core"),
    [
        ("copier on a table", "copier"),
        ("puma sitting on a rock", "puma"),
        ("leonberger lying on the grass", "leonberger"),
        ("bird with an enormous colorful beak", "bird with an enormous colorful beak"),
        ("hot appliance for pressing clothes", "hot appliance for pressing clothes"),
        ("in the picture", "in the picture"),
        ("pekingese, a kind of toy dog", "pekingese"),  # an appositive right after the first word
        ("husky pulling a sled", "husky"),  # any -ing word before an article starts the scene
        ("rooster crowing on a fence", "rooster"),
        ("sewing machine on a table", "sewing machine"),  # an -ing word inside the name stays
    ],
)
def test_core_phrase_drops_the_scene_but_keeps_what_describes_the_object(phrase: str, core: str) -> None:
    assert core_phrase(phrase) == core


def test_an_ing_word_that_ends_a_name_is_no_scene(trigram_index) -> None:
    phrases = ["cliff dwelling in the canyon", "small brambling on a branch", "christmas stocking on a mantel"]
    assert [core_phrase(p) for p in phrases] == ["cliff", "small", "christmas"]  # no names known: cut at "-ing"
    cores = [core_phrase(p, is_name=trigram_index._is_name) for p in phrases]
    assert cores == ["cliff dwelling", "small brambling", "christmas stocking"]
    assert core_phrase("husky pulling a sled", is_name=trigram_index._is_name) == "husky"


@pytest.mark.parametrize(
    ("phrase", "head"),
    [
        ("bull with horns", "bull"),
        ("truck that collects rubbish", "truck"),
        ("chest of drawers", "chest"),
        ("black and white bear", "black and white bear"),
        ("mountain bike", "mountain bike"),
        ("with", "with"),
    ],
)
def test_head_phrase_ends_on_the_word_the_phrase_is_about(phrase: str, head: str) -> None:
    assert head_phrase(phrase) == head


def test_a_postmodifier_does_not_lend_its_words_to_a_name(trigram_index, vocab) -> None:
    # "horns" is the last word, but the phrase is about a bull: *French horn* loses the head penalty's worth
    extra = trigram_index._extra_words(["bull with horns", "french horn", ""])
    horn = [j for j, o in enumerate(trigram_index.owners) if o == vocab.resolve("French horn")][0]
    assert extra[0, horn] > extra[1, horn] == 0 and not extra[2].any()


def test_words_are_stemmed_alike_and_names_keyed_without_spaces() -> None:
    assert [stem(w) for w in ("berries", "boxes", "pressing", "clothes", "glass", "bus")] == [
        "berry",
        "box",
        "press",
        "clothe",
        "glass",
        "bus",
    ]
    assert name_key("Gas masks") == name_key("gasmask") == name_key("the gas-mask")


def test_bm25_ranks_the_class_whose_gloss_holds_the_words(vocab) -> None:
    scores = Bm25Index(vocab).scores(["low-cut slip-on shoe without laces", "zzzz"])
    assert scores.shape == (2, 1000) and int(scores[0].argmax()) == vocab.resolve("Loafer")
    assert not scores[1].any()


def test_word_evidence_reads_the_wordnet_definition_beside_the_description(vocab) -> None:
    from relabel.suggest.class_texts import wordnet_glosses

    definitions = wordnet_glosses()
    assert len(definitions) == 1000 and definitions[vocab.classes[vocab.resolve("wombat")].wnid].startswith("burrowing")
    plain, read = Bm25Index(vocab), Bm25Index(vocab, [definitions[c.wnid or ""] for c in vocab.classes])
    queries = ["stocky burrowing marsupial", "one-humped desert animal"]
    assert [vocab.classes[int(r.argmax())].name for r in read.scores(queries)] == ["wombat", "Arabian camel"]
    assert [vocab.classes[int(r.argmax())].name for r in plain.scores(queries)] != ["wombat", "Arabian camel"]


@pytest.fixture(scope="module")
def trigram_index(vocab):
    return ClassNameIndex(TrigramEncoder(), vocab)


def test_an_exact_synonym_in_a_sentence_picks_its_class(trigram_index, vocab) -> None:
    m = trigram_index.map(["Probably a trolley car.", "This photo shows two gas masks.", "A TABBY CAT in the picture"])
    assert [vocab.classes[c].name for c in m.classes] == ["streetcar", "gasmask", "tabby"]
    assert m.phrases == ["trolley car", "gas masks", "tabby cat"]
    assert all(0 < s <= 1.0001 for s in m.similarity)


def test_a_name_as_written_is_not_taken_for_another_that_stems_alike(trigram_index, vocab) -> None:
    assert name_key("moped") == name_key("mop") and name_key("moped", stemmed=False) != "mop"
    m = trigram_index.map(["That's a mop.", "A moped.", "Two mops in a bucket.", "It looks like gas masks."])
    assert [vocab.classes[c].name for c in m.classes] == ["swab", "moped", "swab", "gasmask"]


def test_a_name_shared_by_classes_is_settled_among_them(trigram_index, vocab) -> None:
    m = trigram_index.map(["crane", "It looks like a crane."])
    assert set(m.classes) <= {vocab.resolve("crane (bird)"), vocab.resolve("crane (machine)")}


def test_each_distinct_phrase_is_embedded_once_and_names_not_at_all(vocab) -> None:
    encoder = TrigramEncoder()
    index = ClassNameIndex(encoder, vocab)
    calls = len(encoder.calls)
    answers = ["tabby", "It looks like a Tabby.", "a tabby", "goldfish", "a goldfish on a table", "an orange fish"]
    m = index.map([*answers, "A small orange fish in a bowl.", "an orange fish"])
    # "tabby" and "goldfish" are class names: their cached embeddings serve; "goldfish on a table" is settled by
    # its core's name; only the two phrases that name no class, and one core, reach the encoder, once each
    assert encoder.calls[calls:] == [["orange fish", "small orange fish", "small orange fish in a bowl"]]
    assert len(m.classes) == 8 and len(set(m.classes[:3])) == 1 and m.classes[5] == m.classes[7]
    assert m.classes[3] == m.classes[4] == vocab.resolve("goldfish")
    assert m.similarity[3] == pytest.approx(1.0, abs=1e-6)
    assert index.describe()["method"] == MAPPER_VERSION
    assert len(index.map([]).classes) == 0 and encoder.calls[calls + 1 :] == []


def test_a_kind_named_in_wordnet_maps_to_its_class_but_listed_names_decide(trigram_index, vocab) -> None:
    m = trigram_index.map(["The image contains a grizzly.", "That's a sieve.", "A woodlouse.", "A drill."])
    assert [vocab.classes[c].name for c in m.classes[:3]] == ["brown bear", "strainer", "isopod"]
    # "drill" is first a tool in WordNet, so no name of the baboon; that tool holds one class, the power drill
    assert m.classes[3] == vocab.resolve("power drill")
    texts, owners, listed = class_names(vocab)
    kinds = {t: o for t, o, is_listed in zip(texts, owners, listed) if not is_listed}
    assert {"grizzly", "sieve", "woodlouse"} <= set(kinds) and kinds["drill"] != vocab.resolve("baboon")
    assert not set(kinds) & {t for t, is_listed in zip(texts, listed) if is_listed}
    assert owners == sorted(owners) and class_names(vocab, hyponyms=False)[0] == [t for t, k in zip(texts, listed) if k]
    with pytest.raises(UnknownClassError):
        vocab.resolve("grizzly")  # the mapper's names only: the vocabulary and closed-world matching are unchanged


def test_other_names_and_sole_groups_map_to_their_class_but_not_a_generic_word(trigram_index, vocab) -> None:
    answers = ["This is a Japanese Chin.", "It looks like a bullock cart", "The image contains a newt."]
    m = trigram_index.map(answers)
    assert [vocab.classes[c].name for c in m.classes[:2]] == ["Japanese spaniel", "oxcart"]
    texts, owners, listed = class_names(vocab)
    other = {t: vocab.classes[o].name for t, o, is_listed in zip(texts, owners, listed) if not is_listed}
    assert other["japanese chin"] == "Japanese spaniel" and other["sirenian"] == "dugong"
    # the curated name of *eft* is "newt", the last word of *common newt*: kept out, so "newt" is not taken from it
    assert "newt" not in other and m.classes[2] != vocab.resolve("eft")
    # a group above many classes, or far above one, or holding many kinds, names none of them: "plant" the factory
    # is above *lumbermill* alone, "location" above *bakery*
    assert not {"mammal", "plant", "location", "workplace", "medication", "surface"} & set(other)
    # a close group's name ("sea cow" for *dugong*) is one more name to compare an answer with, never taken outright
    assert "seacow" not in trigram_index.exact and "seacow" in {name_key(t) for t in other}
    assert "grizzly" in {name_key(t) for t in other} and "grizzly" in trigram_index.exact  # a kind's name is


class RefusingEncoder:
    """Stands in for an encoder whose class-side texts are all cached: any text asked for is refused."""

    def __init__(self, id: str) -> None:
        self.id = id

    def encode(self, texts: list[str]) -> np.ndarray:
        raise AssertionError(f"asked to encode {len(texts)} texts: {texts[:3]}")


def four_classes(vocab: Vocabulary) -> Vocabulary:
    """Four built-in classes (so with their other names and short descriptions) as a vocabulary of their own."""
    return Vocabulary("four", [replace(vocab.classes[vocab.resolve(n)], index=i) for i, n in enumerate(NAMED)])


NAMED = ("tabby", "oxcart", "porcupine", "llama")


def test_a_second_index_reads_every_class_text_from_the_cache(vocab, tmp_path: Path) -> None:
    four = four_classes(vocab)
    first = ClassNameIndex(TrigramEncoder(), four, cache_dir=tmp_path)
    again = ClassNameIndex(RefusingEncoder(TrigramEncoder.id), four, cache_dir=tmp_path)  # no encoder call
    assert again.embeddings.dtype == np.float32 and again.embeddings.shape == (len(again.owners), 512)
    assert np.array_equal(again.embeddings, first.embeddings) and again.descriptors is not None
    assert first.descriptors is not None and np.array_equal(again.descriptors, first.descriptors)
    assert again.descriptions is None  # the gloss embedded whole is scored only without short descriptions
    assert [p.name for p in tmp_path.iterdir()] == ["text-embeddings"]  # the workspace's cache, nothing else
    # another encoder never reads them, nor does a vocabulary with texts the cache lacks ("name: gloss")
    with pytest.raises(AssertionError, match="asked to encode"):
        ClassNameIndex(RefusingEncoder("test:other"), four, cache_dir=tmp_path)
    with pytest.raises(AssertionError, match=r"asked to encode \d texts: \['tabby: "):
        ClassNameIndex(RefusingEncoder(TrigramEncoder.id), four, cache_dir=tmp_path, hyponyms=False)


def test_minilm_class_embeddings_are_a_fresh_encode_in_float16(vocab, tmp_path: Path) -> None:
    from relabel.suggest.textmap import load_encoder

    four = four_classes(vocab)
    encoder = CountingEncoder(load_encoder(DEFAULT_ENCODER))
    index = ClassNameIndex(encoder, four, cache_dir=tmp_path)
    descriptors = class_descriptors(four)[0]
    # the texts these four classes need, each once; not the built-in vocabulary's ~32,000
    assert encoder.texts == len(set(class_names(four)[0]) | set(descriptors)) < 400
    assert index.descriptors is not None and index.descriptors.shape == (len(descriptors), 384)
    sample = list(range(0, len(descriptors), 9))
    fresh = encoder.inner.encode([descriptors[i] for i in sample])
    np.testing.assert_allclose(index.descriptors[sample], fresh, atol=2e-3)  # float16 storage, the same vectors
    assert np.min(np.sum(fresh * index.descriptors[sample], axis=1)) > 0.9999
    m = index.map(["A tabby cat.", "It looks like a bullock cart", "a prickly rodent", "a woolly pack animal"])
    assert [four.classes[c].name for c in m.classes] == ["tabby", "oxcart", "porcupine", "llama"]


class CountingEncoder:
    """Counts the texts that reach the encoder it wraps."""

    def __init__(self, inner) -> None:
        self.inner, self.id, self.texts = inner, inner.id, 0

    def encode(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return self.inner.encode(texts)


def test_settling_by_name_and_reusing_name_embeddings_change_no_result(trigram_index) -> None:
    rows = read_answers("mapping_dev.jsonl")[::3]
    m = trigram_index.map([r["answer"] for r in rows])
    # the reference: every distinct phrase and core freshly embedded and scored, names settling only among hits
    phrases = list(dict.fromkeys(m.phrases))
    cores = [core_phrase(p) for p in phrases]
    hits = [trigram_index._named(p) or trigram_index._named(c) for p, c in zip(phrases, cores)]
    assert 0 < sum(len(h) == 1 for h in hits) < len(phrases)
    encode = TrigramEncoder().encode
    full = trigram_index._score(phrases, cores, encode(phrases), encode(cores), hits)
    assert [full[phrases.index(p)] for p in m.phrases] == list(m.classes)


def read_answers(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines()]


def truths(row: dict) -> list[str]:
    return row["truth"] if isinstance(row["truth"], list) else [row["truth"]]


def test_every_class_has_short_descriptions_that_avoid_its_names(vocab) -> None:
    texts, owners = class_descriptors(vocab)
    assert owners == sorted(owners) and set(owners) == set(range(len(vocab)))
    first = np.searchsorted(owners, np.arange(len(vocab)))
    assert [texts[i] for i in first] == [c.name for c in vocab.classes]  # each class's name leads its rows
    per_class = np.bincount(owners, minlength=len(vocab)) - 1
    assert per_class.min() >= 15 and len(set(texts)) >= 0.99 * len(texts)
    named, leads = [], set(first.tolist())
    for i, (text, owner) in enumerate(zip(texts, owners)):
        if i in leads:
            continue
        c = vocab.classes[owner]
        if any(f" {normalize_answer(n)} " in f" {normalize_answer(text)} " for n in (c.name, *c.synonyms)):
            named.append((c.name, text))
    assert not named  # a description says what the thing is like, never what it is called
    assert all(3 <= len(t.split()) <= 16 for i, t in enumerate(texts) if i not in leads)
    # another vocabulary, or the mapper without its extra resources, has the display name alone
    assert class_descriptors(vocab, hyponyms=False) == ([c.name for c in vocab.classes], list(range(len(vocab))))


def test_an_everyday_name_maps_but_never_displaces_a_listed_one(trigram_index, vocab) -> None:
    texts, owners, listed = class_names(vocab)
    other = {t: vocab.classes[o].name for t, o, is_listed in zip(texts, owners, listed) if not is_listed}
    assert other["clicker"] == "remote control" and other["fridge"] == "refrigerator"
    # an everyday name whose first sense in WordNet is another thing is compared with, never taken outright
    assert other["biscuit"] == "puck" and "biscuit" not in trigram_index.exact
    m = trigram_index.map(["I think that's a clicker.", "A fridge in a kitchen."])
    assert [vocab.classes[c].name for c in m.classes] == ["remote control", "refrigerator"]


def test_descriptions_only_where_every_class_has_them(vocab) -> None:
    imagenet = [vocab.classes[vocab.resolve(n)] for n in ("porcupine", "llama", "tabby", "goldfish")]
    described = Vocabulary("four", [replace(c, index=i) for i, c in enumerate(imagenet)])
    texts, owners = class_descriptors(described)
    assert len(texts) > 4 * 15 and ClassNameIndex(TrigramEncoder(), described).weights == WEIGHTS
    # a class of its own beside them: measured by its name against the others' many descriptions, it would lose
    own = ClassInfo(4, "hedgehog", gloss="a small nocturnal mammal covered in spines that rolls into a ball")
    mixed = Vocabulary("mixed", [*described.classes, own])
    assert class_descriptors(mixed)[0] == [c.name for c in mixed.classes]
    index = ClassNameIndex(TrigramEncoder(), mixed)
    assert index.descriptors is None and index.weights == WEIGHTS_WITHOUT_DESCRIPTORS


def test_the_paraphrase_answers_cover_every_class_and_mostly_avoid_its_names(vocab) -> None:
    rows = read_answers("mapping_paraphrases.jsonl")
    assert len(rows) >= 2000 and len({r["answer"] for r in rows}) == len(rows)
    wnids = {c.wnid: c for c in vocab.classes}
    assert {w for r in rows for w in truths(r)} == set(wnids)
    dev = {r["answer"] for name in ("mapping_dev.jsonl", "mapping_dev_descriptions.jsonl") for r in read_answers(name)}
    assert not dev & {r["answer"] for r in rows}
    # the classes' short descriptions were written apart from the answers: no answer's object phrase is one of them
    described = set(class_descriptors(vocab)[0]) - set(class_descriptors(vocab, hyponyms=False)[0])  # less names
    assert not {object_phrase(r["answer"]) for r in rows} & {object_phrase(d) for d in described}

    def says_a_listed_name(row: dict) -> bool:
        text = f" {normalize_answer(row['answer'])} "
        names = {n for w in truths(row) for n in (wnids[w].name, *wnids[w].synonyms)}
        return any(f" {normalize_answer(n)} " in text for n in names)

    share = np.mean([says_a_listed_name(r) for r in rows])
    assert 0.3 < share < 0.65  # the rest: names the vocabulary lacks, or descriptions


@pytest.mark.slow
def test_minilm_maps_the_paraphrase_answers(vocab) -> None:
    from relabel.suggest.textmap import load_encoder

    index = ClassNameIndex(load_encoder("minilm"), vocab)  # the session's user cache: built once, read after
    cited = ["It looks like a slip-on shoe in the picture.", "This photo shows a mountain.", "A tabby cat."]
    assert [vocab.classes[c].name for c in index.map(cited).classes] == ["Loafer", "alp", "tabby"]
    rows = read_answers("mapping_paraphrases.jsonl")[::5]  # 404 answers, both kinds of each class alternately
    mapping = index.map([r["answer"] for r in rows])
    hits = [vocab.classes[c].wnid in truths(r) for c, r in zip(mapping.classes, rows)]
    # a tuning set since the plain-name rules (read after each round); bench/bench_mapping.py measures all 2,018;
    # this fixed fifth scored 84.7 % when the mapper was written,
    # 86.9 % with the WordNet kinds and phrase heads, and 97.0 % with the classes' short descriptions
    assert np.mean(hits) >= 0.95
