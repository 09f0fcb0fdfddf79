"""ReGT studio: re-annotate ImageNet-style classification data and re-score models against the cleaned labels.

Data flows through the sub-modules in this order: `ingest` (images and original labels in), `sources` (earlier
relabeling efforts and model predictions in), `annotations` (annotators' decisions), `snapshots` (frozen ReGT),
`exports` (real.json, JSONL, CSV out). `cli` is the thin command-line edge over them.
"""

__version__ = "0.1.0"
