"""Plain types shared by adapters, protocols and the runner."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class ImageRef:
    """One image to send to a model."""

    image_id: int
    path: Path  # absolute path on disk
    sha256: str  # content hash: part of every cache key
    key: str  # the path relative to the dataset root, for messages


@dataclass(frozen=True)
class ChatRequest:
    """One generative request: a prompt about one or more images (several images = a multi-image batch)."""

    images: tuple[ImageRef, ...]
    prompt: str
    system: str | None = None
    max_tokens: int = 64
    temperature: float = 0.0  # greedy by default: reproducible answers


@dataclass
class ModelOutput:
    """What a model returned for one request, or why it failed. A failure is never an answer."""

    text: str | None = None  # generative models
    scores: np.ndarray | None = None  # (C,) scores over the vocabulary: classifiers and dual encoders
    error: str | None = None
    retryable: bool = False  # a failure that may pass (server down, overloaded, out of memory): a re-run asks again
    usage: dict[str, int] = field(default_factory=dict)  # prompt_tokens, completion_tokens
    latency_s: float = 0.0
    cached: bool = False  # served from the response cache: no model call was made

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class GenerativeAdapter(Protocol):
    """A model that answers a text prompt about images (OpenAI-compatible APIs, local VLMs)."""

    name: str  # the model, as recorded with the run

    def describe(self) -> dict[str, Any]: ...  # settings recorded with the run (no secrets)
    def check(self) -> None: ...  # fail fast with RelabelError (missing key, unreachable server) before any work
    def generate(self, requests: list[ChatRequest]) -> list[ModelOutput]: ...  # may raise failures.OutageError


@runtime_checkable
class ScoringAdapter(Protocol):
    """A model that scores every class of a vocabulary for an image (classifiers, CLIP/SigLIP)."""

    name: str

    def describe(self) -> dict[str, Any]: ...
    def check(self) -> None: ...
    def score(self, images: list[ImageRef], class_names: list[str]) -> list[ModelOutput]: ...


# what `relabel.suggest.adapters.load_adapter` returns; which of the two it is (and whether it reads text) is read
# from the registry entry of its kind (`relabel.suggest.adapters.ranks_classes`, `reads_text`), not from this type
Adapter = GenerativeAdapter | ScoringAdapter


@runtime_checkable
class ResponseCache(Protocol):
    """Finished model responses by request hash; lets an interrupted run resume without paying twice."""

    def get(self, key: str) -> dict[str, Any] | None: ...
    def put(self, key: str, model: str, response: dict[str, Any]) -> None: ...
