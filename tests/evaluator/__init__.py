"""Tests of the pure scoring core: scoring, model reliability, annotator agreement and perturbations."""
