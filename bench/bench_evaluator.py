"""Evaluator benchmarks: rescoring 100 models on 50,000 images against a new reference with paired intervals,
the joint bootstrap behind rank intervals, and the perturbation grid.

(a) Rescoring. 100 models' stored top-5 predictions on 50,000 images (synthetic int64 class indices, 1 % failed
    calls per model, half of them failed replies scored as wrong) are scored against a new snapshot: a synthetic
    multi-label reference of about 1.2 labels per image, 6 % of images with an empty set. One timed run builds the
    `LabelSets` from the snapshot's lists, scores top-1 and top-5 under the ReaL rule (`score_many(ks=(1, 5))`)
    and top-1 against single ImGT labels, each with its Wilson interval, then every model's paired difference
    ImGT → new reference on the images both score, with its paired bootstrap interval (1,000 resamples), drawn
    for each model on its own as `relabel evaluate` does, so that no model's interval depends on the others.
    Target: ≤ 1 s (median).
(b) Joint bootstrap. The ranks of the 100 models under ImGT and under the new reference on the images every model
    scored under both, in 1,000 resamples of those images drawn once for all models (`JointBootstrap.means` over
    200 columns, then `rank_intervals`), and the reliability table's resamples: each model's top-1 on its own
    scored images and on the images every model scored, over 1,000 draws of the reference's images
    (`relabel.evaluation.row_resamples`, as `relabel evaluate` takes them). Target: ≤ 5 s
    (median).
(c) Perturbation grid. Every registered corruption at severities 1-5 on photos of the sample, each first resized
    to 224 px on the short side (bicubic, not timed), as the classifier would see it: images/s overall and per
    corruption. `perturb()` on PIL images, one process.

`--skip-grid` measures (a) and (b) only and keeps the grid's numbers of the section already in BENCHMARKS.md.
`--blas-threads 1` times the matrix products on one thread: on a machine shared with other work, BLAS threads
that wait for a busy core can make them many times slower than the work they do.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_evaluator.py --repeats 5 --write
  HF_HUB_OFFLINE=1 python bench/bench_evaluator.py --repeats 5 --skip-grid --write
  HF_HUB_OFFLINE=1 python bench/bench_evaluator.py --repeats 5 --skip-grid --blas-threads 1 --write
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import statistics
import sys
import time
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from benchlib import MET, REPO, SHARED, command_line, machine_line, write_section
from PIL import Image

from evaluator import LabelSets
from evaluator.paired import BatchPairedDifference, JointBootstrap, paired_many
from evaluator.perturbations import PERTURBATIONS, SEVERITIES, perturb
from evaluator.ranking import rank_intervals
from evaluator.scoring import image_outcomes, score_many
from relabel.evaluation.row_resamples import resample_top1

SECTION = "## Evaluator: rescoring and perturbations"
RESCORE_TARGET_S = 1.0
BOOTSTRAP_TARGET_S = 5.0
N_BOOT = 1000
N_CLASSES = 1000
SET_SIZES = np.array([0, 1, 2, 3, 4])  # labels per image, drawn with SET_PROBS: mean 1.22, 6 % empty
SET_PROBS = np.array([0.06, 0.74, 0.14, 0.04, 0.02])


@dataclass
class Workload:
    preds: np.ndarray  # (models, images, 5) int64
    ok: np.ndarray  # (models, images) bool
    failed: np.ndarray  # (models, images) bool: the failed replies among the failed calls (scored as wrong)
    new_sets: list[list[int]]  # the new snapshot, as it comes out of the workspace
    imgt: np.ndarray  # (images,) int


def make_workload(models: int, images: int, seed: int) -> Workload:
    """Predictions that hit a label of the new reference about 70 % of the time at top-1."""
    rng = np.random.default_rng(seed)
    sizes = rng.choice(SET_SIZES, size=images, p=SET_PROBS)
    sets = [rng.choice(N_CLASSES, size=s, replace=False).tolist() for s in sizes]
    imgt = np.array([s[0] if s else int(rng.integers(N_CLASSES)) for s in sets])
    preds = rng.integers(0, N_CLASSES, size=(models, images, 5))
    first = np.array([s[0] if s else -1 for s in sets])
    hit = (rng.random((models, images)) < 0.7) & (first >= 0)
    preds[..., 0] = np.where(hit, first, preds[..., 0])
    ok = rng.random((models, images)) >= 0.01
    return Workload(preds, ok, ~ok & (rng.random((models, images)) < 0.5), sets, imgt)


def rescore(work: Workload) -> dict[str, float]:
    """One full rescoring; seconds per step."""
    t0 = time.perf_counter()
    reference = LabelSets.from_lists(work.new_sets, N_CLASSES)
    t1 = time.perf_counter()
    real = score_many(work.preds, reference, ks=(1, 5), ok=work.ok, failed=work.failed)
    t2 = time.perf_counter()
    imgt = score_many(work.preds, work.imgt, ks=(1,), ok=work.ok, failed=work.failed, n_classes=N_CLASSES)
    t3 = time.perf_counter()
    paired = paired_gain(work, reference)
    t4 = time.perf_counter()
    if not (0.6 < float(np.nanmean(real[1].accuracy)) < 0.8 and imgt[1].n_scored.min() > 0):
        sys.exit("benchmark aborted: the synthetic workload scored outside the expected range")
    if not (paired.ci_low is not None and np.all(paired.ci_low < paired.ci_high)):
        sys.exit("benchmark aborted: the paired intervals are missing or degenerate")
    return {"build LabelSets": t1 - t0, "ReaL rule top-1 + top-5 (Wilson)": t2 - t1, "ImGT top-1 (Wilson)": t3 - t2,
            f"paired Δ ImGT → new, {N_BOOT:,} resamples": t4 - t3, "total": t4 - t0}  # fmt: skip


def outcomes(work: Workload, reference: LabelSets) -> tuple[np.ndarray, ...]:
    """Per model and image: right and scored under ImGT, then under the new reference, (models, images) each."""
    right_a, scored_a = image_outcomes(work.preds, work.imgt, 1, work.ok, failed=work.failed, n_classes=N_CLASSES)
    right_b, scored_b = image_outcomes(work.preds, reference, 1, work.ok, failed=work.failed)
    return right_a, scored_a, right_b, scored_b


def paired_gain(work: Workload, reference: LabelSets) -> BatchPairedDifference:
    """Each model's paired difference on its own, from the same seed, as `relabel evaluate` draws it (so a model's
    interval never depends on the other models); gathered into one batch for the checks."""
    right_a, scored_a, right_b, scored_b = outcomes(work, reference)
    common = scored_a & scored_b
    rows = [paired_many(right_a[i : i + 1], right_b[i : i + 1], common[i : i + 1], n_boot=N_BOOT)
            for i in range(len(right_a))]  # fmt: skip
    return BatchPairedDifference(
        *(np.concatenate([getattr(r, f.name) for r in rows]) for f in fields(BatchPairedDifference))
    )


def rank_uncertainty(work: Workload, reference: LabelSets) -> dict[str, float]:
    """The joint bootstrap behind the rank intervals; seconds per step."""
    t0 = time.perf_counter()
    right_a, scored_a, right_b, scored_b = outcomes(work, reference)
    common = np.all(scored_a & scored_b, axis=0)
    columns = np.concatenate([right_a[:, common], right_b[:, common]])
    t1 = time.perf_counter()
    means = JointBootstrap(int(common.sum()), N_BOOT, seed=0).means(columns)
    t2 = time.perf_counter()
    m = len(work.preds)
    intervals = rank_intervals(means[:, :m], means[:, m:], [f"model {i}" for i in range(m)])
    t3 = time.perf_counter()
    # the reliability table: each row's top-1 on its own images (its overall score's interval), then on the images
    # every row scored (its ranks), over draws of the reference's images
    own = resample_top1(right_b, scored_b, N_BOOT, seed=0)
    ranked = resample_top1(right_b, scored_b & np.all(scored_b, axis=0), N_BOOT, seed=0)
    t4 = time.perf_counter()
    if len(intervals) != m or not (np.isfinite(means).all() and np.isfinite(own).all() and np.isfinite(ranked).all()):
        sys.exit("benchmark aborted: the joint bootstrap gave no finite resamples")
    return {"per-image outcomes on common images": t1 - t0,
            f"JointBootstrap.means: {N_BOOT:,} resamples × {2 * m} columns": t2 - t1, "rank_intervals": t3 - t2,
            f"reliability rows: {N_BOOT:,} resamples × {m} own + {m} common columns": t4 - t3,
            "total": t4 - t0}  # fmt: skip


def bench_bootstrap(work: Workload, repeats: int) -> dict[str, list[float]]:
    reference = LabelSets.from_lists(work.new_sets, N_CLASSES)
    rank_uncertainty(work, reference)  # warm-up
    runs = [rank_uncertainty(work, reference) for _ in range(repeats)]
    return {step: [run[step] for run in runs] for step in runs[0]}


def bench_rescoring(work: Workload, repeats: int) -> dict[str, list[float]]:
    rescore(work)  # warm-up: first calls allocate
    runs = [rescore(work) for _ in range(repeats)]
    return {step: [run[step] for run in runs] for step in runs[0]}


def load_photos(folder: Path, count: int) -> list[Image.Image]:
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in {".jpeg", ".jpg", ".png"})[:count]
    if len(paths) < count:
        sys.exit(f"benchmark aborted: {folder} has {len(paths)} photos, need {count}; pass --sample DIR")
    photos = []
    for path in paths:
        with Image.open(path) as image:
            rgb = image.convert("RGB")
        scale = 224 / min(rgb.size)
        photos.append(rgb.resize((round(rgb.width * scale), round(rgb.height * scale)), Image.Resampling.BICUBIC))
    return photos


def bench_grid(photos: list[Image.Image]) -> dict[str, float]:
    """Seconds per corruption for all photos × all severities."""
    seconds = {}
    for name in PERTURBATIONS:
        start = time.perf_counter()
        for severity in SEVERITIES:
            for seed, photo in enumerate(photos):
                perturb(photo, name, severity, seed=seed)
        seconds[name] = time.perf_counter() - start
    return seconds


def rescoring_table(runs: dict[str, list[float]]) -> str:
    head = "| step | median s | min s | max s |\n|---|---:|---:|---:|\n"
    return head + "\n".join(
        f"| {step} | {statistics.median(s):.3f} | {min(s):.3f} | {max(s):.3f} |" for step, s in runs.items()
    )


def grid_table(seconds: dict[str, float], images: int) -> str:
    per = len(SEVERITIES) * images
    total = sum(seconds.values())
    rows = [f"| {name} | {per:,} | {s:.2f} | {per / s:,.0f} | {1000 * s / per:.2f} |" for name, s in seconds.items()]
    rows.append(f"| **all** | {per * len(seconds):,} | {total:.2f} | {per * len(seconds) / total:,.0f} | "
                f"{1000 * total / (per * len(seconds)):.2f} |")  # fmt: skip
    head = "| corruption | images | s | images/s | ms/image |\n|---|---:|---:|---:|---:|\n"
    return head + "\n".join(rows)


def report(
    args: argparse.Namespace,
    machine: str,
    runs: dict[str, list[float]],
    boot: dict[str, list[float]],
    grid: dict[str, float] | None,
) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    total, boot_total = statistics.median(runs["total"]), statistics.median(boot["total"])
    boot_met = MET[boot_total <= BOOTSTRAP_TARGET_S]
    sample = Path(args.sample).resolve()
    shown = sample.relative_to(REPO.parent) if sample.is_relative_to(REPO.parent) else sample
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}; BLAS threads {args.blas_threads or "numpy's default"}
- Rescoring: {args.models} models × {args.images:,} images × top-5 int64 predictions, 1 % failed calls (half of
  them failed replies, scored as wrong); new reference with 1.22 labels per image on average, 6 % empty;
  {args.repeats} timed runs after one warm-up

{rescoring_table(runs)}

Rank intervals: the {args.models} models' top-1 under ImGT and under the new reference on the images every model
scored under both, in {N_BOOT:,} joint resamples of those images; then the reliability table's resamples, each
model's top-1 on its own images and on the common ones; {args.repeats} timed runs after one warm-up:

{rescoring_table(boot)}

| target | measured (median) | met |
|---|---|---|
| rescore {args.models} models × {args.images:,} images (ReaL top-1, top-5, ImGT top-1, paired Δ with \
intervals) ≤ {RESCORE_TARGET_S:.0f} s | {total:.3f} s | {MET[total <= RESCORE_TARGET_S]} |
| joint bootstrap for rank intervals, {args.models} models × 2 references, {N_BOOT:,} resamples, with \
the reliability rows' resamples ≤ {BOOTSTRAP_TARGET_S:.0f} s | {boot_total:.3f} s | {boot_met} |

{grid_text(args, grid, shown)}
"""


GRID_START = "Perturbation grid:"


def grid_text(args: argparse.Namespace, grid: dict[str, float] | None, shown: Path) -> str:
    """The grid's part of the section: measured now, or (None, --skip-grid) kept from BENCHMARKS.md."""
    if grid is not None:
        return f"""{GRID_START} {len(PERTURBATIONS)} corruptions × severities 1-5 on the first {args.photos} photos of
`../{shown}`, each resized to 224 px on the short side first (not timed);
`perturb()` on PIL images, one run, one process:

{grid_table(grid, args.photos)}"""
    path = REPO / "BENCHMARKS.md"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    start = text.find(SECTION)
    end = text.find("\n## ", start + len(SECTION)) if start >= 0 else -1
    section = text[start : end if end >= 0 else len(text)]
    kept = section[section.find(GRID_START) :].rstrip() if GRID_START in section else ""
    note = "not re-measured by this run (`--skip-grid`); kept from the section's previous run"
    if not kept:
        return f"{GRID_START} not measured by this run (`--skip-grid`)."
    return kept.replace(GRID_START, f"{GRID_START} ({note})", 1)


def blas_threads(count: int | None) -> contextlib.AbstractContextManager[object]:
    """A limit on BLAS threads for the timed steps, or no limit (None)."""
    if count is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=count, user_api="blas")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="timed rescoring runs (default 5)")
    parser.add_argument("--models", type=int, default=100, help="models to rescore (default 100)")
    parser.add_argument("--images", type=int, default=50_000, help="images per model (default 50,000)")
    parser.add_argument("--photos", type=int, default=100, help="sample photos in the perturbation grid")
    parser.add_argument("--sample", type=Path, default=SHARED / "imagenet-sample", help="folder of photos")
    parser.add_argument("--skip-grid", action="store_true", help="keep the perturbation grid's numbers as written")
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    parser.add_argument("--blas-threads", type=int, default=None,
                        help="BLAS threads (default: numpy's own); 1 keeps a machine shared with other work from "
                        "stalling the matrix products (needs threadpoolctl, a scikit-learn dependency)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.models < 1 or args.images < 100 or args.photos < 1:
        parser.error("--repeats, --models and --photos must be ≥ 1 and --images ≥ 100")
    if not args.sample.is_dir():
        parser.error(f"sample folder {args.sample} not found; pass --sample DIR")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    machine = machine_line()  # before the load that the benchmark itself adds
    work = make_workload(args.models, args.images, seed=0)
    with blas_threads(args.blas_threads):
        runs = bench_rescoring(work, args.repeats)
        boot = bench_bootstrap(work, args.repeats)
    grid = None if args.skip_grid else bench_grid(load_photos(args.sample, args.photos))
    section = report(args, machine, runs, boot, grid)
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
