"""The retrieval protocol's registry entry: a dual encoder (CLIP, SigLIP) embeds every image and one query per class,
"a photo of a {class}.", and the embeddings are stored as files (`relabel.suggest.retrieval_store`) instead of
answers; `relabel.suggest.retrieval_run` makes the run and `relabel.evaluation.tasks_retrieval` scores it (R@K and
mAP, text → image and image → text)."""

from __future__ import annotations

from typing import Any

from relabel.suggest.protocol_base import Protocol, ProtocolContext, prompt_version

RETRIEVAL = "retrieval"  # the task a retrieval run is scored as
TEMPLATE = "a photo of a {}."  # one query per class, as CLIP's zero-shot evaluation writes it


class Retrieval(Protocol):
    """Image and class-query embeddings of a dual encoder (module docstring); no request is ever built."""

    name, summary, task = RETRIEVAL, "a dual encoder's image and class-query embeddings, for R@K and mAP", RETRIEVAL
    generative = False
    template = TEMPLATE

    def version(self, ctx: ProtocolContext | None = None) -> str:
        return prompt_version("retrieval", self.template)

    def describe(self, ctx: ProtocolContext | None = None) -> dict[str, Any]:
        return {"protocol": self.name, "template": self.template, "prompt_version": self.version(ctx)}
