"""Run a model over a dataset's images with a protocol and store the answers as a model run.

Work goes in chunks; each chunk's predictions are committed before the next starts, so Ctrl-C loses at most one
chunk, and the response cache makes even that chunk free to redo. Re-running the same command resumes: images that
already have a prediction in the run are skipped.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import insert, select, update
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.engine import session_scope
from db.enums import ImageStatus, PredictionStatus
from db.models import Dataset, Image, Label, ModelRun, Prediction
from relabel import __version__
from relabel.errors import ConflictError, InputError
from relabel.progress import progress_bar
from relabel.suggest.protocols import Answer, Protocol, ProtocolContext, details_json, map_pending
from relabel.suggest.textmap import ClassNameIndex
from relabel.suggest.types import ImageRef, ModelOutput
from relabel.workspace import IMGT, get_dataset, get_source

SELECTIONS = ("all", "disputed")


@dataclass
class RunSummary:
    run: str
    total: int  # images selected
    done_before: int  # already predicted when this call started (resume)
    ok: int = 0
    errors: int = 0
    oop: int = 0
    cached: int = 0
    usage: dict[str, int] = field(default_factory=dict)
    cost: float | None = None
    seconds: float = 0.0


def disputed_image_ids(session: Session, dataset: Dataset) -> set[int]:
    """Images whose original label is contradicted: no ImGT label, a prior source without it, or another run's
    top-1 that differs."""
    imgt_id = get_source(session, dataset, IMGT).id
    imgt: dict[int, list[int]] = dict(
        session.execute(select(Label.image_id, Label.classes).where(Label.source_id == imgt_id)).all()
    )
    ids = set(session.scalars(select(Image.id).where(Image.dataset_id == dataset.id, Image.status == ImageStatus.ok)))
    disputed = {i for i in ids if not imgt.get(i)}
    priors = session.execute(
        select(Label.image_id, Label.classes)
        .join(Image, Image.id == Label.image_id)
        .where(Image.dataset_id == dataset.id, Label.source_id != imgt_id)
    )
    disputed |= {i for i, classes in priors if imgt.get(i) and imgt[i][0] not in classes}
    preds = session.execute(
        select(Prediction.image_id, Prediction.classes)
        .join(ModelRun, ModelRun.id == Prediction.run_id)
        .where(ModelRun.dataset_id == dataset.id, Prediction.status == PredictionStatus.ok)
    )
    disputed |= {i for i, classes in preds if classes and imgt.get(i) and classes[0] != imgt[i][0]}
    return disputed & ids


def select_images(session: Session, dataset: Dataset, which: str, limit: int | None, seed: int) -> list[ImageRef]:
    """Readable images of the dataset, in a seeded shuffled order (recorded: image order changes accuracy)."""
    if which not in SELECTIONS:
        raise InputError(f"unknown image selection {which!r}; known: {', '.join(SELECTIONS)}")
    rows = session.execute(
        select(Image.id, Image.path, Image.sha256)
        .where(Image.dataset_id == dataset.id, Image.status == ImageStatus.ok)
        .order_by(Image.path)
    ).all()
    if which == "disputed":
        keep = disputed_image_ids(session, dataset)
        rows = [r for r in rows if r[0] in keep]
    order = np.random.default_rng(seed).permutation(len(rows))
    root = Path(dataset.root or ".")
    refs = [ImageRef(rows[i][0], root / rows[i][1], rows[i][2] or "", rows[i][1]) for i in order]
    return refs[:limit] if limit is not None else refs


def reference_labels(session: Session, dataset: Dataset) -> dict[int, list[int]]:
    source_id = get_source(session, dataset, IMGT).id
    return dict(session.execute(select(Label.image_id, Label.classes).where(Label.source_id == source_id)).all())


def open_run(
    session: Session, dataset: Dataset, name: str, model: str, protocol: str, params: dict[str, Any]
) -> ModelRun:
    """The run to write into: a new one, or the same run to resume (its settings must match)."""
    run = session.scalars(select(ModelRun).where(ModelRun.dataset_id == dataset.id, ModelRun.name == name)).first()
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
    settings = {k: v for k, v in run.params.items() if k != "usage"}
    if (run.model, run.protocol, settings) != (model, protocol, params):
        raise ConflictError(
            f"run {name!r} exists with other settings ({run.model}, {run.protocol}); "
            "use --run NEW_NAME to start another run"
        )
    return run


@dataclass
class SuggestJob:
    engine: Engine
    adapter: Any  # GenerativeAdapter or ScoringAdapter
    protocol: Protocol
    ctx: ProtocolContext
    mapper: ClassNameIndex | None = None
    chunk_size: int = 64


def run_suggestions(
    job: SuggestJob,
    *,
    dataset: str | None,
    run_name: str,
    which: str = "all",
    limit: int | None = None,
    show_progress: bool = True,
) -> RunSummary:
    """Predict every selected image that the run does not have yet; returns counts for this call."""
    if job.protocol.generative != (not hasattr(job.adapter, "score")):
        kind = "generative" if job.protocol.generative else "scoring"
        raise InputError(f"protocol {job.protocol.name!r} needs a {kind} model; {job.adapter.name!r} is not one")
    job.adapter.check()
    with session_scope(job.engine) as s:
        ds = get_dataset(s, dataset)
        params = {**job.protocol.describe(job.ctx), "adapter": job.adapter.describe()}
        run = open_run(s, ds, run_name, job.adapter.name, job.protocol.name, params)
        images = select_images(s, ds, which, limit, job.ctx.seed)
        if job.protocol.needs_reference and not job.ctx.reference:
            job.ctx.reference = reference_labels(s, ds)
        done = set(s.scalars(select(Prediction.image_id).where(Prediction.run_id == run.id)))
        run_id = run.id
    todo = [im for im in images if im.image_id not in done]
    summary = RunSummary(run_name, len(images), len(images) - len(todo))
    started = time.perf_counter()
    bar = progress_bar(len(images), f"suggest {run_name}", enabled=show_progress)
    bar.update(summary.done_before)
    try:
        for start in range(0, len(todo), job.chunk_size):
            chunk = todo[start : start + job.chunk_size]
            answers = answer_chunk(job, chunk)
            _store(job.engine, run_id, chunk, answers, summary)
            bar.update(len(chunk))
            bar.set_postfix_str(_postfix(job.adapter, summary))
    finally:
        bar.close()
        summary.seconds = time.perf_counter() - started
        _record_usage(job, run_id, summary)
    return summary


def answer_chunk(job: SuggestJob, chunk: list[ImageRef]) -> dict[int, Answer]:
    """The parsed (and mapped) answer of `job`'s model for each image of `chunk`, by image id; nothing stored."""
    if not job.protocol.generative:
        outputs = job.adapter.score(chunk, job.ctx.class_names)
        return {im.image_id: job.protocol.scores_to_answer(o) for im, o in zip(chunk, outputs)}  # type: ignore[attr-defined]
    pendings = job.protocol.build(chunk, job.ctx)
    ready = [p for p in pendings if "error" not in p.state[0]]
    outputs = dict(zip(map(id, ready), job.adapter.generate([p.request for p in ready])))
    answers: dict[int, Answer] = {}
    for p in pendings:
        if "error" in p.state[0]:
            parsed = [Answer(error=p.state[0]["error"])]
        else:
            out: ModelOutput = outputs[id(p)]
            parsed = job.protocol.parse(out, p, job.ctx)
            for a in parsed:
                a.details.setdefault("cached", out.cached)
        answers.update({im.image_id: a for im, a in zip(p.images, parsed)})
    map_pending(list(answers.values()), job.mapper)
    return answers


def _store(engine: Engine, run_id: int, chunk: list[ImageRef], answers: dict[int, Answer], summary: RunSummary) -> None:
    rows = []
    for im in chunk:
        a = answers[im.image_id]
        failed = a.error is not None
        summary.errors += failed
        summary.ok += not failed
        summary.oop += bool(a.details.get("oop"))
        summary.cached += bool(a.details.get("cached"))
        rows.append(
            {
                "run_id": run_id,
                "image_id": im.image_id,
                "raw_output": a.raw,
                "classes": a.classes,
                "scores": a.scores,
                "details": details_json(a),
                "reason": a.error or "",
                "status": PredictionStatus.error if failed else PredictionStatus.ok,
            }
        )
    with session_scope(engine) as s:
        s.execute(insert(Prediction), rows)


def _postfix(adapter: Any, summary: RunSummary) -> str:
    text = f"errors {summary.errors}"
    cost = adapter.estimated_cost() if hasattr(adapter, "estimated_cost") else None
    return text + (f", cost ${cost:.4f}" if cost is not None else "")


def _record_usage(job: SuggestJob, run_id: int, summary: RunSummary) -> None:
    usage = dict(getattr(job.adapter, "usage_totals", {}) or {})
    summary.usage = usage
    summary.cost = job.adapter.estimated_cost() if hasattr(job.adapter, "estimated_cost") else None
    with session_scope(job.engine) as s:
        run = s.get(ModelRun, run_id)
        if run is not None:
            prior = dict(run.params.get("usage", {}))
            merged = {k: prior.get(k, 0) + v for k, v in usage.items() if isinstance(v, (int, float))}
            if summary.cost is not None:
                merged["cost_usd"] = round(prior.get("cost_usd", 0.0) + summary.cost, 6)
            s.execute(update(ModelRun).where(ModelRun.id == run_id).values(params={**run.params, "usage": merged}))
