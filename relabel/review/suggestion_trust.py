"""Suggestion trust for leads: how annotators treat each run's suggestion, and how often an accepted one survives.

For every standing annotator decision made with a suggestion on screen (adjudications, and decisions since
superseded or undone, are left out, as in the dashboard's suggestion acceptance), the decision is:

- **accepted**: the annotator kept exactly the suggested class;
- **edited**: kept it beside other classes (the suggestion integrated into a multi-label answer);
- **rejected**: left it out.

*Confirmed or integrated* is accepted + edited, the ReGT paper's measure of annotators taking up an MLLM
suggestion (about half of the hard cases there). *Survives adjudication*: of the accepted or edited suggestions on
images a lead later adjudicated, the share whose suggested class the adjudication kept. Every share carries a 95 %
Wilson interval over decisions. Rows are grouped by run (with its model and protocol), by protocol, by model, and by
the suggestion's confidence (the score the run gave its top class: a classifier's probability, a VLM's mapping
score), in `CONFIDENCE_BINS`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.enums import SuggestionAction
from db.models import Annotation, ModelRun, Prediction
from evaluator.intervals import wilson_interval
from relabel.common.workspace import get_dataset
from relabel.decisions.log import current_decisions
from relabel.decisions.rules import Decision

CONFIDENCE_BINS = (0.0, 0.5, 0.8, 0.95, 1.0)  # [0, 0.5), [0.5, 0.8), [0.8, 0.95), [0.95, 1]
NO_SCORE = "no score"


@dataclass(frozen=True)
class Use:
    """One decision made with a suggestion on screen."""

    run: str
    model: str
    protocol: str
    suggested: int
    score: float | None
    action: SuggestionAction
    survived: bool | None  # None: the image was not adjudicated since, or the suggestion was rejected


@dataclass(frozen=True)
class Share:
    """k of n, with a 95 % Wilson interval; all None when n is 0."""

    k: int
    n: int
    value: float | None
    low: float | None
    high: float | None

    @classmethod
    def of(cls, k: int, n: int) -> Share:
        if n == 0:
            return cls(k, n, None, None, None)
        low, high = wilson_interval(np.array([k]), np.array([n]))
        return cls(k, n, k / n, float(low[0]), float(high[0]))


@dataclass(frozen=True)
class TrustRow:
    """One group of suggestions: how often each was accepted, integrated and kept."""

    group: str  # "run", "protocol", "model" or "confidence"
    name: str
    shown: int
    accepted: Share
    edited: Share
    rejected: Share
    taken_up: Share  # accepted or edited: confirmed or integrated
    survives: Share  # of those taken up on images adjudicated since, the suggested class kept


def confidence_bin(score: float | None) -> str:
    """The confidence group of a suggestion's top score, e.g. "0.80-0.95"; `NO_SCORE` without one."""
    if score is None:
        return NO_SCORE
    edges = CONFIDENCE_BINS
    for low, high in zip(edges, edges[1:]):
        if score < high or high == edges[-1]:
            return f"{low:.2f}-{high:.2f}"
    return f"{edges[-2]:.2f}-{edges[-1]:.2f}"


def trust_rows(uses: Iterable[Use]) -> list[TrustRow]:
    """The table: one row per run, protocol, model and confidence group (in that order, each sorted by name)."""
    groups: dict[tuple[str, str], list[Use]] = defaultdict(list)
    for u in uses:
        groups[("run", f"{u.run} ({u.model}, {u.protocol})")].append(u)
        groups[("protocol", u.protocol)].append(u)
        groups[("model", u.model)].append(u)
        groups[("confidence", confidence_bin(u.score))].append(u)
    order = {"run": 0, "protocol": 1, "model": 2, "confidence": 3}
    return [_row(g, name, groups[(g, name)]) for g, name in sorted(groups, key=lambda k: (order[k[0]], k[1]))]


def _row(group: str, name: str, uses: list[Use]) -> TrustRow:
    n = len(uses)
    count = {a: sum(u.action is a for u in uses) for a in SuggestionAction}
    taken = count[SuggestionAction.accepted] + count[SuggestionAction.edited]
    judged = [u.survived for u in uses if u.survived is not None]
    return TrustRow(
        group,
        name,
        n,
        Share.of(count[SuggestionAction.accepted], n),
        Share.of(count[SuggestionAction.edited], n),
        Share.of(count[SuggestionAction.rejected], n),
        Share.of(taken, n),
        Share.of(sum(judged), len(judged)),
    )


def suggestion_uses(engine: Engine, dataset: str | None = None) -> list[Use]:
    """Every standing annotator decision of the dataset made with a suggestion on screen, with the suggestion's
    run, model, protocol, top class and score, and whether a later adjudication kept the suggested class."""
    with Session(engine) as session:
        ds = get_dataset(session, dataset)
        assert ds.id is not None  # a stored dataset
        ds_id = ds.id
        conn = session.connection()
        standing = current_decisions(conn, ds_id)
        query = (
            select(
                col(Annotation.id),
                col(Annotation.image_id),
                col(Annotation.suggestion_action),
                col(Prediction.classes),
                col(Prediction.scores),
                col(ModelRun.name),
                col(ModelRun.model),
                col(ModelRun.protocol),
            )
            .join(Prediction, col(Prediction.id) == col(Annotation.suggestion_id))
            .join(ModelRun, col(ModelRun.id) == col(Prediction.run_id))
            .where(col(ModelRun.dataset_id) == ds_id, col(Annotation.is_adjudication).is_(False))
        )
        rows = conn.execute(query).all()
    return uses_from(rows, standing)


def uses_from(rows: Iterable[tuple], standing: Mapping[int, list[Decision]]) -> list[Use]:
    """`Use`s from (annotation id, image id, action, suggested classes, scores, run, model, protocol) rows, keeping
    the standing decisions only; an adjudication that stands on the image decides `survived`."""
    kept = {d.annotation_id for ds in standing.values() for d in ds if not d.is_adjudication}
    adjudicated = {
        image: set(adj[-1].classes)
        for image, ds in standing.items()
        if (adj := sorted((d for d in ds if d.is_adjudication), key=lambda d: d.annotation_id))
    }
    uses = []
    for ann_id, image, action, classes, scores, run, model, protocol in rows:
        action = SuggestionAction(getattr(action, "value", action))
        if ann_id not in kept or action is SuggestionAction.none or not classes:
            continue
        suggested = int(classes[0])
        taken = action is not SuggestionAction.rejected
        survived = (suggested in adjudicated[image]) if taken and image in adjudicated else None
        score = float(scores[0]) if scores else None
        uses.append(Use(run, model, protocol, suggested, score, action, survived))
    return uses


def suggestion_trust(engine: Engine, dataset: str | None = None) -> list[TrustRow]:
    """The suggestion-trust table of the dataset (see the module docstring)."""
    return trust_rows(suggestion_uses(engine, dataset))


def share_text(s: Share) -> str:
    """ "62 % (55-68 %, 80 of 129)", or "—" when nothing was counted."""
    if s.value is None or s.low is None or s.high is None:
        return "—"
    return f"{100 * s.value:.0f} % ({100 * s.low:.0f}-{100 * s.high:.0f} %, {s.k} of {s.n})"
