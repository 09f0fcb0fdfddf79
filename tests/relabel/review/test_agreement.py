"""Inter-annotator agreement of a dataset's current decisions: the numbers by hand, datasets by name and id."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.enums import Role, Verdict
from db.models import Dataset, Image
from relabel.common.errors import NotFoundError
from relabel.decisions.annotations import add_user, record_annotation
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.review.agreement import agreement_report
from tests import images


@pytest.fixture
def image_ids(engine, vocab, tmp_path: Path) -> list[int]:
    root = tmp_path / "r"
    for name in ("n01440764_a.jpg", "n01440764_b.jpg", "n02123045_c.jpg", "n02123045_d.jpg"):
        images.photo(root / name, color=(len(name) * 3 + ord(name[-5]), 50, 50))
    ingest_dataset(
        engine, plan_ingest(root, vocab), dataset="d", root=root, vocab=vocab, show_progress=False, workers=1
    )
    for name, role in (("ann", Role.annotator), ("bob", Role.annotator), ("lead", Role.lead)):
        add_user(engine, name, role)
    with Session(engine) as s:
        return list(s.scalars(select(Image.id).order_by(Image.path)))


class TestAgreementReport:
    def record(self, engine, image_id: int, user: str, verdict: Verdict, classes=(), adjudicate=False) -> int:
        return record_annotation(
            engine, image_id=image_id, user=user, verdict=verdict, classes=classes, adjudicate=adjudicate
        )

    def test_numbers_by_hand(self, engine, image_ids) -> None:
        i0, i1, i2, i3 = image_ids
        self.record(engine, i0, "ann", Verdict.labels, [0])
        self.record(engine, i0, "bob", Verdict.labels, [0])
        self.record(engine, i1, "ann", Verdict.labels, [0, 1])
        self.record(engine, i1, "bob", Verdict.labels, [0])
        self.record(engine, i2, "ann", Verdict.none_fit)
        self.record(engine, i2, "bob", Verdict.labels, [5])  # superseded by bob's next decision
        self.record(engine, i2, "bob", Verdict.none_fit)
        self.record(engine, i3, "ann", Verdict.labels, [1])
        self.record(engine, i1, "lead", Verdict.labels, [0], adjudicate=True)
        self.record(engine, i3, "lead", Verdict.labels, [1], adjudicate=True)

        report = agreement_report(engine, "d")
        # ann/bob share i0 ({0} = {0}), i1 ({0,1} ≠ {0}), i2 (Z = Z). Label counts over the 6 pairable values:
        # {0}: 3, {0,1}: 1, Z: 2, so n = 6 and Σ n_c² = 14.
        assert (report.dataset, report.n_items, report.n_multi_rated, report.n_ratings) == ("d", 4, 3, 7)
        assert (report.n_annotators, report.n_pairs, report.n_adjudicated) == (2, 1, 2)
        (pair,) = report.pairs
        # p_o = 2/3; p_e = 1/3·2/3 ({0}) + 1/3·1/3 (Z) = 1/3; κ = (2/3 − 1/3) / (2/3).
        assert (pair.annotator_a, pair.annotator_b, pair.n_items) == ("ann", "bob", 3)
        assert pair.kappa == pytest.approx(0.5)
        # P̄ = 2/3; π = (1/2, 1/6, 1/3); P_e = 7/18; κ = (2/3 − 7/18) / (11/18) = 5/11.
        assert report.percent_agreement == pytest.approx(2 / 3)
        assert report.fleiss_kappa == pytest.approx(5 / 11)
        # D_e = (36 − 14 − 2·3·1·sim) / 30 and D_o = 2·(1 − sim) / 6, with sim({0}, {0,1}) = 0, 1/2, 1/3.
        assert report.alpha == pytest.approx({"nominal": 6 / 11, "jaccard": 14 / 19, "masi": 2 / 3})
        ann, bob = report.reference
        assert (ann.annotator, ann.n_items, ann.exact, ann.mean_jaccard) == ("ann", 2, 0.5, 0.75)
        assert (bob.annotator, bob.n_items, bob.exact, bob.mean_jaccard) == ("bob", 1, 1.0, 1.0)

    def test_dataset_by_id_and_unknown_names(self, engine, image_ids) -> None:
        self.record(engine, image_ids[0], "ann", Verdict.unclear)
        self.record(engine, image_ids[0], "bob", Verdict.unclear)
        with Session(engine) as s:
            dataset_id = s.scalars(select(Dataset.id)).one()
        report = agreement_report(engine, dataset_id)
        assert (report.dataset, report.n_multi_rated, report.percent_agreement) == ("d", 1, 1.0)
        assert agreement_report(engine).n_ratings == 2
        with pytest.raises(NotFoundError, match="unknown dataset 'nope'; known: d"):
            agreement_report(engine, "nope")
        with pytest.raises(NotFoundError, match="dataset id 999 does not exist"):
            agreement_report(engine, 999)
