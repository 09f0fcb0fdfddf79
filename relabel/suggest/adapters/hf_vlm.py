"""Local vision-language models from Hugging Face as a generative adapter (`AutoModelForImageTextToText`).

Every request becomes a chat (optional system message, then one user turn with its images and the prompt) that the
model's own processor turns into tokens with `apply_chat_template`; requests run in batches, left-padded, and only
the newly generated tokens are decoded. Decoding is greedy unless a request asks for a temperature above 0.

Written for chat VLMs whose processor renders image content itself: Qwen2-VL, Qwen2.5-VL, Qwen3-VL, LLaVA /
LLaVA-OneVision, InternVL (the `-hf` checkpoints), Gemma 3 and SmolVLM. A model without a chat template but with an
image token (PaliGemma 2 mix checkpoints) gets its image tokens followed by the plain prompt. In transformers 5 the
Qwen-VL, LLaVA-OneVision, InternVL and SmolVLM processors also build a video processor, which needs torchvision;
without it they are loaded image-only (see `load_processor`).
"""

from __future__ import annotations

import inspect
import threading
import time
from typing import TYPE_CHECKING, Any

from PIL import Image

from relabel.common.errors import InputError, RelabelError
from relabel.common.imaging import load_rgb
from relabel.suggest.adapters.local_models import (
    LazyModel,
    check_positive,
    dtype_options,
    load_error,
    move_inputs,
    pick_device,
    pil_backend_options,
)
from relabel.suggest.types import ChatRequest, ModelOutput

if TYPE_CHECKING:
    import torch

DEFAULT_MAX_IMAGE_SIDE = 1024  # bounds the tokens per image of dynamic-resolution models (Qwen-VL: ~1,300)


def load_processor(model_id: str) -> Any:
    """The model's processor with a Pillow image processor.

    When the full processor cannot be built because its video processor needs torchvision (transformers 5:
    Qwen-VL, LLaVA-OneVision, InternVL, SmolVLM), the same processor class is loaded without its video part: only
    images are sent, and these processors touch the video processor only when given videos.
    """
    from transformers import AutoProcessor

    try:
        return AutoProcessor.from_pretrained(model_id, **pil_backend_options())
    except ImportError as exc:
        processor = _image_only_class(model_id, exc).from_pretrained(model_id, **pil_backend_options())
        processor.video_processor = None
        return processor


def _image_only_class(model_id: str, cause: ImportError) -> Any:
    """The model type's processor class, minus its video processor attribute."""
    from transformers import AutoConfig
    from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES, processor_class_from_name

    name = PROCESSOR_MAPPING_NAMES.get(AutoConfig.from_pretrained(model_id).model_type)
    base = processor_class_from_name(name) if name else None
    if base is None:
        raise cause
    attributes = [a for a in base.get_attributes() if "video" not in a]
    return type(base.__name__, (base,), {"get_attributes": classmethod(lambda cls: attributes)})


def chat_messages(request: ChatRequest, images: list[Image.Image]) -> list[dict[str, Any]]:
    """The request as chat messages with typed content: [system], user = images then the prompt text."""
    content: list[dict[str, Any]] = [{"type": "image", "image": img} for img in images]
    content.append({"type": "text", "text": request.prompt})
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": [{"type": "text", "text": request.system}]})
    messages.append({"role": "user", "content": content})
    return messages


def plain_prompt(request: ChatRequest) -> str:
    """The request as one text, for models without a chat template: the system message, if any, comes first."""
    return f"{request.system}\n{request.prompt}" if request.system else request.prompt


def fit_within(img: Image.Image, side: int | None) -> Image.Image:
    """`img` scaled down (bicubic) so that its longer side is at most `side` pixels; unchanged when it fits."""
    if side is None or max(img.size) <= side:
        return img
    scale = side / max(img.size)
    return img.resize((max(1, round(img.width * scale)), max(1, round(img.height * scale))), Image.Resampling.BICUBIC)


class HFVisionLanguageAdapter(LazyModel):
    """A local chat VLM. `max_new_tokens` (when set) replaces each request's `max_tokens`; `max_image_side`
    downscales larger images before the processor sees them (None: pass them as they are)."""

    kind = "hf-vlm"  # its registry entry: answers prompts, reads text

    def __init__(
        self,
        model_id: str,
        *,
        device: str = "auto",
        batch_size: int = 4,
        max_new_tokens: int | None = None,
        max_image_side: int | None = DEFAULT_MAX_IMAGE_SIDE,
    ) -> None:
        super().__init__()
        check_positive(batch_size, "batch_size")
        check_positive(max_new_tokens, "max_new_tokens")
        check_positive(max_image_side, "max_image_side")
        self.model_id = model_id
        self.name = f"hf-vlm:{model_id}"
        self.device_pref, self.batch_size = device, batch_size
        self.max_new_tokens, self.max_image_side = max_new_tokens, max_image_side
        self.model: Any = None
        self.processor: Any = None
        self.device: torch.device | None = None
        self.dtype: torch.dtype | None = None
        self.stop_ids: set[int] = set()
        self.chat = True  # the processor has a chat template (else: plain prompt after the image tokens)
        self._busy = threading.Lock()  # one generate call at a time on the model
        self.usage_totals: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0}

    def _load(self) -> None:
        from transformers import AutoModelForImageTextToText

        self.device, self.dtype = pick_device(self.device_pref)
        try:
            processor = load_processor(self.model_id)
            model = AutoModelForImageTextToText.from_pretrained(self.model_id, **dtype_options(self.dtype))
        except (OSError, ValueError, ImportError) as exc:
            raise load_error("vision-language model", self.model_id, exc) from exc
        self.chat = bool(getattr(processor, "chat_template", None))
        if not self.chat and not getattr(processor, "image_token", None):
            raise InputError(
                f"model {self.model_id!r} has neither a chat template nor an image token; use an instruction-tuned "
                "vision-language model (e.g. Qwen/Qwen2.5-VL-3B-Instruct)"
            )
        tokenizer = processor.tokenizer
        tokenizer.padding_side = "left"  # generation continues from the right end of every row
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        self.stop_ids = _stop_ids(model.generation_config.eos_token_id, tokenizer)
        # transformers types `.to` through a decorator whose signature wants the model itself
        self.processor, self.model = processor, model.to(self.device).eval()  # type: ignore[arg-type]

    def generate(self, requests: list[ChatRequest]) -> list[ModelOutput]:
        """One output per request, in order: the generated text, or `error` when its images could not be read or
        its batch failed (other batches still run)."""
        self.ensure_loaded()
        outputs: list[ModelOutput | None] = [None] * len(requests)
        ready: list[tuple[int, list[Image.Image]]] = []
        for i, request in enumerate(requests):
            try:
                ready.append((i, [fit_within(load_rgb(ref.path), self.max_image_side) for ref in request.images]))
            except RelabelError as exc:
                outputs[i] = ModelOutput(error=str(exc))
        for batch in self._batches(requests, ready):
            with self._busy:
                results = self._generate_batch([requests[i] for i, _ in batch], [imgs for _, imgs in batch])
            for (i, _), result in zip(batch, results):
                outputs[i] = result
        return [o if o is not None else ModelOutput(error="no output", retryable=True) for o in outputs]

    def _batches(
        self, requests: list[ChatRequest], ready: list[tuple[int, list[Image.Image]]]
    ) -> list[list[tuple[int, list[Image.Image]]]]:
        """Up to `batch_size` requests with the same temperature (one sampling setting per generate call)."""
        groups: dict[float, list[tuple[int, list[Image.Image]]]] = {}
        for item in ready:
            groups.setdefault(requests[item[0]].temperature, []).append(item)
        return [g[s : s + self.batch_size] for g in groups.values() for s in range(0, len(g), self.batch_size)]

    def _limit(self, request: ChatRequest) -> int:
        return self.max_new_tokens or request.max_tokens

    def _generate_batch(self, requests: list[ChatRequest], images: list[list[Image.Image]]) -> list[ModelOutput]:
        import torch

        started = time.perf_counter()
        try:
            inputs = self._encode(requests, images)
            with torch.inference_mode():
                sequences = self.model.generate(**inputs, **self._generation_options(requests))
        except (RuntimeError, ValueError, TypeError, IndexError, KeyError) as exc:  # OOM, too long, template errors
            if self.device is not None and self.device.type == "cuda":
                torch.cuda.empty_cache()
            first_line = (str(exc).splitlines() or [""])[0]
            reason = f"{type(exc).__name__} in a batch of {len(requests)}: {first_line}"
            return [ModelOutput(error=reason, retryable=True) for _ in requests]  # another run may fit
        share = (time.perf_counter() - started) / len(requests)
        new_tokens = sequences[:, inputs["input_ids"].shape[1] :].cpu()
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        outputs = [
            self._output(row[: self._limit(r)].tolist(), int(n), share)
            for row, r, n in zip(new_tokens, requests, prompt_tokens)
        ]
        for out in outputs:  # _busy is held: one batch at a time updates the totals
            for name in ("prompt_tokens", "completion_tokens"):
                self.usage_totals[name] += out.usage[name] if out.usage else 0
        self.usage_totals["calls"] += 1
        return outputs

    def _encode(self, requests: list[ChatRequest], images: list[list[Image.Image]]) -> dict[str, Any]:
        if not self.chat:  # PaliGemma-style: image tokens, then the prompt; the processor adds the rest
            texts = [self.processor.image_token * len(imgs) + plain_prompt(r) for r, imgs in zip(requests, images)]
            batch = self.processor(text=texts, images=images, padding=True, return_tensors="pt")
            return move_inputs(batch, self.device, self.dtype)
        conversations = [chat_messages(r, imgs) for r, imgs in zip(requests, images)]
        options: dict[str, Any] = {"padding": True}
        if "processor_kwargs" in inspect.signature(self.processor.apply_chat_template).parameters:
            options = {"processor_kwargs": options}  # transformers 5 wants processor options in their own dict
        batch = self.processor.apply_chat_template(
            conversations, add_generation_prompt=True, tokenize=True, return_dict=True, return_tensors="pt", **options
        )
        return move_inputs(batch, self.device, self.dtype)

    def _generation_options(self, requests: list[ChatRequest]) -> dict[str, Any]:
        temperature = requests[0].temperature  # a batch shares it (see _batches)
        options: dict[str, Any] = {
            "max_new_tokens": max(self._limit(r) for r in requests),
            "pad_token_id": self.processor.tokenizer.pad_token_id,
        }
        if temperature > 0:
            return {**options, "do_sample": True, "temperature": temperature}
        # greedy: also clear the sampling settings that some checkpoints ship in generation_config.json
        return {**options, "do_sample": False, "temperature": None, "top_p": None, "top_k": None}

    def _output(self, tokens: list[int], prompt_tokens: int, latency: float) -> ModelOutput:
        """Text up to the first stop token; usage counts the completion tokens including that stop token."""
        end = next((k for k, t in enumerate(tokens) if t in self.stop_ids), None)
        kept = tokens if end is None else tokens[:end]
        text = self.processor.tokenizer.decode(kept, skip_special_tokens=True).strip()
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(tokens) if end is None else end + 1}
        return ModelOutput(text=text, usage=usage, latency_s=latency)

    def describe(self) -> dict[str, Any]:
        self.ensure_loaded()
        return {
            "kind": "hf-vlm",
            "model": self.model_id,
            "model_class": type(self.model).__name__,
            "processor_class": type(self.processor).__name__,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "batch_size": self.batch_size,
            "max_new_tokens": self.max_new_tokens,
            "max_image_side": self.max_image_side,
            "decoding": "greedy unless a request sets temperature > 0",
            "prompt_format": "chat template" if self.chat else "image tokens + plain prompt",
        }


def _stop_ids(eos: int | list[int] | None, tokenizer: Any) -> set[int]:
    """Token ids that end an answer: the generation config's eos ids, the tokenizer's eos and its pad token."""
    ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
    ids |= {t for t in (tokenizer.eos_token_id, tokenizer.pad_token_id) if t is not None}
    return ids
