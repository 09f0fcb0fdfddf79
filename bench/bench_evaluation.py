"""Evaluation benchmark: the robustness grid of the offline EfficientNet-Lite0 on the 1000 sample photos.

`run_robustness` on a fresh SQLite workspace holding the photos of `../shared/data/imagenet-sample` (ImGT from the
wnid in each file name): clean top-1, top-1 under every perturbation × severity, RR, and the efficiency
measurements the tool takes while the model runs (latency p50/p95, throughput, peak RSS, parameters, FLOPs). The
grid's rate counts every model input (clean and perturbed) over the whole run: decoding, perturbing, writing the
lossless view, and scoring. One run (a grid is long); `--repeats` is accepted for `run_all.py` and ignored.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_evaluation.py --write --report /tmp/robustness-report
  HF_HUB_OFFLINE=1 python bench/bench_evaluation.py --limit 100 --perturbations gaussian_noise,jpeg
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, SHARED, command_line, machine_line, write_section

from relabel.common.settings import Settings
from relabel.common.vocabulary import load_builtin
from relabel.evaluation.cells import NA, num, pct
from relabel.evaluation.report import write_robustness_report
from relabel.evaluation.results import RobustnessResult
from relabel.evaluation.robustness import parse_perturbations, parse_severities, run_robustness
from relabel.evaluation.robustness_summary import build_robustness_summary
from relabel.ingest import ingest_dataset, plan_ingest

SECTION = "## Evaluation: robustness grid of EfficientNet-Lite0"


def run(args: argparse.Namespace, tmp: Path) -> tuple[RobustnessResult, float]:
    """Ingest the photos (not timed), then the robustness run; returns the result and its wall seconds."""
    engine = Settings(workspace=tmp / "ws").engine
    vocab = load_builtin()
    plan = plan_ingest(args.sample, vocab)
    ingest_dataset(engine, plan, dataset="sample", root=args.sample, vocab=vocab, show_progress=False)
    started = time.perf_counter()
    result = run_robustness(
        engine,
        model="efficientnet-lite0",
        perturbations=args.perturbations,
        severities=args.severities,
        limit=args.limit,
        adapter_options={"batch_size": args.batch_size, "device": "cpu", "threads": args.threads},
        show_progress=not args.quiet,
    )
    return result, time.perf_counter() - started


def grid_table(r: RobustnessResult) -> str:
    head = "| perturbation | " + " | ".join(f"s{s} top-1 %" for s in r.severities) + " | RR |\n"
    head += "|---|" + "---:|" * (len(r.severities) + 1) + "\n"
    clean = r.clean["imgt"].accuracy
    rows = []
    for name, values in zip(r.perturbations, r.grid["imgt"]):
        rr = sum(min(v / clean, 1.0) for v in values) / len(values) if clean > 0 else float("nan")
        rows.append(f"| {name} | " + " | ".join(pct(v, 1) for v in values) + f" | {num(rr)} |")
    return head + "\n".join(rows)


def report(args: argparse.Namespace, machine: str, r: RobustnessResult, wall: float, folder: Path | None) -> str:
    e = r.efficiency
    inputs = r.n_images * (1 + len(r.perturbations) * len(r.severities))
    score_s = e.n_images / e.throughput_per_s if e.throughput_per_s else float("nan")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    clean = r.clean["imgt"]
    interval = f"{pct(clean.ci_low)}–{pct(clean.ci_high)}"
    shown = f"`{folder}`" if folder else "a temporary folder (pass `--report DIR` to keep it)"
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}, {os.getloadavg()[0]:.2f} at the end
- Model: EfficientNet-Lite0 on the CPU, batch {e.batch_size}, torch threads {args.threads or "default"};
  {r.n_images} photos of `{os.path.relpath(args.sample, REPO)}`; {len(r.perturbations)} perturbations ×
  severities {", ".join(map(str, r.severities))}, seed {r.seed}; one run. Report rendered into {shown}.

| measure | value |
|---|---|
| clean top-1 (ImGT = the wnid in the file name) | {pct(clean.accuracy)} % (95 % CI {interval}) |
| RR over the grid (against ImGT) | {num(r.retention["imgt"])} |
| model inputs (clean + perturbed) | {inputs:,} ({r.errors} failed) |
| whole run | {wall:.1f} s, **{inputs / wall:.1f} images/s** (model load, decode, perturb, score, FLOP count) |
| inside the adapter's `score()` (read view, preprocess, forward) | {score_s:.1f} s, \
{num(e.throughput_per_s, 1)} images/s |
| outside `score()`: model load, decode, perturb, write views, FLOP count | {wall - score_s:.1f} s |
| model latency per image, p50 / p95 | {num(e.latency_p50_s * 1e3 if e.latency_p50_s else None, 2)} / \
{num(e.latency_p95_s * 1e3 if e.latency_p95_s else None, 2)} ms |
| peak RSS ({e.peak_rss_scope}) | {(e.peak_rss_bytes or 0) / 2**20:.0f} MiB |
| parameters | {(e.n_parameters or 0) / 1e6:.2f} M |
| FLOPs per image | {f"{e.flops_per_image / 1e9:.3f} G" if e.flops_per_image else NA} ({e.flops_note}) |

Top-1 % against ImGT per perturbation and severity (clean: {pct(clean.accuracy, 1)} %):

{grid_table(r)}
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--sample", type=Path, default=SHARED / "imagenet-sample", help="folder of photos")
    parser.add_argument("--limit", type=int, default=None, help="at most N photos (default: all)")
    parser.add_argument("--perturbations", default="all", help="comma-separated names, or all (default)")
    parser.add_argument("--severities", default="1-5", help="range or list (default 1-5)")
    parser.add_argument("--batch-size", type=int, default=8, help="images per forward pass (default 8)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's own)")
    parser.add_argument("--report", type=Path, default=None, help="also keep the rendered report in DIR")
    parser.add_argument("--repeats", type=int, default=1, help="ignored: the grid runs once")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    args = parser.parse_args(argv)
    if not args.sample.is_dir():
        sys.exit(f"benchmark aborted: sample folder {args.sample} not found; pass --sample DIR")
    args.perturbations = parse_perturbations(args.perturbations)
    args.severities = parse_severities(args.severities)
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    machine = machine_line()
    with tempfile.TemporaryDirectory(prefix="relabel-bench-") as tmp:
        result, wall = run(args, Path(tmp))
        folder = args.report or Path(tmp) / "report"
        files = write_robustness_report(build_robustness_summary(result), folder)
        print(f"report: {files.markdown}", file=sys.stderr)
    section = report(args, machine, result, wall, args.report)
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
