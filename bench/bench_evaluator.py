"""Evaluator benchmarks: rescoring 100 models on 50,000 images against a new reference, and the perturbation grid.

(a) Rescoring. 100 models' stored top-5 predictions on 50,000 images (synthetic int64 class indices, 1 % failed
    calls per model) are scored against a new snapshot: a synthetic multi-label reference of about 1.2 labels per
    image, 6 % of images with an empty set. One timed run builds the `LabelSets` from the snapshot's lists, scores
    top-1 and top-5 under the ReaL rule (`score_many(ks=(1, 5))`) and top-1 against single ImGT labels. Target:
    ≤ 1 s (median).
(b) Perturbation grid. Every registered corruption at severities 1-5 on photos of the sample, each first resized
    to 224 px on the short side (bicubic, not timed), as the classifier would see it: images/s overall and per
    corruption. `perturb()` on PIL images, one process.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_evaluator.py --repeats 5 --write
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from benchlib import MET, REPO, SHARED, command_line, machine_line, write_section
from PIL import Image

from evaluator import LabelSets
from evaluator.perturbations import PERTURBATIONS, SEVERITIES, perturb
from evaluator.scoring import score_many

SECTION = "## Evaluator: rescoring and perturbations"
RESCORE_TARGET_S = 1.0
N_CLASSES = 1000
SET_SIZES = np.array([0, 1, 2, 3, 4])  # labels per image, drawn with SET_PROBS: mean 1.22, 6 % empty
SET_PROBS = np.array([0.06, 0.74, 0.14, 0.04, 0.02])


@dataclass
class Workload:
    preds: np.ndarray  # (models, images, 5) int64
    ok: np.ndarray  # (models, images) bool
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
    return Workload(preds, rng.random((models, images)) >= 0.01, sets, imgt)


def rescore(work: Workload) -> dict[str, float]:
    """One full rescoring; seconds per step."""
    t0 = time.perf_counter()
    reference = LabelSets.from_lists(work.new_sets, N_CLASSES)
    t1 = time.perf_counter()
    real = score_many(work.preds, reference, ks=(1, 5), ok=work.ok)
    t2 = time.perf_counter()
    imgt = score_many(work.preds, work.imgt, ks=(1,), ok=work.ok, n_classes=N_CLASSES)
    t3 = time.perf_counter()
    if not (0.6 < float(np.nanmean(real[1].accuracy)) < 0.8 and imgt[1].n_scored.min() > 0):
        sys.exit("benchmark aborted: the synthetic workload scored outside the expected range")
    return {"build LabelSets": t1 - t0, "ReaL rule top-1 + top-5": t2 - t1, "ImGT top-1": t3 - t2, "total": t3 - t0}


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


def report(args: argparse.Namespace, machine: str, runs: dict[str, list[float]], grid: dict[str, float]) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    total = statistics.median(runs["total"])
    sample = Path(args.sample).resolve()
    shown = sample.relative_to(REPO.parent) if sample.is_relative_to(REPO.parent) else sample
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}
- Rescoring: {args.models} models × {args.images:,} images × top-5 int64 predictions, 1 % failed calls; new
  reference with 1.22 labels per image on average, 6 % empty; {args.repeats} timed runs after one warm-up

{rescoring_table(runs)}

| target | measured (median) | met |
|---|---|---|
| rescore {args.models} models × {args.images:,} images (ReaL top-1, top-5, ImGT top-1) ≤ {RESCORE_TARGET_S:.0f} s \
| {total:.3f} s | {MET[total <= RESCORE_TARGET_S]} |

Perturbation grid: {len(PERTURBATIONS)} corruptions × severities 1-5 on the first {args.photos} photos of
`../{shown}`, each resized to 224 px on the short side first (not timed);
`perturb()` on PIL images, one run, one process:

{grid_table(grid, args.photos)}
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="timed rescoring runs (default 5)")
    parser.add_argument("--models", type=int, default=100, help="models to rescore (default 100)")
    parser.add_argument("--images", type=int, default=50_000, help="images per model (default 50,000)")
    parser.add_argument("--photos", type=int, default=100, help="sample photos in the perturbation grid")
    parser.add_argument("--sample", type=Path, default=SHARED / "imagenet-sample", help="folder of photos")
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.models < 1 or args.images < 100 or args.photos < 1:
        parser.error("--repeats, --models and --photos must be ≥ 1 and --images ≥ 100")
    if not args.sample.is_dir():
        parser.error(f"sample folder {args.sample} not found; pass --sample DIR")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    machine = machine_line()  # before the load that the benchmark itself adds
    runs = bench_rescoring(make_workload(args.models, args.images, seed=0), args.repeats)
    grid = bench_grid(load_photos(args.sample, args.photos))
    section = report(args, machine, runs, grid)
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
