"""ReGT studio: re-annotate ImageNet-style classification data and re-score models against the cleaned labels.

One sub-package per stage, in the order the data flows: `ingest` (images and original labels in), `sources` (earlier
relabeling efforts and model predictions in), `suggest` (model suggestions), `decisions` (what annotators record, and
the rules that say which of it stands), `votes` (every answer aggregated into a consensus), `review` (the studio's
service and the leads' numbers), `snapshots` (frozen ReGT), `interop` and `exports` (other tools' files in and out),
`evaluation` (scores against ImGT and snapshots, reliability, the report) and `planning` (where review matters next).
`common` is the foundation under all of them and `cli` the thin command-line edge over them; a stage imports only
the stages before it (the layers contract in pyproject.toml).
"""

__version__ = "0.1.0"
