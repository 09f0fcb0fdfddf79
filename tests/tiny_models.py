"""Tiny random Hugging Face models, built from configs and saved with their processors into a folder.

The adapters then load them with their real `from_pretrained(path)` code, offline. Weights are random (seeded), so
outputs are meaningless but deterministic. Tokenizers are byte-level with no merges: every byte is a token.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers.pre_tokenizers import ByteLevel
from transformers import (
    CLIPConfig,
    CLIPImageProcessorPil,
    CLIPModel,
    CLIPProcessor,
    CLIPTokenizer,
    LlavaConfig,
    LlavaForConditionalGeneration,
    LlavaProcessor,
    Qwen2Tokenizer,
    Qwen2VLConfig,
    Qwen2VLForConditionalGeneration,
    Qwen2VLImageProcessorPil,
    SiglipConfig,
    SiglipImageProcessorPil,
    SiglipModel,
    SiglipProcessor,
    ViTConfig,
    ViTForImageClassification,
    ViTImageProcessorPil,
)

from relabel.common.vocabulary import load_builtin

SIDE, PATCH = 32, 8  # image side and patch size of every tiny vision tower: 16 patches
TINY = {"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 2, "num_attention_heads": 4}
VISION = {**TINY, "image_size": SIDE, "patch_size": PATCH}
START, END = "<|startoftext|>", "<|endoftext|>"

# A ChatML template in the style of Qwen2-VL / LLaVA-OneVision: images first, then the text, per message.
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% elif part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _byte_clip_tokenizer(max_length: int) -> CLIPTokenizer:
    """CLIP's BPE tokenizer on a byte vocabulary: every byte, and every byte at the end of a word."""
    chars = sorted(ByteLevel.alphabet())
    vocab = {c: i for i, c in enumerate(chars)}
    vocab.update({c + "</w>": len(chars) + i for i, c in enumerate(chars)})
    vocab.update({START: len(vocab), END: len(vocab) + 1})
    return CLIPTokenizer(vocab=vocab, merges=[], model_max_length=max_length)


def _text_config(tokenizer: CLIPTokenizer, max_length: int) -> dict[str, int]:
    eos = tokenizer.eos_token_id
    ids = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": eos, "pad_token_id": eos}
    return {**TINY, **ids, "vocab_size": len(tokenizer), "max_position_embeddings": max_length}


def save_tiny_clip(folder: Path) -> Path:
    """A CLIPModel (32-d towers, 16-d projection) with a CLIPProcessor (Pillow image processor)."""
    tokenizer = _byte_clip_tokenizer(77)
    config = CLIPConfig(text_config=_text_config(tokenizer, 77), vision_config=VISION, projection_dim=16)
    torch.manual_seed(0)
    CLIPModel(config).save_pretrained(folder)
    images = CLIPImageProcessorPil(size={"shortest_edge": SIDE}, crop_size={"height": SIDE, "width": SIDE})
    CLIPProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(folder)
    return folder


def save_tiny_siglip(folder: Path) -> Path:
    """A SiglipModel (sigmoid scores) with a SiglipProcessor; the byte tokenizer stands in for SentencePiece."""
    tokenizer = _byte_clip_tokenizer(16)
    config = SiglipConfig(text_config=_text_config(tokenizer, 16), vision_config=VISION)
    torch.manual_seed(0)
    model = SiglipModel(config)
    with torch.no_grad():
        model.logit_bias.fill_(-2.0)  # a real SigLIP has a negative bias; zero would hide a missing bias
    model.save_pretrained(folder)
    images = SiglipImageProcessorPil(size={"height": SIDE, "width": SIDE})
    SiglipProcessor(image_processor=images, tokenizer=tokenizer).save_pretrained(folder)
    return folder


def imagenet_id2label() -> dict[int, str]:
    """The 1000 ImageNet-1k labels as Hugging Face classifiers spell them: comma-separated synonyms."""
    return {c.index: ", ".join(dict.fromkeys([c.name, *c.synonyms])) for c in load_builtin().classes}


def save_tiny_vit(folder: Path, id2label: dict[int, str] | None = None) -> Path:
    """A ViTForImageClassification with 1000 ImageNet labels (or `id2label`) and a Pillow ViT processor."""
    labels = id2label if id2label is not None else imagenet_id2label()
    config = ViTConfig(
        **TINY, image_size=SIDE, patch_size=PATCH, id2label=labels, label2id={v: k for k, v in labels.items()}
    )
    torch.manual_seed(0)
    ViTForImageClassification(config).save_pretrained(folder)
    ViTImageProcessorPil(size={"height": SIDE, "width": SIDE}).save_pretrained(folder)
    return folder


def _chat_tokenizer() -> Qwen2Tokenizer:
    """A Qwen2-style byte-level tokenizer with ChatML and image special tokens."""
    tokenizer = Qwen2Tokenizer(vocab={c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}, merges=[])
    tokenizer.add_special_tokens(
        {"additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<image>"], "eos_token": "<|im_end|>"}
    )
    tokenizer.add_special_tokens({"pad_token": END})
    return tokenizer


def save_tiny_llava(folder: Path) -> Path:
    """A LlavaForConditionalGeneration (CLIP vision tower, Qwen2 text model) with a LlavaProcessor."""
    tokenizer = _chat_tokenizer()
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    text = {**TINY, "model_type": "qwen2", "vocab_size": len(tokenizer), "num_key_value_heads": 2}
    text.update(intermediate_size=64, max_position_embeddings=512, eos_token_id=eos, pad_token_id=pad, bos_token_id=pad)
    text["initializer_range"] = 0.2  # large random weights: answers then depend visibly on the image and prompt
    vision = {**VISION, "model_type": "clip_vision_model"}
    image_token = tokenizer.convert_tokens_to_ids("<image>")
    config = LlavaConfig(text_config=text, vision_config=vision, image_token_id=image_token, vision_feature_layer=-1)
    torch.manual_seed(0)
    model = LlavaForConditionalGeneration(config)
    model.generation_config.eos_token_id, model.generation_config.pad_token_id = eos, pad
    model.save_pretrained(folder)
    images = CLIPImageProcessorPil(size={"shortest_edge": SIDE}, crop_size={"height": SIDE, "width": SIDE})
    processor = LlavaProcessor(
        image_processor=images,
        tokenizer=tokenizer,
        chat_template=CHAT_TEMPLATE,
        patch_size=PATCH,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,  # the CLS token that the "default" strategy drops
    )
    processor.save_pretrained(folder)
    return folder


QWEN_CHAT_TEMPLATE = CHAT_TEMPLATE.replace("<image>\n", "<|vision_start|><|image_pad|><|vision_end|>")
QWEN_SPECIAL = ["<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>"]


def save_tiny_qwen2_vl(folder: Path) -> Path:
    """A Qwen2VLForConditionalGeneration saved like a hub checkpoint, video processor config included.

    In transformers 5 that video processor needs torchvision, so its config is written as a file (the class cannot
    be built here); the adapter then has to load the processor image-only.
    """
    tokenizer = Qwen2Tokenizer(vocab={c: i for i, c in enumerate(sorted(ByteLevel.alphabet()))}, merges=[])
    tokenizer.add_special_tokens({"additional_special_tokens": QWEN_SPECIAL, "eos_token": "<|im_end|>"})
    tokenizer.add_special_tokens({"pad_token": END})
    ids = {name: tokenizer.convert_tokens_to_ids(f"<|{name}|>") for name in ("vision_start", "vision_end")}
    rope = {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]}
    text = {**TINY, "intermediate_size": 64, "num_key_value_heads": 2, "vocab_size": len(tokenizer)}
    text.update(rope_parameters=rope, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    text.update(bos_token_id=tokenizer.pad_token_id, max_position_embeddings=512, initializer_range=0.2)
    vision = {"depth": 2, "embed_dim": 32, "hidden_size": 32, "num_heads": 4, "patch_size": 14, "spatial_merge_size": 2}
    config = Qwen2VLConfig(
        text_config=text,
        vision_config=vision,
        image_token_id=tokenizer.convert_tokens_to_ids("<|image_pad|>"),
        video_token_id=tokenizer.convert_tokens_to_ids("<|video_pad|>"),
        vision_start_token_id=ids["vision_start"],
        vision_end_token_id=ids["vision_end"],
    )
    torch.manual_seed(0)
    model = Qwen2VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    images = Qwen2VLImageProcessorPil(min_pixels=56 * 56, max_pixels=112 * 112)  # 4 to 16 merged image tokens
    images.save_pretrained(folder)
    (folder / "chat_template.jinja").write_text(QWEN_CHAT_TEMPLATE)
    (folder / "processor_config.json").write_text(json.dumps({"processor_class": "Qwen2VLProcessor"}))
    video = {
        "video_processor_type": "Qwen2VLVideoProcessor",
        "patch_size": 14,
        "temporal_patch_size": 2,
        "merge_size": 2,
    }
    (folder / "video_preprocessor_config.json").write_text(json.dumps(video))
    return folder
