"""Scripted stand-ins for models and text encoders: deterministic, instant, and they record every call."""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput


class ScriptedChatModel:
    """Answers each request from `script(request) -> str`; `fail` maps image keys to an error reason."""

    def __init__(self, script, fail: dict[str, str] | None = None, name: str = "scripted") -> None:
        self.script, self.fail, self.name = script, fail or {}, name
        self.requests: list[ChatRequest] = []

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted"}

    def check(self) -> None:
        pass

    def generate(self, requests: list[ChatRequest]) -> list[ModelOutput]:
        out = []
        for r in requests:
            self.requests.append(r)
            failed = [self.fail[im.key] for im in r.images if im.key in self.fail]
            out.append(ModelOutput(error=failed[0]) if failed else ModelOutput(text=self.script(r)))
        return out


class ScriptedScorer:
    """Scores with a one-hot-ish vector from `best(image) -> class index`."""

    def __init__(self, best, n_classes: int = 1000, name: str = "scorer") -> None:
        self.best, self.n, self.name = best, n_classes, name
        self.calls: list[list[str]] = []

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted-scorer"}

    def check(self) -> None:
        pass

    def score(self, images: list[ImageRef], class_names: list[str]) -> list[ModelOutput]:
        self.calls.append([im.key for im in images])
        outs = []
        for im in images:
            s = np.full(self.n, 0.1 / (self.n - 1), dtype=np.float32)
            s[self.best(im)] = 0.9
            outs.append(ModelOutput(scores=s))
        return outs


class SpecScorer(ScriptedScorer):
    """A ScriptedScorer that `load_adapter` builds from a spec (`KIND:MODEL`) once a registry entry names this class:
    class 0 scores highest. It names no kind of its own: the entry it is loaded as says what it reads."""

    def __init__(self, model: str = "", **options: Any) -> None:
        super().__init__(lambda image: 0, name=f"spec-scorer:{model}")


class TrigramEncoder:
    """A bag of character trigrams hashed into 512 dimensions: similar spellings get similar vectors."""

    id = "test:trigram"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def encode(self, texts: list[str]) -> np.ndarray:
        self.calls.append(list(texts))
        out = np.zeros((len(texts), 512), dtype=np.float32)
        for i, t in enumerate(texts):
            padded = f"  {t.lower()}  "
            for j in range(len(padded) - 2):
                out[i, int(hashlib.md5(padded[j : j + 3].encode()).hexdigest(), 16) % 512] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
