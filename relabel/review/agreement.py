"""Inter-annotator agreement of a dataset's current decisions, for the leads' dashboard.

The maths is pure and lives in `evaluator.agreement`; this module reads the decisions, turns each into a label set
(its classes, {"Z"} for none_fit, {"X"} for unclear) and names the annotators.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, fields

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.enums import Verdict
from db.models import Dataset, User
from evaluator.agreement import NONE_FIT, UNCLEAR, AgreementSummary, Label, summarize_agreement
from relabel.common.errors import NotFoundError
from relabel.common.workspace import get_dataset
from relabel.decisions.log import current_decisions
from relabel.decisions.rules import Decision, adjudication


def decision_label(decision: Decision) -> Label:
    """The label set of one decision: its classes, {"Z"} for none_fit, {"X"} for unclear."""
    if decision.verdict is Verdict.none_fit:
        return frozenset({NONE_FIT})
    if decision.verdict is Verdict.unclear:
        return frozenset({UNCLEAR})
    return frozenset(decision.classes)


def ratings_from_decisions(
    decisions: Mapping[int, Sequence[Decision]], user_names: Mapping[int, str] | None = None
) -> tuple[dict[Hashable, dict[Hashable, Label]], dict[Hashable, Label]]:
    """Split `current_decisions` output into annotator ratings and the reference (the adjudication that settles
    the image, `relabel.decisions.rules.adjudication`).

    Annotators are keyed by `user_names[user_id]` when given, else by user id.
    """
    names: Mapping[int, Hashable] = user_names or {}
    ratings: dict[Hashable, dict[Hashable, Label]] = {}  # image id -> annotator -> label set
    reference: dict[Hashable, Label] = {}
    for image_id, image_decisions in decisions.items():
        adjudicated = adjudication(image_decisions)
        if adjudicated is not None:
            reference[image_id] = decision_label(adjudicated)
        row = {names.get(d.user_id, d.user_id): decision_label(d) for d in image_decisions if not d.is_adjudication}
        if row:
            ratings[image_id] = row
    return ratings, reference


@dataclass(frozen=True)
class AgreementReport(AgreementSummary):
    """`AgreementSummary` of a dataset's current decisions, annotators named by user name."""

    dataset: str
    n_adjudicated: int  # images with a lead's adjudication


def agreement_report(engine: Engine, dataset: str | int | None = None) -> AgreementReport:
    """Agreement among the annotators of `dataset` (name, id, or None for the only one) on their current decisions;
    adjudications are left out of the annotator matrix and serve as the reference."""
    with Session(engine) as session:
        row = session.get(Dataset, dataset) if isinstance(dataset, int) else get_dataset(session, dataset)
        if row is None:
            raise NotFoundError(f"dataset id {dataset} does not exist")
        assert row.id is not None  # a stored dataset
        names = {uid: name for uid, name in session.exec(select(col(User.id), col(User.name))).all() if uid is not None}
        decisions = current_decisions(session.connection(), row.id)
    ratings, reference = ratings_from_decisions(decisions, names)
    summary = summarize_agreement(ratings, reference)
    values = {f.name: getattr(summary, f.name) for f in fields(summary)}
    return AgreementReport(**values, dataset=row.name, n_adjudicated=len(reference))
