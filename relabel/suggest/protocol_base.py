"""What every protocol shares: the parsed `Answer`, the `ProtocolContext` a run asks in, the `Pending` request,
the `Protocol` base class, and the batch mapping of free-text answers (`map_pending`).

The protocols themselves and their registry are in `relabel.suggest.protocols` (and `relabel.suggest.probes` for
the presence probes and captions); import these names from here.
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

from relabel.common.errors import InputError
from relabel.common.vocabulary import Vocabulary
from relabel.suggest.distractors import DistractorSource
from relabel.suggest.textmap import DEFAULT_ENCODER, ClassNameIndex
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput

CLASSES, PRESENCE, CAPTION = "classes", "presence", "caption"  # the tasks a protocol's answers are scored as
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
    to_map_each: list[str] = field(default_factory=list)  # texts mapped one by one (a caption's mentions)


@dataclass
class ProtocolContext:
    vocab: Vocabulary
    reference: dict[int, list[int]] = field(default_factory=dict)  # image id -> reference labels (MC)
    seed: int = 0
    mc_options: int = 4
    distractors: DistractorSource | None = None  # None: random distractors
    images_per_request: int = 1
    accept_synonyms: bool = False  # CW/CW+: also accept an unlisted synonym or wnid (still counted out-of-prompt)
    reference_name: str = "imgt"  # the label source or snapshot `reference` holds (pope's probes are built on it)
    negatives: int = 1  # pope: negatives per image and sampling

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
    task = CLASSES  # what the answers are scored as: CLASSES (top-1/top-5), PRESENCE (yes/no probes) or CAPTION
    reads_reference = False  # pope: builds its probes on --reference (default ImGT)
    distractors_when_random = ""  # uses_distractors: the sources `--distractors random` stands for ("": none)

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

    def combine(self, parts: list[Answer]) -> Answer | None:
        """One image's answer from the answers of its requests (one for every protocol that asks once per image);
        None while some of its requests never came back (an outage): the image is then not stored."""
        return parts[0] if len(parts) == 1 else None

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


_QUOTES = "\"'`*_“”‘’ \t\n"


def listed_key(text: str) -> str:
    """An answer or a listed class name as CW compares them: case-folded, runs of white space made one space,
    surrounding quotes and markdown emphasis and one trailing period dropped, curly apostrophes made straight.
    Nothing else is forgiven: parentheses, articles and hyphens must be as listed."""
    t = " ".join(text.replace("’", "'").casefold().split()).strip(_QUOTES)
    return t[:-1].rstrip(_QUOTES) if t.endswith(".") else t


def map_pending(answers: list[Answer], mapper: ClassNameIndex | None) -> None:
    """Map every answer's `to_map` text, and each of its `to_map_each` texts, in one batch; records the similarity
    and that it was mapped (`to_map_each`: `details["mentions"]`, each text with its nearest class and similarity,
    in order)."""
    todo = [a for a in answers if a.to_map is not None and a.error is None]
    each = [a for a in answers if a.to_map_each and a.error is None]
    if not todo and not each:
        return
    if mapper is None:
        raise InputError("this protocol maps answers in a text-embedding space; no text encoder was given")
    result = mapper.map([a.to_map or "" for a in todo] + [t for a in each for t in a.to_map_each])
    found = [(int(c), round(float(s), 4)) for c, s in zip(result.classes, result.similarity)]
    for a, (cls, sim) in zip(todo, found):
        a.classes = [cls]
        a.details.update({"mapped": True, "similarity": sim})
        a.to_map = None
    at = len(todo)
    for a in each:
        mapped, at = found[at : at + len(a.to_map_each)], at + len(a.to_map_each)
        a.details["mentions"] = [{"text": t, "class": c, "similarity": s} for t, (c, s) in zip(a.to_map_each, mapped)]
        a.to_map_each = []


def details_json(answer: Answer) -> dict[str, Any] | None:
    return json.loads(json.dumps(answer.details)) if answer.details else None
