"""Robustness and efficiency of a model: run it on clean and perturbed inputs, score, measure, store.

The conditions are the clean pass and every perturbation × severity asked for (`--perturbations`, `--severities`):
the ten ImageNet-C-style image corruptions of `evaluator.perturbations.PERTURBATIONS`, and the text perturbations
of `TEXT_PERTURBATIONS` (`typo`: seeded keyboard typos). How each condition reaches the model is in
`relabel.evaluation.passes`; in short, images are perturbed from a 256 px base view, and a text perturbation
misspells the class names a text-conditioned scoring model (CLIP, SigLIP) reads, or the prompt of each request of a
generative model.

Which models take which perturbations:

- scoring models (EfficientNet-Lite0, HF classifiers, CLIP/SigLIP) are read by their ranked scores (`topk`);
  `--protocol` is for generative models only and anything but `topk` is refused for a scoring model;
- image-only classifiers read no text: `all` means the image perturbations, and naming a text one is an error;
- generative models (`hf-vlm:...`, `openai:...`) are asked through a suggestion protocol, `cw` by default (`ow` and
  `cwplus` map free answers with `--encoder`, `mc` builds options around the ImGT label with the distractors of
  `--distractors`, `hard` by default, from the registry `relabel suggest` reads:
  relabel.suggest.distractor_sources); the top-1 is the parsed answer's class, and an out-of-prompt answer is wrong.

A failed call is scored as `evaluate` scores one (`relabel.evaluation.failure_causes`): the model's failures (an
unparseable reply, a refusal, a final HTTP 400/413/422) are wrong in the clean and every perturbed pass, so in RR
too; infrastructure and set-up failures are left out, and the result says how many in a warning line.

Two runs with the same seed see the same pixels and the same typos.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine

from db.engine import session_scope
from db.models import utcnow
from evaluator.errors import unknown_name
from evaluator.model_reliability import robustness_retention, summarize_latencies
from evaluator.perturbations import PERTURBATIONS, SEVERITIES, TEXT_PERTURBATIONS
from relabel import __version__
from relabel.common.errors import InputError
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import IMGT, dataset_vocabulary, get_dataset
from relabel.evaluation.failure_causes import exclusion_warnings
from relabel.evaluation.measure import PeakMemory, cost_per_1k_images, count_flops, describe_adapter
from relabel.evaluation.passes import (
    BASE_SHORT_SIDE,
    AskingModel,
    Condition,
    Passes,
    ScoringModel,
    base_view,
    run_passes,
)
from relabel.evaluation.references import Reference, load_reference
from relabel.evaluation.results import EfficiencyReport, RobustnessResult
from relabel.evaluation.robustness_outcomes import condition_names, robustness_outcomes
from relabel.evaluation.runs import MAX_K, RunInfo, RunPredictions
from relabel.evaluation.scoring import score_run
from relabel.evaluation.storage import store_robustness
from relabel.suggest.adapters import adapter_kind, load_adapter, ranks_classes, reads_text
from relabel.suggest.distractor_sources import HARD, SourceInputs, build_distractors
from relabel.suggest.protocols import Protocol, ProtocolContext, generative_summaries, get_protocol
from relabel.suggest.runner import SuggestJob, reference_labels, select_images
from relabel.suggest.textmap import ClassNameIndex, TextEncoder, load_encoder
from relabel.suggest.types import Adapter, ImageRef

__all__ = [
    "BASE_SHORT_SIDE",
    "DEFAULT_PROTOCOL",
    "model_options",
    "parse_perturbations",
    "parse_severities",
    "run_robustness",
    "select_perturbations",
]
DEFAULT_PROTOCOL = "cw"  # generative models: choose among the dataset's class names
SCORES = "topk"  # how scoring models are read


def parse_severities(text: str) -> tuple[int, ...]:
    """`1-5`, `1,3,5` or `2` as a sorted tuple of severities in 1..5."""
    values: set[int] = set()
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            values.update(range(int(low), int(high or low) + 1))
    except ValueError:
        raise InputError(f"severities {text!r}: expected a range like 1-5 or a list like 1,3,5") from None
    if not values or not values <= set(SEVERITIES):
        raise InputError(f"severities {text!r} must lie in 1..5")
    return tuple(sorted(values))


def parse_perturbations(text: str | None) -> tuple[str, ...] | None:
    """Comma-separated registered names (image or text perturbations), in the order given; `all` (or None) gives
    None: every perturbation that reaches the model (`select_perturbations`). An unknown name lists the known ones."""
    if text is None or text.strip() == "all":
        return None
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    known = [*PERTURBATIONS, *TEXT_PERTURBATIONS]
    for name in names:
        if name not in known:
            raise InputError(str(unknown_name("perturbation", name, known)))
    if not names:
        raise InputError("no perturbation named; give names like gaussian_noise,jpeg,typo or 'all'")
    return names


def select_perturbations(names: Sequence[str] | None, adapter: Adapter) -> tuple[str, ...]:
    """`names`, or when None every image perturbation and, for a model that reads text, every text one. A text
    perturbation named for an image-only classifier is refused: nothing would change what the model sees."""
    text_ok = reads_text(adapter)
    if names is None:
        return (*PERTURBATIONS, *(TEXT_PERTURBATIONS if text_ok else ()))
    text = [n for n in names if n in TEXT_PERTURBATIONS]
    if text and not text_ok:
        raise InputError(
            f"{getattr(adapter, 'name', 'the model')!r} is an image-only classifier: it reads no text, so the text "
            f"perturbation {', '.join(text)} cannot reach it; use image perturbations, or a CLIP/SigLIP or generative "
            "model"
        )
    return tuple(names)


def model_options(
    model: str, *, device: str = "auto", batch_size: int | None = None, base_url: str | None = None
) -> dict[str, Any]:
    """Constructor options of `model`'s adapter: API models take a server, local models a device and batch size."""
    if adapter_kind(model).remote:
        return {"base_url": base_url}
    return {"device": device, **({"batch_size": batch_size} if batch_size else {})}


def run_robustness(
    engine: Engine,
    *,
    model: str = "efficientnet-lite0",
    adapter: Adapter | None = None,
    dataset: str | None = None,
    references: Sequence[str] = (IMGT,),
    perturbations: Sequence[str] | None = None,
    severities: Sequence[int] = SEVERITIES,
    limit: int | None = None,
    seed: int = 0,
    protocol: str | None = None,
    encoder: str | TextEncoder | None = None,
    distractors: str = HARD,
    cache_dir: Path | None = None,
    adapter_options: dict[str, Any] | None = None,
    show_progress: bool = True,
    store: bool = True,
) -> RobustnessResult:
    """Top-1 of `model` on clean and perturbed inputs of the dataset (the first `limit` images in the seeded order)
    against each reference, RR per reference, and the efficiency measurements; stored unless `store` is False.

    `perturbations` None (or `all`): every one that reaches the model. `protocol` asks a generative model (default
    cw); `encoder` (a spec or a TextEncoder; None: the protocol's default) maps ow/cwplus answers, with its class
    embeddings cached in `cache_dir`. `distractors`: the mc protocol's distractor sources (`--distractors`, as for
    `relabel suggest`; the result records them). `adapter` replaces the model named by `model` (tests, or an
    adapter built by the caller).
    """
    requested = parse_perturbations(",".join(perturbations) if perturbations else None)
    sevs = parse_severities(",".join(map(str, severities)))
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    adapter = adapter or load_adapter(model, **(adapter_options or {}))
    asked = _protocol(adapter, protocol)
    names = select_perturbations(requested, adapter)
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        refs = [load_reference(s, ds, spec) for spec in dict.fromkeys(references)]
        images = sorted(select_images(s, ds, "all", limit, seed), key=lambda im: im.image_id)
        vocab = dataset_vocabulary(s, ds)
        labels = reference_labels(s, ds) if asked.needs_reference else {}
        dataset_name = ds.name
    if not images:
        raise InputError(f"dataset {dataset_name!r} has no readable image to run {model!r} on")
    ctx = ProtocolContext(vocab, reference=labels, seed=seed)
    if asked.uses_distractors:  # before the model is checked: a bad source fails first (a run of the model too)
        load_text = _encoder(encoder or asked.default_encoder)
        inputs = SourceInputs(vocab, adapter.name, engine, dataset_name, load_text, cache_dir)
        ctx.distractors = build_distractors(distractors, inputs)
    adapter.check()
    runner, described = _model(engine, adapter, asked, ctx, encoder, cache_dir)
    conditions: list[Condition] = [None, *((n, v) for n in names for v in sevs)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="relabel-robustness-") as tmp, PeakMemory() as memory:
        passes = run_passes(runner, images, conditions, seed, Path(tmp), show_progress)
        flops = _flops(adapter, images, ctx.class_names, Path(tmp)) if asked.name == SCORES else _NOT_COUNTED
    seconds = time.perf_counter() - started
    result = _result(
        adapter, dataset_name, images, refs, names, sevs, seed, passes, memory, flops, ctx.images_per_request
    )
    text_names = tuple(n for n in names if n in TEXT_PERTURBATIONS)
    result = replace(result, seconds=round(seconds, 3), protocol=described, text_perturbations=text_names)
    if store:
        with session_scope(engine) as s:
            result = replace(result, id=store_robustness(s, get_dataset(s, dataset_name), result))
    return result


_NOT_COUNTED = (None, "not counted: a generative model's FLOPs per answer depend on the answer's length")


def _protocol(adapter: Adapter, name: str | None) -> Protocol:
    """The protocol `adapter` is read through: topk for a scoring model, `name` (default cw) for a generative one."""
    generative = not ranks_classes(adapter)
    label = getattr(adapter, "name", "the model")
    if not generative and name not in (None, SCORES):
        raise InputError(
            f"--protocol {name} is for generative models; {label!r} is a scoring model, always read by its ranked "
            "scores (leave --protocol out)"
        )
    chosen = get_protocol(name or (DEFAULT_PROTOCOL if generative else SCORES))
    if generative and not chosen.generative:
        known = ", ".join(generative_summaries())
        raise InputError(f"protocol {name!r} reads scores; {label!r} is a generative model: use one of {known}")
    return chosen


def _model(
    engine: Engine,
    adapter: Any,
    protocol: Protocol,
    ctx: ProtocolContext,
    encoder: str | TextEncoder | None,
    cache_dir: Path | None,
) -> tuple[ScoringModel | AskingModel, dict[str, Any]]:
    """The adapter ready for the passes, and the protocol's description (stored with the result)."""
    described = protocol.describe(ctx)
    if not protocol.generative:
        return ScoringModel(adapter, ctx.class_names, ctx.seed), described
    if encoder is None:
        encoder = protocol.default_encoder
    mapper = _mapper(encoder, ctx.vocab, cache_dir) if protocol.needs_mapper else None
    if mapper is not None:
        described["mapper"] = mapper.describe()
    return AskingModel(SuggestJob(engine, adapter, protocol, ctx, mapper), ctx.seed), described


def _encoder(encoder: str | TextEncoder) -> Callable[[], TextEncoder]:
    """The text encoder, loaded only when a distractor source asks for it (`text`)."""
    return lambda: load_encoder(encoder) if isinstance(encoder, str) else encoder


def _mapper(encoder: str | TextEncoder, vocab: Vocabulary, cache_dir: Path | None) -> ClassNameIndex:
    return ClassNameIndex(load_encoder(encoder) if isinstance(encoder, str) else encoder, vocab, cache_dir)


def _flops(adapter: Any, images: list[ImageRef], class_names: list[str], tmp: Path) -> tuple[float | None, str]:
    """FLOPs of one image through `adapter.score`, after the timed passes (any per-class cache is warm)."""
    view = next((v for v in map(base_view, images[:8]) if v is not None), None)
    if view is None:
        return None, "not counted: no decodable image"
    path = tmp / "flops.bmp"
    view.save(path, format="BMP")
    return count_flops(lambda: adapter.score([ImageRef(images[0].image_id, path, "", "flops")], class_names))


def _result(
    adapter: Any,
    dataset: str,
    images: list[ImageRef],
    refs: list[Reference],
    names: tuple[str, ...],
    sevs: tuple[int, ...],
    seed: int,
    passes: Passes,
    memory: PeakMemory,
    flops: tuple[float | None, str],
    images_per_request: int = 1,
) -> RobustnessResult:
    ids = np.array([im.image_id for im in images], dtype=np.int64)
    conditions: list[Condition] = [None, *((n, v) for n in names for v in sevs)]
    runs = {c: _condition_run(adapter.name, c, ids, passes) for c in conditions}
    clean, grid, retention = {}, {}, {}
    for ref in refs:

        def top1(condition: Condition, n_boot: int = 0, ref: Reference = ref) -> Any:
            return score_run(runs[condition], ref, n_boot=n_boot, seed=seed).top1

        clean[ref.name] = top1(None, 1000)
        grid[ref.name] = [[top1((n, v)).accuracy for v in sevs] for n in names]
        base, values = clean[ref.name].accuracy, np.array(grid[ref.name])
        known = np.isfinite(base) and np.isfinite(values).all()  # a pass whose every call failed has no score
        retention[ref.name] = robustness_retention(base, values) if known else float("nan")
    description = describe_adapter(adapter)
    return RobustnessResult(
        model=adapter.name,
        dataset=dataset,
        n_images=len(images),
        perturbations=names,
        severities=sevs,
        seed=seed,
        references=tuple(r.info for r in refs),
        clean=clean,
        grid=grid,
        retention=retention,
        errors=sum(passes.excluded.values()),
        failed=int(sum(f.sum() for f in passes.failed.values())),
        warnings=tuple(exclusion_warnings(f"robustness run of {adapter.name!r}", passes.excluded, RUN_AGAIN)),
        efficiency=_efficiency(description, passes, memory, flops, cost_per_1k_images(adapter, images_per_request)),
        seconds=0.0,
        created_at=utcnow(),
        tool_version=__version__,
        adapter=description,
        outcomes=robustness_outcomes(list(runs.values()), condition_names(names, sevs), refs),
    )


RUN_AGAIN = "running the command again tries every image again"


def _condition_run(model: str, condition: Condition, ids: np.ndarray, passes: Passes) -> RunPredictions:
    """One condition's pass as a run: answered (`ok`), the model's failures (`failed`, wrong), the rest left out."""
    info = RunInfo(0, str(condition or "clean"), model, "robustness", len(ids), 0, MAX_K, None)
    return RunPredictions(info, ids, passes.classes[condition], passes.ok[condition], None, passes.failed[condition])


def _efficiency(
    description: dict[str, Any], passes: Passes, memory: PeakMemory, flops: tuple[float | None, str], cost: float | None
) -> EfficiencyReport:
    latency = summarize_latencies(passes.latencies) if passes.latencies else None
    params = description.get("parameters")
    return EfficiencyReport(
        device=str(description.get("device", "unknown")),
        batch_size=description.get("batch_size"),
        n_images=passes.n_inputs,
        latency_p50_s=latency.p50_s if latency else None,
        latency_p95_s=latency.p95_s if latency else None,
        latency_mean_s=latency.mean_s if latency else None,
        throughput_per_s=passes.n_inputs / passes.score_seconds if passes.score_seconds > 0 else None,
        peak_rss_bytes=memory.rss_bytes,
        peak_rss_scope=memory.scope,
        cuda_peak_bytes=memory.cuda_bytes,
        n_parameters=int(params) if isinstance(params, int | float) else None,
        flops_per_image=flops[0],
        flops_note=flops[1],
        cost_per_1k_images=cost,
    )
