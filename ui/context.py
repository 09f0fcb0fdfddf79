"""What the leads' read-only tabs (Dashboard, Reports) and the audit log need of the studio, and nothing more.

These tabs read the database and the reports folder; they never touch the review queue, the display cache or the
card tokens. `WorkspaceContext` is made from the `Studio` once, when the app is built (`ui.app`), so the tabs
depend on a few plain values, and a test can build one without a studio.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import Engine

from relabel.common.vocabulary import Vocabulary
from relabel.review.studio import Studio


@dataclass(frozen=True)
class WorkspaceContext:
    """The dataset under review: its database, id, name and classes, the studio's overlap (annotators per image)
    and the reports folder. `require_lead(user)` returns the user's id, or raises ConflictError for an annotator
    (and NotFoundError for an unknown name)."""

    engine: Engine
    dataset_id: int
    dataset_name: str
    vocab: Vocabulary
    overlap: int
    reports_dir: Path
    require_lead: Callable[[str | None], int]

    @classmethod
    def of(cls, studio: Studio, reports_dir: Path) -> WorkspaceContext:
        """The context of `studio`'s dataset, with reports read from `reports_dir`."""
        return cls(
            engine=studio.engine,
            dataset_id=studio.dataset_id,
            dataset_name=studio.dataset_name,
            vocab=studio.vocab,
            overlap=studio.overlap,
            reports_dir=reports_dir,
            require_lead=studio.require_lead,
        )
