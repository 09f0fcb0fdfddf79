"""Zero-shot classification with a dual encoder (CLIP, SigLIP, SigLIP 2) as a scoring adapter.

Each class name is written into every prompt template (`resources/prompts/clip_templates.txt` by default); its
text embedding is the mean of the templates' L2-normalised embeddings, normalised again. Class embeddings are kept
in memory per (model, class list, templates). An image scores softmax(logit_scale * cosine) over the classes for
CLIP; SigLIP models were trained with a sigmoid loss, so each class gets sigmoid(logit_scale * cosine + bias) on
its own and the scores do not sum to 1.

The adapter reads the class names (its kind's `reads_text`), so robustness runs can perturb them (`typo`). Each
perturbed list is a new cache key; the cache keeps the CLASS_CACHE_SIZE most recently used lists.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from importlib import resources
from typing import TYPE_CHECKING, Any

import numpy as np

from relabel.common.errors import InputError
from relabel.suggest.adapters.local_models import (
    BatchedImageScorer,
    dtype_options,
    load_error,
    move_inputs,
    pick_device,
    pil_backend_options,
)
from relabel.suggest.types import ImageRef, ModelOutput

if TYPE_CHECKING:
    import torch

TEMPLATES_FILE = "clip_templates.txt"
TEXT_BATCH = 256  # prompts per text-encoder forward pass
CLASS_CACHE_SIZE = 16  # class lists kept: a robustness run cycles through 1 clean + 5 typo lists per image chunk


def load_templates(text: str | None = None) -> list[str]:
    """Templates from `text` (default: the packaged file): one per line, `#` comments and blank lines skipped."""
    if text is None:
        text = resources.files("relabel.resources").joinpath("prompts").joinpath(TEMPLATES_FILE).read_text("utf-8")
    lines = [ln.strip() for ln in text.splitlines()]
    return check_templates([ln for ln in lines if ln and not ln.startswith("#")])


def check_templates(templates: list[str]) -> list[str]:
    """Raise InputError unless there is at least one template and each holds `{}` exactly once."""
    if not templates:
        raise InputError("no prompt templates given; each template is a sentence with {} for the class name")
    for i, t in enumerate(templates, start=1):
        if t.count("{}") != 1:
            raise InputError(f"prompt template {i} {t!r} must contain {{}} exactly once (where the class name goes)")
    return list(templates)


def _pooled(output: Any) -> torch.Tensor:
    """`get_*_features` returns a tensor in transformers 4 and an output whose pooler_output is it in 5."""
    import torch

    return output if isinstance(output, torch.Tensor) else output.pooler_output


def _normalize(x: torch.Tensor) -> torch.Tensor:
    import torch

    return torch.nn.functional.normalize(x.float(), dim=-1)


class ZeroShotAdapter(BatchedImageScorer):
    """CLIP-family zero-shot classifier over any list of class names (`AutoModel` + `AutoProcessor`)."""

    kind = "clip"  # its registry entry: ranks top-k, reads text (the scores depend on the class names given)

    def __init__(
        self, model_id: str, *, templates: list[str] | None = None, batch_size: int = 32, device: str = "auto"
    ) -> None:
        super().__init__(batch_size=batch_size, device=device)
        self.model_id = model_id
        self.name = f"clip:{model_id}"
        self.templates = check_templates(templates) if templates is not None else load_templates()
        self.model: Any = None
        self.tokenizer: Any = None
        self.image_processor: Any = None
        self.dtype: torch.dtype | None = None
        self.sigmoid = False  # SigLIP: independent sigmoid per class
        self._class_cache: OrderedDict[str, np.ndarray] = OrderedDict()  # least recently used first

    def _load(self) -> None:
        from transformers import AutoModel, AutoProcessor

        self.device, self.dtype = pick_device(self.device_pref)
        try:
            processor = AutoProcessor.from_pretrained(self.model_id, **pil_backend_options())
            model = AutoModel.from_pretrained(self.model_id, **dtype_options(self.dtype))
        except (OSError, ValueError) as exc:
            raise load_error("dual encoder", self.model_id, exc) from exc
        self.tokenizer, self.image_processor = processor.tokenizer, processor.image_processor
        if not (hasattr(model, "get_text_features") and hasattr(model, "get_image_features")):
            raise InputError(f"model {self.model_id!r} ({type(model).__name__}) is not a CLIP-style dual encoder")
        self.sigmoid = hasattr(model, "logit_bias")
        self.model = model.to(self.device).eval()

    @property
    def templates_version(self) -> str:
        return hashlib.sha256("\n".join(self.templates).encode()).hexdigest()[:12]

    def _tokenize(self, texts: list[str]) -> dict[str, Any]:
        # SigLIP was trained on text padded to the full length; CLIP on text that ends at its end token
        limit = min(int(self.tokenizer.model_max_length), int(self.model.config.text_config.max_position_embeddings))
        padding = "max_length" if self.sigmoid else True
        batch = self.tokenizer(texts, padding=padding, truncation=True, max_length=limit, return_tensors="pt")
        return move_inputs(batch, self.device, self.dtype)

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        """(N, D) float32 L2-normalised text embeddings of `texts` as given (no template)."""
        import torch

        self.ensure_loaded()
        rows: list[np.ndarray] = []
        with torch.inference_mode():
            for start in range(0, len(texts), TEXT_BATCH):
                features = _pooled(self.model.get_text_features(**self._tokenize(texts[start : start + TEXT_BATCH])))
                rows.append(_normalize(features).cpu().numpy())
        return np.concatenate(rows) if rows else np.zeros((0, self._embedding_width()), dtype=np.float32)

    def _embedding_width(self) -> int:
        config = self.model.config  # CLIP projects to projection_dim; SigLIP's heads keep the hidden size
        return int(getattr(config, "projection_dim", None) or config.text_config.hidden_size)

    def class_embeddings(self, class_names: list[str]) -> np.ndarray:
        """(C, D) float32: per class, the normalised mean of its templates' normalised text embeddings.

        Cached per (class names, templates), the CLASS_CACHE_SIZE most recently used lists."""
        key = hashlib.sha256(json.dumps([list(class_names), self.templates]).encode()).hexdigest()
        if key in self._class_cache:
            self._class_cache.move_to_end(key)
            return self._class_cache[key]
        prompts = [t.replace("{}", name) for name in class_names for t in self.templates]
        per_prompt = self.encode_texts(prompts).reshape(len(class_names), len(self.templates), -1)
        mean = per_prompt.mean(axis=1)
        self._class_cache[key] = mean / np.maximum(np.linalg.norm(mean, axis=1, keepdims=True), 1e-12)
        while len(self._class_cache) > CLASS_CACHE_SIZE:
            self._class_cache.popitem(last=False)
        return self._class_cache[key]

    def encode_images(self, images: list[Any]) -> np.ndarray:
        """(N, D) float32 L2-normalised embeddings of N RGB PIL images."""
        import torch

        self.ensure_loaded()
        pixels = move_inputs(self.image_processor(images, return_tensors="pt"), self.device, self.dtype)
        with torch.inference_mode():
            return _normalize(_pooled(self.model.get_image_features(**pixels))).cpu().numpy()

    def embed_images(self, images: list[ImageRef]) -> tuple[list[int], np.ndarray, dict[int, str]]:
        """The ids of the images that decode, their (n, D) float32 L2-normalised embeddings in that order, and
        {image id: reason} for those that cannot be decoded (`relabel.suggest.retrieval_run`)."""
        self.ensure_loaded()
        ids: list[int] = []
        rows: list[np.ndarray] = []
        failed: dict[int, str] = {}
        batches = [images[i : i + self.batch_size] for i in range(0, len(images), self.batch_size)]
        for refs, prepared in zip(batches, self._prefetched(images), strict=True):
            good = [(ref, item) for ref, item in zip(refs, prepared, strict=True) if not isinstance(item, Exception)]
            failed.update({ref.image_id: str(item) for ref, item in zip(refs, prepared) if isinstance(item, Exception)})
            if good:
                rows.append(self.encode_images([item for _, item in good]))
                ids += [ref.image_id for ref, _ in good]
        width = rows[0].shape[1] if rows else self._embedding_width()
        return ids, np.concatenate(rows) if rows else np.zeros((0, width), np.float32), failed

    def _check_classes(self, class_names: list[str]) -> None:
        if not class_names or any(not str(n).strip() for n in class_names):
            raise InputError("zero-shot scoring needs a non-empty list of non-empty class names")

    def score(self, images: list[ImageRef], class_names: list[str]) -> list[ModelOutput]:
        """One output per image: `scores` (C,) float32, softmax over classes (CLIP) or per-class sigmoid
        (SigLIP); `error` for an image that cannot be decoded."""
        self._check_classes(class_names)
        self.class_embeddings(class_names)  # once, before the image batches
        return super().score(images, class_names)

    def _predict(self, items: list[Any], class_names: list[str]) -> np.ndarray:
        cosine = self.encode_images(items) @ self.class_embeddings(class_names).T  # (N, C)
        scale = float(self.model.logit_scale.detach().float().exp())
        if self.sigmoid:
            logits = scale * cosine + float(self.model.logit_bias.detach().float())
            return (1 / (1 + np.exp(-logits))).astype(np.float32)
        logits = scale * cosine
        exp = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (exp / exp.sum(axis=1, keepdims=True)).astype(np.float32)

    def text_encoder(self) -> ClipTextEncoder:
        """This model's text tower as a text encoder, e.g. to map free-text answers to class names."""
        return ClipTextEncoder(self)

    def describe(self) -> dict[str, Any]:
        self.ensure_loaded()
        return {
            "kind": self.kind,
            "model": self.model_id,
            "model_class": type(self.model).__name__,
            "scores": "sigmoid" if self.sigmoid else "softmax",
            "templates": len(self.templates),
            "templates_version": self.templates_version,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "batch_size": self.batch_size,
        }


class ClipTextEncoder:
    """The text tower of a `ZeroShotAdapter`; `encode` makes it a `relabel.suggest.textmap.TextEncoder`."""

    def __init__(self, adapter: ZeroShotAdapter) -> None:
        self.adapter = adapter
        self.id = f"clip-text:{adapter.model_id}"

    def encode_texts(self, texts: list[str]) -> np.ndarray:
        """(N, D) float32 L2-normalised embeddings."""
        return self.adapter.encode_texts(list(texts))

    def encode(self, texts: list[str]) -> np.ndarray:
        return self.encode_texts(texts)
