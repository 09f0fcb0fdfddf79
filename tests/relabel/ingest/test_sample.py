"""The 1000 real ImageNet photos of ../shared/data/imagenet-sample: ingest and check labels against file names."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.models import Image, Label
from relabel.ingest import ingest_dataset, plan_ingest
from tests.conftest import shared


@pytest.mark.slow
def test_ingest_imagenet_sample(engine, vocab) -> None:
    root = shared("imagenet-sample")
    plan = plan_ingest(root, vocab)
    assert plan.layout == "wnid-prefix" and len(plan.entries) == 1000
    report = ingest_dataset(engine, plan, dataset="sample", root=root, vocab=vocab, show_progress=False)
    assert report.status_counts == {"ok": 1000} and report.labels_written == 1000
    with Session(engine) as s:
        rows = s.execute(select(Image.path, Label.classes).join(Label, Label.image_id == Image.id)).all()
    assert len(rows) == 1000
    assert all(vocab.classes[classes[0]].wnid == path[:9] for path, classes in rows)
    assert sorted(c[0] for _, c in rows) == list(range(1000))  # one photo per class
