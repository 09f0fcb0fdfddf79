"""torch intra-op threads for local models: EfficientNet-Lite0 forward passes at 1 and 2 threads, quiet and busy.

What `relabel suggest --threads` chooses between. The photos are decoded and preprocessed once, before any timing
(decoding is single-threaded and the same at any thread count); each pass is then the adapter's `predict()` over
all of them in suggest's batches of 8, the part of `score()` that torch's threads run. Two conditions: "quiet"
(whatever else the machine runs) and "busy": one extra process spinning a core (`python -c "while True: pass"`,
started for the condition, killed after it, and ending itself after BURNER_DEADLINE_S should this script be
killed first). Repeats are interleaved (quiet and busy, 1 and 2 threads, in turn) so slow drifts hit every cell
alike; the table shows the median, min and max.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_threads.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch
from benchlib import SHARED, command_line, machine_line, write_section

from relabel.suggest.adapters.classifier import EfficientNetLite0Adapter
from relabel.suggest.types import ImageRef

SECTION = "## Suggestions: torch threads for local models under load"
THREADS = (1, 2)
CONDITIONS = ("quiet", "busy")
BURNER_DEADLINE_S = 300  # the spinning process ends itself after this long even if nobody kills it
BATCH = 8  # the adapter's default batch size


def sample(folder: Path, n: int) -> list[ImageRef]:
    """Every k-th photo of the sorted folder, n in all (spread over the classes), read once into the page cache."""
    paths = sorted(p for p in folder.iterdir() if p.suffix.lower() in {".jpeg", ".jpg", ".png"})
    if len(paths) < n:
        sys.exit(f"benchmark aborted: {folder} has {len(paths)} photos, fewer than --images {n}")
    chosen = paths[:: len(paths) // n][:n]
    return [ImageRef(i, p, "", p.name) for i, p in enumerate(chosen) if p.read_bytes()]


@contextlib.contextmanager
def cpu_burner(active: bool) -> Iterator[None]:
    """One process spinning a core while the block runs (nothing when not `active`); always killed after it."""
    if not active:
        yield
        return
    code = f"import time\nend = time.monotonic() + {BURNER_DEADLINE_S}\nwhile time.monotonic() < end: pass"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.5)  # let it reach full speed
        yield
    finally:
        proc.kill()
        proc.wait()


def timed_pass(adapter: EfficientNetLite0Adapter, batches: list[np.ndarray], threads: int) -> float:
    torch.set_num_threads(threads)
    started = time.perf_counter()
    for batch in batches:
        adapter.predict(batch)
    return time.perf_counter() - started


def measure(refs: list[ImageRef], repeats: int) -> tuple[dict[tuple[str, int], list[float]], dict[str, float]]:
    """Seconds per pass by (condition, threads), and the 1-minute load average seen at each condition's start."""
    adapter = EfficientNetLite0Adapter(batch_size=BATCH)
    pixels = np.stack([adapter.prepare(ref.path) for ref in refs])
    batches = [pixels[i : i + BATCH] for i in range(0, len(pixels), BATCH)]
    timed_pass(adapter, batches[:2], 1)  # load and warm up
    runs: dict[tuple[str, int], list[float]] = {(c, t): [] for c in CONDITIONS for t in THREADS}
    loads: dict[str, list[float]] = {c: [] for c in CONDITIONS}
    for repeat in range(repeats):
        for condition in CONDITIONS if repeat % 2 == 0 else CONDITIONS[::-1]:
            with cpu_burner(condition == "busy"):
                loads[condition].append(os.getloadavg()[0])
                for threads in THREADS if repeat % 2 == 0 else THREADS[::-1]:
                    runs[condition, threads].append(timed_pass(adapter, batches, threads))
                    print(f"{condition}, {threads} thread(s): {runs[condition, threads][-1]:.2f} s", file=sys.stderr)
    return runs, {c: statistics.median(v) for c, v in loads.items()}


def table(runs: dict[tuple[str, int], list[float]], loads: dict[str, float], n: int) -> str:
    lines = [
        "| condition | load avg (1 min) | threads | median s | min s | max s | images/s | vs 1 thread |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (condition, threads), seconds in runs.items():
        median = statistics.median(seconds)
        one = statistics.median(runs[condition, 1])
        lines.append(
            f"| {condition} | {loads[condition]:.2f} | {threads} | {median:.2f} | {min(seconds):.2f} | "
            f"{max(seconds):.2f} | {n / median:.1f} | {one / median:.2f}× |"
        )
    return "\n".join(lines)


def reading(runs: dict[tuple[str, int], list[float]], loads: dict[str, float]) -> str:
    """One sentence on what the table says about the default rule, from the numbers themselves."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    parts = []
    for condition in CONDITIONS:
        one, two = (statistics.median(runs[condition, t]) for t in THREADS)
        side = "at or above" if loads[condition] >= cores else "below"
        parts.append(
            f"{condition} (load {loads[condition]:.1f}, {side} the {cores} cores): 1 thread "
            f"{two / one:.1f}× as fast as 2"
        )
    return "Reading: " + "; ".join(parts) + "."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sample", type=Path, default=SHARED / "imagenet-sample")
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="Rewrite the section of BENCHMARKS.md.")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("benchmark stopped (SIGTERM)"))  # still kills the burner
    machine = machine_line()
    refs = sample(args.sample, args.images)
    runs, loads = measure(refs, args.repeats)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    section = f"""{SECTION}

EfficientNet-Lite0 forward passes (`predict()`, batches of {BATCH}, photos decoded beforehand) over {len(refs)}
photos of the ImageNet sample, median of {args.repeats} interleaved passes. "busy": one extra process spinning a
core for the condition's duration. "load avg" is the 1-minute load average at the condition's start (median).
`relabel suggest --threads` defaults to 1 thread when that load reaches the core count and keeps torch's own
count (at most the core count) below it, as before; a condition below the core count is measured only when the
machine is otherwise idle.

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}

{table(runs, loads, len(refs))}

{reading(runs, loads)}
"""
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
