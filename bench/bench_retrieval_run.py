"""A retrieval run end to end: `relabel suggest --protocol retrieval` over the 1,000 sample photos with a tiny CLIP
built from its config (offline; random weights, so its scores mean nothing: the time is what is measured), then
`relabel evaluate`'s retrieval rows read from the stored embedding files, at the sample's size and at ImageNet
val's (50,000 images × 1,000 class queries, synthetic embeddings stored as a run stores them).

Usage:
  HF_HUB_OFFLINE=1 python bench/bench_retrieval_run.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the tiny model builders live in tests/, which is not an installed package

from bench_argus_tasks import N_CLASSES, references  # noqa: E402
from benchlib import MET, SHARED, command_line, machine_line, write_section  # noqa: E402

from db import create_db_engine, init_db  # noqa: E402
from db.models import ModelRun  # noqa: E402
from relabel.cli import main as relabel  # noqa: E402
from relabel.common.vocabulary import load_builtin  # noqa: E402
from relabel.evaluation import evaluate  # noqa: E402
from relabel.evaluation.tasks_retrieval import load_run_embeddings, retrieval_rows  # noqa: E402
from relabel.ingest import ingest_dataset, plan_ingest  # noqa: E402
from relabel.suggest.retrieval_run import CHUNK  # noqa: E402
from relabel.suggest.retrieval_store import write_part, write_texts  # noqa: E402
from tests.tiny_models import save_tiny_clip  # noqa: E402

TITLE = "## A retrieval run: embeddings stored, then scored"
PHOTOS = SHARED / "imagenet-sample"


def timed(repeats: int, call: Callable[[], Any], cpu: list[float] | None = None) -> tuple[list[float], Any]:
    """Wall-clock seconds of `repeats` calls after a warm-up; their CPU seconds (this process, every thread)
    appended to `cpu` when given: on a shared machine the wall clock also counts the time others hold the cores."""
    call()  # warm-up
    seconds, result = [], None
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        result = call()
        seconds.append(time.perf_counter() - start)
        if cpu is not None:
            cpu.append(time.process_time() - start_cpu)
    return seconds, result


def once(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def quiet_cli(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        relabel(list(args))
    return out.getvalue()


def bench_sample(folder: Path, repeats: int) -> dict[str, Any]:
    """Ingest the photos, embed them (timed once: a second call finds them done), score against ImGT."""
    workspace = folder / "ws"
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    init_db(engine)
    vocab = load_builtin()
    plan = plan_ingest(PHOTOS, vocab)
    ingest_dataset(engine, plan, dataset="sample", root=PHOTOS, vocab=vocab, show_progress=False, workers=1)
    clip = save_tiny_clip(folder / "clip")
    args = ["--workspace", str(workspace), "suggest", "--model", f"clip:{clip}", "--protocol", "retrieval", "--run",
            "ret", "--quiet", "--batch-size", "32"]  # fmt: skip
    first, line = once(lambda: quiet_cli(*args))
    if "now 1000 embedded" not in line:
        sys.exit(f"benchmark aborted: the run said {line!r}")
    again, line_again = once(lambda: quiet_cli(*args))
    if "1000 done before, now 0 embedded" not in line_again:
        sys.exit(f"benchmark aborted: the resumed run said {line_again!r}")
    seconds, ev = timed(repeats, lambda: evaluate(engine, references=["imgt"], n_boot=1000, store=False))
    engine.dispose()
    said = line.strip().split("; embeddings in")[0]
    return {"first": first, "again": again, "line": said, "evaluate": seconds, "row": ev.tasks.retrieval[0]}


def bench_stored(folder: Path, repeats: int, images: int, dim: int) -> dict[str, Any]:
    """Synthetic embeddings of `images` images stored in parts of CHUNK as a run stores them; read and scored
    against ImGT and a ReGT snapshot (1,000 resamples for Δ mAP)."""
    imgt, regt = references(images, seed=1)
    rng = np.random.default_rng(4)
    queries = rng.standard_normal((N_CLASSES, dim), dtype=np.float32)
    gallery = queries[imgt.labels[:, 0]] * np.float32(0.06) + rng.standard_normal((images, dim), dtype=np.float32)
    store = folder / "stored"
    write_texts(store, queries, {"model": "synthetic"})
    for start in range(0, images, CHUNK):
        write_part(store, list(range(start, min(start + CHUNK, images))), gallery[start : start + CHUNK], {})
    run = ModelRun(dataset_id=0, name="synthetic", model="synthetic", protocol="retrieval",
                   params={"embeddings": str(store)})  # fmt: skip
    cpu: dict[str, list[float]] = {"load": [], "one": [], "both": []}
    load, stored = timed(repeats, lambda: load_run_embeddings(run, N_CLASSES), cpu["load"])
    one, _ = timed(repeats, lambda: retrieval_rows(run, stored, ["imgt"], [imgt]), cpu["one"])
    both, rows = timed(
        repeats, lambda: retrieval_rows(run, stored, ["imgt", "regt"], [imgt, regt], n_boot=1000), cpu["both"]
    )
    if not 0 < rows[0].t2i_map < 1 or rows[1].versus is None or rows[1].versus.ci_low is None:
        sys.exit("benchmark aborted: the stored-embedding scores are degenerate")
    parts = len(list(store.glob("part-*.npz")))
    return {"load": load, "one": one, "both": both, "rows": rows, "parts": parts, "cpu": cpu}


def stats(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.3f} | {min(seconds):.3f} | {max(seconds):.3f}"


def report(args: argparse.Namespace, machine: str, sample: dict[str, Any], stored: dict[str, Any]) -> str:
    row = sample["row"]
    a, b = stored["rows"]
    cpu = {k: statistics.median(v) for k, v in stored["cpu"].items()}
    load_and_both = statistics.median(stored["load"]) + statistics.median(stored["both"])
    load_and_one = statistics.median(stored["load"]) + statistics.median(stored["one"])
    return f"""{TITLE}

- Command: `{command_line()}`
- Date: {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
- Machine: {machine}
- The 1,000 photos of `../shared/data/imagenet-sample` ingested, embedded by `relabel suggest --model clip:TINY
  --protocol retrieval --batch-size 32` with a tiny CLIP built from its config (32-px images, 16-d embeddings,
  random weights: the time is the pipeline's, decoding included; a real CLIP's forward pass adds its own), then
  scored by `evaluate` against ImGT. Then {args.images:,} synthetic images × {N_CLASSES:,} queries, d = {args.dim},
  stored in {stored["parts"]} part files as a run stores them, read back and scored against ImGT and a ReGT
  snapshot adding a second class to 20 % of the images; {args.repeats} timed runs after one warm-up.

| step | median s | min s | max s | CPU s (median) |
|---|---:|---:|---:|---:|
| sample: embed 1,000 photos (one call, the class queries included) | {sample["first"]:.3f} | — | — | — |
| sample: the same command again (every image done) | {sample["again"]:.3f} | — | — | — |
| sample: `evaluate` (retrieval row against ImGT, 1,000 resamples) | {stats(sample["evaluate"])} | — |
| stored: read {stored["parts"]} parts ({args.images:,} × {args.dim}) | {stats(stored["load"])} | {cpu["load"]:.3f} |
| stored: retrieval rows against ImGT | {stats(stored["one"])} | {cpu["one"]:.3f} |
| stored: rows against ImGT and ReGT, Δ mAP with 1,000 resamples | {stats(stored["both"])} | {cpu["both"]:.3f} |

The sample run said: `{sample["line"]}` (R@1 {100 * row.t2i_recall[1]:.1f} %, mAP {100 * row.t2i_map:.2f} % for
random weights, as expected near chance). Synthetic, against ImGT: R@1 {100 * a.t2i_recall[1]:.1f} %, R@10
{100 * a.t2i_recall[10]:.1f} %, mAP {100 * a.t2i_map:.2f} %; against ReGT mAP {100 * b.t2i_map:.2f} %
(Δ {100 * b.versus.difference:+.2f} points, 95 % CI {100 * b.versus.ci_low:+.2f} to {100 * b.versus.ci_high:+.2f}).

| target | measured (median) | met |
|---|---|---|
| 50,000 images × 1,000 queries on stored embeddings ≤ 5 s (read + ImGT) | {load_and_one:.3f} s | \
{MET[load_and_one <= 5.0]} |
| the same, ImGT and ReGT side by side with Δ mAP | {load_and_both:.3f} s | {MET[load_and_both <= 5.0]} |

CPU seconds of this process (all its threads) beside the wall clock: read + ImGT {cpu["load"] + cpu["one"]:.3f} s,
read + ImGT and ReGT {cpu["load"] + cpu["both"]:.3f} s; the wall clock also holds the time other processes held the
two cores (load average at the start, above).
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--images", type=int, default=50_000)
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--write", action="store_true", help="replace this section of BENCHMARKS.md")
    args = parser.parse_args()
    machine = machine_line()
    with tempfile.TemporaryDirectory() as tmp:
        sample = bench_sample(Path(tmp), args.repeats)
        stored = bench_stored(Path(tmp), args.repeats, args.images, args.dim)
    section = report(args, machine, sample, stored)
    print(section)
    if args.write:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
