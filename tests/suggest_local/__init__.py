"""Tests of the local-model adapters: real EfficientNet-Lite0 weights and tiny random Hugging Face models."""
