"""Tests of suggestions: protocols, distractors, answer mapping and the resumable runner, with scripted models."""
