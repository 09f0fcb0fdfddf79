"""Assemble a suggestion job from command-line style settings: adapter, protocol, mapper, distractors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from db.engine import session_scope
from db.enums import PredictionStatus
from db.models import ModelRun, Prediction
from relabel.errors import InputError
from relabel.suggest.adapters import adapter_kind, load_adapter
from relabel.suggest.cache import DbResponseCache
from relabel.suggest.distractors import (
    DistractorSource,
    Neighbours,
    confusion_from_predictions,
    load_confusion,
    text_neighbours,
)
from relabel.suggest.failures import STOP_AFTER_FAILURES
from relabel.suggest.protocols import ProtocolContext, get_protocol
from relabel.suggest.runner import SuggestJob, reference_labels
from relabel.suggest.textmap import ClassNameIndex, load_encoder
from relabel.workspace import dataset_vocabulary, get_dataset


@dataclass
class SuggestSettings:
    model: str
    protocol: str | None = None  # None: topk for scoring models, ow for generative ones
    dataset: str | None = None
    concurrency: int = 8
    max_retries: int = 5  # per request, after a failure that may pass (API models)
    stop_after_failures: int = STOP_AFTER_FAILURES  # requests in a row without an answer that stop the run (API)
    batch_size: int = 16
    images_per_request: int = 1
    seed: int = 0
    mc_options: int = 4
    distractors: str = "random"
    confusion: str | None = None  # FILE (.json groups or .npy matrix) or run:NAME; hard ones are topped up from text
    accept_synonyms: bool = False  # cw/cwplus: accept unlisted synonyms and wnids (still counted out-of-prompt)
    encoder: str | None = None  # None: the protocol's default encoder
    max_side: int = 1024
    base_url: str | None = None
    device: str = "auto"


def default_protocol(model: str) -> str:
    return adapter_kind(model).default_protocol


def _adapter_options(s: SuggestSettings, engine: Engine, prompt_version: str) -> dict[str, Any]:
    if adapter_kind(s.model).remote:
        return {
            "base_url": s.base_url,
            "concurrency": s.concurrency,
            "max_retries": s.max_retries,
            "stop_after_failures": s.stop_after_failures,
            "max_side": s.max_side,
            "cache": DbResponseCache(engine),
            "prompt_version": prompt_version,
        }
    return {"device": s.device, "batch_size": s.batch_size}


def _confusion(s: SuggestSettings, engine: Engine, n_classes: int) -> Neighbours | None:
    """The `--confusion` source of hard distractors, checked before any model loads; None without one."""
    if s.distractors not in ("random", "hard"):
        raise InputError(f"unknown distractor kind {s.distractors!r}; known: random, hard")
    if not s.confusion:
        return None
    if s.distractors == "random":
        raise InputError("--confusion is read only with --distractors hard")
    if s.confusion.startswith("run:"):
        return _run_confusion(engine, s.dataset, s.confusion, n_classes)
    return load_confusion(Path(s.confusion), n_classes)


def _run_confusion(engine: Engine, dataset: str | None, spec: str, n_classes: int) -> Neighbours:
    """The confusions of the stored run `spec` ("run:NAME"): all its ranked classes (top-5 for scoring models)
    against the reference labels."""
    with session_scope(engine) as session:
        ds = get_dataset(session, dataset)
        run = session.scalars(
            select(ModelRun).where(col(ModelRun.dataset_id) == ds.id, col(ModelRun.name) == spec[4:])
        ).first()
        if run is None:
            raise InputError(f"no model run {spec[4:]!r} to take confusions from")
        ref = reference_labels(session, ds)
        rows = session.execute(
            select(col(Prediction.image_id), col(Prediction.classes), col(Prediction.scores)).where(
                col(Prediction.run_id) == run.id, col(Prediction.status) == PredictionStatus.ok
            )
        ).all()
    ranked = [(ref[i][0], classes, scores) for i, classes, scores in rows if classes and ref.get(i)]
    if not ranked:
        raise InputError(f"run {run.name!r} has no predictions on labelled images to build confusions from")
    return confusion_from_predictions(ranked, n_classes, spec)


def _check_counts(s: SuggestSettings) -> None:
    least = {
        "--images-per-request": (s.images_per_request, 1),
        "--concurrency": (s.concurrency, 1),
        "--batch-size": (s.batch_size, 1),
        "--stop-after-failures": (s.stop_after_failures, 1),
        "--max-retries": (s.max_retries, 0),
    }
    for flag, (value, minimum) in least.items():
        if value < minimum:
            raise InputError(f"{flag} must be at least {minimum}, got {value}")


def build_job(s: SuggestSettings, engine: Engine, cache_dir: Path | None) -> SuggestJob:
    """Check every setting, then load the model; raises InputError before any heavy work when a setting is wrong."""
    protocol = get_protocol(s.protocol or default_protocol(s.model))
    with session_scope(engine) as session:
        vocab = dataset_vocabulary(session, get_dataset(session, s.dataset))
    _check_counts(s)
    if s.accept_synonyms and not protocol.reads_synonyms:
        raise InputError(f"--accept-synonyms is read by the cw and cwplus protocols, not {protocol.name!r}")
    hard = protocol.uses_distractors and s.distractors == "hard"
    confusion = _confusion(s, engine, len(vocab)) if protocol.uses_distractors else None
    ctx = ProtocolContext(
        vocab,
        seed=s.seed,
        mc_options=s.mc_options,
        images_per_request=s.images_per_request,
        accept_synonyms=s.accept_synonyms,
    )
    adapter = load_adapter(s.model, **_adapter_options(s, engine, protocol.version(ctx)))
    adapter.check()  # a missing key or an unreachable server fails here, before the text encoder loads
    encoder = load_encoder(s.encoder or protocol.default_encoder) if protocol.needs_mapper or hard else None
    if hard and encoder is not None:
        ctx.distractors = DistractorSource(confusion, text_neighbours(encoder, vocab, cache_dir))
    mapper = ClassNameIndex(encoder, vocab, cache_dir) if protocol.needs_mapper and encoder else None
    return SuggestJob(
        engine, adapter, protocol, ctx, mapper, chunk_size=max(64, s.concurrency * s.images_per_request * 4)
    )
