"""Tests of ingest: the layouts, the plan and the real ImageNet sample."""
