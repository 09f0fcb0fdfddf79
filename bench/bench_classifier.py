"""EfficientNet-Lite0 suggestions: throughput of the adapter against a bare torch loop, and top-1 accuracy.

Every photo of the sample is decoded and preprocessed once, before any timing, so that the bare loop and the
adapter's model-only path see the same (N, 3, 224, 224) tensors. Measured in one process, interleaved per repeat:

  bare loop         `softmax(model(x))` under `torch.inference_mode()` over the pre-decoded tensors
  adapter, model    `EfficientNetLite0Adapter.predict()` over the same tensors (numpy in, numpy out)
  decode + bare     decode and preprocess each batch, then the bare loop, one after the other
  adapter, score()  `EfficientNetLite0Adapter.score()` on the image files: decode, preprocess, model, outputs

The batch size sweep (1, 8, 32) times score() and the bare loop on the first --sweep-images photos; the full
comparison and top-1 then run at the fastest batch size for score().

Example:
  HF_HUB_OFFLINE=1 python bench/bench_classifier.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import PIL
import torch
from benchlib import MET, command_line, write_section

from relabel.common.vocabulary import load_builtin
from relabel.suggest.adapters.classifier import EfficientNetLite0Adapter
from relabel.suggest.types import ImageRef

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(__file__).resolve().parents[2] / "shared/data"
SECTION = "## Suggestions: EfficientNet-Lite0 throughput"
BATCH_SIZES = (1, 8, 32)
RATIO_TARGET = 0.95  # adapter throughput / bare torch loop throughput
NAMES = [c.name for c in load_builtin().classes]


def expect(condition: bool, message: str) -> None:
    if not condition:
        sys.exit(f"benchmark aborted: {message}")


def sample(folder: Path) -> tuple[list[ImageRef], np.ndarray]:
    """The photos as ImageRefs (read once, so later reads come from the page cache) and their true indices."""
    index = {c.wnid: c.index for c in load_builtin().classes}
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in {".jpeg", ".jpg", ".png"})
    expect(bool(paths), f"no images in {folder}; pass --sample DIR")
    expect(all(p.name.split("_", 1)[0] in index for p in paths), "file names must start with the wnid")
    refs = [ImageRef(i, p, "", p.name) for i, p in enumerate(paths) if p.read_bytes()]
    return refs, np.array([index[p.name.split("_", 1)[0]] for p in paths])


def batches(n: int, size: int) -> list[slice]:
    return [slice(i, min(i + size, n)) for i in range(0, n, size)]


def bare_loop(model: torch.nn.Module, pixels: np.ndarray, size: int) -> None:
    with torch.inference_mode():
        for part in batches(len(pixels), size):
            torch.softmax(model(torch.from_numpy(pixels[part])), dim=1).numpy()


def adapter_model(adapter: EfficientNetLite0Adapter, pixels: np.ndarray, size: int) -> None:
    for part in batches(len(pixels), size):
        adapter.predict(pixels[part])


def decode_then_bare(adapter: EfficientNetLite0Adapter, refs: list[ImageRef], size: int) -> None:
    with torch.inference_mode():
        for part in batches(len(refs), size):
            x = np.stack([adapter.prepare(r.path) for r in refs[part]])
            torch.softmax(adapter.model(torch.from_numpy(x)), dim=1).numpy()


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def adapter_for(size: int) -> EfficientNetLite0Adapter:
    adapter = EfficientNetLite0Adapter(batch_size=size, device="cpu")
    adapter.check()
    return adapter


def measure(refs: list[ImageRef], pixels: np.ndarray, size: int, repeats: int, full: bool) -> dict[str, list[float]]:
    """Seconds per repeat of each method at one batch size; `full` adds the two model-only/sequential paths."""
    adapter = adapter_for(size)
    adapter.score(refs[:size], NAMES)  # warm-up: first calls allocate
    bare_loop(adapter.model, pixels[:size], size)
    steps: dict[str, Callable[[], object]] = {"bare loop": lambda: bare_loop(adapter.model, pixels, size)}
    if full:
        steps["adapter, model only"] = lambda: adapter_model(adapter, pixels, size)
        steps["decode + bare loop"] = lambda: decode_then_bare(adapter, refs, size)
    steps["adapter, score()"] = lambda: adapter.score(refs, NAMES)
    runs: dict[str, list[float]] = {name: [] for name in steps}
    for repeat in range(repeats):
        order = list(steps) if repeat % 2 == 0 else list(steps)[::-1]  # ABC, CBA, ...: slow drifts cancel out
        for name in order:
            runs[name].append(timed(steps[name]))
    return runs


def top1(refs: list[ImageRef], truth: np.ndarray, size: int) -> tuple[float, int]:
    outputs = adapter_for(size).score(refs, NAMES)
    errors = sum(not o.ok for o in outputs)
    predicted = np.array([int(np.argmax(o.scores)) if o.scores is not None else -1 for o in outputs])
    return float(np.mean(predicted == truth)), errors


def row(name: str, n: int, seconds: list[float], base: float | None = None) -> str:
    median = statistics.median(seconds)
    ratio = f"{base / median:.3f}" if base else "—"
    return (
        f"| {name} | {n:,} | {median:.2f} | {min(seconds):.2f} | {max(seconds):.2f} | "
        f"{n / median:,.1f} | {1000 * median / n:.1f} | {ratio} |"
    )


TABLE_HEAD = (
    "| path | images | median s | min s | max s | images/s | ms/image | throughput vs {base} |\n"
    "|---|---:|---:|---:|---:|---:|---:|---:|\n"
)


def machine_line() -> str:
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"nproc {nproc}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"Python {platform.python_version()}, Pillow {PIL.__version__}, {platform.system()} {platform.machine()}, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )


def sweep_table(sweep: dict[int, dict[str, list[float]]], n: int) -> str:
    lines = []
    for size, runs in sweep.items():
        base = statistics.median(runs["bare loop"])
        lines.append(row(f"batch {size}: bare loop", n, runs["bare loop"]))
        lines.append(row(f"batch {size}: adapter, score()", n, runs["adapter, score()"], base))
    return TABLE_HEAD.format(base="bare loop") + "\n".join(lines)


def full_table(runs: dict[str, list[float]], n: int) -> str:
    bare, sequential = statistics.median(runs["bare loop"]), statistics.median(runs["decode + bare loop"])
    lines = [
        row("bare loop (pre-decoded tensors)", n, runs["bare loop"]),
        row("adapter, model only: `predict()` (pre-decoded tensors)", n, runs["adapter, model only"], bare),
        row("decode + preprocess, then bare loop (sequential)", n, runs["decode + bare loop"]),
        row("adapter, end to end: `score()` on the files", n, runs["adapter, score()"], sequential),
    ]
    return TABLE_HEAD.format(base="baseline (row above)") + "\n".join(lines)


def ratios(runs: dict[str, list[float]]) -> dict[str, float]:
    """Throughput ratios (higher is better for the adapter): each is baseline seconds / adapter seconds."""
    med = {name: statistics.median(seconds) for name, seconds in runs.items()}
    return {
        "model": med["bare loop"] / med["adapter, model only"],
        "end_to_end": med["decode + bare loop"] / med["adapter, score()"],
        "end_to_end_vs_bare": med["bare loop"] / med["adapter, score()"],
    }


@dataclass
class Results:
    sweep: dict[int, dict[str, list[float]]]  # batch size -> path -> seconds per repeat (sweep images)
    runs: dict[str, list[float]]  # path -> seconds per repeat (all photos, best batch size)
    best: int  # batch size used for `runs` and top-1
    n: int
    top1: float
    errors: int


def report(args: argparse.Namespace, machine: str, res: Results) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    r, sample = ratios(res.runs), os.path.relpath(args.sample, REPO)
    met = {key: MET[value >= RATIO_TARGET] for key, value in r.items()}
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}, {os.getloadavg()[0]:.2f} at the end
- Model: EfficientNet-Lite0 (4.65 M parameters) on the CPU in float32, channels-last weights; preprocessing:
  shorter side 256 (bicubic), centre crop 224, (x − 0.498) / 0.502
- Repeats: {args.repeats}, interleaved (order reversed every other repeat); the photos are read once first (page
  cache) and decoded once into tensors for the pre-decoded paths (not timed)

Batch size sweep, first {args.sweep_images} photos of `{sample}`:

{sweep_table(res.sweep, args.sweep_images)}

All {res.n} photos at the fastest batch size for `score()`, **{res.best}**:

{full_table(res.runs, res.n)}

| target | measured (median) | met |
|---|---|---|
| adapter model path ≥ {RATIO_TARGET:.2f} × bare torch loop (same tensors) | {r["model"]:.3f} | {met["model"]} |
| adapter `score()` ≥ {RATIO_TARGET:.2f} × sequential decode + bare loop | {r["end_to_end"]:.3f} | {met["end_to_end"]} |

`score()` end to end runs at {r["end_to_end_vs_bare"]:.3f} × the throughput of the bare model loop, which does no
decoding at all. Top-1 accuracy on the {res.n} photos (label = the wnid in the file name), batch size {res.best}:
**{100 * res.top1:.1f} %** ({res.errors} error outputs).
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs of every path (default 3)")
    parser.add_argument("--sample", type=Path, default=SHARED / "imagenet-sample", help="folder of <wnid>_*.JPEG")
    parser.add_argument("--sweep-images", type=int, default=256, help="photos per batch-size trial (default 256)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    args = parser.parse_args(argv)
    expect(args.repeats >= 1, "--repeats must be at least 1")
    expect(args.sweep_images >= max(BATCH_SIZES), f"--sweep-images must be at least {max(BATCH_SIZES)}")
    expect(args.sample.is_dir(), f"sample folder {args.sample} not found; pass --sample DIR")
    return args


def run(args: argparse.Namespace) -> Results:
    refs, truth = sample(args.sample)
    probe = adapter_for(1)
    pixels = np.stack([probe.prepare(r.path) for r in refs])  # (N, 3, 224, 224), not timed
    few = args.sweep_images
    sweep = {size: measure(refs[:few], pixels[:few], size, args.repeats, full=False) for size in BATCH_SIZES}
    best = min(BATCH_SIZES, key=lambda size: statistics.median(sweep[size]["adapter, score()"]))
    runs = measure(refs, pixels, best, args.repeats, full=True)
    accuracy, errors = top1(refs, truth, best)
    return Results(sweep, runs, best, len(refs), accuracy, errors)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    machine = machine_line()  # before the load that the benchmark itself adds
    section = report(args, machine, run(args))
    print(section)
    if args.write:
        write_section(SECTION, section)
        print(f"wrote the section {SECTION[3:]!r} of {REPO / 'BENCHMARKS.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
