"""The label sets pope builds its probes on, read from a `--reference` spec as `relabel evaluate` reads it."""

from __future__ import annotations

from sqlalchemy.engine import Engine

from db.engine import session_scope
from relabel.common.workspace import get_dataset
from relabel.evaluation.references import load_reference


def reference_sets(engine: Engine, dataset: str | None, spec: str) -> tuple[str, dict[int, list[int]]]:
    """(name, image id -> classes) of the reference `spec` names (`imgt`, `snapshot:NAME`, `latest`, a prior
    source); raises InputError/NotFoundError for an unknown one, naming the known ones."""
    with session_scope(engine) as session:
        ref = load_reference(session, get_dataset(session, dataset), spec)
    rows = ref.labels.labels.tolist()
    return ref.name, {int(i): [c for c in row if c >= 0] for i, row in zip(ref.image_ids.tolist(), rows)}
