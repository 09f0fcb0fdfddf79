"""Scoring of model predictions against ImGT and ReGT references.

Pure functions on numpy arrays and small dataclasses: this package never imports gradio, torch or the
workspace database, so rescoring stored predictions against a new snapshot is cheap and testable in isolation.
`relabel` loads labels and predictions from the workspace and hands arrays to it.
"""
