"""Robustness and efficiency of a scoring model: run it on clean and perturbed images, score, measure, store.

Each image is decoded once and resized to BASE_SHORT_SIDE pixels on its shorter side (ImageNet-C's "resize 256"
step, without its crop, so the model's own preprocessing still crops as usual). That base view is what the model
sees clean, and what every perturbation × severity of `evaluator.perturbations` corrupts, seeded per image
(seed · 2³² + image id), so two runs with the same seed see the same pixels. The views go to the adapter through
its ordinary `score()` as lossless BMP files in a temporary folder, so any scoring adapter (EfficientNet-Lite0,
HF classifiers, CLIP) runs unchanged.

Text perturbations (prompt typos, `evaluator.perturbations.perturb_text`) apply to generative models, whose
prompts are built by the suggestion protocols; they are not wired into this command yet.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from sqlalchemy.engine import Engine

from db.engine import session_scope
from db.models import utcnow
from evaluator import EvaluationError
from evaluator.perturbations import PERTURBATIONS, SEVERITIES, get_perturbation, perturb
from evaluator.reliability import robustness_retention, summarize_latencies
from relabel import __version__
from relabel.errors import InputError, RelabelError
from relabel.evaluation.measure import PeakMemory, count_flops, describe_adapter
from relabel.evaluation.references import Reference, load_reference
from relabel.evaluation.results import EfficiencyReport, RobustnessResult
from relabel.evaluation.runs import MAX_K, RunInfo, RunPredictions
from relabel.evaluation.scoring import score_run
from relabel.evaluation.storage import store_robustness
from relabel.progress import progress_bar
from relabel.suggest.adapters import load_adapter
from relabel.suggest.adapters.imaging import load_rgb
from relabel.suggest.runner import select_images
from relabel.suggest.types import ImageRef
from relabel.workspace import IMGT, dataset_vocabulary, get_dataset

BASE_SHORT_SIDE = 256
CHUNK = 32  # images decoded and perturbed together; each chunk goes through the adapter once per condition
Condition = tuple[str, int] | None  # (perturbation, severity); None is the clean pass


@dataclass
class _Passes:
    """Ranked classes (n, MAX_K) and ok (n,) per condition, and what the adapter calls took."""

    classes: dict[Condition, np.ndarray]
    ok: dict[Condition, np.ndarray]
    latencies: list[float] = field(default_factory=list)
    score_seconds: float = 0.0
    n_inputs: int = 0


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


def parse_perturbations(text: str | None) -> tuple[str, ...]:
    """`all` (or None) or comma-separated registered names; an unknown name lists the known ones."""
    if text is None or text.strip() == "all":
        return tuple(PERTURBATIONS)
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    try:
        for name in names:
            get_perturbation(name)
    except EvaluationError as exc:
        raise InputError(str(exc)) from None
    if not names:
        raise InputError("no perturbation named; give names like gaussian_noise,jpeg or 'all'")
    return names


def run_robustness(
    engine: Engine,
    *,
    model: str = "efficientnet-lite0",
    adapter: Any = None,
    dataset: str | None = None,
    references: Sequence[str] = (IMGT,),
    perturbations: Sequence[str] | None = None,
    severities: Sequence[int] = SEVERITIES,
    limit: int | None = None,
    seed: int = 0,
    adapter_options: dict[str, Any] | None = None,
    show_progress: bool = True,
    store: bool = True,
) -> RobustnessResult:
    """Top-1 of `model` on clean and perturbed images of the dataset (the first `limit` in the seeded order)
    against each reference, RR per reference, and the efficiency measurements; stored unless `store` is False.

    `adapter` replaces the model named by `model` (tests, or an adapter built by the caller).
    """
    names = parse_perturbations(",".join(perturbations) if perturbations else None)
    sevs = parse_severities(",".join(map(str, severities)))
    if limit is not None and limit < 1:
        raise InputError(f"--limit must be at least 1, got {limit}")
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        refs = [load_reference(s, ds, spec) for spec in dict.fromkeys(references)]
        images = sorted(select_images(s, ds, "all", limit, seed), key=lambda im: im.image_id)
        class_names = [c.name for c in dataset_vocabulary(s, ds).classes]
        dataset_name = ds.name
    if not images:
        raise InputError(f"dataset {dataset_name!r} has no readable image to run {model!r} on")
    adapter = adapter or load_adapter(model, **(adapter_options or {}))
    if not hasattr(adapter, "score"):
        name = getattr(adapter, "name", model)
        raise InputError(f"{name!r} is a generative model; robustness runs need a scoring model (classifier, CLIP)")
    adapter.check()
    conditions: list[Condition] = [None, *((n, v) for n in names for v in sevs)]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="relabel-robustness-") as tmp, PeakMemory() as memory:
        passes = _run_passes(adapter, images, class_names, conditions, seed, Path(tmp), show_progress)
        flops, flops_note = _flops(adapter, images, class_names, Path(tmp))
    seconds = time.perf_counter() - started
    result = _result(adapter, dataset_name, images, refs, names, sevs, seed, passes, memory, (flops, flops_note))
    result = replace(result, seconds=round(seconds, 3))
    if store:
        with session_scope(engine) as s:
            result = replace(result, id=store_robustness(s, get_dataset(s, dataset_name), result))
    return result


def _run_passes(
    adapter: Any,
    images: list[ImageRef],
    class_names: list[str],
    conditions: list[Condition],
    seed: int,
    tmp: Path,
    show_progress: bool,
) -> _Passes:
    n = len(images)
    passes = _Passes(
        {c: np.full((n, MAX_K), -1, np.int64) for c in conditions}, {c: np.zeros(n, bool) for c in conditions}
    )
    bar = progress_bar(n * len(conditions), "robustness", enabled=show_progress)
    try:
        for start in range(0, n, CHUNK):
            chunk = images[start : start + CHUNK]
            views = [_base_view(im) for im in chunk]
            for condition in conditions:
                bar.set_postfix_str("clean" if condition is None else f"{condition[0]} s{condition[1]}")
                _score_condition(adapter, chunk, views, start, condition, seed, class_names, tmp, passes)
                bar.update(len(chunk))
    finally:
        bar.close()
    return passes


def _base_view(ref: ImageRef) -> Image.Image | None:
    """The image at BASE_SHORT_SIDE on its shorter side (bicubic), or None when it cannot be decoded."""
    try:
        img = load_rgb(ref.path, min_side=BASE_SHORT_SIDE)
    except RelabelError:
        return None
    scale = BASE_SHORT_SIDE / min(img.size)
    size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    return img.resize(size, Image.Resampling.BICUBIC)


def _score_condition(
    adapter: Any,
    chunk: list[ImageRef],
    views: list[Image.Image | None],
    start: int,
    condition: Condition,
    seed: int,
    class_names: list[str],
    tmp: Path,
    passes: _Passes,
) -> None:
    """Perturb the chunk's views for `condition`, score them through the adapter, record classes and timings."""
    refs, rows = [], []
    for offset, (ref, view) in enumerate(zip(chunk, views)):
        if view is None:
            continue  # undecodable: stays ok=False (an error) in every pass
        img = view if condition is None else perturb(view, condition[0], condition[1], (seed << 32) + ref.image_id)
        path = tmp / f"{offset}.bmp"
        img.save(path, format="BMP")
        refs.append(ImageRef(ref.image_id, path, "", ref.key))
        rows.append(start + offset)
    if not refs:
        return
    began = time.perf_counter()
    outputs = adapter.score(refs, class_names)
    passes.score_seconds += time.perf_counter() - began
    passes.n_inputs += len(refs)
    for row, out in zip(rows, outputs):
        if out.error is None and out.scores is not None:
            top = np.argsort(-np.asarray(out.scores), kind="stable")[:MAX_K]
            passes.classes[condition][row, : len(top)] = top
            passes.ok[condition][row] = True
            passes.latencies.append(float(out.latency_s))


def _flops(adapter: Any, images: list[ImageRef], class_names: list[str], tmp: Path) -> tuple[float | None, str]:
    """FLOPs of one image through `adapter.score`, after the timed passes (any per-class cache is warm)."""
    view = next((v for v in map(_base_view, images[:8]) if v is not None), None)
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
    passes: _Passes,
    memory: PeakMemory,
    flops: tuple[float | None, str],
) -> RobustnessResult:
    ids = np.array([im.image_id for im in images], dtype=np.int64)
    clean, grid, retention = {}, {}, {}
    for ref in refs:

        def top1(condition: Condition, n_boot: int = 0, ref: Reference = ref) -> Any:
            info = RunInfo(0, str(condition or "clean"), adapter.name, "robustness", len(ids), 0, MAX_K, None)
            run = RunPredictions(info, ids, passes.classes[condition], passes.ok[condition], None)
            return score_run(run, ref, n_boot=n_boot, seed=seed).top1

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
        errors=int(sum((~ok).sum() for ok in passes.ok.values())),
        efficiency=_efficiency(description, passes, memory, flops),
        seconds=0.0,
        created_at=utcnow(),
        tool_version=__version__,
        adapter=description,
    )


def _efficiency(
    description: dict[str, Any], passes: _Passes, memory: PeakMemory, flops: tuple[float | None, str]
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
    )
