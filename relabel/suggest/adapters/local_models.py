"""Shared helpers for the local-model adapters: pixel preprocessing, device and loading options, the batch loop.

Images are decoded by `relabel.common.imaging` (Pillow only, no torchvision). torch and transformers are imported inside
the functions that need them, so importing this module stays cheap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from relabel.common.errors import InputError, RelabelError
from relabel.common.imaging import load_rgb
from relabel.suggest.types import ImageRef, ModelOutput

if TYPE_CHECKING:
    import torch

DEVICE_CHOICES = ("auto", "cpu", "cuda", "cuda:N", "mps")


def resize_and_crop(
    img: Image.Image, shorter: int, crop: int, resample: Image.Resampling = Image.Resampling.BICUBIC
) -> Image.Image:
    """Scale so that the shorter side is `shorter` pixels, then take the central `crop` x `crop` square.

    Done in one resampling pass over just the crop's source box: the same sampling positions as resizing the whole
    image and cropping afterwards (pixels differ by rounding only), at about half the cost.
    """
    w, h = img.size
    scale = shorter / min(w, h)
    new_w, new_h = max(shorter, round(w * scale)), max(shorter, round(h * scale))
    left, top = round((new_w - crop) / 2), round((new_h - crop) / 2)
    sx, sy = w / new_w, h / new_h
    box = (left * sx, top * sy, (left + crop) * sx, (top + crop) * sy)
    return img.resize((crop, crop), resample, box=box)


def to_chw(img: Image.Image, mean: tuple[float, ...], std: tuple[float, ...]) -> np.ndarray:
    """RGB pixels as a (3, H, W) float32 array: scaled to [0, 1], then (x - mean) / std per channel."""
    hwc = np.asarray(img, dtype=np.float32)
    scale = np.float32(1 / 255) / np.asarray(std, dtype=np.float32)
    shift = np.asarray(mean, dtype=np.float32) / np.asarray(std, dtype=np.float32)
    return np.ascontiguousarray((hwc * scale - shift).transpose(2, 0, 1))


def pick_device(pref: str = "auto") -> tuple[torch.device, torch.dtype]:
    """The torch device for `pref` and the dtype to run a model in there.

    `auto` takes CUDA, then Apple MPS, then the CPU. Half precision where it is fast: bfloat16 on CUDA when the
    GPU supports it (else float16), float16 on MPS, float32 on the CPU. Raises InputError for an unknown or
    unavailable device.
    """
    import torch

    pref = (pref or "auto").strip().lower()
    if pref == "auto":
        pref = "cuda" if torch.cuda.is_available() else "mps" if _mps_available() else "cpu"
    kind = pref.split(":", 1)[0]
    if kind not in {"cpu", "cuda", "mps"}:
        raise InputError(f"unknown device {pref!r}; use one of {', '.join(DEVICE_CHOICES)}")
    if (kind == "cuda" and not torch.cuda.is_available()) or (kind == "mps" and not _mps_available()):
        raise InputError(f"device {pref!r} is not available on this machine; use 'auto' or 'cpu'")
    try:
        device = torch.device(pref)
    except RuntimeError as exc:
        raise InputError(f"invalid device {pref!r}: {exc}; use one of {', '.join(DEVICE_CHOICES)}") from exc
    if kind == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise InputError(f"device {pref!r} does not exist; this machine has {torch.cuda.device_count()} GPU(s)")
    if kind == "cuda":
        return device, torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return device, torch.float16 if kind == "mps" else torch.float32


def _mps_available() -> bool:
    import torch

    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


def pil_backend_options() -> dict[str, Any]:
    """Keyword arguments that make transformers image processors use Pillow, not torchvision (not installed)."""
    import transformers

    major = int(transformers.__version__.split(".", 1)[0])
    return {"backend": "pil"} if major >= 5 else {"use_fast": False}


def dtype_options(dtype: torch.dtype) -> dict[str, Any]:
    """The `from_pretrained` keyword that loads weights directly in `dtype` (renamed in transformers 5)."""
    import transformers

    major = int(transformers.__version__.split(".", 1)[0])
    return {"dtype": dtype} if major >= 5 else {"torch_dtype": dtype}


def load_error(what: str, model_id: str, exc: Exception) -> RelabelError:
    """An error for a model that cannot be loaded, with the offline hint that usually fixes it."""
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return RelabelError(
        f"cannot load {what} {model_id!r}: {reason}. Pass a local folder saved with save_pretrained, or download "
        "the model into the Hugging Face cache on a machine with internet (HF_HUB_OFFLINE=1 forbids downloads)"
    )


def move_inputs(batch: Any, device: torch.device | None, dtype: torch.dtype | None) -> dict[str, Any]:
    """A processor's output on `device`, floating-point tensors (pixels) cast to the model's `dtype` (None: as they
    are; an adapter's device and dtype are None until its model is loaded)."""
    import torch

    out: dict[str, Any] = {}
    for key, value in dict(batch).items():
        if isinstance(value, torch.Tensor):
            value = value.to(device=device, dtype=dtype) if value.is_floating_point() else value.to(device=device)
        out[key] = value
    return out


def check_positive(value: int | None, option: str) -> None:
    """Raise InputError unless `value` is None or an integer >= 1."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise InputError(f"{option} must be a positive integer, got {value!r}")


class LazyModel:
    """Loads its model on first use, once, even when several threads ask at the same time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False

    def _load(self) -> None:
        raise NotImplementedError

    def ensure_loaded(self) -> None:
        with self._lock:
            if not self._loaded:
                self._load()
                self._loaded = True

    def check(self) -> None:
        """Load the model now, so that a missing model fails before any work."""
        self.ensure_loaded()


class BatchedImageScorer(LazyModel):
    """A scoring adapter's loop: batches of `batch_size` (on a GPU the next batch decodes in a background thread
    while the model scores this one), and a file that cannot be decoded an error output for that image alone.

    Subclasses implement `_load`, `_predict` and optionally `_prepare_one` (default: the decoded RGB image) and
    `_check_classes`.
    """

    name: str

    def __init__(self, *, batch_size: int, device: str) -> None:
        super().__init__()
        check_positive(batch_size, "batch_size")
        self.batch_size = batch_size
        self.device_pref = device
        self.device: torch.device | None = None  # set by `_load`

    def _check_classes(self, class_names: list[str]) -> None:
        """Raise InputError when the model cannot score this class list."""

    def _prepare_one(self, ref: ImageRef) -> Any:
        """One image's input for `_predict`; raises InputError when the file cannot be decoded."""
        return load_rgb(ref.path)

    def _predict(self, items: list[Any], class_names: list[str]) -> np.ndarray:
        """(N, C) float32 scores for N prepared inputs and C = len(class_names) classes."""
        raise NotImplementedError

    def score(self, images: list[ImageRef], class_names: list[str]) -> list[ModelOutput]:
        """One output per image: `scores` (C,) float32 over `class_names`, or `error` for that image."""
        self._check_classes(class_names)
        self.ensure_loaded()
        outputs: list[ModelOutput] = []
        for prepared in self._prefetched(images):
            outputs.extend(self._score_chunk(prepared, class_names))
        return outputs

    def _prefetched(self, images: list[ImageRef]) -> Iterator[list[Any]]:
        """Each batch's prepared inputs (an exception in place of an image that failed). With the model on a GPU
        the next batch decodes in a thread meanwhile; on the CPU both would compete for the same cores, and
        measured (bench/bench_classifier.py) the thread made the whole about 7 % slower there."""
        chunks = [images[i : i + self.batch_size] for i in range(0, len(images), self.batch_size)]
        if self.device is None or self.device.type == "cpu":
            yield from map(self._prepare_chunk, chunks)
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="decode") as pool:
            pending = [pool.submit(self._prepare_chunk, chunk) for chunk in chunks[:1]]
            for k in range(len(chunks)):
                prepared = pending.pop().result()
                pending += [pool.submit(self._prepare_chunk, nxt) for nxt in chunks[k + 1 : k + 2]]
                yield prepared

    def _prepare_chunk(self, chunk: list[ImageRef]) -> list[Any]:
        prepared: list[Any] = []
        for ref in chunk:
            try:
                prepared.append(self._prepare_one(ref))
            except RelabelError as exc:
                prepared.append(exc)
        return prepared

    def _score_chunk(self, prepared: list[Any], class_names: list[str]) -> list[ModelOutput]:
        good = [i for i, p in enumerate(prepared) if not isinstance(p, Exception)]
        outputs = [ModelOutput(error=str(p)) if isinstance(p, Exception) else ModelOutput() for p in prepared]
        if not good:
            return outputs
        started = time.perf_counter()
        try:
            scores = self._predict([prepared[i] for i in good], class_names)
        except (RuntimeError, ValueError) as exc:  # e.g. out of memory: this batch fails, the run goes on
            for i in good:
                outputs[i].error = f"model failed on a batch of {len(good)}: {str(exc).splitlines()[0]}"
                outputs[i].retryable = True  # out of memory may pass: a re-run tries again
            return outputs
        share = (time.perf_counter() - started) / len(good)
        for row, i in enumerate(good):
            outputs[i].scores, outputs[i].latency_s = scores[row], share
        return outputs
