"""Calibration benchmark: ReaL's raters through `relabel snapshot create --consensus ds --calibrate` and its ReaL-format
export, scored against ReaL on images the calibration never saw (2-fold over the rated images, fixed seed).

(a) Choice (numbers only, no database): for each half, the calibration (none, one isotonic curve, one curve for
    original and one for other classes), the original-label rule and the threshold are chosen on the *other* half
    alone, with an inner 2-fold over that half's images: the calibration whose best estimates (posterior >= 0.5)
    agree most often with ReaL on whole label sets, then the rule and threshold that leave the most images settled
    while >= 97 % of the settled label sets agree with ReaL.
(b) Through the product: the half's ReaL labels are imported as a label source (`real-half-0`, `real-half-1`); a
    snapshot calibrated against one half with the choice made on it is exported (`--format real` and `jsonl`) and
    scored on the other half's rated pairs; the two held-out halves are pooled. Goals: >= 98.5 % of rated pairs,
    >= 90 % of rated label sets; ECE over the pairs with a posterior in [0.05, 0.95] <= 0.05; settled images >= 70 %
    of the rated ones at >= 97 % set agreement. The reliability diagram of the held-out posteriors beside the raw
    ones. An uncalibrated snapshot (defaults) is scored beside it.
(c) `relabel votes aggregate` without a calibration: its threshold and original rule chosen on one half (the best
    set agreement over thresholds 0.50-0.99 and original rules off, 0.3-0.6), scored on the other.
(d) Spread over the draw of the halves: the calibration of (b) cross-fitted with fold seeds 0-5 (numbers only).
(e) Time of `relabel snapshot create` on the 50,000 images, plain and with --calibrate real --reference real:
    median of --repeats in-process and as the whole command; goal <= 5 s.

Example:
  python bench/bench_calibration.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bench_consensus import VAL, build_workspace
from benchlib import MET, REPO, command_line, machine_line, write_section

sys.path.insert(0, str(REPO))

from sqlalchemy import select  # noqa: E402

from db.models import Image  # noqa: E402
from relabel.exports.formats import export_snapshot  # noqa: E402
from relabel.snapshots.freeze import CALIBRATED_DEFAULTS  # noqa: E402
from relabel.sources.labels import import_source  # noqa: E402
from relabel.votes.aggregation import Aggregate, aggregate, decide, uncertain  # noqa: E402
from relabel.votes.calibration import (  # noqa: E402
    cross_fit,
    expected_calibration_error,
    image_folds,
    reliability,
)
from relabel.votes.importing import import_votes  # noqa: E402
from relabel.votes.table import VoteTable, collect_votes  # noqa: E402

TITLE = "## Consensus: calibrated posteriors, chosen out of sample"
SEED = 0
CALIBRATIONS = {"none": None, "isotonic": False, "isotonic, original and other apart": True}  # -> by_original
KEEP = (None, 0.5)
THRESHOLDS = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.99)
SETTLED_GOAL = 0.97


@dataclass(frozen=True)
class Pairs:
    """The rated pairs as arrays: posterior (raw ds), ReaL holds the class, the class is ImGT's, image id, class."""

    posterior: np.ndarray
    truth: np.ndarray
    original: np.ndarray
    image: np.ndarray
    cls: np.ndarray


@dataclass(frozen=True)
class Choice:
    calibration: str
    keep_original: float | None
    threshold: float


def scores(accepted: np.ndarray, truth: np.ndarray, image: np.ndarray) -> tuple[int, int, int, int]:
    """(pairs agreeing, pairs, images whose every pair agrees, images)."""
    images, inverse = np.unique(image, return_inverse=True)
    wrong = np.bincount(inverse, weights=accepted != truth, minlength=len(images))
    return int((accepted == truth).sum()), len(truth), int((wrong == 0).sum()), len(images)


def settled(q: np.ndarray, p: Pairs, threshold: float, keep: float | None) -> np.ndarray:
    """(I,) bool: the pair's image has no uncertain pair (`relabel.votes.aggregation.uncertain`, as a snapshot asks)."""
    open_ = uncertain(Aggregate("ds", q), threshold, original=p.original, keep_original=keep)
    images, inverse = np.unique(p.image, return_inverse=True)
    return np.bincount(inverse, weights=open_, minlength=len(images))[inverse] == 0


def best(q: np.ndarray, p: Pairs, keep: float | None) -> np.ndarray:
    return decide(Aggregate("ds", q), 0.5, original=p.original, keep_original=keep)


def subset(p: Pairs, mask: np.ndarray) -> Pairs:
    return Pairs(p.posterior[mask], p.truth[mask], p.original[mask], p.image[mask], p.cls[mask])


def calibrated(p: Pairs, name: str, seed: int) -> np.ndarray:
    """Out-of-fold calibrated posteriors of `p` (an inner 2-fold over its images); `none`: as fitted."""
    by_original = CALIBRATIONS[name]
    if by_original is None:
        return p.posterior
    return cross_fit(p.posterior, p.truth, p.original, image_folds(p.image, 2, seed), by_original=by_original)[0]


def choose(p: Pairs) -> Choice:
    """The choice made on `p` alone (see the module docstring, (a))."""
    qs = {name: calibrated(p, name, SEED + 1) for name in CALIBRATIONS}
    name = max(qs, key=lambda n: scores(best(qs[n], p, 0.5), p.truth, p.image)[2])
    q, options = qs[name], []
    for keep in KEEP:
        for t in THRESHOLDS:
            on = settled(q, p, t, keep)
            agree, _, sets, n_sets = scores(best(q, p, keep)[on], p.truth[on], p.image[on])
            if n_sets and sets / n_sets >= SETTLED_GOAL:
                options.append((n_sets, keep or 0.0, t))
    n, keep, t = max(options) if options else (0, 0.5, 0.99)
    return Choice(name, keep or None, t)


AGGREGATE_GRID = [(t, k) for t in np.round(np.arange(0.5, 0.996, 0.01), 2).tolist() for k in (None, 0.3, 0.4, 0.5, 0.6)]


def aggregate_two_fold(p: Pairs, fold: np.ndarray) -> tuple[np.ndarray, list[tuple[float, float | None]]]:
    """(pooled held-out scores, the (threshold, keep_original) chosen for each half) of `votes aggregate`'s rule."""
    total, chosen = np.zeros(4, np.int64), []
    for f in (0, 1):
        train, test = fold != f, fold == f
        pick = max(AGGREGATE_GRID, key=lambda g: scores(best_at(p, *g)[train], p.truth[train], p.image[train])[2])
        total += scores(best_at(p, *pick)[test], p.truth[test], p.image[test])
        chosen.append(pick)
    return total, chosen


def best_at(p: Pairs, threshold: float, keep: float | None) -> np.ndarray:
    return decide(Aggregate("ds", p.posterior), threshold, original=p.original, keep_original=keep)


def rated_pairs(table: VoteTable, real: list[list[int]], original: dict[int, int], val_of: dict[int, int]) -> Pairs:
    raw = aggregate(table.votes, "ds").posterior
    truth = np.array([c in real[val_of[i] - 1] for i, c in table.pairs.tolist()])
    is_original = np.array([original.get(i) == c for i, c in table.pairs.tolist()])
    return Pairs(raw, truth, is_original, table.pairs[:, 0].copy(), table.pairs[:, 1].copy())


def write_half(path: Path, image_ids: np.ndarray, paths: dict[int, str], real: list[list[int]], val_of: dict) -> None:
    rows = [{"image": paths[i], "labels": real[val_of[i] - 1]} for i in image_ids.tolist()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@dataclass
class Held:
    """What the held-out halves gave, pooled: export agreement, settled images, posteriors."""

    counts: np.ndarray  # pairs agreeing, pairs, sets agreeing, sets
    settled: np.ndarray  # settled images, their sets agreeing
    posterior: list[np.ndarray]
    truth: list[np.ndarray]
    seconds: list[float]
    curve: dict[float, np.ndarray] = field(default_factory=dict)  # threshold -> voted, settled, checked, agreeing


def through_snapshot(  # noqa: ANN201
    engine,  # noqa: ANN001
    folder: Path,
    name: str,
    choice: Choice,
    calibrate: str | None,
    reference: str | None = None,
):
    """Create, export (real and jsonl) and read back one snapshot: (real-format labels, JSONL records by path,
    seconds to create, the risk-coverage points recorded against `reference`)."""
    from relabel.snapshots.freeze import create_snapshot

    started = time.perf_counter()
    summary = create_snapshot(
        engine, name, consensus="ds", vote_sources=["real-raters"], studio_votes=False, calibrate=calibrate,
        threshold=choice.threshold, keep_original=choice.keep_original, reference=reference,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    export_snapshot(engine, name, fmt="real", out=folder / f"{name}.json")
    export_snapshot(engine, name, fmt="jsonl", out=folder / f"{name}.jsonl")
    labels = json.loads((folder / f"{name}.json").read_text())  # file-name order: val number order
    records = [json.loads(line) for line in (folder / f"{name}.jsonl").read_text().splitlines()]
    by_path = {r["image"]: r for r in records}
    points = summary.consensus.get("risk_coverage", {}).get("points", [])
    return labels, by_path, seconds, points


def score_half(
    held: Held, p: Pairs, mask: np.ndarray, result: tuple, val_of: dict[int, int], paths: dict[int, str]
) -> None:
    """Add the held-out pairs `mask` of one snapshot's export to `held`."""
    labels, by_path, seconds, points = result
    for point in points:
        counts = [point[k] for k in ("voted", "settled", "checked", "agreeing")]
        held.curve[point["threshold"]] = held.curve.get(point["threshold"], 0) + np.array(counts)
    h = subset(p, mask)
    keys = h.image * 1000 + h.cls
    exported = np.isin(keys, [i * 1000 + c for i in np.unique(h.image).tolist() for c in labels[val_of[i] - 1]])
    held.counts += scores(exported, h.truth, h.image)
    posterior = np.array([by_path[paths[i]]["posteriors"][str(c)] for i, c in zip(h.image.tolist(), h.cls.tolist())])
    held.posterior.append(posterior)
    held.truth.append(h.truth)
    origin = np.array([by_path[paths[i]]["origin"] != "uncertain" for i in h.image.tolist()])
    _, _, sets, n_sets = scores(exported[origin], h.truth[origin], h.image[origin])
    held.settled += (n_sets, sets)
    held.seconds.append(seconds)


def curve_lines(curve: dict[float, np.ndarray]) -> list[str]:
    lines = ["| threshold | settled (both snapshots) | held-out settled images agreeing with ReaL |", "|---|---|---|"]
    for t in sorted(curve):
        voted, settled, checked, agreeing = curve[t].tolist()
        lines.append(
            f"| {t:g} | {100 * settled / voted:.1f} % | {100 * agreeing / max(checked, 1):.2f} % of {checked:,} |"
        )
    return lines


def diagram_lines(raw: tuple[np.ndarray, np.ndarray], cal: tuple[np.ndarray, np.ndarray]) -> list[str]:
    lines = [
        "| posterior | pairs (raw) | raw: mean posterior / share in ReaL | pairs (calibrated) | "
        "calibrated: mean posterior / share in ReaL |",
        "|---|---|---|---|---|",
    ]
    a, b = {x.low: x for x in reliability(*raw)}, {x.low: x for x in reliability(*cal)}
    for low in sorted(set(a) | set(b)):
        cells = []
        for d in (a, b):
            x = d.get(low)
            cells += [f"{x.n:,}", f"{x.mean_posterior:.3f} / {x.share_true:.3f}"] if x else ["0", "-"]
        lines.append(f"| {low:.1f}-{low + 0.1:.1f} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="Rewrite this section of BENCHMARKS.md.")
    parser.add_argument("--repeats", type=int, default=3, help="Timed runs of snapshot create per variant (e).")
    args = parser.parse_args()
    if not (VAL / "real_raters.npz").exists():
        sys.exit(f"{VAL / 'real_raters.npz'} is not here; nothing to measure")
    real = json.loads((VAL / "real.json").read_text())
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        lines = measure(folder, real, args.repeats)
    section = (
        "\n".join([TITLE, "", f"{datetime.date.today()}; `{command_line()}`; {machine_line()}.", "", *lines]) + "\n"
    )
    print(section)
    if args.write:
        write_section(TITLE, section)


def measure(folder: Path, real: list[list[int]], repeats: int = 3) -> list[str]:
    engine = build_workspace(folder)
    import_votes(engine, VAL / "real_raters.npz", fmt="real-raters", name="real-raters")
    with engine.connect() as conn:
        table = collect_votes(conn, 1, sources=["real-raters"], studio=False)
        rows = conn.execute(select(Image.id, Image.path, Image.stem)).all()
    paths = {i: path for i, path, _ in rows}
    val_of = {i: int(stem.rsplit("_", 1)[-1]) for i, _, stem in rows}
    imgt = np.load(VAL / "original_labels_by_index.npy")
    order = json.loads((VAL / "index_to_filepath.json").read_text())
    original_by_val = {int(Path(f).stem.rsplit("_", 1)[-1]): int(c) for f, c in zip(order, imgt)}
    original = {i: original_by_val[v] for i, v in val_of.items()}
    p = rated_pairs(table, real, original, val_of)
    fold = image_folds(p.image, 2, SEED)
    for f in (0, 1):
        write_half(folder / f"half-{f}.jsonl", np.unique(p.image[fold == f]), paths, real, val_of)
        import_source(engine, folder / f"half-{f}.jsonl", fmt="jsonl", name=f"real-half-{f}")
    held = Held(np.zeros(4, np.int64), np.zeros(2, np.int64), [], [], [])
    choices = []
    for f in (0, 1):
        train = fold != f
        choice = choose(subset(p, train))
        choices.append(choice)
        calibrate = f"real-half-{1 - f}" if CALIBRATIONS[choice.calibration] else None
        result = through_snapshot(engine, folder, f"held-out-{f}", choice, calibrate, reference=f"real-half-{f}")
        score_half(held, p, fold == f, result, val_of, paths)
    plain = Held(np.zeros(4, np.int64), np.zeros(2, np.int64), [], [], [])
    result = through_snapshot(engine, folder, "uncalibrated", Choice("none", 0.5, 0.9), None)
    score_half(plain, p, np.ones(len(p.truth), bool), result, val_of, paths)
    timing = timing_lines(engine, folder, repeats)
    engine.dispose()
    return [
        *report_lines(p, choices, held, plain),
        "",
        aggregate_line(*aggregate_two_fold(p, fold)),
        "",
        spread_line(p),
        "",
        *timing,
    ]


SNAPSHOT_GOAL_S = 5.0
TIMED = {  # what (e) times: `relabel snapshot create NAME --consensus ds --votes real-raters --no-studio-votes` ...
    "": {},
    " --calibrate real --reference real": {"calibrate": "real", "reference": "real"},
}


def timing_lines(engine, folder: Path, repeats: int) -> list[str]:  # noqa: ANN001
    """(e): `create_snapshot` in-process, `repeats` times per variant (collecting the votes, ds, calibration,
    risk-coverage, storing and committing; a new name each time), and the whole command once per repeat in a fresh
    process (start-up and imports included)."""
    import os
    import subprocess
    from statistics import median

    from relabel.snapshots.freeze import consensus_defaults, create_snapshot

    cells = []
    for k, (flags, options) in enumerate(TIMED.items()):
        threshold, keep = consensus_defaults(options.get("calibrate"))
        times = []
        for r in range(repeats):
            started = time.perf_counter()
            create_snapshot(engine, f"timed-{k}-{r}", consensus="ds", vote_sources=["real-raters"], studio_votes=False,
                            threshold=threshold, keep_original=keep, **options)  # fmt: skip
            times.append(time.perf_counter() - started)
        command = []
        env = {**os.environ, "RELABEL_DB": str(engine.url)}
        for r in range(repeats):
            args = ["snapshot", "create", f"cli-{k}-{r}", "--consensus", "ds", "--votes", "real-raters",
                    "--no-studio-votes", "--quiet", *flags.split()]  # fmt: skip
            started = time.perf_counter()
            subprocess.run([sys.executable, "-m", "relabel", *args], env=env, check=True, capture_output=True)
            command.append(time.perf_counter() - started)
        ok = median(times) <= SNAPSHOT_GOAL_S
        cells.append(
            f"| `--consensus ds --votes real-raters --no-studio-votes{flags}` | {median(times):.2f} s (min "
            f"{min(times):.2f}, max {max(times):.2f}) | {median(command):.2f} s (min {min(command):.2f}, max "
            f"{max(command):.2f}) | {MET[ok]} |"
        )
    return [
        f"(e) `relabel snapshot create` on the 50,000 images with ReaL's 924,810 votes (collecting the votes from "
        f"SQLite, ds, calibration, risk-coverage, 50,000 labels and 184,962 posteriors stored), median of {repeats}: "
        "in-process (`create_snapshot`) and the whole command in a fresh process (start-up and imports included). "
        f"Goal <= {SNAPSHOT_GOAL_S:g} s in-process. Before the bulk snapshot path (2e07130), the plain command took "
        "9.35 and 9.75 s (ad38ae9, same machine, load 0.2-0.5); `python bench/ab_snapshot.py BEFORE --rounds 3` "
        "(BEFORE the tree of f18e7d3, each tree in turn, load about 2): in-process 4.67 s against 9.40 s plain and "
        "5.02 s against 9.32 s calibrated (CPU 4.56 against 8.65 s and 4.69 against 9.18 s), same labels, "
        "categories, posteriors, hash and exports.",
        "",
        "| snapshot create | in-process | whole command | goal met |",
        "|---|---|---|---|",
        *cells,
    ]


def spread_line(p: Pairs, seeds: range = range(6)) -> str:
    """(d): held-out pair and set agreement and ECE of the isotonic calibration by original class, per fold seed."""
    figures = []
    for seed in seeds:
        q = cross_fit(p.posterior, p.truth, p.original, image_folds(p.image, 2, seed))[0]
        pairs_ok, pairs, sets_ok, sets = scores(q >= 0.5, p.truth, p.image)
        figures.append((100 * pairs_ok / pairs, 100 * sets_ok / sets, expected_calibration_error(q, p.truth)))
    low, high = np.min(figures, axis=0), np.max(figures, axis=0)
    return (
        f"(d) Over fold seeds {seeds.start}-{seeds.stop - 1} (the calibration of (b), cross-fitted without the "
        f"database): rated pairs {low[0]:.2f}-{high[0]:.2f} %, rated label sets {low[1]:.2f}-{high[1]:.2f} %, ECE "
        f"{low[2]:.3f}-{high[2]:.3f}."
    )


def aggregate_line(total: np.ndarray, chosen: list[tuple[float, float | None]]) -> str:
    pairs_ok, pairs, sets_ok, sets = total.tolist()
    picks = "; ".join(f"threshold {t}, original kept at {k or 'off'}" for t, k in chosen)
    return (
        f"(c) `relabel votes aggregate --method ds` without a calibration, rule chosen on the other half ({picks}): "
        f"held out, {100 * pairs_ok / pairs:.2f} % of the rated pairs and {100 * sets_ok / sets:.2f} % of the rated "
        "label sets agree with ReaL. (The defaults 0.9 and 0.5 were fitted on all of ReaL: 98.61 % and 90.18 % "
        "in-sample, which is no validation.)"
    )


def report_lines(p: Pairs, choices: list[Choice], held: Held, plain: Held) -> list[str]:
    pairs_ok, pairs, sets_ok, sets = held.counts.tolist()
    n_settled, settled_ok = held.settled.tolist()
    q, t = np.concatenate(held.posterior), np.concatenate(held.truth)
    ece = expected_calibration_error(q, t)
    raw_ece = expected_calibration_error(p.posterior, p.truth)
    in_range = int(((q >= 0.05) & (q <= 0.95)).sum())
    u_pairs, u_n, u_sets, u_n_sets = plain.counts.tolist()
    chosen = "; ".join(
        f"half {f} held out: {c.calibration}, original rule {c.keep_original or 'off'}, threshold {c.threshold}"
        for f, c in enumerate(choices)
    )
    same = all((c.threshold, c.keep_original) == CALIBRATED_DEFAULTS for c in choices)
    return [
        f"(a) Chosen on the other half alone: {chosen}. The defaults of `snapshot create --calibrate` (threshold "
        f"{CALIBRATED_DEFAULTS[0]}, original rule {CALIBRATED_DEFAULTS[1] or 'off'}) are this choice: {MET[same]}.",
        "",
        f"(b) Held out, pooled over both halves ({pairs:,} rated pairs of {sets:,} images), through the snapshot's "
        f"`--format real` export: **{100 * pairs_ok / pairs:.2f} %** of the rated pairs agree with ReaL (goal 98.5 "
        f"%: {MET[pairs_ok / pairs >= 0.985]}), **{100 * sets_ok / sets:.2f} %** of the rated label sets (goal 90 "
        f"%: {MET[sets_ok / sets >= 0.90]}). ECE of the held-out calibrated posteriors over the {in_range:,} pairs "
        f"in [0.05, 0.95]: **{ece:.3f}** (goal 0.05: {MET[ece <= 0.05]}; the raw ds posteriors: {raw_ece:.3f}). "
        f"Settled images (not U): {n_settled:,} of {sets:,} ({100 * n_settled / sets:.1f} %, goal 70 %: "
        f"{MET[n_settled / sets >= 0.70]}), {100 * settled_ok / max(n_settled, 1):.2f} % of their sets agree "
        f"(goal 97 %: {MET[settled_ok / max(n_settled, 1) >= 0.97]}). Times of `snapshot create` under (e).",
        "",
        "Reliability diagram, held-out pairs (raw: the ds posteriors; calibrated: as the snapshots store them):",
        "",
        *diagram_lines((p.posterior, p.truth), (q, t)),
        "",
        "Risk and coverage (`snapshot create --reference real-half-F`, recorded by each calibrated snapshot: voted "
        "images settled, of both halves, and the held-out half's settled images agreeing with ReaL, pooled):",
        "",
        *curve_lines(held.curve),
        "",
        f"Without a calibration (defaults: threshold 0.9, original kept at 0.5), the export agrees on "
        f"{100 * u_pairs / u_n:.2f} % of the {u_n:,} rated pairs and {100 * u_sets / u_n_sets:.2f} % of the "
        f"{u_n_sets:,} rated label sets ({plain.settled[0]:,} images settled, "
        f"{100 * plain.settled[1] / max(plain.settled[0], 1):.2f} % of them agreeing); its U images carry "
        "their uncalibrated best estimate.",
    ]


if __name__ == "__main__":
    main()
