"""A tiny random LLaVA (CLIP vision tower, Qwen2 text model) through HFVisionLanguageAdapter's real loading code."""

from __future__ import annotations

import hashlib
import importlib.util
import shutil
from pathlib import Path

import pytest
from PIL import Image

from relabel.common.errors import InputError, RelabelError
from relabel.suggest.adapters import load_adapter
from relabel.suggest.adapters.hf_vlm import HFVisionLanguageAdapter, chat_messages, fit_within
from relabel.suggest.types import ChatRequest, GenerativeAdapter, ImageRef
from tests.images import photo, truncated_jpeg
from tests.tiny_models import save_tiny_llava, save_tiny_qwen2_vl

IMAGE_TOKENS = 16  # (32 / 8) ** 2 patches, one <image> token each


def ref(path: Path, image_id: int = 0) -> ImageRef:
    return ImageRef(image_id, path, hashlib.sha256(path.read_bytes()).hexdigest(), path.name)


@pytest.fixture(scope="module")
def tiny_llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_llava(tmp_path_factory.mktemp("llava"))


@pytest.fixture(scope="module")
def vlm(tiny_llava: Path) -> HFVisionLanguageAdapter:
    adapter = load_adapter(f"hf-vlm:{tiny_llava}", device="cpu", batch_size=4)
    adapter.check()
    return adapter


@pytest.fixture
def requests_(tmp_path: Path) -> list[ChatRequest]:
    prompts = ["What is this?", "Name the main object in a few words.", "Which class?"]
    return [
        ChatRequest((ref(photo(tmp_path / f"{i}.jpg", (50 + 13 * i, 40), (80 * i, 60, 220 - 70 * i)), i),), p, None, 6)
        for i, p in enumerate(prompts)
    ]


def texts(outputs: list) -> list[str | None]:
    return [o.text for o in outputs]


class TestGenerate:
    def test_greedy_output_is_deterministic(self, vlm: HFVisionLanguageAdapter, requests_: list[ChatRequest]) -> None:
        assert isinstance(vlm, GenerativeAdapter)
        first, second = vlm.generate(requests_), vlm.generate(requests_)
        assert all(o.ok and isinstance(o.text, str) and o.text for o in first)
        assert texts(first) == texts(second)
        assert len(set(texts(first))) == 3  # different images and prompts give different answers

    def test_a_batch_gives_what_one_by_one_gives(
        self, vlm: HFVisionLanguageAdapter, tiny_llava: Path, requests_: list[ChatRequest]
    ) -> None:
        single = HFVisionLanguageAdapter(str(tiny_llava), device="cpu", batch_size=1)
        one_by_one = [single.generate([r])[0] for r in requests_]
        batched = vlm.generate(requests_)
        assert texts(batched) == texts(one_by_one)
        assert [o.usage for o in batched] == [o.usage for o in one_by_one]

    def test_usage_counts_prompt_and_new_tokens(
        self, vlm: HFVisionLanguageAdapter, requests_: list[ChatRequest]
    ) -> None:
        short = ChatRequest(requests_[0].images, "What is this?", None, 2)
        with_system = ChatRequest(requests_[0].images, "What is this?", "You label photos.", 6)
        outputs = vlm.generate([requests_[0], short, with_system])
        assert all(0 < o.usage["completion_tokens"] <= 6 for o in outputs)
        assert outputs[1].usage["completion_tokens"] <= 2
        assert outputs[0].usage["prompt_tokens"] > IMAGE_TOKENS
        assert outputs[2].usage["prompt_tokens"] > outputs[0].usage["prompt_tokens"]  # the system turn is sent
        assert outputs[1].text == vlm.generate([short])[0].text  # cut to its own limit inside a longer batch

    def test_several_images_in_one_request(self, vlm: HFVisionLanguageAdapter, requests_: list[ChatRequest]) -> None:
        pair = ChatRequest(requests_[0].images + requests_[1].images, "What is this?", None, 6)
        one, two = vlm.generate([requests_[0], pair])
        assert two.ok and two.usage["prompt_tokens"] == one.usage["prompt_tokens"] + IMAGE_TOKENS + 1

    def test_a_broken_image_fails_only_its_request(
        self, vlm: HFVisionLanguageAdapter, requests_: list[ChatRequest], tmp_path: Path
    ) -> None:
        broken = ChatRequest((ref(truncated_jpeg(tmp_path / "cut.jpg"), 9),), "What is this?")
        outputs = vlm.generate([requests_[0], broken, requests_[1]])
        assert [o.ok for o in outputs] == [True, False, True] and "cut.jpg" in (outputs[1].error or "")
        assert outputs[1].text is None
        assert texts([outputs[0], outputs[2]]) == texts(vlm.generate([requests_[0], requests_[1]]))

    def test_a_failing_batch_becomes_error_outputs(
        self, vlm: HFVisionLanguageAdapter, requests_: list[ChatRequest], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        def out_of_memory(**kwargs: object) -> None:
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

        monkeypatch.setattr(vlm.model, "generate", out_of_memory)
        outputs = vlm.generate(requests_)
        assert all(not o.ok and o.text is None and "out of memory" in (o.error or "") for o in outputs)

    def test_max_new_tokens_overrides_the_requests(self, tiny_llava: Path, requests_: list[ChatRequest]) -> None:
        adapter = HFVisionLanguageAdapter(str(tiny_llava), device="cpu", max_new_tokens=1)
        assert all(o.usage["completion_tokens"] == 1 for o in adapter.generate(requests_))
        assert adapter.describe()["max_new_tokens"] == 1


class TestLoading:
    def test_describe_records_the_model(self, vlm: HFVisionLanguageAdapter, tiny_llava: Path) -> None:
        described = vlm.describe()
        assert described["model_class"] == "LlavaForConditionalGeneration" and described["dtype"] == "float32"
        assert described["parameters"] > 0 and vlm.name == f"hf-vlm:{tiny_llava}"

    def test_without_chat_template_the_prompt_follows_the_image_tokens(
        self, tiny_llava: Path, tmp_path: Path, requests_: list[ChatRequest]
    ) -> None:
        folder = Path(shutil.copytree(tiny_llava, tmp_path / "plain"))
        (folder / "chat_template.jinja").unlink()
        adapter = HFVisionLanguageAdapter(str(folder), device="cpu")
        outputs = adapter.generate(requests_[:2])
        assert all(o.ok and o.text for o in outputs) and adapter.describe()["prompt_format"] != "chat template"
        expected = [IMAGE_TOKENS + len(r.prompt) for r in requests_[:2]]  # byte tokens: one per character
        assert [o.usage["prompt_tokens"] for o in outputs] == expected

    def test_a_missing_model_fails_at_check(self, tmp_path: Path) -> None:
        with pytest.raises(RelabelError, match="cannot load vision-language model.*HF_HUB_OFFLINE"):
            HFVisionLanguageAdapter(str(tmp_path / "nowhere"), device="cpu").check()

    def test_bad_options_are_input_errors(self) -> None:
        with pytest.raises(InputError, match="batch_size"):
            HFVisionLanguageAdapter("m", batch_size=0)
        with pytest.raises(InputError, match="max_new_tokens"):
            HFVisionLanguageAdapter("m", max_new_tokens=-3)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> HFVisionLanguageAdapter:
    folder = save_tiny_qwen2_vl(tmp_path_factory.mktemp("qwen2vl"))
    adapter = load_adapter(f"hf-vlm:{folder}", device="cpu", batch_size=2, max_new_tokens=5)
    adapter.check()
    return adapter


class TestQwen2VL:
    """Qwen-VL's processor builds a video processor that needs torchvision; the adapter loads it image-only."""

    def test_loads_and_answers_deterministically(
        self, qwen: HFVisionLanguageAdapter, requests_: list[ChatRequest]
    ) -> None:
        first, second = qwen.generate(requests_), qwen.generate(requests_)
        assert all(o.ok for o in first) and texts(first) == texts(second)
        info = qwen.describe()
        assert (
            info["model_class"] == "Qwen2VLForConditionalGeneration" and info["processor_class"] == "Qwen2VLProcessor"
        )
        assert qwen.processor.video_processor is None or importlib.util.find_spec("torchvision") is not None

    def test_the_image_is_encoded_into_the_prompt(
        self, qwen: HFVisionLanguageAdapter, requests_: list[ChatRequest]
    ) -> None:
        small, large = (
            ref(photo(requests_[0].images[0].path.parent / n, size))
            for n, size in (("s.jpg", (56, 56)), ("l.jpg", (112, 112)))
        )
        outputs = qwen.generate([ChatRequest((small,), "x"), ChatRequest((large,), "x")])
        # merged image tokens: (56/28)^2 = 4 and (112/28)^2 = 16, so the prompts differ by exactly 12 tokens
        assert outputs[1].usage["prompt_tokens"] - outputs[0].usage["prompt_tokens"] == 12


def test_chat_messages_put_images_before_the_prompt() -> None:
    img = Image.new("RGB", (4, 4))
    request = ChatRequest((), "Which class?", "Be brief.")
    messages = chat_messages(request, [img, img])
    assert [m["role"] for m in messages] == ["system", "user"]
    assert [part["type"] for part in messages[1]["content"]] == ["image", "image", "text"]
    assert messages[1]["content"][2]["text"] == "Which class?"


def test_fit_within_scales_down_only() -> None:
    assert fit_within(Image.new("RGB", (4000, 3000)), 1024).size == (1024, 768)
    assert fit_within(Image.new("RGB", (400, 300)), 1024).size == (400, 300)
    assert fit_within(Image.new("RGB", (4000, 3000)), None).size == (4000, 3000)
