"""Perturbations: pinned ImageNet-C parameters, strength rising with severity, seeds, types, text typos."""

from __future__ import annotations

import io

import numpy as np
import pytest
import skimage.color
import skimage.data
import skimage.filters
from PIL import Image

from evaluator import EvaluationError
from evaluator.perturbations import (
    PERTURBATIONS,
    SEVERITIES,
    TYPO_RATES,
    get_perturbation,
    perturb,
    perturb_text,
)

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
}
SEEDED = {"gaussian_noise", "shot_noise", "impulse_noise", "motion_blur"}
BLURS = ("gaussian_blur", "defocus_blur", "motion_blur", "pixelate", "contrast")


@pytest.fixture(scope="module")
def photo() -> Image.Image:
    """A real photo (the chelsea cat, bundled with scikit-image) at 224 px on the short side, as a model sees it."""
    return Image.fromarray(skimage.data.chelsea()).resize((336, 224), Image.Resampling.BICUBIC)


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

    def test_unknown_name_lists_the_known_ones(self, photo: Image.Image) -> None:
        with pytest.raises(EvaluationError, match=r"unknown perturbation 'fog'; known: brightness, contrast, "):
            perturb(photo, "fog", 1)
        with pytest.raises(EvaluationError, match="pixelate, shot_noise"):
            get_perturbation("snow")


class TestSeverity:
    @pytest.mark.parametrize("name", sorted(IMAGENET_C_PARAMS))
    def test_distance_from_the_clean_photo_rises_with_severity(self, photo: Image.Image, name: str) -> None:
        distances = [mean_abs_diff(perturb(photo, name, s, seed=1), photo) for s in SEVERITIES]
        assert all(a < b for a, b in zip(distances, distances[1:])), distances

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
    """Where ImageNet-C's own operation is available here (skimage, PIL), the result agrees with it."""

    def test_gaussian_blur_is_skimage_gaussian(self, photo: Image.Image) -> None:
        expected = skimage.filters.gaussian(np.asarray(photo) / 255.0, sigma=4, channel_axis=-1) * 255
        assert np.abs(np.asarray(perturb(photo, "gaussian_blur", 4)) - expected).max() <= 0.5 + 1e-3

    def test_brightness_is_the_hsv_round_trip(self, photo: Image.Image) -> None:
        hsv = skimage.color.rgb2hsv(np.asarray(photo) / 255.0)
        hsv[..., 2] = np.clip(hsv[..., 2] + 0.3, 0, 1)
        expected = skimage.color.hsv2rgb(hsv) * 255
        assert np.abs(np.asarray(perturb(photo, "brightness", 3)) - expected).max() <= 0.5 + 1e-3

    def test_black_turns_grey(self) -> None:
        out = perturb(np.zeros((2, 2, 3), np.uint8), "brightness", 5)
        assert (out == 128).all()  # V = 0 + 0.5 -> 127.5, rounded half to even

    def test_contrast_pulls_towards_the_channel_means(self) -> None:
        pixels = np.array([[[0, 100, 200], [200, 100, 0]]], np.uint8)
        assert perturb(pixels, "contrast", 1).tolist() == [[[60, 100, 140], [140, 100, 60]]]

    def test_jpeg_is_a_pil_round_trip_at_the_pinned_quality(self, photo: Image.Image) -> None:
        buffer = io.BytesIO()
        photo.save(buffer, format="JPEG", quality=10)
        expected = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"))
        assert np.array_equal(np.asarray(perturb(photo, "jpeg", 4)), expected)

    def test_pixelate_of_224_matches_imagenet_c(self) -> None:
        square = Image.fromarray(skimage.data.chelsea()).resize((224, 224))
        expected = square.resize((67, 67), Image.Resampling.BOX).resize((224, 224), Image.Resampling.BOX)
        assert np.array_equal(np.asarray(perturb(square, "pixelate", 4)), np.asarray(expected))

    def test_impulse_noise_hits_the_pinned_share(self) -> None:
        grey = np.full((200, 200, 3), 128, np.uint8)
        out = perturb(grey, "impulse_noise", 5, seed=0)
        assert (out != 128).mean() == pytest.approx(0.27, abs=0.01)
        assert set(np.unique(out).tolist()) == {0, 128, 255}

    def test_gaussian_noise_has_the_pinned_sigma(self) -> None:
        grey = np.full((200, 200, 3), 128, np.uint8)
        out = perturb(grey, "gaussian_noise", 1, seed=0).astype(np.float64) / 255
        assert out.std() == pytest.approx(0.08, abs=0.003)

    def test_shot_noise_variance_follows_the_photon_count(self) -> None:
        grey = np.full((200, 200, 3), 128, np.uint8)
        out = perturb(grey, "shot_noise", 1, seed=0).astype(np.float64) / 255  # c = 60: var = x / c
        assert out.var() == pytest.approx((128 / 255) / 60, rel=0.05)

    def test_blurs_keep_a_flat_image_flat(self) -> None:
        flat = np.full((40, 50, 3), (10, 120, 200), np.uint8)
        for name in ("gaussian_blur", "motion_blur", "pixelate"):
            assert np.array_equal(perturb(flat, name, 5, seed=4), flat), name
        # ImageNet-C's defocus kernel sums to 1.0108 at severity 5 (anti-aliasing after normalising): kept as is
        assert perturb(flat, "defocus_blur", 5).tolist() == np.full((40, 50, 3), (10, 121, 202)).tolist()


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
    """Levenshtein distance, by the textbook dynamic programme."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]
