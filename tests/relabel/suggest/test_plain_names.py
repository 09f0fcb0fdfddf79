"""Answers that name their class plainly beside words another class's descriptions share: the phrase rules (dash
asides, a comma after colours, a person wearing the object, "X with a Y") and the plain-name scoring."""

from __future__ import annotations

import json

import pytest

from relabel.suggest.phrases import appositive, core_phrase, name_candidates, object_phrase, scene_part
from relabel.suggest.plain_names import PlainNames
from relabel.suggest.textmap import ClassNameIndex
from tests.conftest import REPO


def core_of(answer: str) -> str:
    return core_phrase(object_phrase(answer))


@pytest.mark.parametrize(
    ("answer", "core"),
    [
        ("A pelican – a big waterbird with a throat pouch – on a pier.", "pelican"),
        ("A hippo—huge, grey, and half submerged—in a muddy river.", "hippo"),
        ("A snorkel -- a bent breathing tube -- next to a diving mask.", "snorkel"),
        ("It's a jellyfish — translucent, with long trailing tentacles.", "jellyfish"),
        ("Answer — a stone viaduct", "stone viaduct"),
    ],
)
def test_a_dash_aside_is_cut_as_a_comma_aside_is(answer: str, core: str) -> None:
    assert core_of(answer) == core


@pytest.mark.parametrize(
    ("answer", "core"),
    [
        ("An orange, shaggy Irish setter running in a meadow.", "orange, shaggy irish setter"),
        ("A yellow, dented school bus parked by a curb.", "yellow, dented school bus"),
        ("A red, ripe strawberry on a white plate.", "red, ripe strawberry"),
        ("An orange, a citrus fruit cut in half.", "orange"),  # an aside after the comma: the orange it is
        ("A tench, caught on a line.", "tench"),
    ],
)
def test_a_comma_after_colours_or_adjectives_is_no_aside(answer: str, core: str) -> None:
    assert core_of(answer) == core


@pytest.mark.parametrize(
    ("answer", "phrase"),
    [
        ("A young woman wearing a straw sombrero.", "straw sombrero"),
        ("An elderly man wearing a cardigan on a park bench.", "cardigan on a park bench"),
        ("A girl holding a teddy bear.", "teddy bear"),
        ("The picture shows a man in a bulletproof vest.", "bulletproof vest"),
        ("A man in black.", "man in black"),  # no article: a colour, not a garment
    ],
)
def test_a_person_wearing_or_holding_the_object_is_read_as_the_object(answer: str, phrase: str) -> None:
    assert object_phrase(answer) == phrase


def test_name_candidates_start_at_the_head_and_drop_only_modifiers() -> None:
    assert name_candidates("rusty anchor with a coil of chain") == ["rusty anchor", "anchor"]
    assert name_candidates("ear of corn") == ["ear"]
    assert name_candidates("head of lettuce") == ["lettuce"]  # a measure: the object follows its "of"
    assert name_candidates("black and tan hound")[-1] == "hound"  # "and" joins adjectives here
    assert "dog" not in name_candidates("cat and a dog")  # ... and two things here
    assert name_candidates("porcini mushroom", lambda word: word != "porcini") == ["porcini mushroom"]
    assert "orange" not in name_candidates("fluffy orange")  # a colour alone names no class


def test_the_scene_and_a_closing_name_are_found_apart_from_the_object() -> None:
    assert scene_part("sleepy dog on a patchwork quilt", "sleepy dog") == "on a patchwork quilt"
    assert scene_part("dog wearing a muzzle", "dog") == ""  # worn, not a place
    assert appositive("small yellow finch on a branch, a goldfinch") == "goldfinch"
    assert appositive("small yellow finch on a branch") == ""


def test_plain_names_take_the_head_and_leave_the_scene() -> None:
    table = {"chest": [1], "padlock": [2], "quilt": [3], "tabby": [4], "goldfinch": [5], "mushroom": [6]}
    plain = PlainNames(lambda t: table.get(t, []), lambda t: t in table, {"porcini", "chest", "padlock"})
    assert plain.plainly_named("wooden chest with a brass padlock", "wooden chest with a brass padlock") == [1]
    assert plain.named_around("wooden chest with a brass padlock", "wooden chest with a brass padlock", [1]) == [2]
    assert plain.plainly_named("sleepy tabby on a quilt", "sleepy tabby") == [4]
    assert plain.named_around("sleepy tabby on a quilt", "sleepy tabby", [4]) == [3]
    assert plain.plainly_named("porcini mushroom", "porcini mushroom") == []  # 'porcini' names a kind, no modifier
    assert plain.plainly_named("yellow finch on a branch, a goldfinch", "yellow finch") == [5]
    # beside an object named by no class, the scene or a "with" may be what the answer is about
    assert plain.named_around("box with a brass padlock", "box with a brass padlock", []) == []
    assert plain.named_around("books on a quilt", "books", []) == []


@pytest.fixture(scope="module")
def minilm_index(vocab) -> ClassNameIndex:
    from relabel.suggest.textmap import load_encoder

    return ClassNameIndex(load_encoder("minilm"), vocab)  # the session's user cache: built once, read after


@pytest.mark.slow
@pytest.mark.parametrize(
    ("answer", "name"),
    [
        # "X with a Y": a class named plainly beside words other classes' descriptions hold (all four went to Y)
        ("A canoe with a paddle resting across it.", "canoe"),
        ("A crib with a teddy bear in it.", "crib"),
        ("A monitor with a keyboard in front of it.", "monitor"),
        ("A bathtub with a rubber duck.", "bathtub"),
        # an adjective and a scene (went to the scene)
        ("A fat orange tabby asleep on a laptop keyboard.", "tabby"),
        ("A scruffy Yorkshire terrier on a park bench.", "Yorkshire terrier"),
        # a colour and a comma (went to the colour or past the object)
        ("An orange, shaggy Irish setter running in a meadow.", "Irish setter"),
        ("A grey, wrinkled African elephant at a waterhole.", "African elephant"),
        ("A black, fluffy Newfoundland on a dock.", "Newfoundland"),
        ("A golden, shiny trombone on a stand.", "trombone"),
        # a person wearing the object (went elsewhere)
        ("An elderly man wearing a cardigan on a park bench.", "cardigan"),
        ("A man wearing a vestment at an altar.", "vestment"),
        # a dash aside
        ("A snorkel -- a bent breathing tube -- next to a diving mask.", "snorkel"),
        ("A pelican – a big waterbird with a throat pouch – on a pier.", "pelican"),
    ],
)
def test_minilm_maps_a_plainly_named_class_over_descriptions(minilm_index, vocab, answer: str, name: str) -> None:
    assert vocab.classes[int(minilm_index.map([answer]).classes[0])].name == name


def test_the_pattern_tuning_set_covers_each_pattern_apart_from_the_other_sets(vocab) -> None:
    data = REPO / "tests" / "data"

    def read(name: str) -> list[dict]:
        return [json.loads(line) for line in (data / name).read_text(encoding="utf-8").splitlines() if line.strip()]

    rows = read("mapping_dev_patterns.jsonl")
    counts: dict[str, int] = {}
    for row in rows:
        for wnid in row["truth"] if isinstance(row["truth"], list) else [row["truth"]]:
            vocab.resolve(wnid)  # raises on an unknown class
        counts[row["pattern"]] = counts.get(row["pattern"], 0) + 1
    assert set(counts) == {"named", "colour_comma", "adjective_scene", "person_wearing", "x_with_y", "dash_aside"}
    assert all(10 <= n <= 30 for n in counts.values())
    others = ("mapping_dev.jsonl", "mapping_dev_descriptions.jsonl", "mapping_paraphrases.jsonl")
    assert not {r["answer"] for r in rows} & {r["answer"] for name in others for r in read(name)}
