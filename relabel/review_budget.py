"""The review budget of a workspace (`relabel plan`): the posteriors of a vote-based snapshot and the stored runs'
top-1, read as arrays, and the forecast of `relabel.review_plan` on them.

The images are those of the snapshot, read as `relabel evaluate` reads a probabilistic snapshot
(`relabel.evaluation.references`): a voted pair carries its stored posterior, a label without one is certain, and
the images nobody rated (category U without a posterior) are left out of every run's score, as the evaluator leaves
them out by default. A run is scored on the images it answered or failed on (a failed reply is wrong; an
infrastructure error is never scored, `relabel.evaluation.runs`) that can hold a class at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.engine import session_scope
from db.models import Dataset, Snapshot
from relabel.active_review import NO_RUN
from relabel.errors import InputError
from relabel.evaluation.references import SNAPSHOT, load_reference
from relabel.evaluation.runs import align, load_run, select_runs
from relabel.posteriors import reads_votes
from relabel.review_plan import STABILITY, TARGET_HALFWIDTH, Plan, forecast
from relabel.snapshots import get_snapshot
from relabel.workspace import get_dataset


@dataclass(frozen=True)
class BudgetReport:
    """A forecast (`plan`) for the runs `run_names` (the plan's run indices) on the images of `snapshot`
    (`n_images`, `n_unrated` of them left out: nobody rated them)."""

    dataset: str
    snapshot: str
    rule: str
    n_images: int
    n_unrated: int
    run_names: list[str]
    n_scored: list[int]
    plan: Plan

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON values (`relabel plan --json`)."""
        p = self.plan
        runs = [
            {"run": name, "n_scored": n, "top1": _num(t), "halfwidth": _num(h), "reviews_until_target": k}
            for name, n, t, h, k in zip(self.run_names, self.n_scored, p.top1_now, p.halfwidth_now, p.reviews_per_run)
        ]
        order = [self.run_names[i] for i in p.ranking.order]
        return {
            "dataset": self.dataset,
            "snapshot": self.snapshot,
            "rule": self.rule,
            "n_images": self.n_images,
            "n_unrated": self.n_unrated,
            "pool": p.pool,
            "target_halfwidth": p.target_halfwidth,
            "stability": p.stability,
            "runs": runs,
            "ranking": order,
            "ranking_pairs": [
                {"above": a, "below": b, "probability": float(x), "tied": bool(t)}
                for a, b, x, t in zip(order, order[1:], p.ranking.probability, p.ranking.tied)
            ],
            "ranking_stability": p.ranking.stability,
            "reviews_until_halfwidth": p.reviews_halfwidth,
            "reviews_until_stable_ranking": p.reviews_ranking,
            "reviews": p.reviews,
        }


def plan_reviews(
    engine: Engine,
    *,
    dataset: str | None = None,
    snapshot: str | None = None,
    runs: Sequence[str] = (),
    target_halfwidth: float = TARGET_HALFWIDTH,
    stability: float = STABILITY,
) -> BudgetReport:
    """How many more reviews, in the active order, until each run's top-1 half-width from label uncertainty is
    within `target_halfwidth` points and the ranking of `runs` (default: every stored run) holds with `stability`
    (`relabel.review_plan.forecast`), from `snapshot` (default: the newest whose consensus read votes)."""
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        snap = _vote_snapshot(s, ds, snapshot)
        ref = load_reference(s, ds, f"{SNAPSHOT}{snap.name}")
        stored = [load_run(s, r) for r in select_runs(s, ds, runs or None)]
    posteriors = ref.posteriors
    if posteriors is None:  # a vote-based snapshot without a voted image stores none
        raise InputError(f"snapshot {snap.name!r} stores no posteriors (no image had votes); nothing to plan from")
    n = posteriors.n_images
    unrated = ref.unrated if ref.unrated is not None else np.zeros(n, bool)
    can_hold = np.bincount(posteriors.rows[posteriors.probs > 0], minlength=n) > 0
    top1 = np.full((len(stored), n), NO_RUN, dtype=np.int64)
    scored = np.zeros((len(stored), n), bool)
    for r, run in enumerate(stored):
        a = align(run, ref.image_ids)
        answered = a.ok & (a.classes[:, 0] >= 0)
        top1[r, a.rows[answered]] = a.classes[answered, 0]
        scored[r, a.rows] = a.ok | a.failed
    scored &= ~unrated & can_hold
    names = [run.info.name for run in stored]
    empty = [name for name, k in zip(names, scored.sum(axis=1)) if k == 0]
    if empty:
        raise InputError(f"run {empty[0]!r} is scored on none of the images of snapshot {snap.name!r}; leave it out")
    plan = forecast(
        posteriors.rows, posteriors.classes, posteriors.probs, n, top1, scored=scored,
        target_halfwidth=target_halfwidth, stability=stability,
    )  # fmt: skip
    rule = str((snap.consensus or {}).get("rule", ""))
    n_scored = [int(k) for k in scored.sum(axis=1)]
    return BudgetReport(ds.name, snap.name, rule, n, int(unrated.sum()), names, n_scored, plan)


def _vote_snapshot(session: Session, dataset: Dataset, name: str | None) -> Snapshot:
    """The snapshot `name`, or the dataset's newest whose consensus read votes; InputError when it reads none."""
    if name is not None:
        snap = get_snapshot(session, dataset, name)
        if not reads_votes(snap.consensus):
            raise InputError(
                f"snapshot {name!r} was made by the unanimous rule and stores no posteriors; name one made with "
                "--consensus ds (or another rule that reads votes)"
            )
        return snap
    query = select(Snapshot).where(col(Snapshot.dataset_id) == dataset.id)
    ordered = session.exec(query.order_by(col(Snapshot.created_at).desc(), col(Snapshot.id).desc())).all()
    newest = next((x for x in ordered if reads_votes(x.consensus)), None)
    if newest is None:
        raise InputError(
            f"dataset {dataset.name!r} has no snapshot whose consensus read votes; make one first, e.g. "
            "`relabel snapshot create round-1-ds --consensus ds`"
        )
    return newest


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)
