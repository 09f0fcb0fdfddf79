"""The protocols of two hallucination tasks: presence probes (pope, after POPE, Li et al. 2023) and one-sentence
captions (caption, after CHAIR, Rohrbach et al. 2018). Their runs are scored by `relabel.evaluation.tasks`.

**pope** asks "Is there a {class} in the image? Answer yes or no." once per probe. An image's probes are the classes
of its reference set (`--reference`, ImGT by default) and, for each of POPE's three samplings (random, popular,
adversarial; `evaluator.presence_sampling.probes`), `ctx.negatives` classes outside it: 1 positive and 3 × 1
negatives on a single-label image by default, so each sampling's table has one probe of each truth per image (POPE:
three of each). A class drawn by two samplings, and every positive, is asked once and scored in every table it
belongs to.
Adversarial negatives are the classes `--distractors` links to the positives (its default, random, reads as the
shipped hard sources, `relabel.suggest.distractor_sources.DEFAULT_HARD`), each source's first neighbour scoring
highest.

Storage: one prediction per image, as for every other protocol, with its probes in `details["probes"]` (class,
the tables it is in, and the answer "yes", "no" or "unparseable"; "error" for a call that failed) and the classes
answered yes in `classes`. One row per image keeps the runner's resume, response cache and error accounting as
they are: an image is done when every probe is answered, and a failed probe makes the image an error that a later
run asks again (the probes already answered come from the response cache). An unparseable reply is an answer,
scored as wrong (`evaluator.presence`: FAILED).

**caption** asks "Describe this image in one sentence."; the caption is stored as the reply, and its object
mentions (`caption_mentions`: the noun phrases between determiners, prepositions, conjunctions and verbs) are
mapped with the run's mapper (`relabel.suggest.textmap`) when stored, each with its nearest class and similarity
in `details["mentions"]`. Which mentions count as mapped (`is_confident`) is decided when scoring.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from evaluator import EvaluationError, LabelSets
from evaluator.presence_sampling import SAMPLINGS, probes
from relabel.common.errors import InputError
from relabel.suggest.distractors import MAX_NEIGHBOURS, DistractorSource
from relabel.suggest.phrases import PLAIN_ADJECTIVES, object_phrase
from relabel.suggest.protocol_base import (
    CAPTION,
    PRESENCE,
    Answer,
    Pending,
    Protocol,
    ProtocolContext,
    load_prompt,
    prompt_version,
)
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput

POSITIVE = "positive"  # a probe of a class in the reference set, in every sampling's table
YES, NO, UNPARSEABLE, ERROR = "yes", "no", "unparseable", "error"
MENTIONS_VERSION = "noun-chunks/1"  # how `caption_mentions` reads a caption: recorded with each caption run
MENTION_THRESHOLD = 0.6  # a mention counts as mapped when its core phrase is this close to its class's nearest name

ProbePlan = dict[int, list[tuple[int, list[str]]]]  # image id -> [(class, the tables it is in)], positives first


class PresenceProbes(Protocol):
    """Yes/no probes of the reference's classes and of sampled negatives (module docstring)."""

    name, summary, task = "pope", "object-presence probes, yes/no per class (after POPE)", PRESENCE
    needs_reference, reads_reference, uses_distractors = True, True, True
    distractors_when_random = "hard"  # adversarial sampling needs linked classes: `--distractors random` reads as hard
    template = load_prompt("pope")

    def __init__(self) -> None:
        self._plan: ProbePlan | None = None

    def version(self, ctx: ProtocolContext) -> str:
        return prompt_version(self.template)

    def describe(self, ctx: ProtocolContext) -> dict[str, Any]:
        return {
            **super().describe(ctx),
            "reference": ctx.reference_name,
            "negatives": ctx.negatives,
            "samplings": list(SAMPLINGS),
            "adversarial": self.adversarial_source(ctx).describe(),
            "seed": ctx.seed,
        }

    def adversarial_source(self, ctx: ProtocolContext) -> DistractorSource:
        """The sources of the adversarial negatives: `--distractors` (`relabel.suggest.setup` reads `random` as
        `distractors_when_random`)."""
        if ctx.distractors is None:
            raise InputError("pope's adversarial negatives need linked classes: give --distractors sources (e.g. hard)")
        return ctx.distractors

    def build(self, images: list[ImageRef], ctx: ProtocolContext) -> list[Pending]:
        if ctx.images_per_request != 1:
            raise InputError("the pope protocol asks about one image per request; drop --images-per-request")
        if self._plan is None:
            related = related_matrix(self.adversarial_source(ctx), len(ctx.vocab))
            self._plan = probe_plan(ctx.reference, len(ctx.vocab), ctx.negatives, ctx.seed, related)
        pending = []
        for im in images:
            asked = self._plan.get(im.image_id)
            if not asked:
                error = f"no reference label in {ctx.reference_name} for pope"
                pending.append(Pending(ChatRequest((im,), ""), [im], [{"error": error}]))
                continue
            for cls, tables in asked:
                prompt = self.template.format(object=with_article(ctx.vocab.classes[cls].name))
                state = {"probe": {"class": cls, "in": tables}, "n_probes": len(asked)}
                pending.append(Pending(ChatRequest((im,), prompt, max_tokens=8), [im], [state]))
        return pending

    def parse(self, output: ModelOutput, pending: Pending, ctx: ProtocolContext) -> list[Answer]:
        state = pending.state[0]
        details = {"n_probes": state["n_probes"]}
        if not output.ok:
            probe = {**state["probe"], "answer": ERROR}
            return [Answer(raw=output.text or "", details={**details, "probe": probe}, error=output.error,
                           retryable=output.retryable)]  # fmt: skip
        text = output.text or ""
        return [Answer(raw=text, details={**details, "probe": {**state["probe"], "answer": parse_yes_no(text)}})]

    def combine(self, parts: list[Answer]) -> Answer | None:
        """The image's probes in one answer; an error when a probe failed (its reason and reply: who caused it is
        read from them), None while probes are missing and none failed (an outage stopped the call)."""
        expected = parts[0].details.get("n_probes")
        if expected is None:
            return parts[0]  # refused before asking: no reference label
        failed = [p for p in parts if p.error is not None]
        if len(parts) < expected and not failed:
            return None
        found = [p.details["probe"] for p in parts]
        details = {"probes": found, "cached": all(p.details.get("cached") for p in parts)}
        if failed:
            first = failed[0]
            return Answer(raw=first.raw, details=details, error=first.error, retryable=any(p.retryable for p in failed))
        raw = "\n".join(f"{p['class']}: {a.raw}" for p, a in zip(found, parts))
        return Answer([p["class"] for p in found if p["answer"] == YES], raw=raw, details=details)

    def summarize(self, details: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """The share of probes answered yes, and of replies that were neither yes nor no."""
        answers = [p["answer"] for d in details for p in d.get("probes", [])]
        if not answers:
            return {}
        return {
            "probes": len(answers),
            "yes_rate": round(answers.count(YES) / len(answers), 4),
            "unparseable_rate": round(answers.count(UNPARSEABLE) / len(answers), 4),
        }


class Caption(Protocol):
    """A one-sentence caption; its object mentions are mapped to classes when stored (module docstring)."""

    name, summary, task, needs_mapper = (
        "caption",
        "a one-sentence caption, mentions mapped (after CHAIR)",
        CAPTION,
        True,
    )
    template = load_prompt("caption")

    def version(self, ctx: ProtocolContext) -> str:
        return prompt_version(self.template, MENTIONS_VERSION)

    def describe(self, ctx: ProtocolContext) -> dict[str, Any]:
        return {**super().describe(ctx), "mentions": MENTIONS_VERSION}

    def build(self, images: list[ImageRef], ctx: ProtocolContext) -> list[Pending]:
        if ctx.images_per_request != 1:
            raise InputError("the caption protocol asks about one image per request; drop --images-per-request")
        return [Pending(ChatRequest((im,), self.template, max_tokens=96), [im], [{}]) for im in images]

    def _parse_one(self, text: str, state: dict[str, Any], ctx: ProtocolContext) -> Answer:
        if not text.strip():
            return Answer(error="empty caption: the reply had no text")
        return Answer(raw=text, details={"mentions": []}, to_map_each=caption_mentions(text))


def with_article(name: str) -> str:
    """'a tabby', 'an English setter': the class name as the probe says it."""
    return ("an " if name[:1].lower() in "aeiou" else "a ") + name


_YES_WORDS = re.compile(r"\b(?:yes|yeah|yep|true)\b")
_NO_WORDS = re.compile(r"\b(?:no|nope|false|not)\b")


def parse_yes_no(text: str) -> str:
    """YES or NO from the reply's first word ("Yes.", "**No**, there is..."), else from the only one of the two it
    holds ("There is no dog."); UNPARSEABLE for a reply with both or neither ("Maybe.", "There is a dog.")."""
    t = re.sub(r"[*_`\"']", "", text).casefold().strip()
    first = re.match(r"\W*(\w+)", t)
    if first and _YES_WORDS.fullmatch(first.group(1)):
        return YES
    if first and first.group(1) in ("no", "nope", "false"):
        return NO
    has_yes, has_no = bool(_YES_WORDS.search(t)), bool(_NO_WORDS.search(t))
    return YES if has_yes and not has_no else NO if has_no and not has_yes else UNPARSEABLE


def probe_plan(
    reference: dict[int, list[int]], n_classes: int, negatives: int, seed: int, related: np.ndarray
) -> ProbePlan:
    """Every image's probes: its reference classes (in every table) and each sampling's `negatives` classes, in the
    order asked. Built once per run over the whole reference, since popular sampling counts classes over it and
    ties are drawn in image order; the same reference, negatives, seed and sources give the same probes."""
    ids = sorted(i for i, classes in reference.items() if classes)
    if not ids:
        raise InputError("the reference labels no image: pope has no positives to ask about")
    try:
        sets = LabelSets.from_lists([list(dict.fromkeys(reference[i])) for i in ids], n_classes)
        drawn = [probes(sets, negatives, s, seed, related if s == "adversarial" else None) for s in SAMPLINGS]
    except EvaluationError as exc:
        raise InputError(f"--pope-negatives {negatives}: {exc}") from None
    tables: dict[int, dict[int, list[str]]] = {}
    for found in drawn:
        for row, cls, truth in zip(found.image.tolist(), found.cls.tolist(), found.truth.tolist()):
            table = tables.setdefault(ids[row], {}).setdefault(cls, [])
            name = POSITIVE if truth else found.sampling
            table.extend([name] * (name not in table))
    return {image: list(by_class.items()) for image, by_class in tables.items()}


def related_matrix(source: DistractorSource, n_classes: int) -> np.ndarray:
    """(C, C): how strongly each class (column) is linked to each positive (row) by `source`: a source tried
    earlier outranks every later one, and within one a neighbour ranked r scores MAX_NEIGHBOURS − r."""
    related = np.zeros((n_classes, n_classes))
    weight = 1.0
    for _, neighbours in reversed(source.sources):
        for cls, linked in neighbours.by_class.items():
            for rank, other in enumerate(linked[:MAX_NEIGHBOURS]):
                related[cls, other] += weight * (MAX_NEIGHBOURS - rank)
        weight *= MAX_NEIGHBOURS * (MAX_NEIGHBOURS + 1) / 2 + 1  # more than the sum of every later source
    np.fill_diagonal(related, 0.0)
    return related


_DETERMINERS = frozenset(
    re.findall(
        r"\S+",
        "a an the one two three four five six several some many few its his her their another other each "
        "every this that these those",
    )
)
_BREAKS = frozenset(
    re.findall(
        r"\S+",
        """on in at of with without near next to beside behind under over above below between among against into onto
    across along around through from by for while as and or but up down out off is are was were be being been has
    have had holds hold sits sit stands stand lies lie looks look appears appear rests rest plays eats chases
    perched which who that there here where while""",
    )
)
_NOT_OBJECTS = frozenset(
    re.findall(
        r"\S+",
        "image photo picture photograph scene view close-up closeup background foreground front side top "
        "bottom middle left right distance day night shot frame",
    )
)


def caption_mentions(caption: str) -> list[str]:
    """The object mentions of a caption, in order: its first sentence without framing words ("This image shows",
    `relabel.suggest.phrases.object_phrase`), cut into the word runs between determiners, prepositions,
    conjunctions and common verbs; an "-ing"/"-ed" word after a noun ends its run ("a dog sitting on a sofa").
    Runs of colours and sizes alone, and words for the picture itself ("background"), are dropped.
    'A photo of a tabby cat next to a goldfish bowl.' -> ['tabby cat', 'goldfish bowl']."""
    words = re.findall(r"[\w'-]+|[,;:()]", object_phrase(caption))
    mentions: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if run and not all(w in PLAIN_ADJECTIVES for w in run) and run[-1] not in _NOT_OBJECTS:
            mentions.append(" ".join(run))
        run.clear()

    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        ends_run = not following or following in _DETERMINERS or following in _BREAKS
        verb_like = bool(run) and re.fullmatch(r"[a-z]{3,}(?:ing|ed)", word) is not None and ends_run
        if word in _DETERMINERS or word in _BREAKS or not word[0].isalnum() or verb_like:
            flush()
        else:
            run.append(word)
    flush()
    return mentions


def is_confident(mention: dict[str, Any]) -> bool:
    """Whether a stored mention counts as mapped to its class (else it is counted apart, unmapped)."""
    return mention.get("class") is not None and float(mention.get("similarity", 0.0)) >= MENTION_THRESHOLD
