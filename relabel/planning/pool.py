"""A workspace's answers as a `relabel.planning.simulation.Pool`: the imported votes, ImGT, a reference, the runs.

Reads the dataset's imported vote sources (the studio's decisions stay out: a replay needs answers that were all
given already), keeps the voted images that the reference label source labels, and takes each stored run's top-1
on them (a failed prediction counts as not scored, `NO_RUN`). A pool needs several answers on some pair, or a
review would reveal nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import String, cast, select
from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session, col

from db.enums import SourceKind
from db.models import Label, LabelSource, stored_id
from relabel.common.errors import InputError
from relabel.common.workspace import get_dataset, get_source
from relabel.decisions.log import ParsedLists
from relabel.planning.simulation import Pool, make_pool
from relabel.review.active import NO_RUN
from relabel.votes.aggregation import make_votes
from relabel.votes.table import VoteTable, collect_votes


@dataclass(frozen=True)
class LoadedPool:
    """The pool, the image id of each of its images, the vote sources read and the voted images left out because
    the reference does not label them."""

    pool: Pool
    image_ids: np.ndarray
    sources: tuple[str, ...]
    unreferenced: int


def load_pool(
    engine: Engine,
    *,
    reference: str,
    dataset: str | None = None,
    sources: Sequence[str] | None = None,
    runs: Sequence[str] | None = None,
) -> LoadedPool:
    """The pool of the dataset's imported vote `sources` (None: all) on the images the label source `reference`
    labels, with the stored `runs` (None: all of them, none if the dataset has none). Raises NotFoundError for an
    unknown dataset, vote source, reference or run; InputError when the votes give one answer per pair."""
    from relabel.evaluation.runs import load_run, select_runs

    with Session(engine) as s:
        ds = get_dataset(s, dataset)
        source_id = stored_id(get_source(s, ds, reference))
        chosen = select_runs(s, ds, runs) if runs or _has_runs(s, stored_id(ds)) else []
        predictions = [load_run(s, r) for r in chosen]
    with engine.connect() as conn:
        table = collect_votes(conn, stored_id(ds), sources=sources, studio=False)
        _check_answers(table)
        image_ids = table.image_ids
        ref = _label_sets(conn, select(col(Label.image_id), cast(col(Label.classes), String)).where(
            col(Label.source_id) == source_id), image_ids)  # fmt: skip
        original = _label_sets(conn, _originals(stored_id(ds)), image_ids)
    covered = np.array([r is not None for r in ref])
    if not covered.any():
        raise InputError(
            f"--reference {reference}: the label source labels none of the {len(image_ids):,} voted images"
        )
    table, kept = _subset(table, covered)
    top1 = np.full((len(predictions), len(kept)), NO_RUN, dtype=np.int64)
    for row, p in zip(top1, predictions):
        at = np.searchsorted(kept, p.image_ids)
        hit = (at < len(kept)) & (kept[np.minimum(at, len(kept) - 1)] == p.image_ids) & p.ok & (p.classes[:, 0] >= 0)
        row[at[hit]] = p.classes[hit, 0]
    pool = make_pool(
        table.votes,
        table.pairs[:, 1],
        original=[original[i] or () for i in np.flatnonzero(covered)],
        reference=[ref[i] or () for i in np.flatnonzero(covered)],
        top1=top1,
        run_names=[p.info.name for p in predictions],
    )
    return LoadedPool(pool, kept, table.sources, int((~covered).sum()))


def _has_runs(session: Session, dataset_id: int) -> bool:
    from db.models import ModelRun

    query = select(col(ModelRun.id)).where(col(ModelRun.dataset_id) == dataset_id)
    return session.scalars(query).first() is not None


def _check_answers(table: VoteTable) -> None:
    names = ", ".join(table.sources) or "none"
    if not len(table.pairs):
        raise InputError("the dataset has no imported votes; import some with `relabel votes import FILE --format ...`")
    if np.bincount(table.votes.item).max() < 2:
        raise InputError(
            f"the votes of {names} give one answer per (image, class) pair: a review would reveal nothing; import "
            "a source with several answers per pair (e.g. ReaL's raters)"
        )


def _originals(dataset_id: int):  # noqa: ANN202
    return (
        select(col(Label.image_id), cast(col(Label.classes), String))
        .join(LabelSource, col(LabelSource.id) == col(Label.source_id))
        .where(col(LabelSource.dataset_id) == dataset_id, col(LabelSource.kind) == SourceKind.original)
    )


def _label_sets(conn: Connection, query: object, image_ids: np.ndarray) -> list[tuple[int, ...] | None]:
    """The label set of each of `image_ids` among `query`'s rows (image id, JSON classes); None: no row."""
    position = {i: k for k, i in enumerate(image_ids.tolist())}
    out: list[tuple[int, ...] | None] = [None] * len(image_ids)
    lists = ParsedLists()
    for image_id, classes in conn.execute(query):  # type: ignore[call-overload]
        k = position.get(image_id)
        if k is not None:
            out[k] = tuple(sorted({*(out[k] or ()), *lists[classes]}))
    return out


def _subset(table: VoteTable, keep: np.ndarray) -> tuple[VoteTable, np.ndarray]:
    """`table` on the images `keep` (n_images,) bool, items and images numbered again; and their image ids."""
    if keep.all():
        return table, table.image_ids
    v = table.votes
    kept_items = keep[v.item_image]
    new_item = np.cumsum(kept_items) - 1
    answers = kept_items[v.item]
    new_image = np.cumsum(keep) - 1
    votes = make_votes(
        new_item[v.item[answers]], v.worker[answers], v.answer[answers], new_image[v.item_image[kept_items]],
        n_workers=v.n_workers,
    )  # fmt: skip
    pairs = table.pairs[kept_items]
    return VoteTable(votes, pairs, table.workers, table.worker_kinds, table.sources), table.image_ids[keep]
