"""Tests of the review service: the queue and the checks on every decision a card sends."""
