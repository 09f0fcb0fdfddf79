"""The pope and caption protocols' parts: yes/no replies, caption mentions, the probe plan, and one image's probes
made one answer."""

from __future__ import annotations

import numpy as np
import pytest

from relabel.common.errors import InputError
from relabel.suggest.distractors import DistractorSource, Neighbours
from relabel.suggest.probes import (
    PresenceProbes,
    caption_mentions,
    is_confident,
    parse_yes_no,
    probe_plan,
    related_matrix,
)
from relabel.suggest.protocol_base import Answer, map_pending
from relabel.suggest.textmap import Mapping


@pytest.mark.parametrize(
    ("reply", "read"),
    [("Yes.", "yes"), ("**No**, there is none.", "no"), ("yes, but not sure", "yes"), ("There is no dog.", "no"),
     ("There is a dog.", "unparseable"), ("Maybe.", "unparseable"), ("", "unparseable"), ("Nope", "no")],
)  # fmt: skip
def test_yes_no_replies(reply: str, read: str) -> None:
    assert parse_yes_no(reply) == read


@pytest.mark.parametrize(
    ("caption", "mentions"),
    [
        ("A photo of a tabby cat next to a goldfish.", ["tabby cat", "goldfish"]),
        ("This image shows a golden retriever sitting on a sofa with a red ball in the background.",
         ["golden retriever", "sofa", "red ball"]),
        ("Two black and white dogs playing in the snow.", ["white dogs", "snow"]),
        ("", []),
    ],
)  # fmt: skip
def test_caption_mentions(caption: str, mentions: list[str]) -> None:
    assert caption_mentions(caption) == mentions


def _linked(*pairs: tuple[int, int]) -> DistractorSource:
    by_class: dict[int, list[int]] = {}
    for a, b in pairs:
        by_class.setdefault(a, []).append(b)
        by_class.setdefault(b, []).append(a)
    return DistractorSource((("groups", Neighbours(by_class, "test")),))


def test_probe_plan_asks_each_positive_once_and_one_negative_per_sampling() -> None:
    reference = {10: [0], 11: [281], 12: [1], 13: []}
    related = related_matrix(_linked((0, 1), (281, 282)), 1000)
    plan = probe_plan(reference, 1000, 1, 0, related)
    assert 13 not in plan  # no label: no probes
    for image, classes in reference.items():
        if not classes:
            continue
        asked = plan[image]
        assert asked[0] == (classes[0], ["positive"])
        tables = [t for _, found in asked[1:] for t in found]
        assert sorted(tables) == ["adversarial", "popular", "random"]  # a class drawn twice is asked once
        assert all(c not in classes for c, _ in asked[1:])
    # the linked class is the adversarial negative (popular may draw it too: classes 0, 1, 281 label one image each)
    assert "adversarial" in dict(plan[10])[1] and dict(plan[11])[282] == ["adversarial"]
    assert probe_plan(reference, 1000, 1, 0, related) == plan  # seeded


def test_too_many_negatives_is_one_line() -> None:
    with pytest.raises(InputError, match="--pope-negatives 5"):
        probe_plan({1: [0]}, 3, 5, 0, np.zeros((3, 3)))


def test_an_earlier_source_outranks_a_later_one() -> None:
    first = Neighbours({0: [5]}, "first")
    second = Neighbours({0: [3, 4]}, "second")
    related = related_matrix(DistractorSource((("a", first), ("b", second))), 6)
    assert related[0].argmax() == 5 and related[0, 3] > related[0, 4] > 0 == related[0, 0]


def _probe(cls: int, answer: str, error: str | None = None, retryable: bool = False) -> Answer:
    details = {"n_probes": 2, "probe": {"class": cls, "in": ["positive"], "answer": answer}, "cached": False}
    return Answer(raw=answer, details=details, error=error, retryable=retryable)


def test_an_images_probes_become_one_answer() -> None:
    pope = PresenceProbes()
    done = pope.combine([_probe(3, "yes"), _probe(4, "no")])
    assert done is not None and done.error is None and done.classes == [3]
    assert [p["answer"] for p in done.details["probes"]] == ["yes", "no"]
    assert pope.combine([_probe(3, "yes")]) is None  # the other probe was never sent: not stored


def test_a_failed_probe_makes_the_image_an_error_with_its_own_reason() -> None:
    failed = PresenceProbes().combine([_probe(3, "yes"), _probe(4, "error", "HTTP 503: overloaded", True)])
    assert failed is not None and failed.error == "HTTP 503: overloaded" and failed.retryable
    assert failed.raw == "error"  # the failed call's reply only: the others' words would read as the model's failure
    assert [p["answer"] for p in failed.details["probes"]] == ["yes", "error"]


class _Mapper:
    def map(self, answers: list[str]) -> Mapping:
        return Mapping(np.arange(len(answers)), np.linspace(0.9, 0.3, len(answers)), answers)


def test_caption_mentions_are_mapped_one_by_one() -> None:
    caption = Answer(raw="a cat and a lawn", details={"mentions": []}, to_map_each=["cat", "lawn"])
    map_pending([caption], _Mapper())  # type: ignore[arg-type]
    assert caption.details["mentions"] == [
        {"text": "cat", "class": 0, "similarity": 0.9},
        {"text": "lawn", "class": 1, "similarity": 0.3},
    ]
    assert [is_confident(m) for m in caption.details["mentions"]] == [True, False]
