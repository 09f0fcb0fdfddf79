"""Foundation benchmarks: ingest of real photos, ingest of a 50,000-row label file, snapshot and export.

Every timed step runs into a fresh SQLite workspace whose schema is created before the clock starts. A timed
ingest is what `relabel ingest` does: plan the layout, then check and store every image (default workers).

Example:
  HF_HUB_OFFLINE=1 python bench/bench_foundation.py --repeats 5 --write
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from benchlib import MET, REPO, SHARED, command_line, machine_line, write_section
from sqlalchemy.engine import Engine

from db.enums import ImageStatus
from relabel.common.imagecheck import check_image
from relabel.common.settings import Settings
from relabel.common.vocabulary import Vocabulary, load_builtin
from relabel.exports.formats import export_snapshot
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.ingest.layouts import IMAGE_EXTENSIONS, LayoutOptions, builtin_val_labels
from relabel.ingest.service import IngestReport
from relabel.snapshots.freeze import create_snapshot
from relabel.sources.labels import import_source

T = TypeVar("T")
SECTION = "## Foundation: ingest and export"
EXPORT_FORMATS = ("real", "jsonl", "csv")
RATE_TARGET = 500.0  # images/s, header-only ingest (hash + header checks) of cached files
EXPORT_TARGET = 2.0  # seconds for a `--format real` export of 50,000 images


@dataclass
class Result:
    name: str
    items: int
    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    def row(self, unit: str) -> str:
        rate, per = self.items / self.median, 1000 * self.median / self.items
        return (
            f"| {self.name} | {self.items:,} {unit} | {self.median:.3f} | {min(self.seconds):.3f} | "
            f"{max(self.seconds):.3f} | {rate:,.0f} | {per:.3f} |"
        )


def timed(fn: Callable[..., T], *args: Any, **kwargs: Any) -> tuple[float, T]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


def fresh_engine(parent: Path) -> Engine:
    """A new workspace with its schema already created (not part of any timing)."""
    return Settings(workspace=Path(tempfile.mkdtemp(prefix="ws-", dir=parent))).engine


def ingest(
    engine: Engine, root: Path, vocab: Vocabulary, *, decode: bool = True, labels_file: Path | None = None
) -> IngestReport:
    plan = plan_ingest(root, vocab, "auto", LayoutOptions(labels_file=labels_file))
    return ingest_dataset(engine, plan, dataset="bench", root=root, vocab=vocab, decode=decode, show_progress=False)


def expect(condition: bool, message: str) -> None:
    if not condition:
        sys.exit(f"benchmark aborted: {message}")


def sample_paths(sample: Path) -> list[Path]:
    paths = sorted(p for p in sample.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)
    expect(bool(paths), f"no images in {sample}; pass --sample DIR")
    for p in paths:  # warm-up read: every later read comes from the OS page cache
        p.read_bytes()
    return paths


def bench_sample_ingest(sample: Path, n: int, repeats: int, tmp: Path) -> list[Result]:
    """Fresh ingest with the decode check, fresh header-only ingest, then a re-ingest of the latter."""
    vocab = load_builtin()
    runs: dict[bool | None, list[float]] = {True: [], False: [], None: []}
    for _ in range(repeats):
        for decode in (True, False):
            engine = fresh_engine(tmp)
            seconds, report = timed(ingest, engine, sample, vocab, decode=decode)
            expect(report.status_counts["ok"] == n, f"ingest found {dict(report.status_counts)}")
            runs[decode].append(seconds)
            if decode:
                engine.dispose()
        seconds, report = timed(ingest, engine, sample, vocab)  # the CLI default; every file is skipped
        expect(report.unchanged == n and report.checked == 0, f"re-ingest checked {report.checked} image(s)")
        runs[None].append(seconds)
        engine.dispose()
    return [
        Result("ingest, fresh workspace, decode check (default)", n, runs[True]),
        Result("ingest, fresh workspace, header-only (`--header-only`)", n, runs[False]),
        Result("re-ingest, all files unchanged (skipped)", n, runs[None]),
    ]


def check_all(paths: list[Path], decode: bool) -> None:
    for p in paths:
        expect(check_image(p, decode=decode).status is ImageStatus.ok, f"{p} is not ok")


def bench_check_image(paths: list[Path], repeats: int) -> list[Result]:
    results = []
    for decode in (True, False):
        seconds = [timed(check_all, paths, decode)[0] for _ in range(repeats)]
        results.append(Result(f"`check_image` alone, 1 process, decode={decode}", len(paths), seconds))
    return results


def write_loc_solution(folder: Path, vocab: Vocabulary) -> Path:
    """Steps 2 and 3: a LOC_val_solution.csv for the 50,000 val images, from the built-in labels."""
    lines = ["ImageId,PredictionString"]
    for number, index in enumerate(builtin_val_labels(), start=1):
        lines.append(f"ILSVRC2012_val_{number:08d},{vocab.classes[index].wnid} 1 2 3 4")
    path = folder / "LOC_val_solution.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def val_round(engine: Engine, root: Path, labels: Path, real: Path, out: Path) -> dict[str, float]:
    """One repeat of steps 2 and 3 on a fresh workspace; returns seconds per step."""
    vocab = load_builtin()
    times: dict[str, float] = {}
    times["ingest"], report = timed(ingest, engine, root, vocab, labels_file=labels)
    missing = report.status_counts[ImageStatus.missing.value]
    expect(missing == report.planned == 50_000, f"expected 50,000 missing images, got {missing}")
    times["import"], _ = timed(import_source, engine, real, fmt="real")
    times["snapshot"], summary = timed(create_snapshot, engine, "bench", base="real")
    expect(summary.n_images == 50_000, f"snapshot holds {summary.n_images} image(s)")
    for fmt in EXPORT_FORMATS:
        times[fmt], written = timed(export_snapshot, engine, "bench", fmt=fmt, out=out.with_suffix(f".{fmt}"))
        expect(written == 50_000, f"{fmt} export wrote {written} image(s)")
    return times


def bench_val(real: Path, repeats: int, tmp: Path) -> tuple[list[Result], bool]:
    root, out = tmp / "empty-root", tmp / "export"
    root.mkdir()
    labels = write_loc_solution(tmp, load_builtin())
    runs: list[dict[str, float]] = []
    identical = True
    for _ in range(repeats):
        engine = fresh_engine(tmp)
        runs.append(val_round(engine, root, labels, real, out))
        engine.dispose()
        identical &= out.with_suffix(".real").read_bytes() == real.read_bytes()
    names = {
        "ingest": "ingest LOC_val_solution.csv, no image on disk (all missing)",
        "import": "import real.json as a prior",
        "snapshot": "`create_snapshot --base real`",
        **{fmt: f"`export_snapshot --format {fmt}`" for fmt in EXPORT_FORMATS},
    }
    return [Result(name, 50_000, [r[key] for r in runs]) for key, name in names.items()], identical


def table(results: list[Result], unit: str) -> str:
    head = "| benchmark | items | median s | min s | max s | items/s (median) | ms/item (median) |\n"
    return head + "|---|---:|---:|---:|---:|---:|---:|\n" + "\n".join(r.row(unit) for r in results)


def report(args: argparse.Namespace, machine: str, photos: list[Result], val: list[Result], same: bool) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sample, real = os.path.relpath(args.sample, REPO), os.path.relpath(args.real, REPO)
    rate, export = photos[1].items / photos[1].median, val[3].median  # the header-only ingest; the real export
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}, {os.getloadavg()[0]:.2f} at the end
- Repeats: {args.repeats}; each into a fresh SQLite workspace in a temporary directory (schema creation not timed)

{photos[0].items} real photos in `{sample}`, read once before timing (so from the OS page cache):

{table(photos, "images")}

50,000 ImageNet val labels, no pixels (a generated `LOC_val_solution.csv`, then `{real}`):

{table(val, "rows")}

| target | measured (median) | met |
|---|---|---|
| header-only ingest of cached files ≥ {RATE_TARGET:.0f} images/s | {rate:,.0f} images/s | {MET[rate >= RATE_TARGET]} |
| `export --format real` of 50,000 images ≤ {EXPORT_TARGET:.0f} s | {export:.3f} s | {MET[export <= EXPORT_TARGET]} |

`--format real` export byte-identical to the imported `real.json`: {MET[same]} (checked in every repeat).
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--repeats", type=int, default=5, help="runs of every step (default 5)")
    parser.add_argument("--sample", type=Path, default=SHARED / "imagenet-sample", help="folder of photos")
    parser.add_argument("--real", type=Path, default=SHARED / "imagenet-val/real.json", help="ReaL real.json")
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    args = parser.parse_args(argv)
    expect(args.repeats >= 1, "--repeats must be at least 1")
    expect(args.sample.is_dir(), f"sample folder {args.sample} not found; pass --sample DIR")
    expect(args.real.is_file(), f"{args.real} not found; pass --real FILE")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    machine = machine_line()  # before the load that the benchmark itself adds
    with tempfile.TemporaryDirectory(prefix="relabel-bench-") as tmp:
        paths = sample_paths(args.sample)
        photos = bench_sample_ingest(args.sample, len(paths), args.repeats, Path(tmp))
        photos += bench_check_image(paths, args.repeats)
        val, identical = bench_val(args.real, args.repeats, Path(tmp))
    section = report(args, machine, photos, val, identical)
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
