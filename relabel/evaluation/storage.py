"""Evaluations in the workspace: store each one, read the history, and find a model's latest robustness run.

Rows of the `evaluations` table are written once and never changed. Robustness results are read back from their
stored JSON (the same form the report shows), so `relabel evaluate` folds RR and E into the reliability table without
running a model.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.engine import session_scope
from db.models import Dataset, EvaluationRecord, stored_id
from evaluator.scoring import Score
from relabel.common.errors import InputError
from relabel.common.workspace import get_dataset
from relabel.evaluation.references import ReferenceInfo
from relabel.evaluation.results import EfficiencyReport, Evaluation, RobustnessResult
from relabel.evaluation.robustness_outcomes import RobustnessOutcomes, condition_names

SCORES, ROBUSTNESS = "scores", "robustness"


def store_evaluation(session: Session, dataset: Dataset, evaluation: Evaluation) -> int:
    """Insert `evaluation`; returns the new row's id and sets it on `evaluation.id`."""
    runs = [{"id": r.id, "name": r.name, "model": r.model, "protocol": r.protocol} for r in evaluation.runs]
    row = EvaluationRecord(
        dataset_id=stored_id(dataset),
        kind=SCORES,
        reference_hashes={r.name: r.content_hash for r in evaluation.references},
        runs=runs,
        result=evaluation.to_dict(),
        tool_version=evaluation.tool_version,
        created_at=evaluation.created_at,
    )
    evaluation.id = _insert(session, row)
    return evaluation.id


def store_robustness(session: Session, dataset: Dataset, result: RobustnessResult) -> int:
    """Insert a robustness result; returns the new row's id."""
    row = EvaluationRecord(
        dataset_id=stored_id(dataset),
        kind=ROBUSTNESS,
        reference_hashes={r.name: r.content_hash for r in result.references},
        runs=[{"id": None, "name": None, "model": result.model, "protocol": "robustness"}],
        result=result.to_dict(),
        tool_version=result.tool_version,
        created_at=result.created_at,
    )
    return _insert(session, row)


def _insert(session: Session, row: EvaluationRecord) -> int:
    session.add(row)
    session.flush()
    return stored_id(row)


def latest_robustness(session: Session, models: Iterable[str]) -> dict[str, RobustnessResult]:
    """The newest stored robustness result of each of `models` that has one, from any dataset."""
    wanted = set(models)
    found: dict[str, RobustnessResult] = {}
    rows = session.scalars(
        select(EvaluationRecord)
        .where(col(EvaluationRecord.kind) == ROBUSTNESS)
        .order_by(col(EvaluationRecord.created_at).desc(), col(EvaluationRecord.id).desc())
    )
    for row in rows:
        model = row.result.get("model")
        if model in wanted and model not in found:
            found[model] = robustness_from_dict(row.result, row.id)
    return found


def latest_robustness_by_protocol(
    session: Session, keys: Iterable[tuple[str, str]]
) -> dict[tuple[str, str], RobustnessResult]:
    """The newest stored robustness result of each (model, protocol) of `keys` that has one, from any dataset;
    the protocol is the one the robustness run read the model through (topk for ranked scores)."""
    wanted = set(keys)
    found: dict[tuple[str, str], RobustnessResult] = {}
    rows = session.scalars(
        select(EvaluationRecord)
        .where(col(EvaluationRecord.kind) == ROBUSTNESS)
        .order_by(col(EvaluationRecord.created_at).desc(), col(EvaluationRecord.id).desc())
    )
    for row in rows:
        key = (row.result.get("model"), (row.result.get("protocol") or {}).get("protocol", "topk"))
        if key in wanted and key not in found:
            found[key] = robustness_from_dict(row.result, row.id)
    return found


def robustness_from_dict(d: dict[str, Any], record_id: int | None = None) -> RobustnessResult:
    """A `RobustnessResult` back from its JSON form (`RobustnessResult.to_dict`)."""
    return RobustnessResult(
        model=d["model"],
        dataset=d["dataset"],
        n_images=d["n_images"],
        perturbations=tuple(d["perturbations"]),
        severities=tuple(d["severities"]),
        seed=d["seed"],
        references=tuple(ReferenceInfo(**r) for r in d["references"]),
        clean={k: score_from_dict(v) for k, v in d["clean"].items()},
        grid={k: [[_float(x) for x in row] for row in v] for k, v in d["grid"].items()},
        retention={k: _float(v) for k, v in d["retention"].items()},
        errors=d["errors"],
        efficiency=EfficiencyReport(**d["efficiency"]),
        seconds=d["seconds"],
        created_at=datetime.fromisoformat(d["created_at"]),
        tool_version=d["tool_version"],
        adapter=d.get("adapter") or {},
        protocol=d.get("protocol") or {},
        text_perturbations=tuple(d.get("text_perturbations") or ()),
        id=record_id,
        failed=d.get("failed", 0),  # results stored before failures were scored: counted in `errors`
        warnings=tuple(d.get("warnings") or ()),
        outcomes=_outcomes(d, record_id),
    )


def _outcomes(d: dict[str, Any], record_id: int | None) -> RobustnessOutcomes | None:
    """The stored per-image outcomes (None for a run stored before they were kept); InputError naming the run."""
    if not d.get("outcomes"):
        return None
    grid = condition_names(tuple(d["perturbations"]), tuple(d["severities"]))
    try:
        return RobustnessOutcomes.from_json(d["outcomes"], expected=grid)
    except InputError as exc:
        raise InputError(f"robustness run #{record_id}: {exc}") from exc


def score_from_dict(d: dict[str, Any]) -> Score:
    return Score(**{**d, "accuracy": _float(d["accuracy"])})


def _float(value: float | None) -> float:
    return float("nan") if value is None else float(value)


@dataclass(frozen=True)
class EvaluationHistoryEntry:
    """One stored evaluation as the history shows it: top-1 by (run or model, reference name)."""

    id: int
    kind: str
    created_at: datetime
    tool_version: str
    reference_hashes: dict[str, str]
    top1: dict[tuple[str, str], float | None]
    retention: dict[str, float | None]  # robustness entries: RR by reference


def evaluation_history(engine: Engine, dataset: str | None = None) -> list[EvaluationHistoryEntry]:
    """Every stored evaluation of the dataset, oldest first."""
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        rows = s.scalars(
            select(EvaluationRecord)
            .where(col(EvaluationRecord.dataset_id) == ds.id)
            .order_by(col(EvaluationRecord.created_at), col(EvaluationRecord.id))
        ).all()
        return [_history_entry(r) for r in rows]


def _history_entry(row: EvaluationRecord) -> EvaluationHistoryEntry:
    result = row.result
    if row.kind == ROBUSTNESS:
        top1 = {(result["model"], ref): score["accuracy"] for ref, score in result["clean"].items()}
        retention = dict(result["retention"])
    else:
        top1 = {(s["run"], s["reference"]): s["top1"]["accuracy"] for s in result["scores"]}
        retention = {}
    created = row.created_at if row.created_at.tzinfo else row.created_at.replace(tzinfo=timezone.utc)
    return EvaluationHistoryEntry(
        row.id,  # type: ignore[arg-type]
        row.kind,
        created,
        row.tool_version,
        dict(row.reference_hashes),
        top1,
        retention,
    )
