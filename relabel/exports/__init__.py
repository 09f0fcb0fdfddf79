"""Snapshots out: ReaL-style real.json, JSON Lines, CSV, Label Studio tasks and a Hugging Face `datasets` folder
(`formats`, registry `EXPORT_FORMATS`; `hf`). Files and folders are written whole or not at all.
"""
