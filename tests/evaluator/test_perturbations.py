"""Perturbations: pinned ImageNet-C parameters, pixels against `imagecorruptions`, the benchmark's JPEG step,
strength rising with severity, seeds, types, text typos."""

from __future__ import annotations

import importlib
import io
import os
import subprocess
import sys
from importlib import resources
from types import ModuleType

import numpy as np
import pytest
import skimage.color
import skimage.data
import skimage.filters
from PIL import Image
from rapidfuzz.distance import Levenshtein

from evaluator import EvaluationError, corruptions
from evaluator.corruptions import FROST_TEXTURES, _glass_sources, motion_kernel
from evaluator.perturbations import (
    BENCHMARK_CORRUPTIONS,
    PERTURBATIONS,
    SEVERITIES,
    TYPO_RATES,
    get_perturbation,
    perturb,
    perturb_text,
)
from evaluator.resampling import reflect101, warp_affine
from tests.conftest import shared

IMAGENET_C_PARAMS = {
    "gaussian_noise": (0.08, 0.12, 0.18, 0.26, 0.38),
    "shot_noise": (60, 25, 12, 5, 3),
    "impulse_noise": (0.03, 0.06, 0.09, 0.17, 0.27),
    "gaussian_blur": (1, 2, 3, 4, 6),
    "defocus_blur": ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)),
    "motion_blur": ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15)),
    "jpeg": (25, 18, 15, 10, 7),
    "contrast": (0.4, 0.3, 0.2, 0.1, 0.05),
    "brightness": (0.1, 0.2, 0.3, 0.4, 0.5),
    "pixelate": (0.6, 0.5, 0.4, 0.3, 0.25),
    # the six that complete the benchmark's 15
    "glass_blur": ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)),
    "zoom_blur": ((1, 1.11, 0.01), (1, 1.16, 0.01), (1, 1.21, 0.02), (1, 1.26, 0.02), (1, 1.31, 0.03)),
    "snow": (
        (0.1, 0.3, 3, 0.5, 10, 4, 0.8),
        (0.2, 0.3, 2, 0.5, 12, 4, 0.7),
        (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65),
        (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
    ),
    "frost": ((1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)),
    "fog": ((1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)),
    "elastic_transform": (  # (alpha, sigma, affine shift) in pixels, make_imagenet_c.py's "244" kept
        (244 * 2, 244 * 0.7, 244 * 0.1),
        (244 * 2, 244 * 0.08, 244 * 0.2),
        (244 * 0.05, 244 * 0.01, 244 * 0.02),
        (244 * 0.07, 244 * 0.01, 244 * 0.02),
        (244 * 0.12, 244 * 0.01, 244 * 0.02),
    ),
}
BENCHMARK = (  # Hendrycks & Dietterich's 15, in their order: noise, blur, weather, digital
    "gaussian_noise", "shot_noise", "impulse_noise", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur",
    "snow", "frost", "fog", "brightness", "contrast", "elastic_transform", "pixelate", "jpeg",
)  # fmt: skip
SEEDED = {
    "gaussian_noise", "shot_noise", "impulse_noise", "glass_blur", "motion_blur", "snow", "frost", "fog",
    "elastic_transform",
}  # fmt: skip
BLURS = ("gaussian_blur", "defocus_blur", "glass_blur", "motion_blur", "zoom_blur", "pixelate", "contrast")
# The benchmark's tables do not grow the mean pixel distance from the clean image at every step for these: glass
# blur's passes go 2, 1, 3, 2, 2; frost dims the image as it adds texture; fog's severities 3 and 4 share a strength;
# elastic transform's severities 1 and 2 are mostly a large affine shift, 3 to 5 a small one with local wobble.
NOT_DISTANCE_MONOTONE = {"glass_blur", "frost", "fog", "elastic_transform"}
REFERENCE_NAMES = {"jpeg": "jpeg_compression"}  # ours → imagecorruptions'
# These two follow make_imagenet_c.py where imagecorruptions departs from it (TestAgainstMakeImagenetC).
AS_MAKE_IMAGENET_C = {"frost", "elastic_transform"}


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    """A real photo (the chelsea cat, bundled with scikit-image) at 224 px on the short side, as a model sees it."""
    return Image.fromarray(skimage.data.chelsea()).resize((336, 224), Image.Resampling.BICUBIC)


def reference_module(name: str) -> ModuleType:
    """A module of the `reference` extra (`pip install -e ".[dev,reference]"`: the imagecorruptions-imaug fork, which
    brings OpenCV and numba, about 500 MB the evaluator never imports). Without it these tests skip, unless
    RELABEL_REQUIRE_REFERENCE is set (CI sets it and installs the extra), where they fail instead."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        message = f"the pixel references need the `reference` extra ({exc})"
        if os.environ.get("RELABEL_REQUIRE_REFERENCE"):
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def reference() -> ModuleType:
    """`imagecorruptions`, the maintained ImageNet-C code, imported here only."""
    return reference_module("imagecorruptions")


@pytest.fixture(scope="module")
def cv2() -> ModuleType:
    """OpenCV, which `make_imagenet_c.py` calls (it comes with the `reference` extra)."""
    return reference_module("cv2")


@pytest.fixture(scope="module")
def pixels() -> np.ndarray:
    """The cat photo at 160 × 120 as an array: landscape, so a swapped axis shows; small, so the grid is quick."""
    return np.asarray(Image.fromarray(skimage.data.chelsea()).resize((160, 120), Image.Resampling.BICUBIC))


def reference_corrupt(reference: ModuleType, pixels: np.ndarray, name: str, severity: int, seed: int) -> np.ndarray:
    """imagecorruptions' result seeded as `perturb` is: `np.random.seed(seed)` for its global draws, and its own
    `seed=` for impulse noise and glass blur. The global generator is restored afterwards."""
    state = np.random.get_state()
    try:
        np.random.seed(seed)
        kwargs = {"seed": seed} if name in ("impulse_noise", "glass_blur") else {}
        return reference.corrupt(pixels, severity=severity, corruption_name=REFERENCE_NAMES.get(name, name), **kwargs)
    finally:
        np.random.set_state(state)


def mean_abs_diff(a: object, b: object) -> float:
    return float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).mean())


def sharpness(image: object) -> float:
    """Mean absolute difference between neighbouring pixels of the grey image: falls as an image blurs."""
    grey = np.asarray(image, np.float64).mean(axis=2)
    return float(np.abs(np.diff(grey, axis=0)).mean() + np.abs(np.diff(grey, axis=1)).mean())


class TestRegistry:
    def test_parameters_are_imagenet_c(self) -> None:
        assert {name: c.params for name, c in PERTURBATIONS.items()} == IMAGENET_C_PARAMS
        assert {name for name, c in PERTURBATIONS.items() if c.seeded} == SEEDED

    def test_all_fifteen_benchmark_corruptions(self) -> None:
        assert BENCHMARK_CORRUPTIONS == BENCHMARK and set(PERTURBATIONS) == {*BENCHMARK, "gaussian_blur"}

    def test_unknown_name_lists_the_known_ones(self, photo: Image.Image) -> None:
        with pytest.raises(EvaluationError, match=r"unknown perturbation 'spatter'; known: brightness, contrast, "):
            perturb(photo, "spatter", 1)
        with pytest.raises(EvaluationError, match="pixelate, shot_noise, snow, zoom_blur$"):
            get_perturbation("speckle_noise")


class TestAgainstImagecorruptions:
    """Pixels against `imagecorruptions`, the maintained ImageNet-C code for images of any size, before the JPEG
    step (which it leaves out). Ours rounds where it truncates, hence the ±1."""

    @pytest.mark.parametrize("severity", SEVERITIES)
    @pytest.mark.parametrize("name", sorted(set(PERTURBATIONS) - AS_MAKE_IMAGENET_C))
    def test_within_one_grey_level(self, reference: ModuleType, pixels: np.ndarray, name: str, severity: int) -> None:
        seed = 10 * severity + len(name)  # a different seed per case
        expected = reference_corrupt(reference, pixels, name, severity, seed).astype(int)
        diff = np.abs(perturb(pixels, name, severity, seed, benchmark_jpeg=False).astype(int) - expected)
        assert diff.max() <= 1

    @pytest.mark.slow
    def test_real_photos_at_the_robustness_base_view(self, reference: ModuleType) -> None:
        """Three ImageNet photos at 256 px on the short side (what `evaluate robustness` corrupts), seeded as its
        passes seed them (seed · 2³² + image id, here with seed 0 so that the reference can take it)."""
        for image_id, path in enumerate(sorted(shared("imagenet-sample").glob("*.JPEG"))[::400]):
            with Image.open(path) as image:
                rgb = image.convert("RGB")
            scale = 256 / min(rgb.size)
            pixels = np.asarray(
                rgb.resize((round(rgb.width * scale), round(rgb.height * scale)), Image.Resampling.BICUBIC)
            )
            for name in sorted(set(BENCHMARK) - AS_MAKE_IMAGENET_C):
                for severity in (1, 5):
                    expected = reference_corrupt(reference, pixels, name, severity, image_id).astype(int)
                    ours = perturb(pixels, name, severity, image_id, benchmark_jpeg=False).astype(int)
                    assert np.abs(ours - expected).max() <= 1, (path.name, name)

    def test_frost_textures_are_the_reference_files(self, reference: ModuleType) -> None:
        for texture in FROST_TEXTURES:
            ours = (resources.files("evaluator") / "resources" / "frost" / texture).read_bytes()
            assert ours == (resources.files(reference) / "frost" / texture).read_bytes(), texture

    def test_the_evaluator_needs_neither_opencv_nor_numba(self) -> None:
        heavy = "{'cv2', 'numba', 'imagecorruptions'}"
        code = f"import evaluator.perturbations, sys; print(sorted({heavy} & set(sys.modules)))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "[]"


class TestAgainstMakeImagenetC:
    """Frost and elastic transform against Hendrycks & Dietterich's `make_imagenet_c.py` steps, written here with
    OpenCV, scikit-image and scipy as that script calls them (its fixed 224 replaced by the image's height and
    width), before the JPEG step."""

    @staticmethod
    def frost_reference(cv2: ModuleType, pixels: np.ndarray, severity: int, seed: int) -> np.ndarray:
        keep, weight = IMAGENET_C_PARAMS["frost"][severity - 1]
        rng = np.random.RandomState(seed)
        name = FROST_TEXTURES[rng.randint(5)]  # the script's randint(5) over its six file names
        with resources.as_file(resources.files("evaluator") / "resources" / "frost" / name) as path:
            texture = cv2.imread(str(path))[..., ::-1]  # BGR → RGB
        h, w = pixels.shape[:2]
        top, left = rng.randint(0, texture.shape[0] - h), rng.randint(0, texture.shape[1] - w)
        return np.clip(keep * pixels.astype(np.float64) + weight * texture[top : top + h, left : left + w], 0, 255)

    @staticmethod
    def elastic_reference(cv2: ModuleType, pixels: np.ndarray, severity: int, seed: int) -> np.ndarray:
        from scipy.ndimage import map_coordinates

        alpha, sigma, shift = IMAGENET_C_PARAMS["elastic_transform"][severity - 1]
        rng = np.random.RandomState(seed)
        image = pixels.astype(np.float32) / 255
        h, w = image.shape[:2]
        mid, third = np.float32([h, w]) // 2, min(h, w) // 3
        before = np.float32([mid + third, [mid[0] + third, mid[1] - third], mid - third])
        after = before + rng.uniform(-shift, shift, size=(3, 2)).astype(np.float32)
        warp = cv2.getAffineTransform(before, after)
        image = cv2.warpAffine(image, warp, (w, h), borderMode=cv2.BORDER_REFLECT_101)
        shifts = [
            (skimage.filters.gaussian(rng.uniform(-1, 1, (h, w)), sigma, mode="reflect", truncate=3) * alpha).astype(
                np.float32
            )[..., None]
            for _ in "xy"
        ]
        rows, cols, chans = np.mgrid[:h, :w, :3]
        return map_coordinates(image, [rows + shifts[1], cols + shifts[0], chans], order=1, mode="reflect") * 255

    @pytest.mark.parametrize("shape", [(224, 224), (120, 160), (256, 300)])
    @pytest.mark.parametrize("severity", SEVERITIES)
    def test_frost(self, cv2: ModuleType, shape: tuple[int, int], severity: int) -> None:
        pixels = np.asarray(Image.fromarray(skimage.data.chelsea()).resize(shape[::-1], Image.Resampling.BICUBIC))
        for seed in range(4):
            expected = np.rint(self.frost_reference(cv2, pixels, severity, seed))
            ours = perturb(pixels, "frost", severity, seed, benchmark_jpeg=False)
            assert np.abs(ours - expected).max() <= 1, seed

    def test_frost_draws_the_first_five_photos_only(self, monkeypatch: pytest.MonkeyPatch) -> None:
        drawn: list[str] = []
        load = corruptions.frost_texture
        monkeypatch.setattr(corruptions, "frost_texture", lambda name: drawn.append(name) or load(name))
        pixels = np.zeros((32, 32, 3), np.uint8)
        for seed in range(60):
            perturb(pixels, "frost", 1, seed, benchmark_jpeg=False)
        assert set(drawn) == set(FROST_TEXTURES[:5])

    def test_frost_scales_a_photo_smaller_than_the_image(self) -> None:
        """Taller than the shortest photo (315 rows): the photo is scaled up first (the stated deviation)."""
        pixels = np.full((400, 300, 3), 100, np.uint8)
        out = perturb(pixels, "frost", 3, seed=5, benchmark_jpeg=False)
        assert out.shape == pixels.shape and out.std() > 1

    def test_warp_affine_by_whole_and_half_pixels(self) -> None:
        """dst(x, y) = src(x − 2, y − 1) exactly, reflect-101 beyond the edge; a half-pixel shift averages."""
        image = np.random.default_rng(3).random((6, 7, 3)).astype(np.float32)
        shifted = warp_affine(image, np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 1.0]]))
        rows, cols = reflect101(np.arange(6) - 1, 6), reflect101(np.arange(7) - 2, 7)
        assert rows.tolist() == [1, 0, 1, 2, 3, 4] and np.array_equal(shifted, image[rows][:, cols])
        half = warp_affine(image, np.array([[1.0, 0.0, 0.5], [0.0, 1.0, 0.0]]))
        assert np.allclose(half[:, 1:], (image[:, :-1] + image[:, 1:]) / 2)

    @pytest.mark.parametrize("shape", [(224, 224), (120, 160)])
    @pytest.mark.parametrize("severity", SEVERITIES)
    def test_elastic_transform(self, cv2: ModuleType, shape: tuple[int, int], severity: int) -> None:
        """The OpenCV of 2018 (which made the released files) rounds warpAffine's source point to 1/32 pixel, as
        ours does; OpenCV 5.0 (installed here) interpolates at the exact point: up to 2 grey levels apart, rarely."""
        pixels = np.asarray(Image.fromarray(skimage.data.chelsea()).resize(shape[::-1], Image.Resampling.BICUBIC))
        for seed in (2, 9):
            expected = np.rint(np.clip(self.elastic_reference(cv2, pixels, severity, seed), 0, 255))
            diff = np.abs(perturb(pixels, "elastic_transform", severity, seed, benchmark_jpeg=False) - expected)
            assert diff.max() <= 2 and (diff > 1).mean() < 1e-3 and diff.mean() < 0.1, seed


class TestBenchmarkJpeg:
    def test_every_corruption_is_saved_as_the_released_files_were(self, photo: Image.Image) -> None:
        raw = perturb(photo, "gaussian_noise", 2, seed=4, benchmark_jpeg=False)
        buffer = io.BytesIO()
        raw.save(buffer, format="JPEG", quality=85, optimize=True)  # make_imagenet_c.py's save
        expected = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
        assert np.array_equal(np.asarray(perturb(photo, "gaussian_noise", 2, seed=4)), expected)
        assert mean_abs_diff(raw, expected) > 1  # the step does change the pixels

    def test_the_jpeg_corruption_is_saved_twice(self, photo: Image.Image) -> None:
        once = perturb(photo, "jpeg", 1, benchmark_jpeg=False)
        buffer = io.BytesIO()
        once.save(buffer, format="JPEG", quality=85, optimize=True)
        assert np.array_equal(np.asarray(perturb(photo, "jpeg", 1)), np.asarray(Image.open(buffer).convert("RGB")))

    def test_flag_must_be_a_bool(self, photo: Image.Image) -> None:
        with pytest.raises(EvaluationError, match="benchmark_jpeg must be True or False, got 'no'"):
            perturb(photo, "jpeg", 1, benchmark_jpeg="no")  # type: ignore[arg-type]


class TestSeverity:
    @pytest.mark.parametrize("name", sorted(set(IMAGENET_C_PARAMS) - NOT_DISTANCE_MONOTONE))
    def test_distance_from_the_clean_photo_rises_with_severity(self, photo: Image.Image, name: str) -> None:
        distances = [mean_abs_diff(perturb(photo, name, s, seed=1), photo) for s in SEVERITIES]
        assert all(a < b for a, b in zip(distances, distances[1:])), distances

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_elastic_transform_moves_more_within_each_regime(self, photo: Image.Image, seed: int) -> None:
        distances = [mean_abs_diff(perturb(photo, "elastic_transform", s, seed=seed), photo) for s in SEVERITIES]
        assert distances[0] < distances[1] and distances[2] < distances[3] < distances[4], distances
        assert min(distances[:2]) > max(distances[2:]), distances  # the large shifts move more

    @pytest.mark.parametrize("seed", [1, 2, 3])
    def test_frost_hides_more_of_the_photo_with_severity(self, photo: Image.Image, seed: int) -> None:
        clean = np.asarray(photo, np.float64).ravel()
        correlations = [
            np.corrcoef(np.asarray(perturb(photo, "frost", s, seed=seed), np.float64).ravel(), clean)[0, 1]
            for s in SEVERITIES
        ]
        assert all(a > b for a, b in zip(correlations, correlations[1:])), correlations

    @pytest.mark.parametrize("name", BLURS)
    def test_blurs_lose_sharpness_with_severity(self, photo: Image.Image, name: str) -> None:
        values = [sharpness(photo)] + [sharpness(perturb(photo, name, s, seed=1)) for s in SEVERITIES]
        assert all(a > b for a, b in zip(values, values[1:])), values

    @pytest.mark.parametrize("severity", [0, 6, -1, 2.0, True, "3"])
    def test_outside_one_to_five(self, photo: Image.Image, severity: object) -> None:
        with pytest.raises(EvaluationError, match="severity must be one of 1, 2, 3, 4, 5, got"):
            perturb(photo, "jpeg", severity)


class TestSeeds:
    @pytest.mark.parametrize("name", sorted(IMAGENET_C_PARAMS))
    def test_same_seed_same_pixels(self, photo: Image.Image, name: str) -> None:
        first, again = perturb(photo, name, 3, seed=42), perturb(photo, name, 3, seed=42)
        assert np.array_equal(np.asarray(first), np.asarray(again))

    @pytest.mark.parametrize("name", sorted(IMAGENET_C_PARAMS))
    def test_another_seed_changes_only_the_random_ones(self, photo: Image.Image, name: str) -> None:
        first, other = np.asarray(perturb(photo, name, 3, seed=1)), np.asarray(perturb(photo, name, 3, seed=2))
        assert np.array_equal(first, other) == (name not in SEEDED)

    @pytest.mark.parametrize("name", sorted(SEEDED))
    def test_seeds_past_32_bits(self, name: str) -> None:
        """`evaluate robustness` seeds with seed · 2³² + image id: the high word counts too."""
        pixels = np.asarray(Image.fromarray(skimage.data.chelsea()).resize((64, 48)))
        high = perturb(pixels, name, 3, seed=(1 << 32) + 5)
        assert np.array_equal(high, perturb(pixels, name, 3, seed=(1 << 32) + 5))
        assert not np.array_equal(high, perturb(pixels, name, 3, seed=5))

    def test_negative_seed(self, photo: Image.Image) -> None:
        with pytest.raises(EvaluationError, match="seed must be an integer ≥ 0, got -1"):
            perturb(photo, "shot_noise", 1, seed=-1)


class TestTypes:
    @pytest.mark.parametrize("name", sorted(IMAGENET_C_PARAMS))
    def test_pil_in_pil_out_same_size(self, photo: Image.Image, name: str) -> None:
        out = perturb(photo, name, 5)
        assert isinstance(out, Image.Image) and (out.mode, out.size) == ("RGB", photo.size)

    @pytest.mark.parametrize("name", sorted(IMAGENET_C_PARAMS))
    def test_array_in_array_out_even_for_tiny_images(self, name: str) -> None:
        pixels = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
        out = perturb(pixels, name, 5)
        assert isinstance(out, np.ndarray) and (out.dtype, out.shape) == (np.uint8, (5, 7, 3))
        assert out.flags.writeable and not np.shares_memory(out, pixels)

    def test_array_and_pil_agree(self, photo: Image.Image) -> None:
        from_array = perturb(np.asarray(photo), "motion_blur", 2, seed=3)
        assert np.array_equal(from_array, np.asarray(perturb(photo, "motion_blur", 2, seed=3)))

    @pytest.mark.parametrize(
        ("image", "message"),
        [
            (Image.new("L", (4, 4)), "image mode is 'L', expected 'RGB'"),
            (np.zeros((4, 4, 3), np.float32), r"uint8 \(H, W, 3\), got float32 \(4, 4, 3\)"),
            (np.zeros((4, 4), np.uint8), r"got uint8 \(4, 4\)"),
            ([[0]], "must be a PIL image or a numpy array, got list"),
        ],
    )
    def test_refused(self, image: object, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            perturb(image, "contrast", 1)


class TestAgainstImageNetC:
    """The corruption alone (no JPEG step) against ImageNet-C's own operations where they are available here
    (skimage, PIL), and the behaviours the reviews pinned down (motion blur's direction, glass blur's copies)."""

    def test_gaussian_blur_is_skimage_gaussian(self, photo: Image.Image) -> None:
        expected = skimage.filters.gaussian(np.asarray(photo) / 255.0, sigma=4, channel_axis=-1) * 255
        out = np.asarray(perturb(photo, "gaussian_blur", 4, benchmark_jpeg=False))
        assert np.abs(out - expected).max() <= 0.5 + 1e-3

    def test_brightness_is_the_hsv_round_trip(self, photo: Image.Image) -> None:
        hsv = skimage.color.rgb2hsv(np.asarray(photo) / 255.0)
        hsv[..., 2] = np.clip(hsv[..., 2] + 0.3, 0, 1)
        expected = skimage.color.hsv2rgb(hsv) * 255
        out = np.asarray(perturb(photo, "brightness", 3, benchmark_jpeg=False))
        assert np.abs(out - expected).max() <= 0.5 + 1e-3

    def test_black_turns_grey(self) -> None:
        out = perturb(np.zeros((2, 2, 3), np.uint8), "brightness", 5, benchmark_jpeg=False)
        assert (out == 128).all()  # V = 0 + 0.5 -> 127.5, rounded half to even

    def test_contrast_pulls_towards_the_channel_means(self) -> None:
        pixels = np.array([[[0, 100, 200], [200, 100, 0]]], np.uint8)
        assert perturb(pixels, "contrast", 1, benchmark_jpeg=False).tolist() == [[[60, 100, 140], [140, 100, 60]]]

    def test_jpeg_is_a_pil_round_trip_at_the_pinned_quality(self, photo: Image.Image) -> None:
        buffer = io.BytesIO()
        photo.save(buffer, format="JPEG", quality=10)
        expected = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
        assert np.array_equal(np.asarray(perturb(photo, "jpeg", 4, benchmark_jpeg=False)), expected)

    def test_pixelate_of_224_matches_imagenet_c(self) -> None:
        """make_imagenet_c.py scales back up with BOX, imagecorruptions with NEAREST (ours): at 224 px the same."""
        square = Image.fromarray(skimage.data.chelsea()).resize((224, 224))
        for severity, side in zip(SEVERITIES, (134, 112, 89, 67, 56)):
            small = square.resize((side, side), Image.Resampling.BOX)
            expected = small.resize((224, 224), Image.Resampling.BOX)
            assert np.array_equal(np.asarray(perturb(square, "pixelate", severity, benchmark_jpeg=False)), expected)

    def test_impulse_noise_hits_the_pinned_share(self) -> None:
        grey = np.full((200, 200, 3), 128, np.uint8)
        out = perturb(grey, "impulse_noise", 5, seed=0, benchmark_jpeg=False)
        assert (out != 128).mean() == pytest.approx(0.27, abs=0.01)
        assert set(np.unique(out).tolist()) == {0, 128, 255}

    def test_gaussian_noise_has_the_pinned_sigma(self) -> None:
        grey = np.full((200, 200, 3), 128, np.uint8)
        out = perturb(grey, "gaussian_noise", 1, seed=0, benchmark_jpeg=False).astype(np.float64) / 255
        assert out.std() == pytest.approx(0.08, abs=0.003)

    def test_shot_noise_variance_follows_the_photon_count(self) -> None:
        grey = np.full((200, 200, 3), 128, np.uint8)
        out = perturb(grey, "shot_noise", 1, seed=0, benchmark_jpeg=False).astype(np.float64) / 255  # var = x / c
        assert out.var() == pytest.approx((128 / 255) / 60, rel=0.05)

    def test_blurs_keep_a_flat_image_flat(self) -> None:
        flat = np.full((40, 50, 3), (10, 120, 200), np.uint8)
        for name in ("gaussian_blur", "motion_blur", "pixelate"):
            assert np.array_equal(perturb(flat, name, 5, seed=4, benchmark_jpeg=False), flat), name
        # ImageNet-C's defocus kernel sums to 1.0108 at severity 5 (anti-aliasing after normalising): kept as is
        out = perturb(flat, "defocus_blur", 5, benchmark_jpeg=False)
        assert out.tolist() == np.full((40, 50, 3), (10, 121, 202)).tolist()

    def test_motion_kernel_reads_ahead_along_the_angle(self) -> None:
        """ImageMagick MotionBlurImage: out(y, x) sums in(y + dy, x + dx) for taps i·(sin, cos) of the angle."""
        assert [(dy, dx) for _, dy, dx in motion_kernel(10, 3, 0)] == [(0, i) for i in range(21)]
        assert [(dy, dx) for _, dy, dx in motion_kernel(10, 3, 90)] == [(i, 0) for i in range(21)]
        assert [(dy, dx) for _, dy, dx in motion_kernel(2, 1, 45)][1:] == [(1, 1), (1, 1), (2, 2), (3, 3)]
        weights = [w for w, _, _ in motion_kernel(15, 5, 10)]
        assert sum(weights) == pytest.approx(1) and weights == sorted(weights, reverse=True)

    @pytest.mark.parametrize("seed", [0, 1, 2, 3])
    def test_motion_blur_smears_a_dot_backwards(self, seed: int) -> None:
        """A bright dot trails towards −(cos, sin) of the drawn angle (the mirrored kernel smeared it forwards)."""
        dot = np.zeros((64, 64, 3), np.uint8)
        dot[32, 32] = 255
        out = perturb(dot, "motion_blur", 1, seed=seed, benchmark_jpeg=False).max(axis=2)
        angle = np.random.RandomState(seed).uniform(-45, 45)  # the draw motion_blur makes from this seed
        assert out[:, 33:].max() == 0 and out[:, :32].max() > 0  # |angle| < 45°: always leftwards
        other_side = out[33:] if angle > 0 else out[:32]  # angle > 0 (clockwise, rows down): the smear goes up
        assert other_side.max() == 0, angle

    def test_glass_blur_copies_rather_than_swaps(self) -> None:
        """The reference's `x[a], x[b] = x[b], x[a]` on an (H, W, C) array swaps pixel views, so it copies x[b]
        into x[a]; the vectorised chain following equals that plain loop."""
        h, w, delta, passes = 13, 17, 2, 3
        x = np.arange(h * w).reshape(h, w, 1)  # each pixel shows its own index
        rng = np.random.RandomState(5)
        for _ in range(passes):
            for r in range(h - delta, delta, -1):
                for c in range(w - delta, delta, -1):
                    dx, dy = rng.randint(-delta, delta, size=(2,))
                    x[r, c], x[r + dy, c + dx] = x[r + dy, c + dx], x[r, c]
        assert np.array_equal(_glass_sources(h, w, delta, passes, np.random.RandomState(5)), x.ravel())
        assert len(np.unique(x)) < h * w  # copies, not a permutation: some pixels are now shown twice


class TestTextTypos:
    TEXT = "a photo of a great white shark swimming near the surface of the ocean on a bright day " * 3

    def test_rate_rises_with_severity(self) -> None:
        changed = [
            np.mean([edit_distance(self.TEXT, perturb_text(self.TEXT, s, seed)) for seed in range(30)])
            for s in SEVERITIES
        ]
        assert all(a < b for a, b in zip(changed, changed[1:])), changed
        letters = sum(c.isalpha() for c in self.TEXT)
        # each typo costs 1 or 2 edits; allow for typos that cancel or touch neighbours
        assert changed[0] == pytest.approx(TYPO_RATES[0] * letters * 1.25, rel=0.5)

    def test_same_seed_same_text(self) -> None:
        assert perturb_text(self.TEXT, 4, seed=9) == perturb_text(self.TEXT, 4, seed=9)
        assert perturb_text(self.TEXT, 4, seed=9) != perturb_text(self.TEXT, 4, seed=10)

    def test_only_letters_are_touched(self) -> None:
        text = "1234 -- 5678, 90!"
        assert perturb_text(text, 5, seed=0) == text

    def test_typos_are_keyboard_neighbours(self) -> None:
        typed = perturb_text("g" * 200, 5, seed=1)
        assert set(typed) <= set("gtyfhvbr") and typed != "g" * 200

    def test_case_is_kept(self) -> None:
        assert perturb_text("G" * 200, 5, seed=1).isupper()

    @pytest.mark.parametrize(("text", "severity", "message"), [(3, 1, "text must be a str"), ("a", 0, "severity")])
    def test_refused(self, text: object, severity: int, message: str) -> None:
        with pytest.raises(EvaluationError, match=message):
            perturb_text(text, severity)


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance, by rapidfuzz (the textbook dynamic programme in Python took 10 s for this test)."""
    return Levenshtein.distance(a, b)
