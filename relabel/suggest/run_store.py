"""What one `relabel suggest` call did (`RunSummary`) and how its answers are stored: one prediction row per image,
written in one transaction per chunk, an earlier error's row updated in place. The online runner and the Batch API
path both store through here, so evaluate and stats read their runs alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import bindparam, insert, update
from sqlalchemy.engine import Engine

from db.engine import session_scope
from db.enums import PredictionStatus
from db.models import Prediction, utcnow
from relabel.suggest.failures import RETRYABLE_MARK
from relabel.suggest.protocol_base import details_json
from relabel.suggest.protocols import Answer
from relabel.suggest.types import ImageRef


@dataclass
class RunSummary:
    """Counts of one call; `ok + errors + not_started` is the number of images it had to do."""

    run: str
    total: int  # images selected
    done_before: int  # with an answer or a final error when this call started (resume)
    ok: int = 0
    errors: int = 0
    retryable: int = 0  # of `errors`: asked again by the next run
    retried: int = 0  # images that had an error before and were asked again by this call
    oop: int = 0
    cached: int = 0
    not_started: int = 0  # left for the next run: the call stopped early
    stopped: str | None = None  # why the call stopped early (an outage), None when it went through
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    seconds: float = 0.0
    measured: dict[str, Any] = field(default_factory=dict)  # the run's params["measured"] after this call

    def line(self) -> str:
        """The one-line summary a person reads after the run."""
        share = self.measured.get("hard_distractor_share")
        final = self.errors - self.retryable
        kinds = [f"{self.retryable} retryable: run again"] * bool(self.retryable)
        kinds += [f"{final} final: --retry-errors"] * bool(final)
        return (
            f"run {self.run!r}: {self.total} image(s), {self.done_before} done before, now {self.ok} ok, "
            f"{self.errors} error(s)"
            + (f" ({', '.join(kinds)})" if kinds else "")
            + (f", {self.retried} earlier error(s) retried" if self.retried else "")
            + (f", {self.oop} out-of-prompt ({self.oop / max(self.ok, 1):.1%} of answers)" if self.oop else "")
            + (f", {self.cached} from cache" if self.cached else "")
            + (f", {self.not_started} not started" if self.not_started else "")
            + (f", hard distractors {share:.1%}" if share else ", every distractor random" if share == 0 else "")
        )

    def stop_message(self) -> str:
        """Why the call stopped early and where it stands, on one line ("" when it went through)."""
        if self.stopped is None:
            return ""
        return (
            f"stopped early: {self.stopped}; {self.ok} image(s) done, {self.errors} failed, {self.not_started} not "
            "started; run the same command again to resume"
        )


def store_answers(
    engine: Engine,
    run_id: int,
    chunk: list[ImageRef],
    answers: dict[int, Answer],
    row_ids: dict[int, int],
    summary: RunSummary,
) -> None:
    """One transaction: a row per image of `chunk`, new, or updated in place where `row_ids` has an earlier one."""
    new, again = [], []
    for im in chunk:
        a = answers[im.image_id]
        failed = a.error is not None
        summary.errors += failed
        summary.retryable += failed and a.retryable
        summary.ok += not failed
        summary.oop += bool(a.details.get("oop"))
        summary.cached += bool(a.details.get("cached"))
        row = _row(a)
        if im.image_id in row_ids:
            again.append({**row, "row_id": row_ids[im.image_id], "created_at": utcnow()})
        else:
            new.append({**row, "run_id": run_id, "image_id": im.image_id})
    summary.retried += len(again)
    table = Prediction.__table__  # type: ignore[attr-defined]
    with session_scope(engine) as s:
        if new:
            s.execute(insert(Prediction), new)
        if again:
            s.execute(update(table).where(table.c.id == bindparam("row_id")), again)


def _row(a: Answer) -> dict[str, Any]:
    """The stored columns of one answer; an error's details say whether the next run asks again."""
    failed = a.error is not None
    details = details_json(a)
    if failed:
        details = {**(details or {}), RETRYABLE_MARK: a.retryable}
    return {
        "raw_output": a.raw,
        "classes": a.classes,
        "scores": a.scores,
        "details": details,
        "reason": a.error or "",
        "status": PredictionStatus.error if failed else PredictionStatus.ok,
    }
