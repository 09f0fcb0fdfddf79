"""Tests of the pure scoring core: scoring, reliability parts and perturbations."""
