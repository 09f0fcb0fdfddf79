"""Ingest: read a dataset's files and original labels (ImGT) into the workspace.

`layouts` turns a directory (and label file or manifest) into a plan: image paths with their labels, validated
before anything is written. `service` checks each image and writes the plan in resumable batches.
"""

from relabel.ingest.layouts import LAYOUTS, IngestPlan, PlanEntry, plan_ingest
from relabel.ingest.service import IngestReport, ingest_dataset

__all__ = ["LAYOUTS", "IngestPlan", "IngestReport", "PlanEntry", "ingest_dataset", "plan_ingest"]
