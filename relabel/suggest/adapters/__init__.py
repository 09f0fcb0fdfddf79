"""Model adapters: one registry from a spec prefix to "module:Class", imported only when used.

A model spec is `KIND:MODEL`, e.g. `openai:gpt-4o`, `hf-vlm:Qwen/Qwen2.5-VL-3B-Instruct`,
`clip:openai/clip-vit-base-patch32`, `hf-classifier:google/vit-base-patch16-224`, `efficientnet-lite0` (and
`efficientnet-lite1`, `efficientnet-lite2` with their weights packages installed).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, TypeGuard

from relabel.common.errors import InputError, RelabelError
from relabel.suggest.types import Adapter, ScoringAdapter


@dataclass(frozen=True)
class AdapterKind:
    """A model kind: where its adapter class lives ("module:Class", imported only when used) and what the rest of
    the code reads from the entry instead of asking the adapter or testing the kind's name. An adapter knows its
    kind (`kind`, the registry key: set by `load_adapter`, declared by each adapter class) and `kind_of` finds the
    entry, which `ranks_classes` and `reads_text` read."""

    target: str
    example: str  # how a spec of this kind is written, for the CLI's help: "clip:ID"
    ranks_topk: bool  # a ScoringAdapter: scores every class, read as its top-k; else a GenerativeAdapter
    reads_text: bool  # text perturbations reach it: a prompt (generative) or the class names (CLIP, SigLIP)
    remote: bool = False  # an API server: takes base_url, retries and a response cache, not a device
    summary: str = ""  # what it is, for the README's table of kinds
    needs: str = ""  # what it needs beyond the package (model files, an API key), for the same table

    @property
    def default_protocol(self) -> str:
        """How `relabel suggest` asks it when --protocol is left out: by its scores, else an open question."""
        return "topk" if self.ranks_topk else "ow"


_ADAPTERS = "relabel.suggest.adapters"
REGISTRY: dict[str, AdapterKind] = {
    "efficientnet-lite0": AdapterKind(
        f"{_ADAPTERS}.classifier:EfficientNetLite0Adapter",
        "efficientnet-lite0",
        True,
        False,
        summary="supervised ImageNet-1k classifier (the default; works offline)",
        needs="nothing",
    ),
    "efficientnet-lite1": AdapterKind(
        f"{_ADAPTERS}.classifier:EfficientNetLite1Adapter",
        "efficientnet-lite1",
        True,
        False,
        summary="a larger EfficientNet-Lite, offline",
        needs="the `classifiers` extra",
    ),
    "efficientnet-lite2": AdapterKind(
        f"{_ADAPTERS}.classifier:EfficientNetLite2Adapter",
        "efficientnet-lite2",
        True,
        False,
        summary="a larger EfficientNet-Lite, offline",
        needs="the `classifiers` extra",
    ),
    "hf-classifier": AdapterKind(
        f"{_ADAPTERS}.classifier:HFClassifierAdapter",
        "hf-classifier:ID",
        True,
        False,
        summary="any transformers `AutoModelForImageClassification` with the 1000 ImageNet labels",
        needs="the model files",
    ),
    "clip": AdapterKind(
        f"{_ADAPTERS}.clip:ZeroShotAdapter",
        "clip:ID",
        True,
        True,
        summary="CLIP or SigLIP zero-shot over the class names, averaged over prompt templates",
        needs="the model files",
    ),
    "hf-vlm": AdapterKind(
        f"{_ADAPTERS}.hf_vlm:HFVisionLanguageAdapter",
        "hf-vlm:ID",
        False,
        True,
        summary="local vision-language model (Qwen2.5-VL, Qwen3-VL, LLaVA-OneVision, InternVL, Gemma 3, "
        "PaliGemma 2, SmolVLM)",
        needs="the model files",
    ),
    "openai": AdapterKind(
        f"{_ADAPTERS}.openai_api:OpenAIChatAdapter",
        "openai:MODEL",
        False,
        True,
        remote=True,
        summary="GPT-4o or any OpenAI-compatible server (vLLM, SGLang, Ollama, LM Studio)",
        needs="`OPENAI_API_KEY`, `OPENAI_BASE_URL`",
    ),
}


def kind_examples() -> dict[str, str]:
    """How a spec of each kind is written, in the registry's order (the CLI's `--model` help)."""
    return {kind.example: "" for kind in REGISTRY.values()}


def parse_spec(spec: str) -> tuple[str, str]:
    """Split `KIND:MODEL`; a bare registered kind (`efficientnet-lite0`) has an empty model."""
    kind, _, model = spec.partition(":")
    if kind not in REGISTRY:
        raise InputError(f"unknown model kind {kind!r} in {spec!r}; known: {', '.join(sorted(REGISTRY))}")
    return kind, model


def adapter_kind(spec: str) -> AdapterKind:
    """The registry entry of the model `spec` (`KIND:MODEL`); an unknown kind is an InputError."""
    return REGISTRY[parse_spec(spec)[0]]


def kind_of(adapter: object) -> AdapterKind | None:
    """The registry entry of `adapter`'s kind (its `kind` attribute); None for an object that names no kind, such
    as a test's stand-in. A kind that is not registered is an InputError naming the known ones."""
    kind = getattr(adapter, "kind", None)
    if kind is None:
        return None
    if kind not in REGISTRY:
        name = getattr(adapter, "name", type(adapter).__name__)
        raise InputError(f"model {name!r} is of kind {kind!r}, which is not registered; known: {', '.join(REGISTRY)}")
    return REGISTRY[kind]


def ranks_classes(adapter: Adapter) -> TypeGuard[ScoringAdapter]:
    """Whether `adapter` scores classes (a ScoringAdapter, read by its top-k) rather than answering prompts: its
    kind's `ranks_topk`. An adapter of no kind is told by its methods: a scorer has `score`."""
    entry = kind_of(adapter)
    return entry.ranks_topk if entry is not None else hasattr(adapter, "score")


def reads_text(adapter: Adapter) -> bool:
    """Whether text perturbations reach `adapter`: its kind's `reads_text` (a prompt for a generative model, the
    class names for CLIP and SigLIP). An adapter of no kind reads text when it answers prompts."""
    entry = kind_of(adapter)
    return entry.reads_text if entry is not None else not ranks_classes(adapter)


def load_adapter(spec: str, **options: Any) -> Adapter:
    """Instantiate the adapter for `spec`, of the kind it was loaded as (`adapter.kind`); heavy libraries are
    imported here, not before. A class that does not do what its entry declares (score classes or answer
    prompts) is a RelabelError."""
    kind, model = parse_spec(spec)
    entry = REGISTRY[kind]
    module_name, _, class_name = entry.target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    if entry.ranks_topk != callable(getattr(cls, "score", None)):
        does = "scores classes (ranks_topk)" if entry.ranks_topk else "answers prompts (not ranks_topk)"
        raise RelabelError(f"model kind {kind!r} declares that it {does}, but {entry.target} does not")
    adapter = cls(model, **options) if model else cls(**options)
    adapter.kind = kind  # the entry this adapter was loaded as: what the capability checks read
    result: Adapter = adapter
    return result
