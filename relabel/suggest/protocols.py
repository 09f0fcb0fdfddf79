"""How a model is asked and how its answer becomes classes: OW, MC, CW, CW+ and top-k scoring; and the
registry of every protocol, the presence probes (pope) and captions (caption) of `relabel.suggest.probes` too.

Each protocol builds requests from images, parses outputs into `Answer`s, and is recorded with its prompt's
version hash. Free-text answers that need the embedding space (OW, and CW+'s out-of-prompt answers) are mapped in
one batch per chunk by `map_pending`. After each call the runner stores what `Protocol.summarize` measured over
the run's answers in `params["measured"]` (CW: the strict out-of-prompt rate; MC: the hard-distractor share).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relabel.common.errors import InputError, unknown_name
from relabel.common.vocabulary import INDEX, Vocabulary
from relabel.suggest.class_texts import normalize_answer
from relabel.suggest.distractors import RANDOM, REFERENCE, summarize_distractors
from relabel.suggest.probes import Caption, PresenceProbes
from relabel.suggest.protocol_base import (
    CLASSES,
    Answer,
    Pending,
    Protocol,
    ProtocolContext,
    listed_key,
    load_prompt,
    prompt_version,
)
from relabel.suggest.retrieval_protocol import Retrieval
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TOP_K = 5


class OpenWorld(Protocol):
    """A free answer, mapped to the nearest class in the text-embedding space."""

    name, summary, needs_mapper = "ow", "open world", True
    template, multi_template = load_prompt("ow"), load_prompt("ow_multi")

    def _prompt(self, ctx: ProtocolContext, n: int) -> str:
        return self.template if n == 1 else self.multi_template.format(n=n)

    def _parse_one(self, text: str, state: dict[str, Any], ctx: ProtocolContext) -> Answer:
        return Answer(raw=text, to_map=text)


class ClosedWorld(Protocol):
    """The model chooses among all class names; an answer that is not a listed name is out-of-prompt (OOP).

    An answer is in-prompt when it is one of the listed display names as written, parentheses included
    ("crane (bird)"), up to `listed_key`'s formatting allowances. With `ctx.accept_synonyms` an answer that names a
    class by an unlisted synonym or its wnid gets that class too, marked `details["accepted"]`, but stays OOP:
    `details["oop"]` is always the strict verdict, and `summarize` reports both rates."""

    name, summary, reads_synonyms = "cw", "closed world", True
    template, multi_template = load_prompt("cw"), load_prompt("cw_multi")
    map_oop = False

    def describe(self, ctx: ProtocolContext) -> dict[str, Any]:
        return {**super().describe(ctx), "accept_synonyms": ctx.accept_synonyms}

    def _prompt(self, ctx: ProtocolContext, n: int) -> str:
        listing = "\n".join(ctx.class_names)
        return self.template.format(classes=listing) if n == 1 else self.multi_template.format(n=n, classes=listing)

    def _parse_one(self, text: str, state: dict[str, Any], ctx: ProtocolContext) -> Answer:
        index = ctx.listed_names.get(listed_key(text))
        if index is not None:
            return Answer([index], raw=text, details={"oop": False})
        if ctx.accept_synonyms and (found := unlisted_class(text, ctx.vocab)) is not None:
            return Answer([found[0]], raw=text, details={"oop": True, "accepted": found[1]})
        return Answer(raw=text, details={"oop": True}, to_map=text if self.map_oop else None)

    def summarize(self, details: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """`oop_strict_rate`: answers that are not a listed name / answers; `oop_lenient_rate` leaves out those
        accepted as a synonym or wnid (equal to the strict rate unless `accept_synonyms`)."""
        answered = len(details)
        oop = sum(bool(d.get("oop")) for d in details)
        accepted = sum(bool(d.get("accepted")) for d in details)
        return {
            "answered": answered,
            "oop_strict": oop,
            "oop_strict_rate": round(oop / answered, 4) if answered else None,
            "accepted_synonym_or_wnid": accepted,
            "oop_lenient_rate": round((oop - accepted) / answered, 4) if answered else None,
        }


class ClosedWorldPlus(ClosedWorld):
    """CW, with out-of-prompt answers mapped to the nearest valid class (similarity stored)."""

    name, summary, map_oop, needs_mapper = "cwplus", "CW with mapping", True, True


class MultipleChoice(Protocol):
    """k options: the reference class and k-1 distractors (random, or hard ones from the sources that
    relabel.suggest.distractor_sources names), shuffled with a per-image seed. The run records its distractor
    sources (`params["distractors"]`, `params["distractor_sources"]`)."""

    name, summary, needs_reference, uses_distractors = "mc", "multiple choice", True, True
    template = load_prompt("mc")

    def describe(self, ctx: ProtocolContext) -> dict[str, Any]:
        sources = ctx.distractors.describe() if ctx.distractors else {"distractors": RANDOM}
        return {**super().describe(ctx), "options": ctx.mc_options, **sources, "seed": ctx.seed}

    def build(self, images: list[ImageRef], ctx: ProtocolContext) -> list[Pending]:
        if ctx.images_per_request != 1:
            raise InputError("the mc protocol sends one image per request; drop --images-per-request")
        return [self._mc_request(im, ctx) for im in images]

    def _mc_request(self, image: ImageRef, ctx: ProtocolContext) -> Pending:
        question = mc_options(image.image_id, ctx)
        if question is None:
            return Pending(ChatRequest((image,), ""), [image], [{"error": "no reference label for mc"}])
        listing = "\n".join(f"{LETTERS[i]}. {ctx.vocab.classes[c].name}" for i, c in enumerate(question.classes))
        state = {"options": question.classes, "option_sources": question.sources}
        return Pending(ChatRequest((image,), self.template.format(options=listing), max_tokens=8), [image], [state])

    def _parse_one(self, text: str, state: dict[str, Any], ctx: ProtocolContext) -> Answer:
        options = state["options"]
        asked = {"options": options, "option_sources": state["option_sources"]}
        choice = parse_choice(text, [ctx.vocab.classes[c].name for c in options])
        if choice is None:
            return Answer(raw=text, details={"oop": True, **asked})
        return Answer([options[choice]], raw=text, details={"oop": False, **asked, "choice": choice})

    def summarize(self, details: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The hard-distractor share over the answered questions (`relabel.suggest.distractors`)."""
        return summarize_distractors(d["option_sources"] for d in details if "option_sources" in d)


class TopK(Protocol):
    """Scoring models (classifiers, zero-shot dual encoders): the top-5 classes and their scores."""

    name, summary, generative = "topk", "a scoring model's top 5 classes", False

    def version(self, ctx: ProtocolContext) -> str:
        return prompt_version("topk", str(TOP_K))

    def scores_to_answer(self, output: ModelOutput) -> Answer:
        if not output.ok or output.scores is None:
            return Answer(error=output.error or "no scores returned", retryable=output.retryable)
        top = np.argsort(-output.scores, kind="stable")[:TOP_K]
        return Answer([int(i) for i in top], [round(float(output.scores[i]), 6) for i in top])


PROTOCOLS: dict[str, type[Protocol]] = {
    "ow": OpenWorld,
    "mc": MultipleChoice,
    "cw": ClosedWorld,
    "cwplus": ClosedWorldPlus,
    "topk": TopK,
    "pope": PresenceProbes,
    "caption": Caption,
    "retrieval": Retrieval,
}


IMPORTED_PROTOCOLS = ("supervised", "imported")  # runs made elsewhere (`relabel predictions import`): ranked classes


def get_protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise unknown_name("protocol", name, list(PROTOCOLS))
    return PROTOCOLS[name]()


def protocol_summaries() -> dict[str, str]:
    """Every protocol's name and summary, in the registry's order (`relabel suggest --protocol`)."""
    return {name: p.summary for name, p in PROTOCOLS.items()}


def generative_summaries() -> dict[str, str]:
    """The protocols that ask a generative model for classes (`relabel evaluate robustness --protocol`)."""
    return {name: p.summary for name, p in PROTOCOLS.items() if p.generative and p.task == CLASSES}


def suggestion_protocols() -> tuple[str, ...]:
    """Protocols whose runs' answers the review cards show as suggestions: generative, and asked without a
    reference label (an MC answer only picks among options built around the label under review), for classes
    (not pope's probes nor captions)."""
    return tuple(name for name, p in PROTOCOLS.items() if p.generative and not p.needs_reference and p.task == CLASSES)


def task_of_protocol(name: str) -> str:
    """The task a run of protocol `name` is scored as (`Protocol.task`); runs made elsewhere rank classes."""
    entry = PROTOCOLS.get(name)
    return entry.task if entry is not None else CLASSES


def ranked_protocols() -> tuple[str, ...]:
    """Protocols whose runs rank classes by score (the cards' classifier, the top-K a model's vote reads)."""
    ranked = tuple(name for name, p in PROTOCOLS.items() if not p.generative and p.task == CLASSES)
    return ranked + IMPORTED_PROTOCOLS


def unlisted_class(text: str, vocab: Vocabulary) -> tuple[int, str] | None:
    """(class, "wnid" | "synonym") when the answer names exactly one class by its wnid or a synonym (case,
    punctuation and a leading article aside); None for anything else, indices included."""
    for key in dict.fromkeys([listed_key(text), normalize_answer(text)]):
        if not key or INDEX.fullmatch(key):
            continue
        index = vocab.try_resolve(key)
        if index is not None:
            return index, "wnid" if key == (vocab.classes[index].wnid or "").casefold() else "synonym"
    return None


def parse_choice(text: str, option_names: list[str]) -> int | None:
    """Index of the chosen option from a letter ("B", "(b)", "Answer: B.") or the option's name."""
    stripped = text.strip()
    m = re.match(r"^\W*(?:answer\s*(?:is)?\s*:?\s*)?\(?([A-Za-z])\)?(?:[.:)\s]|$)", stripped, re.IGNORECASE)
    if m and m.group(1).upper() in LETTERS[: len(option_names)]:
        return LETTERS.index(m.group(1).upper())
    key = normalize_answer(stripped)
    hits = [i for i, name in enumerate(option_names) if normalize_answer(name) == key]
    if not hits:
        hits = [i for i, name in enumerate(option_names) if normalize_answer(name) in key]
    return hits[0] if len(hits) == 1 else None


@dataclass(frozen=True)
class McOptions:
    """One question's options in the order shown, and where each came from (`reference`, `random`, or the name of
    the distractor source that chose it; see relabel.suggest.distractors)."""

    classes: list[int]
    sources: list[str]


def mc_options(image_id: int, ctx: ProtocolContext) -> McOptions | None:
    """Reference class + distractors (hard ones first when `ctx.distractors`, random ones for the slots left),
    shuffled by a generator seeded with (seed, image id); None without a reference label."""
    reference = ctx.reference.get(image_id) or []
    if not reference:
        return None
    rng = np.random.default_rng([ctx.seed, image_id])
    true = reference[0]
    k = min(ctx.mc_options, len(ctx.vocab))
    exclude = set(reference)
    chosen = ctx.distractors.hard(true, k - 1, exclude, rng, image_id) if ctx.distractors else []
    taken = exclude | {c for c, _ in chosen}
    pool = np.array([c for c in range(len(ctx.vocab)) if c not in taken])
    chosen += [(int(c), RANDOM) for c in rng.choice(pool, size=k - 1 - len(chosen), replace=False)]
    options = [(true, REFERENCE), *chosen]
    rng.shuffle(options)  # a list shuffles as before: random runs keep their questions
    return McOptions([int(c) for c, _ in options], [source for _, source in options])
