"""How a model is asked and how its answer becomes classes: OW, MC, CW, CW+ and top-k scoring.

Each protocol builds requests from images, parses outputs into `Answer`s, and is recorded with its prompt's
version hash. Free-text answers that need the embedding space (OW, and CW+'s out-of-prompt answers) are mapped in
one batch per chunk by `map_pending`. After each call the runner stores what `Protocol.summarize` measured over
the run's answers in `params["measured"]` (CW: the strict out-of-prompt rate; MC: the hard-distractor share).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from importlib import resources
from typing import Any

import numpy as np

from relabel.errors import InputError, unknown_name
from relabel.suggest.class_texts import normalize_answer
from relabel.suggest.distractors import RANDOM, REFERENCE, DistractorSource, summarize_distractors
from relabel.suggest.textmap import DEFAULT_ENCODER, ClassNameIndex
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput
from relabel.vocabulary import INDEX, Vocabulary

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
TOP_K = 5
_LINE = re.compile(r"^\s*(?:image\s*)?(\d+)\s*[:.)\-]\s*(.*)$", re.IGNORECASE)


def load_prompt(name: str) -> str:
    return resources.files("relabel.resources.prompts").joinpath(f"{name}.txt").read_text(encoding="utf-8").strip()


def prompt_version(*texts: str) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()[:12]


@dataclass
class Answer:
    """One image's parsed answer. `to_map` holds text still to be mapped to a class in the embedding space.

    An `error` is final unless `retryable` (relabel.suggest.failures): an answer that cannot be parsed is final,
    since the same cached answer would be parsed again; a failed call is as retryable as the adapter says."""

    classes: list[int] = field(default_factory=list)
    scores: list[float] | None = None
    raw: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    retryable: bool = False
    to_map: str | None = None


@dataclass
class ProtocolContext:
    vocab: Vocabulary
    reference: dict[int, list[int]] = field(default_factory=dict)  # image id -> reference labels (MC)
    seed: int = 0
    mc_options: int = 4
    distractors: DistractorSource | None = None  # None: random distractors
    images_per_request: int = 1
    accept_synonyms: bool = False  # CW/CW+: also accept an unlisted synonym or wnid (still counted out-of-prompt)

    @property
    def class_names(self) -> list[str]:
        return [c.name for c in self.vocab.classes]

    @cached_property
    def listed_names(self) -> dict[str, int]:
        """Class index by display name, in the form `listed_key` gives, as the CW prompt lists them."""
        return {listed_key(c.name): c.index for c in self.vocab.classes}


@dataclass
class Pending:
    """A request and what is needed to read its answer back."""

    request: ChatRequest
    images: list[ImageRef]
    state: list[dict[str, Any]]  # per image


class Protocol:
    """How a model is asked. A subclass declares what the rest of the code reads from the registry: whether it asks
    a generative model (else it reads a scoring model's ranked scores), whether it needs a reference label, the
    text encoder that maps its free answers when --encoder is left out, and the few words the CLI's help shows."""

    name = ""
    summary = ""  # the CLI's help: "open world"
    generative = True
    template = ""
    multi_template = ""
    needs_mapper = False
    default_encoder = DEFAULT_ENCODER  # maps answers (needs_mapper) and finds MC's hard distractors
    needs_reference = False  # MC builds its options around the reference label: an evaluation protocol
    uses_distractors = False  # MC: reads --distractors
    reads_synonyms = False  # CW, CW+: read --accept-synonyms

    def version(self, ctx: ProtocolContext) -> str:
        return prompt_version(self.template, self.multi_template)

    def describe(self, ctx: ProtocolContext) -> dict[str, Any]:
        return {
            "protocol": self.name,
            "prompt_version": self.version(ctx),
            "images_per_request": ctx.images_per_request,
        }

    def build(self, images: list[ImageRef], ctx: ProtocolContext) -> list[Pending]:
        n = ctx.images_per_request
        return [self._request(images[i : i + n], ctx) for i in range(0, len(images), n)]

    def _request(self, group: list[ImageRef], ctx: ProtocolContext) -> Pending:
        text = self._prompt(ctx, len(group))
        return Pending(ChatRequest(tuple(group), text, max_tokens=24 * len(group) + 16), group, [{} for _ in group])

    def _prompt(self, ctx: ProtocolContext, n: int) -> str:
        raise NotImplementedError

    def parse(self, output: ModelOutput, pending: Pending, ctx: ProtocolContext) -> list[Answer]:
        if not output.ok:
            return [
                Answer(error=output.error, raw=output.text or "", retryable=output.retryable) for _ in pending.images
            ]
        texts = split_lines(output.text or "", len(pending.images))
        if texts is None:
            reason = f"expected {len(pending.images)} numbered answers, got {output.text!r:.200}"
            return [Answer(error=reason, raw=output.text or "") for _ in pending.images]
        return [self._parse_one(t, s, ctx) for t, s in zip(texts, pending.state)]

    def _parse_one(self, text: str, state: dict[str, Any], ctx: ProtocolContext) -> Answer:
        raise NotImplementedError

    def summarize(self, details: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Figures measured over the `details` of a run's answered predictions, stored in `params["measured"]`."""
        return {}


def split_lines(text: str, n: int) -> list[str] | None:
    """One answer per image: the whole text for one image, numbered lines ("1: tabby") for several."""
    if n == 1:
        return [text.strip()]
    found: dict[int, str] = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and 1 <= int(m.group(1)) <= n:
            found.setdefault(int(m.group(1)), m.group(2).strip())
    return [found[i] for i in range(1, n + 1)] if len(found) == n else None


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
    """The protocols that ask a generative model (`relabel evaluate robustness --protocol`)."""
    return {name: p.summary for name, p in PROTOCOLS.items() if p.generative}


def suggestion_protocols() -> tuple[str, ...]:
    """Protocols whose runs' answers the review cards show as suggestions: generative, and asked without a
    reference label (an MC answer only picks among options built around the label under review)."""
    return tuple(name for name, p in PROTOCOLS.items() if p.generative and not p.needs_reference)


def ranked_protocols() -> tuple[str, ...]:
    """Protocols whose runs rank classes by score (the cards' classifier, the top-K a model's vote reads)."""
    return tuple(name for name, p in PROTOCOLS.items() if not p.generative) + IMPORTED_PROTOCOLS


_QUOTES = "\"'`*_“”‘’ \t\n"


def listed_key(text: str) -> str:
    """An answer or a listed class name as CW compares them: case-folded, runs of white space made one space,
    surrounding quotes and markdown emphasis and one trailing period dropped, curly apostrophes made straight.
    Nothing else is forgiven: parentheses, articles and hyphens must be as listed."""
    t = " ".join(text.replace("’", "'").casefold().split()).strip(_QUOTES)
    return t[:-1].rstrip(_QUOTES) if t.endswith(".") else t


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


def map_pending(answers: list[Answer], mapper: ClassNameIndex | None) -> None:
    """Map every answer with `to_map` text in one batch; records the similarity and that it was mapped."""
    todo = [a for a in answers if a.to_map is not None and a.error is None]
    if not todo:
        return
    if mapper is None:
        raise InputError("this protocol maps answers in a text-embedding space; no text encoder was given")
    result = mapper.map([a.to_map or "" for a in todo])
    for a, cls, sim in zip(todo, result.classes, result.similarity):
        a.classes = [int(cls)]
        a.details.update({"mapped": True, "similarity": round(float(sim), 4)})
        a.to_map = None


def details_json(answer: Answer) -> dict[str, Any] | None:
    return json.loads(json.dumps(answer.details)) if answer.details else None
