"""Review-budget planner benchmark: `relabel plan`'s forecast against the review simulator on ReaL's raters, and
the command's time on 50,000 images.

(a) The pool (`relabel.planning.simulation.Pool`): ReaL's 24,889 rated images, their 184,962 (image, class) items and
    924,810 answers (`real_raters.npz`), ImGT as the original labels, ReaL (`real.json`) as the reference. Stored
    runs: `cv` (cleanlab's cross-validated predictions), `imgt` (the original labels read as a run) and
    `cv-near`, a synthetic near-copy of cv: ImGT's label in place of cv's top-1 on a seeded 0.2 % of the images,
    made so that the ranking question is not settled from the start. The simulator replays the active order
    (`simulate(pool, "active", step=250)`) from one answer per item to every image reviewed; at every step the
    criteria are computed on the step's state with `relabel.planning.plan` (each run's half-width within ±0.25
    points; the ranking holds with 95 %). From the states at 0, 250, 500 and 750 reviews and at every 1,000, the
    planner (`relabel.planning.plan.forecast`, the same functions `relabel plan` calls) forecasts the reviews still
    needed; the simulator's answer is the first step from there at which the criterion holds (so a multiple of
    250). Ratio = forecast / needed; goal within ±25 %. At each state the answers the fit read are counted as
    `relabel plan` counts a snapshot's (`relabel.votes.aggregation.shared_answers`): where the median rater shares
    fewer than `MIN_SHARED_ANSWERS` answers with another, the command prints a caution instead of trusting its
    forecast, and those states are reported apart.
    The planner's one free choice, the share of an image's variance a review leaves (`residual`, 0: a review
    settles the image), is chosen on seed 0 alone (the residual whose forecasts at the states without a caution
    have the median |log ratio| nearest 0); the figures reported are those of seeds 1 and 2, which never took part
    in the choice, with the plain assumption (0) beside it.
(b) Time: a workspace of the 50,000 val images (no pixels) with the raters' votes, a Dawid-Skene snapshot and the
    three runs over all 50,000 images (`cv-near` with its 0.2 % taken over the 50,000); `relabel plan` through the
    command line in-process, median of --repeats; `forecast` alone on the same arrays. Goal <= 5 s.

Example:
  python bench/bench_plan.py --write
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import math
import pickle
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from bench_consensus import VAL, build_workspace
from benchlib import MET, REPO, command_line, machine_line, write_section

sys.path.insert(0, str(REPO))

from relabel.cli import main as relabel  # noqa: E402
from relabel.common.vocabulary import load_builtin  # noqa: E402
from relabel.planning.plan import REVIEW_RESIDUAL, forecast, halfwidths, ranking_stability  # noqa: E402
from relabel.planning.simulation import Pool, State, Step, make_pool, simulate  # noqa: E402
from relabel.review.active import correct_probability  # noqa: E402
from relabel.votes.aggregation import MIN_SHARED_ANSWERS, Votes, make_votes, shared_answers  # noqa: E402
from relabel.votes.formats import parse_real_raters  # noqa: E402

TITLE = "## Review: the budget planner against the simulator"
STEP, EVERY = 250, 1000  # the simulator refits every STEP reviews; the planner forecasts every EVERY (and below it)
TARGET, STABILITY = 0.25, 0.95
NEAR_SHARE, NEAR_SEED = 0.002, 20261202  # cv-near: ImGT's label on this share of the images
RESIDUALS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5)
CALIBRATION_SEED, REPORT_SEEDS = 0, (1, 2)
CRITERIA = ("halfwidth", "ranking", "both")
TARGET_S = 5.0


def by_val(name: str) -> np.ndarray:
    """A (50,001,) array indexed by val number from one of the .npy files in `index_to_filepath.json` order."""
    paths = json.loads((VAL / "index_to_filepath.json").read_text())
    numbers = np.array([int(Path(p).stem.rsplit("_", 1)[1]) for p in paths])
    out = np.full(50_001, -1, dtype=np.int64)
    out[numbers] = np.load(VAL / name)
    return out


def near_copy(cv: np.ndarray, imgt: np.ndarray) -> np.ndarray:
    """cv with ImGT's label on a seeded NEAR_SHARE of the positions."""
    swap = np.random.default_rng(NEAR_SEED).random(len(cv)) < NEAR_SHARE
    return np.where(swap, imgt, cv)


def build_pool() -> Pool:
    parsed = parse_real_raters(VAL / "real_raters.npz", load_builtin())
    val = np.array([int(k[-8:]) for k in parsed.keys])[parsed.key_of]
    images, image_of = np.unique(val, return_inverse=True)
    items, item_of = np.unique(image_of.astype(np.int64) * 1000 + parsed.classes, return_inverse=True)
    votes = make_votes(item_of, parsed.worker_of, parsed.answers, items // 1000, len(parsed.worker_names))
    imgt, cv = (
        by_val("original_labels_by_index.npy")[images],
        by_val("cleanlab_cv_predicted_labels_by_index.npy")[images],
    )
    real = json.loads((VAL / "real.json").read_text())
    top1 = np.stack([cv, imgt, near_copy(cv, imgt)])
    return make_pool(
        votes, items % 1000, original=[{int(c)} for c in imgt], reference=[real[v - 1] for v in images.tolist()],
        top1=top1, run_names=("cv", "imgt", "cv-near"),
    )  # fmt: skip


@dataclass
class Replay:
    """One seed's replay: per step (reviews) whether each criterion held, and the forecasts made on the way
    (reviews at the state -> residual -> criterion -> forecast remaining reviews, None: not within the pool)."""

    seed: int
    reviews: list[int] = field(default_factory=list)
    held: dict[str, list[bool]] = field(default_factory=lambda: {c: [] for c in CRITERIA})
    halfwidth: list[np.ndarray] = field(default_factory=list)
    stability: list[float] = field(default_factory=list)
    forecasts: dict[int, dict[float, dict[str, int | None]]] = field(default_factory=dict)
    shared: dict[int, int] = field(default_factory=dict)  # reviews at a forecast state -> median shared answers
    forecast_seconds: list[float] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)

    def needed(self, start: int, criterion: str) -> int | None:
        """Reviews after `start` until the criterion first holds in the replay (None: never)."""
        for r, ok in zip(self.reviews, self.held[criterion]):
            if r >= start and ok:
                return r - start
        return None

    def stays(self, criterion: str) -> bool:
        """Once it first holds, the criterion holds at every later step."""
        flags = self.held[criterion]
        return True not in flags or all(flags[flags.index(True) :])


def replay(pool: Pool, seed: int) -> Replay:
    out = Replay(seed)
    n = (pool.top1 >= 0).sum(axis=1)

    def on_step(step: Step, state: State) -> None:
        q = correct_probability(state.rows, state.classes, state.probs, pool.n_images, pool.top1)
        hw, stab = halfwidths(q, n), ranking_stability(q, pool.top1, n).stability
        out.reviews.append(step.reviews)
        out.halfwidth.append(hw)
        out.stability.append(stab)
        out.step_seconds.append(step.seconds)
        ok_hw, ok_rank = bool((hw <= TARGET).all()), stab >= STABILITY
        for c, ok in zip(CRITERIA, (ok_hw, ok_rank, ok_hw and ok_rank)):
            out.held[c].append(ok)
        if (step.reviews % EVERY == 0 or step.reviews < EVERY) and step.reviews < pool.n_images:
            v, seen = pool.votes, state.revealed
            out.shared[step.reviews] = shared_answers(
                Votes(v.item[seen], v.worker[seen], v.answer[seen], v.item_image, v.n_workers)
            )
            out.forecasts[step.reviews] = {}
            for rho in RESIDUALS:
                started = time.perf_counter()
                plan = forecast(
                    state.rows, state.classes, state.probs, pool.n_images, pool.top1, exclude=state.reviewed,
                    seed=seed, target_halfwidth=TARGET, stability=STABILITY, residual=rho,
                )  # fmt: skip
                out.forecast_seconds.append(time.perf_counter() - started)
                out.forecasts[step.reviews][rho] = {
                    "halfwidth": plan.reviews_halfwidth, "ranking": plan.reviews_ranking, "both": plan.reviews,
                }  # fmt: skip
        print(f"seed {seed}: {step.reviews:,} reviews, half-widths {np.round(hw, 3)}, ranking {stab:.3f}",
              file=sys.stderr)  # fmt: skip

    simulate(pool, "active", step=STEP, budget=pool.n_images, seed=seed, on_step=on_step)
    return out


def cautioned(r: Replay, start: int) -> bool:
    """`relabel plan` would print a caution at this state: the median rater shares too few answers."""
    return r.shared[start] < MIN_SHARED_ANSWERS


def ratios(r: Replay, rho: float, criterion: str, with_caution: bool = False) -> list[float]:
    """forecast / needed over the forecast states where the simulator needs > 0 and `relabel plan` prints a caution
    (`with_caution`) or none (a forecast of "not within the pool" counts as infinite)."""
    out = []
    for start, by_rho in sorted(r.forecasts.items()):
        need, guess = r.needed(start, criterion), by_rho[rho][criterion]
        if cautioned(r, start) == with_caution and need:
            out.append(math.inf if guess is None else guess / need)
    return out


def choose_residual(r: Replay) -> float:
    """The residual whose forecasts without a caution have the median |log ratio| nearest 0 (criterion both)."""

    def loss(rho: float) -> float:
        values = ratios(r, rho, "both")
        return abs(float(np.median(np.log(values)))) if values else float("inf")

    return min(RESIDUALS, key=loss)


def fmt(k: int | None) -> str:
    return "never" if k is None else f"{k:,}"


def ratio_text(guess: int | None, need: int | None) -> str:
    if guess is None or need is None:
        return "—"
    if need == 0:
        return "0 = 0" if guess == 0 else "needs 0"
    return f"{guess / need:.2f}"


def summary(values: list[float]) -> str:
    if not values:
        return "no forecast with reviews still needed"
    within = sum(abs(v - 1) <= 0.25 for v in values)
    shown = [f"{v:.2f}" if math.isfinite(v) else "never" for v in (statistics.median(values), min(values), max(values))]
    return f"median {shown[0]} (min {shown[1]}, max {shown[2]}); {within} of {len(values)} within ±25 %"


def shares_text(r: Replay) -> str:
    """The median rater's shared answers at the states before EVERY reviews: "0 at 0, 41 at 250, ..."."""
    return ", ".join(f"{r.shared[k]:,} at {k:,}" for k in sorted(r.shared) if k < EVERY)


def seed_lines(r: Replay, rho: float) -> list[str]:
    lines = [f"Seed {r.seed}:", ""]
    lines.append("| criterion | simulator needs from 0 | forecast at 0, residual 0 | ratio | "
                 f"forecast at 0, residual {rho:g} | ratio | holds for good once met |")  # fmt: skip
    lines.append("|---|---:|---:|---:|---:|---:|---|")
    for c in CRITERIA:
        need, plain, tuned = r.needed(0, c), r.forecasts[0][0.0][c], r.forecasts[0][rho][c]
        lines.append(
            f"| {c} | {fmt(need)} | {fmt(plain)} | {ratio_text(plain, need)} | {fmt(tuned)} | "
            f"{ratio_text(tuned, need)} | {MET[r.stays(c)]} |"
        )
    flagged = [k for k in sorted(r.forecasts) if cautioned(r, k)]
    lines += [
        "",
        f"Median rater's answers shared with another rater: {shares_text(r)} reviews. `relabel plan` cautions at "
        f"{', '.join(f'{k:,}' for k in flagged) or 'no state'} reviews (below {MIN_SHARED_ANSWERS}).",
        "",
        f"Forecasts of the remaining reviews from the states without a caution ({len(r.forecasts) - len(flagged)} "
        "states; forecast / needed, where the simulator still needs some; never: the planner said not within the "
        "pool), then from the states with one:",
        "",
    ]
    for c in CRITERIA:
        for value in (0.0, rho):
            lines.append(f"- {c}, residual {value:g}: {summary(ratios(r, value, c))}")
    for c in CRITERIA:
        lines.append(f"- with a caution, {c}, residual {rho:g}: {summary(ratios(r, rho, c, with_caution=True))}")
    hw0, hw_end = r.halfwidth[0], r.halfwidth[-1]
    after = r.halfwidth[1] if len(r.halfwidth) > 1 else hw0
    lines += [
        f"- half-widths (cv, imgt, cv-near): {np.round(hw0, 3).tolist()} at 0 reviews, "
        f"{np.round(after, 3).tolist()} after the first {STEP} (the refit learns the raters), "
        f"{np.round(hw_end, 3).tolist()} with every image reviewed; ranking stability "
        f"{r.stability[0]:.3f} at 0, {min(r.stability):.3f} at its lowest",
        "",
    ]
    return lines


def time_plan(tmp: Path, repeats: int) -> tuple[list[float], list[float], list[float], str]:
    """(wall and CPU seconds of `relabel plan` per repeat, seconds of `forecast` alone on the same arrays, the
    command's output)."""
    engine = build_workspace(tmp)
    engine.dispose()
    cv, imgt = by_val("cleanlab_cv_predicted_labels_by_index.npy"), by_val("original_labels_by_index.npy")
    paths = json.loads((VAL / "index_to_filepath.json").read_text())
    numbers = np.array([int(Path(p).stem.rsplit("_", 1)[1]) for p in paths])
    np.save(tmp / "imgt.npy", imgt[numbers])
    np.save(tmp / "near.npy", near_copy(cv, imgt)[numbers])
    base = ["--workspace", str(tmp)]
    order = ["--order", str(VAL / "index_to_filepath.json")]
    steps = [
        ["votes", "import", str(VAL / "real_raters.npz"), "--format", "real-raters", "--name", "real-raters",
         "--quiet"],
        ["snapshot", "create", "raters-ds", "--consensus", "ds", "--votes", "real-raters", "--no-studio-votes",
         "--quiet"],
        ["predictions", "import", str(VAL / "cleanlab_cv_predicted_labels_by_index.npy"), "--run", "cv", *order],
        ["predictions", "import", str(tmp / "imgt.npy"), "--run", "imgt", *order],
        ["predictions", "import", str(tmp / "near.npy"), "--run", "cv-near", *order],
    ]  # fmt: skip
    with contextlib.redirect_stdout(io.StringIO()):
        for args in steps:
            relabel([*base, *args])
    seconds, cpu, text = [], [], ""
    for _ in range(repeats):
        buffer = io.StringIO()
        started, started_cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(buffer):
            relabel([*base, "plan"])
        seconds.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
        text = buffer.getvalue()
    return seconds, cpu, forecast_alone(tmp, repeats), text


def forecast_alone(tmp: Path, repeats: int) -> list[float]:
    """Seconds of `forecast` alone on the arrays `relabel plan` reads from the workspace."""
    from unittest import mock

    import relabel.planning.budget as budget
    from relabel.common.settings import Settings

    with mock.patch.object(budget, "forecast", wraps=forecast) as spy:
        budget.plan_reviews(Settings(workspace=tmp, db_url=None).engine)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        forecast(*spy.call_args.args, **spy.call_args.kwargs)
        times.append(time.perf_counter() - started)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="Rewrite this section of BENCHMARKS.md.")
    parser.add_argument(
        "--replays", type=Path, help="A pickle of the replays: read when it exists, else written (the replays take "
        "minutes; the timing of (b) is always measured afresh)."
    )  # fmt: skip
    args = parser.parse_args()
    pool = build_pool()
    if args.replays is not None and args.replays.exists():
        calibration, *reports = pickle.loads(args.replays.read_bytes())
    else:
        calibration, *reports = [replay(pool, seed) for seed in (CALIBRATION_SEED, *REPORT_SEEDS)]
        if args.replays is not None:
            args.replays.write_bytes(pickle.dumps([calibration, *reports]))
    rho = choose_residual(calibration)
    with tempfile.TemporaryDirectory() as tmp:
        plan_s, cpu_s, forecast_s, text = time_plan(Path(tmp), args.repeats)
    calibration_fit = summary(ratios(calibration, rho, "both"))
    below = ratios(calibration, rho, "halfwidth", with_caution=True)
    pooled = {(c, value): [x for r in reports for x in ratios(r, value, c)] for c in CRITERIA for value in (0.0, rho)}
    median_plan = statistics.median(plan_s)
    step_s = [s for r in (calibration, *reports) for s in r.step_seconds[1:]]
    lines = [
        TITLE,
        "",
        f"{datetime.date.today()}; `{command_line()}`; {machine_line()}.",
        "",
        f"Pool: ReaL's {pool.n_images:,} rated images, {pool.votes.n_items:,} items, {len(pool.votes.item):,} "
        f"answers; runs cv (cleanlab's CV predictions), imgt (the original labels as a run), cv-near (cv with ImGT's "
        f"label on a seeded {100 * NEAR_SHARE:g} % of the images: synthetic, a near-copy so that the ranking is in "
        f"question). The simulator replays the active order from one answer per item, refitting Dawid-Skene every "
        f"{STEP} reviews (median step {statistics.median(step_s):.2f} s); at every step both criteria are computed "
        f"on its state with `relabel.planning.plan` (half-width ≤ ±{TARGET} points for every run; ranking stability "
        f'≥ {100 * STABILITY:g} %). "Needs" is the first step at which a criterion holds (a multiple of {STEP}).',
        "",
        f"Residual chosen on seed {CALIBRATION_SEED} alone: {rho:g} (share of an image's variance a review leaves; "
        f"its forecasts at the states without a caution: {calibration_fit}); `relabel plan`'s default "
        f"(`relabel.planning.plan.REVIEW_RESIDUAL`) is {REVIEW_RESIDUAL:g}: the same: {MET[rho == REVIEW_RESIDUAL]}. "
        f"The caution's bound (`relabel.votes.aggregation.MIN_SHARED_ANSWERS`, {MIN_SHARED_ANSWERS}) was set on seed "
        f"{CALIBRATION_SEED} too: the median rater's shared answers there were {shares_text(calibration)} reviews, "
        f"and its half-width forecasts at the states below the bound: {summary(below)}. Seeds "
        f"{', '.join(map(str, REPORT_SEEDS))} below never took part in either choice.",
        "",
    ]
    for r in reports:
        lines += seed_lines(r, rho)
    if not any(r.stays("ranking") for r in reports):
        lines += [
            "The ranking criterion never holds for good in these replays: with cv-near this close to cv the "
            "ranking's stability comes and goes as the refits move the posteriors (its value at 0 and its lowest "
            "above), which the forecast, holding each run's expected top-1 where it is, cannot foresee.",
            "",
        ]
    lines += [f"Pooled over seeds {', '.join(map(str, REPORT_SEEDS))}, forecasts at the states without a caution:", ""]
    lines += [f"- {c}, residual {value:g}: {summary(values)}" for (c, value), values in pooled.items()]
    lines += [
        "",
        f"Time on 50,000 images (3 runs, the Dawid-Skene snapshot of all the raters' votes): `relabel plan` "
        f"median {median_plan:.2f} s (min {min(plan_s):.2f}, max {max(plan_s):.2f}, {len(plan_s)} runs; CPU time "
        f"median {statistics.median(cpu_s):.2f} s), of which `forecast` {statistics.median(forecast_s):.3f} s; goal "
        f"≤ {TARGET_S:g} s: {MET[median_plan <= TARGET_S]}. Its output:",
        "",
        "```",
        *text.rstrip("\n").splitlines(),
        "```",
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
