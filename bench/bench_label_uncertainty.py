"""Label-uncertainty benchmark: top-1 against probabilistic labels, expected over sampled label sets, with the
interval that combines label draws and the image bootstrap (`evaluator.label_uncertainty`, after Stutz et al. 2023).

(a) Speed. 50,000 images, each with two listed classes whose posteriors are drawn from Beta(5, 1) and 1 − that (so
    every image is sampled), 80 % of top-1 predictions on the first class; 1,000 draws, each one label draw and one
    image resample. Target: ≤ 5 s (median).
(b) ReaL with its raters' noise left in. The ReaL raters' answers (`real_raters.npz`: 184,962 (image, class) pairs
    of 24,889 images) fitted by Dawid-Skene (`relabel.aggregation`), the other images' `real.json` sets taken as
    certain; the cleanlab cross-validated predictions scored: ReaL-rule top-1 on `real.json`, thresholded top-1 at
    0.9, the expected top-1 and both intervals, beside the plain image bootstrap of the thresholded score.

Example:
  python bench/bench_label_uncertainty.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import time

import numpy as np
from benchlib import MET, SHARED, command_line, machine_line, write_section

from evaluator import LabelSets
from evaluator.label_uncertainty import Posteriors, UncertainScore, uncertain_accuracy
from evaluator.paired import JointBootstrap, percentile_interval
from evaluator.scoring import image_outcomes, multilabel_accuracy

TITLE = "## Evaluator: scores with label uncertainty"
N_IMAGES, N_DRAWS, TARGET_S = 50_000, 1000, 5.0
VAL = SHARED / "imagenet-val"


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


def val_number(name: str) -> int:
    """0-based position in val order of a name or path like ILSVRC2012_val_00000293.JPEG."""
    return int(name.rsplit("_", 1)[1].split(".")[0]) - 1


def real_posteriors() -> tuple[Posteriors, list[list[int]], int]:
    """DS posteriors of the rated pairs, real.json's sets (p = 1) for the other images; and the rated images."""
    from relabel.aggregation import aggregate, make_votes

    data = np.load(VAL / "real_raters.npz", allow_pickle=True)
    tensor, info = data["tensor"], data["info"]
    worker, item = np.nonzero(tensor.sum(axis=-1) > 0)
    image = np.array([val_number(str(name)) for name, _ in info])
    label = np.array([int(c) for _, c in info])
    votes = make_votes(item, worker, tensor[worker, item].argmax(axis=-1), image, tensor.shape[0])
    fit = aggregate(votes, "ds")
    real = json.loads((VAL / "real.json").read_text())
    rated = np.zeros(len(real), bool)
    rated[image] = True
    others = [(i, c) for i in np.flatnonzero(~rated) for c in real[i]]
    rows = np.r_[image, [i for i, _ in others]].astype(np.int64)
    classes = np.r_[label, [c for _, c in others]].astype(np.int64)
    probs = np.r_[fit.posterior, np.ones(len(others))]
    return Posteriors(rows, classes, probs, len(real)), real, int(rated.sum())


def cleanlab_predictions() -> np.ndarray:
    paths = json.loads((VAL / "index_to_filepath.json").read_text())
    pred = np.empty(len(paths), np.int64)
    pred[[val_number(p) for p in paths]] = np.load(VAL / "cleanlab_cv_predicted_labels_by_index.npy")
    return pred


def real_section() -> tuple[list[str], float]:
    post, real, n_rated = real_posteriors()
    pred = cleanlab_predictions()
    start = time.perf_counter()
    score = uncertain_accuracy(pred, post, threshold=0.9, n_draws=N_DRAWS)
    seconds = time.perf_counter() - start
    correct, scored = image_outcomes(pred, post.label_sets(0.9))
    low, high = percentile_interval(JointBootstrap(len(pred), N_DRAWS, 0).means(correct[None], scored[None]))
    real_top1 = multilabel_accuracy(pred, LabelSets.from_lists(real), interval=None).accuracy
    return real_lines(score, n_rated, real_top1, (float(low[0]), float(high[0]))), seconds


def real_lines(s: UncertainScore, n_rated: int, real_top1: float, boot: tuple[float, float]) -> list[str]:
    def pct(x: float) -> str:
        return f"{100 * x:.2f}"

    def width(a: float, b: float) -> str:
        return f"{100 * (b - a):.2f}"

    t = s.thresholded
    return [
        f"cleanlab CV predictions, 50,000 val images; DS posteriors on the {n_rated:,} rated images, `real.json` "
        "sets elsewhere (certain); 1,000 draws, seed 0:",
        "",
        "| number | value % | 95 % interval | width (points) |",
        "|---|---|---|---|",
        f"| ReaL-rule top-1 on `real.json` (46,837 images) | {pct(real_top1)} | | |",
        f"| thresholded top-1 at 0.9 ({t.n_scored:,} images), image bootstrap | {pct(t.accuracy)} | "
        f"{pct(boot[0])}–{pct(boot[1])} | {width(*boot)} |",
        f"| expected top-1, label draws alone | {pct(s.expected_accuracy)} | {pct(s.label_ci_low)}–"
        f"{pct(s.label_ci_high)} | {width(s.label_ci_low, s.label_ci_high)} |",
        f"| expected top-1, label draws + image bootstrap | {pct(s.expected_accuracy)} | {pct(s.ci_low)}–"
        f"{pct(s.ci_high)} | {width(s.ci_low, s.ci_high)} |",
        "",
        f"Images scored per draw: {s.expected_scored:,.0f} on average; {s.n_uncertain:,} images hold a posterior "
        "between 0.1 and 0.9.",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
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
    if (VAL / "real_raters.npz").exists():
        real, seconds = real_section()
        lines += [f"(b) ReaL with its raters' noise left in ({seconds:.2f} s for the scoring):", "", *real]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
