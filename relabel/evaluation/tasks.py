"""The tasks of `relabel evaluate` beyond classification: presence probes (pope runs), captions (caption runs) and
retrieval (retrieval runs, `relabel.evaluation.tasks_retrieval`), each run scored against the evaluation's first
reference (a: ImGT by default) and side by side against every other named reference (b: a snapshot), on the
images both label.

In: the stored predictions of runs whose protocol's task is presence or caption (`relabel.suggest.probes`), and the
evaluation's references. Out: `TaskTables`, rows of plain numbers that `relabel.evaluation.tasks_text` renders.

- Presence: per sampling (random, popular, adversarial), the table of the image's positives (in every sampling)
  and that sampling's negatives; POPE's accuracy, precision, recall, F1 and yes-ratio (`evaluator.presence`). A
  probe's truth is read again from each reference, so a negative drawn from ImGT is a positive under a snapshot that
  lists the class: a yes to it is a "hallucination" under a that is a true object under b (`yes_absent_a_present_b`).
  The accuracy difference b − a has a paired bootstrap interval over images.
- Captions: CHAIR-i, CHAIR-s and coverage (`evaluator.chair`) over the mentions mapped with confidence
  (`relabel.suggest.probes.is_confident`); the others are counted apart (`n_unmapped`), with the count of
  mentions hallucinated under a whose class b lists.

Failures follow `relabel.evaluation.failure_causes`: an unparseable yes/no reply, a refusal, a final HTTP 4xx are
the model's and count as wrong (a failed probe, a failed caption); infrastructure and set-up errors are left out,
their images counted in `n_left_out`. A row depends only on its run's answers and the two references.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlmodel import Session, col

from db.enums import PredictionStatus
from db.models import ModelRun, Prediction
from evaluator import LabelSets
from evaluator.chair import ChairScore, chair, compare_chair
from evaluator.presence import ERROR, FAILED, NO, YES, PresenceScore, compare_presence
from evaluator.presence import score_presence as score_probes
from evaluator.presence_sampling import SAMPLINGS, Probes
from relabel.evaluation.failure_causes import failure_cause
from relabel.evaluation.references import Reference
from relabel.evaluation.tasks_retrieval import RetrievalRow, load_run_embeddings, retrieval_rows
from relabel.suggest.failures import RETRYABLE_MARK
from relabel.suggest.probes import POSITIVE, is_confident
from relabel.suggest.protocol_base import CAPTION, PRESENCE
from relabel.suggest.protocols import task_of_protocol
from relabel.suggest.retrieval_protocol import RETRIEVAL

_CODES = {"yes": YES, "no": NO, "unparseable": FAILED}


@dataclass(frozen=True)
class Comparison:
    """What a row under reference b adds: accuracy (presence) b − a with its paired interval (None without
    resamples), and the yes answers / mentions hallucinated under a whose class b lists."""

    reference_a: str
    hallucinated_a_true_b: int
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class PresenceRow:
    run: str
    model: str
    sampling: str
    reference: str
    n_images: int  # images whose probes were scored under this row's reference pair
    score: PresenceScore
    versus: Comparison | None = None  # rows under reference b


@dataclass(frozen=True)
class ChairRow:
    run: str
    model: str
    reference: str
    score: ChairScore
    versus: Comparison | None = None


@dataclass(frozen=True)
class TaskTables:
    """The task rows of one evaluation; `n_left_out`: per run, images whose call got no answer for reasons of the
    infrastructure or set-up (never scored)."""

    presence: tuple[PresenceRow, ...]
    chair: tuple[ChairRow, ...]
    n_left_out: dict[str, int]
    retrieval: tuple[RetrievalRow, ...] = ()


def task_runs(runs: Sequence[ModelRun]) -> tuple[list[ModelRun], list[ModelRun]]:
    """(the runs scored by classes, the runs of the presence, caption and retrieval tasks), each in the order
    given."""
    tasks = [r for r in runs if task_of_protocol(r.protocol) in (PRESENCE, CAPTION, RETRIEVAL)]
    return [r for r in runs if r not in tasks], tasks


def score_tasks(
    session: Session, runs: Sequence[ModelRun], references: Sequence[Reference], *, n_boot: int = 1000, seed: int = 0
) -> TaskTables | None:
    """The presence, CHAIR and retrieval rows of `runs` against `references` (the first is a); None without such
    runs."""
    if not runs:
        return None
    presence: list[PresenceRow] = []
    chair_rows: list[ChairRow] = []
    retrieval: list[RetrievalRow] = []
    left_out: dict[str, int] = {}
    for run in runs:
        if task_of_protocol(run.protocol) == RETRIEVAL:
            stored = load_run_embeddings(run, references[0].labels.n_classes)
            sets = [label_sets(ref, stored.image_ids) for ref in references]
            names = [ref.name for ref in references]
            retrieval += retrieval_rows(run, stored, names, sets, n_boot=n_boot, seed=seed)
            continue
        answers = _answers(session, run)
        left_out[run.name] = sum(a.left_out for a in answers)
        kept = [a for a in answers if not a.left_out]
        if task_of_protocol(run.protocol) == PRESENCE:
            presence += _presence_rows(run, kept, references, n_boot, seed)
        else:
            chair_rows += _chair_rows(run, kept, references)
    return TaskTables(tuple(presence), tuple(chair_rows), left_out, tuple(retrieval))


@dataclass(frozen=True)
class _Stored:
    image_id: int
    details: dict[str, Any]
    failed: bool  # an error the model caused: scored as wrong
    left_out: bool  # an error of the infrastructure or set-up


def _answers(session: Session, run: ModelRun) -> list[_Stored]:
    rows = session.execute(
        select(
            col(Prediction.image_id), col(Prediction.status), col(Prediction.details), col(Prediction.reason),
            col(Prediction.raw_output),
        ).where(col(Prediction.run_id) == run.id).order_by(col(Prediction.image_id))
    ).all()  # fmt: skip
    out = []
    for image_id, status, details, reason, raw in rows:
        if PredictionStatus(status) is PredictionStatus.ok:
            out.append(_Stored(image_id, details or {}, False, False))
            continue
        retryable = (details or {}).get(RETRYABLE_MARK)
        scored = failure_cause(reason or "", raw_output=raw or "", retryable=retryable).scored
        out.append(_Stored(image_id, details or {}, scored, not scored))
    return out


def label_sets(reference: Reference, image_ids: np.ndarray) -> LabelSets:
    """`reference`'s sets of `image_ids` (sorted) in that order; an image it does not cover has an empty set."""
    pos = np.minimum(np.searchsorted(reference.image_ids, image_ids), max(len(reference.image_ids) - 1, 0))
    covered = reference.image_ids[pos] == image_ids if len(reference.image_ids) else np.zeros(len(image_ids), bool)
    rows = np.where(covered[:, None], reference.labels.labels[pos], -1)
    return LabelSets(rows.reshape(len(image_ids), -1), reference.labels.n_classes)


def _presence_rows(
    run: ModelRun, answers: list[_Stored], references: Sequence[Reference], n_boot: int, seed: int
) -> list[PresenceRow]:
    ids = np.array([a.image_id for a in answers], dtype=np.int64)
    sets = [label_sets(ref, ids) for ref in references]
    rows: list[PresenceRow] = []
    for sampling in SAMPLINGS:
        probes, codes = _probes(answers, sampling)
        rows.append(_alone(run, sampling, references[0].name, probes, codes, sets[0]))
        for ref, ref_sets in zip(references[1:], sets[1:]):
            c = compare_presence(probes, codes, sets[0], ref_sets, n_boot=n_boot, seed=seed)
            ci = (float(c.ci_low[0]), float(c.ci_high[0])) if c.ci_low is not None and c.ci_high is not None else None
            versus = Comparison(references[0].name, int(c.yes_absent_a_present_b[0]), float(c.difference[0]),
                                *(ci or (None, None)))  # fmt: skip
            rows.append(
                PresenceRow(run.name, run.model, sampling, ref.name, c.n_common_images, c.score_b.row(0), versus)
            )
    return rows


def _alone(run: ModelRun, sampling: str, name: str, probes: Probes, codes: np.ndarray, sets: LabelSets) -> PresenceRow:
    score = score_probes(probes, codes, sets).row(0)
    n_images = len(np.unique(probes.image[sets.counts[probes.image] > 0]))
    return PresenceRow(run.name, run.model, sampling, name, n_images, score)


def _probes(answers: list[_Stored], sampling: str) -> tuple[Probes, np.ndarray]:
    """The probes of `sampling`'s table (positives and its negatives) with their answer codes; a probe whose call
    failed is FAILED when the model caused it, ERROR (never scored) otherwise."""
    image, cls, code = [], [], []
    for row, a in enumerate(answers):
        for probe in a.details.get("probes", []):
            if POSITIVE in probe["in"] or sampling in probe["in"]:
                image.append(row)
                cls.append(int(probe["class"]))
                code.append(_CODES.get(probe["answer"], FAILED if a.failed else ERROR))
    n = len(image)
    probes = Probes(np.array(image, np.int64), np.array(cls, np.int64), np.zeros(n, bool), sampling, 0)
    return probes, np.array(code, np.int8)


def _chair_rows(run: ModelRun, answers: list[_Stored], references: Sequence[Reference]) -> list[ChairRow]:
    ids = np.array([a.image_id for a in answers], dtype=np.int64)
    sets = [label_sets(ref, ids) for ref in references]
    stored = [a.details.get("mentions", []) if not a.failed else [] for a in answers]
    mentions = [[int(m["class"]) for m in found if is_confident(m)] for found in stored]
    inputs: dict[str, Any] = {
        "n_unmapped": np.array([sum(not is_confident(m) for m in found) for found in stored], np.int64),
        "failed": np.array([a.failed for a in answers], bool),
    }
    rows = [ChairRow(run.name, run.model, references[0].name, chair(mentions, sets[0], **inputs))]
    for ref, ref_sets in zip(references[1:], sets[1:]):
        c = compare_chair(mentions, sets[0], ref_sets, **inputs)
        rows.append(
            ChairRow(
                run.name, run.model, ref.name, c.score_b, Comparison(references[0].name, c.hallucinated_a_present_b)
            )
        )
    return rows
