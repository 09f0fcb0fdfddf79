"""Tests of the model adapters: the OpenAI-compatible client against a stub server, real EfficientNet-Lite0 weights
and tiny random Hugging Face models."""
