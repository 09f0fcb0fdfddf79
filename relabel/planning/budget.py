"""The review budget of a workspace (`relabel plan`): the posteriors of a vote-based snapshot and the stored runs'
top-1, read as arrays, and the forecast of `relabel.planning.plan` on them.

The images are those of the snapshot, read as `relabel evaluate` reads a probabilistic snapshot
(`relabel.evaluation.references`): a voted pair carries its stored posterior, a label without one is certain, and
the images nobody rated (category U without a posterior) are left out of every run's score, as the evaluator leaves
them out by default. A run is scored on the images it answered or failed on (a failed reply is wrong; an
infrastructure error is never scored, `relabel.evaluation.runs`) that can hold a class at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import String, cast
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col, select

from db.engine import session_scope
from db.enums import Category, PredictionStatus
from db.models import Dataset, Prediction, Snapshot, SnapshotLabel, SnapshotPosterior, stored_id
from relabel.common.errors import InputError
from relabel.common.workspace import get_dataset
from relabel.decisions.rules import DEFAULT_RULE, reads_votes
from relabel.evaluation.failure_causes import failure_cause
from relabel.evaluation.runs import select_runs
from relabel.planning.plan import REVIEW_RESIDUAL, STABILITY, TARGET_HALFWIDTH, Plan, forecast
from relabel.review.active import NO_RUN
from relabel.review.benefit import newest_vote_snapshot
from relabel.snapshots.reader import get_snapshot
from relabel.suggest.failures import RETRYABLE_MARK
from relabel.votes.fit import shared_caution


@dataclass(frozen=True)
class BudgetReport:
    """A forecast (`plan`) for the runs `run_names` (the plan's run indices) on the images of `snapshot`
    (`n_images`, `n_unrated` of them left out: nobody rated them). `caution`: why the forecast cannot be trusted
    yet (`relabel.votes.fit.shared_caution`), or None."""

    dataset: str
    snapshot: str
    rule: str
    n_images: int
    n_unrated: int
    run_names: list[str]
    n_scored: list[int]
    plan: Plan
    caution: str | None = None

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
            "residual": p.residual,
            "runs": runs,
            "ranking": order,
            "ranking_pairs": [
                {"above": a, "below": b, "probability": float(x), "tied": bool(t), "after_pool": float(e)}
                for a, b, x, t, e in zip(order, order[1:], p.ranking.probability, p.ranking.tied, p.after_pool)
            ],
            "ranking_stability": p.ranking.stability,
            "reviews_until_halfwidth": p.reviews_halfwidth,
            "reviews_until_stable_ranking": p.reviews_ranking,
            "reviews": p.reviews,
            "caution": self.caution,
        }


def plan_reviews(
    engine: Engine,
    *,
    dataset: str | None = None,
    snapshot: str | None = None,
    runs: Sequence[str] = (),
    target_halfwidth: float = TARGET_HALFWIDTH,
    stability: float = STABILITY,
    residual: float = REVIEW_RESIDUAL,
) -> BudgetReport:
    """How many more reviews, in the active order, until each run's top-1 half-width from label uncertainty is
    within `target_halfwidth` points and the ranking of `runs` (default: every stored run) holds with `stability`
    (`relabel.planning.plan.forecast`, a review leaving `residual` of its image's variance), from `snapshot`
    (default: the newest whose consensus read votes)."""
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        snap = _vote_snapshot(s, ds, snapshot)
        chosen = select_runs(s, ds, runs or None)
        conn = s.connection()
        images = _snapshot_images(conn, stored_id(snap))
        read = [_run_top1(conn, stored_id(r), images.image_ids) for r in chosen]
    n = len(images.image_ids)
    top1 = np.stack([t for t, _ in read]) if read else np.zeros((0, n), np.int64)
    scored = np.stack([m for _, m in read]) if read else np.zeros((0, n), bool)
    scored &= ~images.unrated & images.can_hold
    names = [r.name for r in chosen]
    empty = [name for name, k in zip(names, scored.sum(axis=1)) if k == 0]
    if empty:
        raise InputError(f"run {empty[0]!r} is scored on none of the images of snapshot {snap.name!r}; leave it out")
    plan = forecast(
        images.rows, images.classes, images.probs, n, top1, scored=scored,
        target_halfwidth=target_halfwidth, stability=stability, residual=residual,
    )  # fmt: skip
    rule = str((snap.consensus or {}).get("rule", ""))
    n_scored = [int(k) for k in scored.sum(axis=1)]
    caution = shared_caution(snap.consensus or {})
    if caution is not None:
        caution += "; until then this forecast can be far off either way"
    return BudgetReport(ds.name, snap.name, rule, n, int(images.unrated.sum()), names, n_scored, plan, caution)


def _vote_snapshot(session: Session, dataset: Dataset, name: str | None) -> Snapshot:
    """The snapshot `name`, or the dataset's newest whose consensus read votes; InputError when it reads none."""
    if name is not None:
        snap = get_snapshot(session, dataset, name)
        if not reads_votes(snap.consensus):
            rule = (snap.consensus or {}).get("rule", DEFAULT_RULE)
            raise InputError(
                f"snapshot {name!r} was made by the {rule} rule and stores no posteriors; name one made with "
                "--consensus ds (or another rule that reads votes)"
            )
        return snap
    found = newest_vote_snapshot(session.connection(), stored_id(dataset))
    newest = session.get(Snapshot, found[0]) if found is not None else None
    if newest is None:
        raise InputError(
            f"dataset {dataset.name!r} has no snapshot whose consensus read votes; make one first, e.g. "
            "`relabel snapshot create round-1-ds --consensus ds`"
        )
    return newest


@dataclass(frozen=True, eq=False)
class _Images:
    """A vote-based snapshot's images as arrays (module docstring): `image_ids` sorted; the posteriors of the listed
    pairs as `rows` (index into image_ids), `classes`, `probs`; `unrated` and `can_hold` (n,) bool."""

    image_ids: np.ndarray
    rows: np.ndarray
    classes: np.ndarray
    probs: np.ndarray
    unrated: np.ndarray
    can_hold: np.ndarray


def _snapshot_images(conn: Connection, snapshot_id: int) -> _Images:
    """The snapshot's labels and stored posteriors, a label without a stored posterior certain (p = 1), as
    `relabel.evaluation.references` reads a probabilistic snapshot, with plain column reads."""
    # the label lists as their JSON text, parsed in one call: a JSON decode per row costs more than the query
    labels = conn.execute(
        select(
            col(SnapshotLabel.image_id),
            cast(col(SnapshotLabel.classes), String),
            col(SnapshotLabel.category) == Category.U,  # compared in SQL: no enum built per row
        )
        .where(col(SnapshotLabel.snapshot_id) == snapshot_id)
        .order_by(col(SnapshotLabel.image_id))
    ).all()
    stored = conn.execute(
        select(
            col(SnapshotPosterior.image_id), col(SnapshotPosterior.class_index), col(SnapshotPosterior.posterior)
        ).where(col(SnapshotPosterior.snapshot_id) == snapshot_id)
    ).all()
    image_ids = np.array([i for i, _, _ in labels], dtype=np.int64)
    p_ids, p_classes, p_probs = (np.array(c) for c in zip(*stored)) if stored else (np.zeros(0),) * 3
    p_rows = np.searchsorted(image_ids, p_ids.astype(np.int64))
    inside = (p_rows < len(image_ids)) & (image_ids[np.minimum(p_rows, max(len(image_ids) - 1, 0))] == p_ids)
    p_rows, p_classes, p_probs = p_rows[inside], p_classes[inside].astype(np.int64), p_probs[inside].astype(float)
    sets = json.loads("[" + ",".join(text or "[]" for _, text, _ in labels) + "]")
    l_rows = np.repeat(np.arange(len(labels)), [len(c) for c in sets])
    l_classes = np.fromiter((k for c in sets for k in c), np.int64, len(l_rows))
    width = int(max(l_classes.max(initial=0), p_classes.max(initial=0))) + 1
    certain = ~np.isin(l_rows * width + l_classes, p_rows * width + p_classes)
    rows, classes = np.r_[p_rows, l_rows[certain]], np.r_[p_classes, l_classes[certain]]
    probs = np.r_[p_probs, np.ones(int(certain.sum()))]
    rated = np.zeros(len(image_ids), bool)
    rated[p_rows] = True
    undecided = np.array([bool(u) for _, _, u in labels], dtype=bool)
    can_hold = np.bincount(rows[probs > 0], minlength=len(image_ids)) > 0
    return _Images(image_ids, rows, classes, probs, undecided & ~rated, can_hold)


def _run_top1(conn: Connection, run_id: int, image_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(n,) each image's top-1 of the run (NO_RUN: none, or not answered) and (n,) bool whether the run is scored
    on it: answered, or failed by the model's own failure (`relabel.evaluation.failure_causes`; an infrastructure
    error is never scored). Only the first class of each ranking is read."""
    first = col(Prediction.classes)[0].as_integer()
    rows = conn.execute(
        select(col(Prediction.image_id), col(Prediction.status) == PredictionStatus.ok, first)
        .where(col(Prediction.run_id) == run_id)
        .order_by(col(Prediction.image_id))
    ).all()
    n = len(image_ids)
    if not rows:
        return np.full(n, NO_RUN, dtype=np.int64), np.zeros(n, bool)
    ids = np.array([i for i, _, _ in rows], dtype=np.int64)
    ok = np.array([bool(a) for _, a, _ in rows], dtype=bool)
    classes = np.array([NO_RUN if c is None else c for _, _, c in rows], dtype=np.int64)
    errors = conn.execute(
        select(
            col(Prediction.image_id), col(Prediction.reason), col(Prediction.details), col(Prediction.raw_output)
        ).where(col(Prediction.run_id) == run_id, col(Prediction.status) == PredictionStatus.error)
    ).all()
    failed = [
        i for i, reason, details, raw in errors
        if failure_cause(reason or "", raw_output=raw or "", retryable=(details or {}).get(RETRYABLE_MARK)).scored
    ]  # fmt: skip
    counted = ok | np.isin(ids, np.array(failed, dtype=np.int64))
    at = np.minimum(np.searchsorted(ids, image_ids), len(ids) - 1)
    hit = ids[at] == image_ids
    return np.where(hit & ok[at] & (classes[at] >= 0), classes[at], NO_RUN), hit & counted[at]


def _num(x: float) -> float | None:
    return None if not np.isfinite(x) else float(x)
