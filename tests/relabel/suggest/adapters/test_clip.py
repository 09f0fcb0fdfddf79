"""Zero-shot scoring with tiny random CLIP and SigLIP models loaded through the adapter's real code."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from relabel.common.errors import InputError
from relabel.suggest.adapters import load_adapter
from relabel.suggest.adapters.clip import ZeroShotAdapter, check_templates, load_templates
from relabel.suggest.types import ImageRef, ScoringAdapter
from tests.images import photo, truncated_jpeg
from tests.tiny_models import save_tiny_clip, save_tiny_siglip

CLASSES = ["tabby cat", "golden retriever", "school bus", "volcano"]


def ref(path: Path, image_id: int = 0) -> ImageRef:
    return ImageRef(image_id, path, hashlib.sha256(path.read_bytes()).hexdigest(), path.name)


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_clip(tmp_path_factory.mktemp("clip"))


@pytest.fixture(scope="module")
def tiny_siglip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_siglip(tmp_path_factory.mktemp("siglip"))


@pytest.fixture
def refs(tmp_path: Path) -> list[ImageRef]:
    return [ref(photo(tmp_path / f"{i}.jpg", (60 + 11 * i, 45), (70 * i, 120, 200 - 50 * i)), i) for i in range(3)]


def model_probabilities(folder: Path, paths: list[Path], texts: list[str], sigmoid: bool) -> np.ndarray:
    """What the model's own forward pass gives for `texts`: the reference for a one-template adapter."""
    from transformers import AutoModel, AutoProcessor

    processor, model = AutoProcessor.from_pretrained(folder, backend="pil"), AutoModel.from_pretrained(folder)
    images = [Image.open(p).convert("RGB") for p in paths]
    padding = "max_length" if sigmoid else True
    inputs = processor(text=texts, images=images, padding=padding, truncation=True, return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits_per_image
    return (torch.sigmoid(logits) if sigmoid else torch.softmax(logits, dim=1)).numpy()


class TestTemplates:
    def test_the_packaged_ensemble(self) -> None:
        templates = load_templates()
        assert len(templates) == 7 and "itap of a {}." in templates
        assert all(t.count("{}") == 1 for t in templates)

    def test_comments_and_blank_lines_are_skipped(self) -> None:
        assert load_templates("# a comment\n\na photo of a {}.\n  art of the {}.  \n") == [
            "a photo of a {}.",
            "art of the {}.",
        ]

    @pytest.mark.parametrize("bad", [[], ["a photo"], ["{} and {}"]])
    def test_a_template_needs_exactly_one_slot(self, bad: list[str]) -> None:
        with pytest.raises(InputError, match="template"):
            check_templates(bad)


class TestClip:
    def test_scores_match_the_models_own_softmax(self, tiny_clip: Path, refs: list[ImageRef]) -> None:
        adapter = load_adapter(f"clip:{tiny_clip}", templates=["{}"], device="cpu")
        assert isinstance(adapter, ZeroShotAdapter) and isinstance(adapter, ScoringAdapter)
        outputs = adapter.score(refs, CLASSES)
        expected = model_probabilities(tiny_clip, [r.path for r in refs], CLASSES, sigmoid=False)
        got = np.stack([o.scores for o in outputs])  # type: ignore[arg-type]
        assert got.shape == (3, 4) and got.dtype == np.float32
        np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert adapter.describe()["scores"] == "softmax"

    def test_class_embeddings_average_the_templates(self, tiny_clip: Path) -> None:
        templates = ["a photo of a {}.", "art of the {}.", "a {} in a video game."]
        adapter = ZeroShotAdapter(str(tiny_clip), templates=templates, device="cpu")
        got = adapter.class_embeddings(CLASSES[:2])
        for row, name in zip(got, CLASSES[:2]):
            per_template = adapter.encode_texts([t.replace("{}", name) for t in templates])
            mean = per_template.mean(axis=0)
            np.testing.assert_allclose(row, mean / np.linalg.norm(mean), atol=1e-5)
            assert not np.allclose(row, per_template[0], atol=1e-3)  # really a mix, not the first template
        assert got.shape == (2, 16)

    def test_class_embeddings_are_cached_per_class_list(
        self, tiny_clip: Path, refs: list[ImageRef], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        adapter = ZeroShotAdapter(str(tiny_clip), device="cpu")
        calls: list[int] = []
        encode = adapter.encode_texts
        monkeypatch.setattr(adapter, "encode_texts", lambda texts: calls.append(len(texts)) or encode(texts))
        adapter.score(refs[:1], CLASSES)
        adapter.score(refs[1:], CLASSES)
        adapter.score(refs[:1], CLASSES[:2])
        assert calls == [4 * 7, 2 * 7]  # one encoding per class list, every class in all 7 templates

    def test_batch_equals_one_by_one_and_a_broken_image_is_an_error(
        self, tiny_clip: Path, refs: list[ImageRef], tmp_path: Path
    ) -> None:
        bad = ref(truncated_jpeg(tmp_path / "cut.jpg"), 7)
        batched = ZeroShotAdapter(str(tiny_clip), batch_size=4, device="cpu").score([*refs[:2], bad, refs[2]], CLASSES)
        single = ZeroShotAdapter(str(tiny_clip), batch_size=1, device="cpu")
        assert [o.ok for o in batched] == [True, True, False, True] and "cut.jpg" in (batched[2].error or "")
        for r, many in zip(refs, [batched[0], batched[1], batched[3]]):
            np.testing.assert_allclose(single.score([r], CLASSES)[0].scores, many.scores, atol=1e-5)  # type: ignore[arg-type]

    def test_the_text_tower_serves_as_a_text_encoder(self, tiny_clip: Path) -> None:
        adapter = ZeroShotAdapter(str(tiny_clip), device="cpu")
        encoder = adapter.text_encoder()
        vectors = encoder.encode_texts(["a tabby cat", "school bus", "a tabby cat"])
        assert vectors.shape == (3, 16) and vectors.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        np.testing.assert_allclose(vectors[0], vectors[2], atol=1e-6)
        assert not np.allclose(vectors[0], vectors[1], atol=1e-3)
        np.testing.assert_allclose(encoder.encode(["school bus"]), vectors[1:2], atol=1e-6)
        assert encoder.id == f"clip-text:{tiny_clip}" and encoder.encode_texts([]).shape == (0, 16)

    def test_an_empty_class_list_is_an_input_error(self, tiny_clip: Path, refs: list[ImageRef]) -> None:
        with pytest.raises(InputError, match="class names"):
            ZeroShotAdapter(str(tiny_clip), device="cpu").score(refs, [])


class TestSiglip:
    def test_scores_are_independent_sigmoids_matching_the_model(self, tiny_siglip: Path, refs: list[ImageRef]) -> None:
        adapter = ZeroShotAdapter(str(tiny_siglip), templates=["{}"], device="cpu")
        got = np.stack([o.scores for o in adapter.score(refs, CLASSES)])  # type: ignore[arg-type]
        expected = model_probabilities(tiny_siglip, [r.path for r in refs], CLASSES, sigmoid=True)
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert ((got > 0) & (got < 1)).all() and not np.allclose(got.sum(axis=1), 1.0, atol=1e-2)
        assert adapter.describe()["scores"] == "sigmoid"
