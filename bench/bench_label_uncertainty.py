"""Label-uncertainty benchmark: top-1 against probabilistic labels, expected over sampled label sets, with the
interval that combines label draws and the image bootstrap (`evaluator.label_uncertainty`, after Stutz et al. 2023),
and the aggregation-sensitivity table beside it (`relabel.evaluation.label_sensitivity`).

(a) Speed. 50,000 images, each with two listed classes whose posteriors are drawn from Beta(5, 1) and 1 − that (so
    every image is sampled), 80 % of top-1 predictions on the first class; 1,000 draws, each one label draw and one
    image resample. Target: ≤ 5 s (median).
(b) Many runs. The same 50,000 images and 1,000 draws, `--runs N` runs (each the predictions of (a) with another
    10 % replaced at random): every run alone (`uncertain_accuracy` once per run, how the aggregation-sensitivity
    rows were scored before) against one set of label draws for all (`uncertain_accuracies`), checked equal.
(c) ReaL's raters through the tool, as a user runs it: a label-only workspace of the 50,000 val images (ImGT,
    `real.json` and Shankar et al. as priors, the cleanlab cross-validated predictions as run `cleanlab-cv`), ReaL's
    rater answers imported as votes, a Dawid-Skene snapshot of them (with `--real-runs N`, the predictions imported
    N times, as N runs), and

      relabel evaluate --reference snapshot:raters-ds --out DIR

    Every figure is read from that command's evaluation.json, so it is the number the console and report.md show.

Example:
  python bench/bench_label_uncertainty.py --repeats 3 --runs 10 --write
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import datetime
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from benchlib import MET, REPO, SHARED, command_line, machine_line, write_section

from evaluator.label_uncertainty import Posteriors, uncertain_accuracies, uncertain_accuracy
from relabel.cli import main as relabel

sys.path.insert(0, str(REPO / "scripts"))
from example_report import write_loc_solution  # noqa: E402  (the same LOC_val_solution.csv as the example report)

TITLE = "## Evaluator: scores with label uncertainty"
N_IMAGES, N_DRAWS, TARGET_S = 50_000, 1000, 5.0
VAL = SHARED / "imagenet-val"
SNAPSHOT = "raters-ds"
RUN = "cleanlab-cv"


def synthetic(seed: int = 0) -> tuple[np.ndarray, Posteriors]:
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 1000, N_IMAGES)
    pred = np.where(rng.random(N_IMAGES) < 0.8, truth, rng.integers(0, 1000, N_IMAGES))
    p = rng.beta(5, 1, N_IMAGES)
    rows = np.r_[np.arange(N_IMAGES), np.arange(N_IMAGES)]
    return pred, Posteriors(rows, np.r_[truth, (truth + 1) % 1000], np.r_[p, 1 - p], N_IMAGES)


def time_synthetic(repeats: int) -> list[float]:
    pred, post = synthetic()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        uncertain_accuracy(pred, post, n_draws=N_DRAWS)
        times.append(time.perf_counter() - start)
    return times


def time_runs(n_runs: int) -> tuple[float, float, bool]:
    """Seconds to score `n_runs` runs one by one and all against shared draws, and whether the numbers agree."""
    pred, post = synthetic()
    rng = np.random.default_rng(1)
    preds = [np.where(rng.random(N_IMAGES) < 0.1, rng.integers(0, 1000, N_IMAGES), pred) for _ in range(n_runs)]
    start = time.perf_counter()
    alone = [uncertain_accuracy(p, post, n_draws=N_DRAWS) for p in preds]
    middle = time.perf_counter()
    shared = uncertain_accuracies(preds, post, n_draws=N_DRAWS)
    return middle - start, time.perf_counter() - middle, alone == shared


def build_workspace(tmp: Path, n_runs: int = 1) -> list[str]:
    """The label-only workspace with the votes and the snapshot, the cleanlab predictions imported as `n_runs`
    runs (`cleanlab-cv`, then `cleanlab-cv-1`, ...); returns the `--workspace` arguments."""
    (tmp / "no-pixels").mkdir()
    base = ["--workspace", str(tmp / "ws")]
    steps = [
        ["ingest", str(tmp / "no-pixels"), "--labels", str(write_loc_solution(tmp)), "--dataset", "val", "--quiet"],
        ["labels", "import", str(VAL / "real.json"), "--format", "real"],
        ["labels", "import", str(VAL / "shankar_multilabel.csv"), "--format", "shankar"],
        ["predictions", "import", str(VAL / "cleanlab_cv_predicted_labels_by_index.npy"), "--run", "cleanlab-cv",
         "--order", str(VAL / "index_to_filepath.json")],
        ["votes", "import", str(VAL / "real_raters.npz"), "--format", "real-raters", "--name", "real-raters",
         "--quiet"],
        ["snapshot", "create", SNAPSHOT, "--consensus", "ds", "--votes", "real-raters", "--no-studio-votes",
         "--quiet"],
    ]  # fmt: skip
    steps += [
        ["predictions", "import", str(VAL / "cleanlab_cv_predicted_labels_by_index.npy"), "--run", f"{RUN}-{i}",
         "--order", str(VAL / "index_to_filepath.json")] for i in range(1, n_runs)
    ]  # fmt: skip
    for args in steps:
        relabel([*base, *args])
    return base


def evaluate_snapshot(tmp: Path, n_runs: int = 1) -> tuple[dict, str, float]:
    """evaluation.json and the console text of `relabel evaluate --reference snapshot:raters-ds`, and the seconds
    it took."""
    base = build_workspace(tmp, n_runs)
    console = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(console):
        relabel([*base, "evaluate", "--reference", f"snapshot:{SNAPSHOT}", "--out", str(tmp / "report")])
    seconds = time.perf_counter() - start
    return json.loads((tmp / "report" / "evaluation.json").read_text()), console.getvalue(), seconds


def console_agrees(data: dict, console: str) -> bool:
    """Whether the console's label-uncertainty row shows evaluation.json's thresholded and expected top-1."""
    u = next(s for s in data["scores"] if (s["run"], s["reference"]) == (RUN, SNAPSHOT))["uncertain"]
    row = next(line.split() for line in console.splitlines() if line.split()[:3] == [RUN, SNAPSHOT, "0.9"])
    return row[4:6] == [pct(u["thresholded"]["accuracy"]), pct(u["expected_accuracy"])]


def shankar_on_unrated() -> tuple[float, int]:
    """The share of the images ReaL's raters never saw that Shankar et al. put in B or Z (ImGT's label replaced or
    nothing fits), over those of them Shankar et al. labelled; and that count."""
    info = np.load(VAL / "real_raters.npz", allow_pickle=True)["info"]
    rated = {Path(str(name)).stem for name, _ in info}
    with (VAL / "shankar_multilabel.csv").open(newline="") as f:
        categories = [row["category"] for row in csv.DictReader(f) if Path(row["id"]).stem not in rated]
    return sum(c in ("B", "Z") for c in categories) / len(categories), len(categories)


def pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}"


def span(a: float | None, b: float | None) -> str:
    return "—" if a is None or b is None else f"{pct(a)}–{pct(b)} ({100 * (b - a):.2f})"


def real_lines(data: dict, shankar: tuple[float, int]) -> list[str]:
    """The figures of one evaluation.json: top-1 against the snapshot's labels, the expected top-1 and its
    intervals, and the sensitivity rows."""
    score = next(s for s in data["scores"] if (s["run"], s["reference"]) == (RUN, SNAPSHOT))
    u, t = score["uncertain"], score["uncertain"]["thresholded"]
    (item,) = [i for i in data["label_sensitivity"] if (i["run"], i["reference"]) == (RUN, SNAPSHOT)]
    lines = [
        f"cleanlab CV predictions against `{SNAPSHOT}` (Dawid-Skene, threshold 0.9, original kept at 0.5); "
        f"{u['n_draws']:,} draws, seed {u['seed']}. {item['n_unrated']:,} images nobody rated keep ImGT and are left "
        f"out of the label-uncertainty numbers (ImGT's label is absent on {pct(item['base_error_rate'])} % of the "
        "rated images, which ReaL chose as doubtful, so that rate does not carry over to them).",
        "",
        f"Shankar et al. put {100 * shankar[0]:.2f} % of the {shankar[1]:,} never-rated images they labelled in B or Z "
        "(`shankar_multilabel.csv`).",
        "",
        "| number | images | value % | 95 % interval (width, points) |",
        "|---|---|---|---|",
        f"| top-1 against the snapshot's labels, all images | {score['top1']['n_scored']:,} | "
        f"{pct(score['top1']['accuracy'])} | {span(score['top1']['ci_low'], score['top1']['ci_high'])} |",
        f"| top-1 against the snapshot's labels, rated images | {t['n_scored']:,} | {pct(t['accuracy'])} | "
        f"{span(t['ci_low'], t['ci_high'])} |",
        f"| expected top-1, label draws alone | {u['expected_scored']:,.0f} per draw | "
        f"{pct(u['expected_accuracy'])} | {span(u['label_ci_low'], u['label_ci_high'])} |",
        f"| expected top-1, label draws + image bootstrap | {u['expected_scored']:,.0f} per draw | "
        f"{pct(u['expected_accuracy'])} | {span(u['ci_low'], u['ci_high'])} |",
        "",
        "Aggregation sensitivity (the same images; a source's interval is Wilson's):",
        "",
        "| labels | kind | images scored | top-1 % (expected) | 95 % CI labels + images | 95 % CI labels only |",
        "|---|---|---|---|---|---|",
    ]
    for r in item["rows"]:
        name = f"{r['labels']} (this snapshot)" if r["labels"] == item["rule"] else r["labels"]
        cis = f"{span(r['ci_low'], r['ci_high'])} | {span(r['label_ci_low'], r['label_ci_high'])}"
        lines.append(f"| {name} | {r['kind']} | {r['n_images']:,.0f} | {pct(r['top1'])} | {cis} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--runs", type=int, default=10, help="Runs scored against one set of draws in (b).")
    parser.add_argument("--real-runs", type=int, default=1, help="Runs (copies of the predictions) in (c).")
    parser.add_argument("--write", action="store_true", help="Rewrite this section of BENCHMARKS.md.")
    args = parser.parse_args()
    times = time_synthetic(args.repeats)
    median = statistics.median(times)
    lines = [
        TITLE,
        "",
        f"{datetime.date.today()}; `{command_line()}`; {machine_line()}.",
        "",
        f"(a) {N_IMAGES:,} images × {N_DRAWS:,} draws (label sets sampled, images resampled): median {median:.2f} s "
        f"(min {min(times):.2f}, max {max(times):.2f}, {len(times)} runs); target ≤ {TARGET_S:g} s: "
        f"{MET[median <= TARGET_S]}.",
        "",
    ]
    if args.runs > 0:
        alone, shared, same = time_runs(args.runs)
        lines += [
            f"(b) {args.runs} runs × {N_IMAGES:,} images × {N_DRAWS:,} draws: {alone:.1f} s one run at a time, "
            f"{shared:.1f} s against one set of draws ({alone / shared:.1f}×); the same numbers: {MET[same]}.",
            "",
        ]
    if (VAL / "real_raters.npz").exists():
        with tempfile.TemporaryDirectory() as tmp:
            data, console, seconds = evaluate_snapshot(Path(tmp), args.real_runs)
        lines += [
            f"(c) ReaL's raters through `relabel evaluate` ({seconds:.1f} s for the command with {args.real_runs} "
            f"run{'s' * (args.real_runs != 1)}; the figures below are `{RUN}`'s):",
            "",
            *real_lines(data, shankar_on_unrated()),
            "",
            f"The console printed the same thresholded and expected top-1: {MET[console_agrees(data, console)]}.",
        ]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
