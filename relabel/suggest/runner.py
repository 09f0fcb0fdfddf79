"""Run a model over a dataset's images with a protocol and store the answers as a model run.

Work goes in chunks; each chunk's predictions are committed before the next starts, so Ctrl-C loses at most one
chunk, and the response cache makes even that chunk free to redo. Re-running the same command resumes: images
with an answer or a final error in the run are skipped, retryable errors are asked again (all errors with
`retry_errors`; which errors are retryable: `relabel.suggest.failures`). A retried image's row is updated in place,
so its id stays what annotations may refer to.

When the adapter stops for an outage (`OutageError`), the answers of the requests that finished are stored, the
images never sent get no row, and the summary says why the run stopped and how many images were not started.

Besides its settings, a run's params hold what each call added up: `usage` (tokens, cost) and `measured` (what
the protocol measured over all the run's answers, e.g. the hard-distractor share of MC or the strict out-of-prompt
rate of CW); neither has to match when a run is resumed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from sqlalchemy import select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.engine import session_scope
from db.enums import ImageStatus, PredictionStatus
from db.models import Dataset, Image, Label, ModelRun, Prediction, pk
from relabel import __version__
from relabel.common.errors import ConflictError, InputError
from relabel.common.progress import progress_bar
from relabel.common.workspace import IMGT, get_dataset, get_source
from relabel.suggest.adapters import ranks_classes
from relabel.suggest.failures import OutageError, needs_retry
from relabel.suggest.protocol_base import map_pending
from relabel.suggest.protocols import Answer, Pending, Protocol, ProtocolContext
from relabel.suggest.run_store import RunSummary, store_answers
from relabel.suggest.textmap import ClassNameIndex
from relabel.suggest.types import Adapter, GenerativeAdapter, ImageRef, ModelOutput, ScoringAdapter

SELECTIONS = ("all", "suspect")  # "suspect": see suspect_image_ids
TALLIES = ("usage", "measured", "batch_api")  # params written by calls, not settings: left out of the resume check


@dataclass
class ResumePlan:
    """What a call does: images never asked in this run (in order), and earlier errors to ask again, with the id
    of the prediction row each of those updates."""

    fresh: list[ImageRef]
    retry: list[ImageRef]
    row_ids: dict[int, int]  # image id -> prediction id, for `retry`
    done_before: int


def plan_resume(session: Session, run_id: int, images: list[ImageRef], *, retry_errors: bool) -> ResumePlan:
    """Split the selected `images` by what the run already holds: an answer or a final error is done; a retryable
    error (every error with `retry_errors`) is asked again; an image without a row is fresh."""
    answered = set(
        session.scalars(
            select(col(Prediction.image_id)).where(
                col(Prediction.run_id) == run_id, col(Prediction.status) == PredictionStatus.ok
            )
        )
    )
    errors = session.execute(
        select(col(Prediction.image_id), col(Prediction.id), col(Prediction.details)).where(
            col(Prediction.run_id) == run_id, col(Prediction.status) == PredictionStatus.error
        )
    ).all()
    again = {
        image_id: row_id for image_id, row_id, details in errors if needs_retry(details, retry_errors=retry_errors)
    }
    done = answered | ({image_id for image_id, _, _ in errors} - again.keys())
    # fresh images first: their grouping into chunks and multi-image requests stays what an interrupted call used,
    # so the requests it finished are found in the response cache
    fresh = [im for im in images if im.image_id not in done and im.image_id not in again]
    retry = [im for im in images if im.image_id in again]
    return ResumePlan(
        fresh, retry, {im.image_id: again[im.image_id] for im in retry}, len(images) - len(fresh) - len(retry)
    )


def suspect_image_ids(session: Session, dataset: Dataset) -> set[int]:
    """Images whose original label other evidence contradicts: no ImGT label, a prior source without it, or
    another run's top-1 that differs. Not "disputed", which is about annotators (`relabel.decisions.rules`)."""
    imgt_id = get_source(session, dataset, IMGT).id
    imgt: dict[int, list[int]] = dict(
        session.execute(select(col(Label.image_id), col(Label.classes)).where(col(Label.source_id) == imgt_id)).all()
    )
    ids = set(
        session.scalars(
            select(pk(Image.id)).where(col(Image.dataset_id) == dataset.id, col(Image.status) == ImageStatus.ok)
        )
    )
    suspect = {i for i in ids if not imgt.get(i)}
    priors = session.execute(
        select(col(Label.image_id), col(Label.classes))
        .join(Image, col(Image.id) == col(Label.image_id))
        .where(col(Image.dataset_id) == dataset.id, col(Label.source_id) != imgt_id)
    )
    suspect |= {i for i, classes in priors if imgt.get(i) and imgt[i][0] not in classes}
    preds = session.execute(
        select(col(Prediction.image_id), col(Prediction.classes))
        .join(ModelRun, col(ModelRun.id) == col(Prediction.run_id))
        .where(col(ModelRun.dataset_id) == dataset.id, col(Prediction.status) == PredictionStatus.ok)
    )
    suspect |= {i for i, classes in preds if classes and imgt.get(i) and classes[0] != imgt[i][0]}
    return suspect & ids


def select_images(session: Session, dataset: Dataset, which: str, limit: int | None, seed: int) -> list[ImageRef]:
    """Readable images of the dataset, in a seeded shuffled order (recorded: image order changes accuracy)."""
    if which not in SELECTIONS:
        raise InputError(f"unknown image selection {which!r}; known: {', '.join(SELECTIONS)}")
    rows = session.execute(
        select(col(Image.id), col(Image.path), col(Image.sha256))
        .where(col(Image.dataset_id) == dataset.id, col(Image.status) == ImageStatus.ok)
        .order_by(col(Image.path))
    ).all()
    if which == "suspect":
        keep = suspect_image_ids(session, dataset)
        rows = [r for r in rows if r[0] in keep]
    order = np.random.default_rng(seed).permutation(len(rows))
    root = Path(dataset.root or ".")
    refs = [ImageRef(rows[i][0], root / rows[i][1], rows[i][2] or "", rows[i][1]) for i in order]
    return refs[:limit] if limit is not None else refs


def reference_labels(session: Session, dataset: Dataset) -> dict[int, list[int]]:
    source_id = get_source(session, dataset, IMGT).id
    return dict(
        session.execute(select(col(Label.image_id), col(Label.classes)).where(col(Label.source_id) == source_id)).all()
    )


def open_run(
    session: Session, dataset: Dataset, name: str, model: str, protocol: str, params: dict[str, Any]
) -> ModelRun:
    """The run to write into: a new one, or the same run to resume (its settings must match)."""
    assert dataset.id is not None  # a stored dataset
    run = session.scalars(
        select(ModelRun).where(col(ModelRun.dataset_id) == dataset.id, col(ModelRun.name) == name)
    ).first()
    if run is None:
        run = ModelRun(
            dataset_id=dataset.id,
            name=name,
            model=model,
            protocol=protocol,
            params=params,
            prompt_hash=params.get("prompt_version"),
            origin="relabel suggest",
            tool_version=__version__,
        )
        session.add(run)
        session.flush()
        return run
    settings = {k: v for k, v in run.params.items() if k not in TALLIES}
    if (run.model, run.protocol, settings) != (model, protocol, params):
        raise ConflictError(
            f"run {name!r} exists with other settings ({run.model}, {run.protocol}); "
            "use --run NEW_NAME to start another run"
        )
    return run


@dataclass
class SuggestJob:
    engine: Engine
    adapter: Adapter
    protocol: Protocol
    ctx: ProtocolContext
    mapper: ClassNameIndex | None = None
    chunk_size: int = 64


def open_job(
    job: SuggestJob, *, dataset: str | None, run_name: str, which: str, limit: int | None, retry_errors: bool
) -> tuple[int, list[ImageRef], ResumePlan]:
    """Check the job, open (or resume) its run and plan the call: the run id, the selected images and what is left
    to ask."""
    if job.protocol.generative == ranks_classes(job.adapter):
        kind = "generative" if job.protocol.generative else "scoring"
        raise InputError(f"protocol {job.protocol.name!r} needs a {kind} model; {job.adapter.name!r} is not one")
    job.adapter.check()
    if hasattr(job.adapter, "run"):  # an adapter with a response cache keys it by run: a new run asks afresh
        cast(Any, job.adapter).run = run_name
    with session_scope(job.engine) as s:
        ds = get_dataset(s, dataset)
        params = {**job.protocol.describe(job.ctx), "adapter": job.adapter.describe()}
        if job.mapper is not None:
            params["mapper"] = job.mapper.describe()
        run = open_run(s, ds, run_name, job.adapter.name, job.protocol.name, params)
        assert run.id is not None  # open_run flushes a new run
        images = select_images(s, ds, which, limit, job.ctx.seed)
        if job.protocol.needs_reference and not job.ctx.reference:
            job.ctx.reference = reference_labels(s, ds)
        plan = plan_resume(s, run.id, images, retry_errors=retry_errors)
        run_id = run.id
    return run_id, images, plan


def run_suggestions(
    job: SuggestJob,
    *,
    dataset: str | None,
    run_name: str,
    which: str = "all",
    limit: int | None = None,
    retry_errors: bool = False,
    show_progress: bool = True,
) -> RunSummary:
    """Predict every selected image that the run has no answer for yet: images without a row, then earlier
    errors that are retryable (every error with `retry_errors`); returns counts for this call. An outage stops the
    call early: `stopped` says why, `not_started` how many images are left for the next run."""
    run_id, images, plan = open_job(
        job, dataset=dataset, run_name=run_name, which=which, limit=limit, retry_errors=retry_errors
    )
    todo = plan.fresh + plan.retry
    summary = RunSummary(run_name, len(images), plan.done_before)
    started = time.perf_counter()
    bar = progress_bar(len(images), f"suggest {run_name}", enabled=show_progress)
    bar.update(summary.done_before)
    try:
        for start in range(0, len(todo), job.chunk_size):
            chunk = todo[start : start + job.chunk_size]
            answers, outage = answer_started(job, chunk)
            store_answers(
                job.engine, run_id, [im for im in chunk if im.image_id in answers], answers, plan.row_ids, summary
            )
            bar.update(len(answers))
            bar.set_postfix_str(_postfix(job.adapter, summary))
            if outage is not None:
                summary.stopped, summary.not_started = outage.reason, len(todo) - start - len(answers)
                break
    finally:
        bar.close()
        summary.seconds = time.perf_counter() - started
        record_usage(job, run_id, summary)
    return summary


def answer_chunk(job: SuggestJob, chunk: list[ImageRef]) -> dict[int, Answer]:
    """The parsed (and mapped) answer of `job`'s model for each image of `chunk`, by image id; nothing stored.
    Raises `OutageError` when the adapter stopped for an outage."""
    answers, outage = answer_started(job, chunk)
    if outage is not None:
        raise outage
    return answers


def answer_started(job: SuggestJob, chunk: list[ImageRef]) -> tuple[dict[int, Answer], OutageError | None]:
    """As `answer_chunk`, but an outage is returned, not raised: the answers then cover only the images whose
    request finished (answered or failed); images never sent have none."""
    # the protocol's kind matches the adapter's (run_suggest checks it before any work)
    if not job.protocol.generative:
        to_answer = job.protocol.scores_to_answer  # type: ignore[attr-defined]
        scores = cast(ScoringAdapter, job.adapter).score(chunk, job.ctx.class_names)
        return {im.image_id: to_answer(o) for im, o in zip(chunk, scores)}, None
    pendings = job.protocol.build(chunk, job.ctx)
    ready = [p for p in pendings if "error" not in p.state[0]]
    outage: OutageError | None = None
    try:
        generated: list[ModelOutput | None] = list(
            cast(GenerativeAdapter, job.adapter).generate([p.request for p in ready])
        )
    except OutageError as exc:
        outage, generated = exc, exc.outputs
    answers = collect_answers(job, pendings, dict(zip(map(id, ready), generated)))
    return answers, outage


def collect_answers(
    job: SuggestJob, pendings: list[Pending], outputs: dict[int, ModelOutput | None]
) -> dict[int, Answer]:
    """Parse (and map) the outputs of `pendings`, keyed by `id(pending)`, into one answer per image; a pending
    without an output (never sent) gives its images none."""
    parts: dict[int, list[Answer]] = {}
    for p in pendings:
        if "error" in p.state[0]:
            parsed = [Answer(error=p.state[0]["error"])]
        elif (out := outputs.get(id(p))) is None:
            continue  # never sent: the run stopped for an outage first
        else:
            parsed = job.protocol.parse(out, p, job.ctx)
            for a in parsed:
                a.details.setdefault("cached", out.cached)
        for im, a in zip(p.images, parsed):
            parts.setdefault(im.image_id, []).append(a)
    # a protocol may ask one image several questions (pope's probes): it makes their answers one
    answers = {i: one for i, found in parts.items() if (one := job.protocol.combine(found)) is not None}
    map_pending(list(answers.values()), job.mapper)
    return answers


def _postfix(adapter: Any, summary: RunSummary) -> str:
    text = f"errors {summary.errors}" + (f" ({summary.retryable} to retry)" if summary.retryable else "")
    cost = adapter.estimated_cost() if hasattr(adapter, "estimated_cost") else None
    return text + (f", cost ${cost:.4f}" if cost is not None else "")


def record_usage(job: SuggestJob, run_id: int, summary: RunSummary, *, price_scale: float = 1.0) -> None:
    """Add this call's usage to the run's params and store what the protocol measures over all its answers;
    `price_scale` multiplies the adapter's estimated cost (0.5: the Batch API's discount)."""
    usage = dict(getattr(job.adapter, "usage_totals", {}) or {})
    summary.usage = usage
    cost = job.adapter.estimated_cost() if hasattr(job.adapter, "estimated_cost") else None
    summary.cost = None if cost is None else cost * price_scale
    with session_scope(job.engine) as s:
        run = s.get(ModelRun, run_id)
        if run is not None:
            prior = dict(run.params.get("usage", {}))
            merged = {k: prior.get(k, 0) + v for k, v in usage.items() if isinstance(v, (int, float))}
            if summary.cost is not None:
                merged["cost_usd"] = round(prior.get("cost_usd", 0.0) + summary.cost, 6)
            params = {**run.params, "usage": merged}
            details = s.scalars(
                select(col(Prediction.details)).where(
                    col(Prediction.run_id) == run_id, col(Prediction.status) == PredictionStatus.ok
                )
            )
            summary.measured = job.protocol.summarize([d for d in details if d])
            if summary.measured:
                params["measured"] = summary.measured
            s.execute(update(ModelRun).where(col(ModelRun.id) == run_id).values(params=params))
