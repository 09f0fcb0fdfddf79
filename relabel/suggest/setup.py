"""Assemble a suggestion job from command-line style settings: adapter, protocol, mapper, distractors."""

from __future__ import annotations

import importlib
import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from db.engine import session_scope
from relabel.common.errors import InputError
from relabel.common.workspace import dataset_vocabulary, get_dataset
from relabel.suggest.adapters import adapter_kind, load_adapter
from relabel.suggest.cache import DbResponseCache
from relabel.suggest.distractor_sources import SourceInputs, build_distractors
from relabel.suggest.failures import STOP_AFTER_FAILURES
from relabel.suggest.protocols import ProtocolContext, get_protocol
from relabel.suggest.runner import SuggestJob
from relabel.suggest.textmap import ClassNameIndex, load_encoder


@dataclass
class SuggestSettings:
    model: str
    protocol: str | None = None  # None: topk for scoring models, ow for generative ones
    dataset: str | None = None
    concurrency: int = 8
    max_retries: int = 5  # per request, after a failure that may pass (API models)
    stop_after_failures: int = STOP_AFTER_FAILURES  # requests in a row without an answer that stop the run (API)
    batch_size: int | None = None  # None: the adapter's own default (8 for EfficientNet-Lite0)
    threads: int | None = None  # torch intra-op threads, local models; None: `default_threads()`
    images_per_request: int = 1
    seed: int = 0
    mc_options: int = 4
    distractors: str = "random"  # random, hard, or sources joined by "+" (relabel.suggest.distractor_sources)
    distractor_spread: int = 1  # MC: each source picks among its best spread × slots classes
    accept_synonyms: bool = False  # cw/cwplus: accept unlisted synonyms and wnids (still counted out-of-prompt)
    reference: str | None = None  # pope: the labels its probes are built on (a --reference spec; None: ImGT)
    pope_negatives: int = 1  # pope: negative probes per image and sampling
    encoder: str | None = None  # None: the protocol's default encoder
    max_side: int = 1024
    base_url: str | None = None
    device: str = "auto"
    use_cache: bool = True  # False: API answers are neither read from nor written to the response cache


# (engine, dataset, --reference spec) -> (the reference's name, image id -> its classes): pope's label sets
ReferenceReader = Callable[[Engine, str | None, str], tuple[str, dict[int, list[int]]]]


def default_protocol(model: str) -> str:
    return adapter_kind(model).default_protocol


def default_threads() -> int:
    """torch intra-op threads when --threads is left out: 1 when the 1-minute load average already reaches the
    core count (more threads then only wait on each other and on the other processes; bench/bench_threads.py),
    else torch's own default capped at the cores this process may use."""
    import torch

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # no load average on this system (Windows)
        load = 0.0
    return 1 if load >= cores else max(1, min(torch.get_num_threads(), cores))


def _takes_threads(spec: str) -> bool:
    """Whether the adapter class of `spec` accepts a `threads` option (its load then sets torch's threads)."""
    module_name, _, class_name = adapter_kind(spec).target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return "threads" in inspect.signature(cls).parameters


def _adapter_options(s: SuggestSettings, engine: Engine, prompt_version: str, threads: int | None) -> dict[str, Any]:
    if adapter_kind(s.model).remote:
        return {
            "base_url": s.base_url,
            "concurrency": s.concurrency,
            "max_retries": s.max_retries,
            "stop_after_failures": s.stop_after_failures,
            "max_side": s.max_side,
            "cache": DbResponseCache(engine) if s.use_cache else None,
            "prompt_version": prompt_version,
        }
    options: dict[str, Any] = {"device": s.device}
    if s.batch_size is not None:
        options["batch_size"] = s.batch_size
    if threads is not None and _takes_threads(s.model):
        options["threads"] = threads
    return options


def _set_local_threads(s: SuggestSettings) -> int | None:
    """The torch thread count of a local model (`s.threads`, else `default_threads()`), given to torch now so that
    adapters without a `threads` option, and the text encoder, run with it too. None: a remote model, torch is
    left alone."""
    if adapter_kind(s.model).remote:
        return None
    import torch

    threads = s.threads or default_threads()
    torch.set_num_threads(threads)
    return threads


def quiet_model_loading() -> None:
    """Keep transformers' weight-loading progress bars and advisory warnings out of relabel's output; downloads
    (huggingface_hub's own bars) still show their progress."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def _check_counts(s: SuggestSettings) -> None:
    least = {
        "--images-per-request": (s.images_per_request, 1),
        "--concurrency": (s.concurrency, 1),
        "--batch-size": (1 if s.batch_size is None else s.batch_size, 1),
        "--threads": (1 if s.threads is None else s.threads, 1),
        "--stop-after-failures": (s.stop_after_failures, 1),
        "--max-retries": (s.max_retries, 0),
    }
    for flag, (value, minimum) in least.items():
        if value < minimum:
            raise InputError(f"{flag} must be at least {minimum}, got {value}")


def build_job(
    s: SuggestSettings, engine: Engine, cache_dir: Path | None, read_reference: ReferenceReader | None = None
) -> SuggestJob:
    """Check every setting, then load the model; raises InputError before any heavy work when a setting is wrong
    (an unknown distractor source, or a `run:` of the model under test, included). `read_reference` reads the label
    sets of `s.reference` (pope); the command passes the evaluation's reader of `--reference` specs."""
    protocol = get_protocol(s.protocol or default_protocol(s.model))
    with session_scope(engine) as session:
        vocab = dataset_vocabulary(session, get_dataset(session, s.dataset))
    _check_counts(s)
    if s.accept_synonyms and not protocol.reads_synonyms:
        raise InputError(f"--accept-synonyms is read by the cw and cwplus protocols, not {protocol.name!r}")
    if (s.reference is not None or s.pope_negatives != 1) and not protocol.reads_reference:
        raise InputError(f"--reference and --pope-negatives are read by the pope protocol, not {protocol.name!r}")
    ctx = ProtocolContext(
        vocab,
        seed=s.seed,
        mc_options=s.mc_options,
        images_per_request=s.images_per_request,
        accept_synonyms=s.accept_synonyms,
        negatives=s.pope_negatives,
    )
    if s.reference is not None:
        if read_reference is None:
            raise ValueError("a reference spec needs a reader of label sets (read_reference)")
        ctx.reference_name, ctx.reference = read_reference(engine, s.dataset, s.reference)
    quiet_model_loading()
    if protocol.uses_distractors:
        encoder_spec = s.encoder or protocol.default_encoder
        inputs = SourceInputs(vocab, s.model, engine, s.dataset, lambda: load_encoder(encoder_spec), cache_dir)
        spec = protocol.distractors_when_random if s.distractors == "random" else ""
        ctx.distractors = build_distractors(spec or s.distractors, inputs, s.distractor_spread)
    threads = _set_local_threads(s)
    adapter = load_adapter(s.model, **_adapter_options(s, engine, protocol.version(ctx), threads))
    adapter.check()  # a missing key or an unreachable server fails here, before the text encoder loads
    encoder = load_encoder(s.encoder or protocol.default_encoder) if protocol.needs_mapper else None
    mapper = ClassNameIndex(encoder, vocab, cache_dir) if protocol.needs_mapper and encoder else None
    return SuggestJob(
        engine, adapter, protocol, ctx, mapper, chunk_size=max(64, s.concurrency * s.images_per_request * 4)
    )
