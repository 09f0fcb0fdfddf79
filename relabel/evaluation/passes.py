"""One model over the conditions of a robustness run: clean, perturbed images, perturbed text.

Each image is decoded once and resized to BASE_SHORT_SIDE pixels on its shorter side (ImageNet-C's "resize 256"
step, without its crop, so the model's own preprocessing still crops as usual). That base view is what the model
sees clean, and what every image perturbation × severity of `evaluator.perturbations` corrupts, seeded per image
(seed · 2³² + image id). The views reach the adapter as lossless BMP files in a temporary folder, through its
ordinary `score()` (classifiers, CLIP) or, for generative models, through a suggestion protocol and `generate()`.

A text perturbation (`typo`) keeps the clean view and changes what the model reads:

- a scoring model whose kind reads text (`AdapterKind.reads_text`: CLIP, SigLIP) gets perturbed class names, each
  seeded by seed · 2³² + class index, so a class is misspelt the same way for every image;
- a generative model gets the instructions of each request's prompt perturbed, seeded by seed · 2³² + the id of
  its first image; the lines listing the answer key (CW's class names, MC's lettered options) stay as written, so
  the answers are still read against the key the model was shown.

The seed does not depend on the severity, so a letter misspelt at one severity stays misspelt at every higher one.
Image-only classifiers read no text and take no text perturbation.

A failed call is scored by its cause, as `evaluate` scores stored runs (`relabel.evaluation.failure_causes`): the
model's failures (an unparseable or empty reply, a refusal, a final HTTP 400/413/422) are wrong in every pass;
infrastructure and set-up failures (timeouts, HTTP 429/5xx after the adapter's retries, an unreadable image, HTTP
401/403/404) are left out of the pass and counted in `Passes.excluded`.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from evaluator.perturbations import TEXT_PERTURBATIONS, perturb, perturb_text
from relabel.common.errors import RelabelError
from relabel.common.imaging import load_rgb
from relabel.common.progress import progress_bar
from relabel.evaluation.failure_causes import FailureCause, failure_cause
from relabel.evaluation.runs import MAX_K
from relabel.suggest.runner import SuggestJob, answer_chunk
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput

BASE_SHORT_SIDE = 256
CHUNK = 32  # images decoded and perturbed together; each chunk goes through the adapter once per condition
Condition = tuple[str, int] | None  # (perturbation, severity); None is the clean pass
Prediction = tuple[list[int] | FailureCause, float | None]  # ranked classes or why the call failed; latency (s)


@dataclass
class Passes:
    """Per condition: ranked classes (n, MAX_K), -1 padded, ok (n,) (answered) and failed (n,) (the model's failure,
    scored as wrong); the failures left out, by cause, over all passes; and what the model calls took."""

    classes: dict[Condition, np.ndarray]
    ok: dict[Condition, np.ndarray]
    failed: dict[Condition, np.ndarray] = field(default_factory=dict)
    excluded: Counter[FailureCause] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)
    score_seconds: float = 0.0
    n_inputs: int = 0


def is_text(condition: Condition) -> bool:
    return condition is not None and condition[0] in TEXT_PERTURBATIONS


def text_seed(seed: int, item: int) -> int:
    """The seed of one class name's or one request's text: seed · 2³² + class index or first image id."""
    return (seed << 32) + item


def perturbed_class_names(class_names: list[str], condition: Condition, seed: int) -> list[str]:
    """`class_names` as the model reads them under `condition`; unchanged unless it is a text perturbation."""
    if condition is None or not is_text(condition):
        return list(class_names)
    name, severity = condition
    perturbed = [perturb_text(c, severity, text_seed(seed, i), name) for i, c in enumerate(class_names)]
    # a name whose every letter went keeps its spelling: an empty class name is no question a model can answer
    return [p if p.strip() else c for p, c in zip(perturbed, class_names)]


class ScoringModel:
    """A classifier or zero-shot dual encoder: ranked classes from `score()`, class names perturbed by text
    conditions (computed once per condition)."""

    def __init__(self, adapter: Any, class_names: list[str], seed: int) -> None:
        self.adapter, self.class_names, self.seed = adapter, class_names, seed
        self._names: dict[Condition, list[str]] = {}

    def names(self, condition: Condition) -> list[str]:
        if condition not in self._names:
            self._names[condition] = perturbed_class_names(self.class_names, condition, self.seed)
        return self._names[condition]

    def predict(self, refs: list[ImageRef], condition: Condition) -> list[Prediction]:
        return [_ranked(out) for out in self.adapter.score(refs, self.names(condition))]


def _ranked(out: ModelOutput) -> Prediction:
    if out.error is not None or out.scores is None:
        return failure_cause(out.error or "no scores returned", retryable=out.retryable), None
    return [int(c) for c in np.argsort(-np.asarray(out.scores), kind="stable")[:MAX_K]], float(out.latency_s)


class AskingModel:
    """A generative model asked through a suggestion protocol (`job`); a text condition perturbs each prompt.

    The prediction is the parsed answer's class (none for an out-of-prompt answer: wrong); a failed call or an
    unparseable reply is a failure with its cause. Latency is each request's own time from its output, if any.
    """

    def __init__(self, job: SuggestJob, seed: int) -> None:
        self.job, self.seed = job, seed
        self.listed = frozenset(job.ctx.class_names)  # lines of a prompt that list the answer key

    def predict(self, refs: list[ImageRef], condition: Condition) -> list[Prediction]:
        model = PromptEditor(self.job.adapter, self._typos(condition))
        answers = answer_chunk(replace(self.job, adapter=model), refs)
        latency = {im.image_id: out.latency_s for r, out in model.seen for im in r.images if _timed(out)}
        predictions: list[Prediction] = []
        for ref in refs:
            a = answers[ref.image_id]
            if a.error is not None:
                predictions.append((failure_cause(a.error, raw_output=a.raw, retryable=a.retryable), None))
            else:
                predictions.append((a.classes[:MAX_K], latency.get(ref.image_id)))
        return predictions

    def _typos(self, condition: Condition) -> Callable[[ChatRequest], str] | None:
        if condition is None or not is_text(condition):
            return None
        name, severity = condition

        def edit(request: ChatRequest) -> str:
            return perturb_instructions(
                request.prompt, severity, text_seed(self.seed, request.images[0].image_id), name, self.listed
            )

        return edit


_OPTION = re.compile(r"^[A-Z]\. ")


def perturb_instructions(prompt: str, severity: int, seed: int, name: str, listed: frozenset[str]) -> str:
    """`prompt` with typos in its instructions only: the lines that list the answer key (a class name on its own
    line, as CW lists them, or an MC option "A. name") stay as written, so an answer copied from the list is still
    read as that class. Each instruction line is seeded by `seed` and its place among them."""
    lines = prompt.split("\n")
    edited, k = [], 0
    for line in lines:
        if line in listed or _OPTION.match(line):
            edited.append(line)
            continue
        edited.append(perturb_text(line, severity, (seed << 16) + k, name))
        k += 1
    return "\n".join(edited)


def _timed(out: ModelOutput) -> bool:
    return out.ok and not out.cached and out.latency_s > 0


class PromptEditor:
    """A generative adapter whose requests' prompts go through `edit` first; it keeps what it sent and got."""

    def __init__(self, adapter: Any, edit: Callable[[ChatRequest], str] | None) -> None:
        self.adapter, self.edit, self.name = adapter, edit, adapter.name
        self.seen: list[tuple[ChatRequest, ModelOutput]] = []

    def describe(self) -> dict[str, Any]:
        return self.adapter.describe()

    def check(self) -> None:
        self.adapter.check()

    def generate(self, requests: list[ChatRequest]) -> list[ModelOutput]:
        if self.edit is not None:
            requests = [replace(r, prompt=self.edit(r)) for r in requests]
        outputs = self.adapter.generate(requests)
        self.seen += zip(requests, outputs)
        return outputs


def run_passes(
    model: ScoringModel | AskingModel,
    images: list[ImageRef],
    conditions: list[Condition],
    seed: int,
    tmp: Path,
    show_progress: bool,
) -> Passes:
    """Every condition over every image, chunk by chunk (each chunk decoded once)."""
    n = len(images)
    passes = Passes(
        {c: np.full((n, MAX_K), -1, np.int64) for c in conditions},
        {c: np.zeros(n, bool) for c in conditions},
        {c: np.zeros(n, bool) for c in conditions},
    )
    bar = progress_bar(n * len(conditions), "robustness", enabled=show_progress)
    try:
        for start in range(0, n, CHUNK):
            chunk = images[start : start + CHUNK]
            views = [base_view(im) for im in chunk]
            for condition in conditions:
                bar.set_postfix_str("clean" if condition is None else f"{condition[0]} s{condition[1]}")
                _run_condition(model, chunk, views, start, condition, seed, tmp, passes)
                bar.update(len(chunk))
    finally:
        bar.close()
    return passes


def base_view(ref: ImageRef) -> Image.Image | None:
    """The image at BASE_SHORT_SIDE on its shorter side (bicubic), or None when it cannot be decoded."""
    try:
        img = load_rgb(ref.path, min_side=BASE_SHORT_SIDE)
    except RelabelError:
        return None
    scale = BASE_SHORT_SIDE / min(img.size)
    size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    return img.resize(size, Image.Resampling.BICUBIC)


def save_view(img: Image.Image, ref: ImageRef, path: Path) -> ImageRef:
    """`img` written to `path` (BMP) as an ImageRef with its content hash (part of any response cache key)."""
    img.save(path, format="BMP")
    return ImageRef(ref.image_id, path, hashlib.sha256(path.read_bytes()).hexdigest(), ref.key)


def _run_condition(
    model: ScoringModel | AskingModel,
    chunk: list[ImageRef],
    views: list[Image.Image | None],
    start: int,
    condition: Condition,
    seed: int,
    tmp: Path,
    passes: Passes,
) -> None:
    """The chunk's views for `condition` through the model; records ranked classes and timings."""
    refs, rows = [], []
    for offset, (ref, view) in enumerate(zip(chunk, views)):
        if view is None:
            passes.excluded[FailureCause.infrastructure] += 1  # undecodable: left out of every pass
            continue
        img = view
        if condition is not None and not is_text(condition):
            img = perturb(view, condition[0], condition[1], (seed << 32) + ref.image_id)
        refs.append(save_view(img, ref, tmp / f"{offset}.bmp"))
        rows.append(start + offset)
    if not refs:
        return
    began = time.perf_counter()
    predictions = model.predict(refs, condition)
    passes.score_seconds += time.perf_counter() - began
    passes.n_inputs += len(refs)
    for row, (classes, latency) in zip(rows, predictions):
        if isinstance(classes, FailureCause):
            passes.failed[condition][row] = classes.scored
            passes.excluded[classes] += not classes.scored
            continue
        passes.classes[condition][row, : len(classes)] = classes
        passes.ok[condition][row] = True
        if latency is not None:
            passes.latencies.append(latency)
