"""Model adapters: one registry from a spec prefix to "module:Class", imported only when used.

A model spec is `KIND:MODEL`, e.g. `openai:gpt-4o`, `hf-vlm:Qwen/Qwen2.5-VL-3B-Instruct`,
`clip:openai/clip-vit-base-patch32`, `hf-classifier:google/vit-base-patch16-224`, `efficientnet-lite0`.
"""

from __future__ import annotations

import importlib
from typing import Any

from relabel.errors import InputError

REGISTRY: dict[str, str] = {
    "openai": "relabel.suggest.adapters.openai_api:OpenAIChatAdapter",
    "hf-vlm": "relabel.suggest.adapters.hf_vlm:HFVisionLanguageAdapter",
    "clip": "relabel.suggest.adapters.clip:ZeroShotAdapter",
    "hf-classifier": "relabel.suggest.adapters.classifier:HFClassifierAdapter",
    "efficientnet-lite0": "relabel.suggest.adapters.classifier:EfficientNetLite0Adapter",
}


def parse_spec(spec: str) -> tuple[str, str]:
    """Split `KIND:MODEL`; a bare registered kind (`efficientnet-lite0`) has an empty model."""
    kind, _, model = spec.partition(":")
    if kind not in REGISTRY:
        raise InputError(f"unknown model kind {kind!r} in {spec!r}; known: {', '.join(sorted(REGISTRY))}")
    return kind, model


def load_adapter(spec: str, **options: Any) -> Any:
    """Instantiate the adapter for `spec`; heavy libraries are imported here, not before."""
    kind, model = parse_spec(spec)
    module_name, _, class_name = REGISTRY[kind].partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(model, **options) if model else cls(**options)
