"""Evaluator benchmarks for the ARGUS tasks: presence probes (after POPE), caption hallucination (after CHAIR) and
retrieval, each scored against ImGT and a ReGT snapshot.

(a) Presence probes. 50,000 images with one ImGT label each and a synthetic ReGT snapshot (ImGT's label plus a
    second class on 20 % of the images, one of five "siblings" of the first); each image gets 6 probes from ImGT
    (its label and 5 negatives, adversarial sampling on the siblings), 300,000 in all. 10 runs answer every probe
    (80 % right about what ReGT says is in the image, 1 % failed replies, 0.5 % errors). One timed run:
    `compare_presence` on the 10 runs at once: POPE's five numbers under both references, the hallucinations
    under ImGT that are objects under ReGT, and each run's paired bootstrap interval of the accuracy difference
    (1,000 image resamples). Target ≤ 2 s (median). Building the probes (each sampling, once) is timed apart: it
    happens once per task, before any model is asked.
(b) Captions. 50,000 captions of 0-4 mapped mentions (1 unmapped in 10 captions) against both references:
    `compare_chair`, for scale.
(c) Retrieval. 1,000 class queries and 50,000 images, 512-dimensional float32 embeddings (seeded: each image is
    its class's query direction plus noise, so ranks are neither perfect nor random), stored as .npy files in a
    temporary folder and loaded first (not timed). One timed run: `retrieval_scores` against ImGT, text → image
    (R@1/5/10, item recall, mAP) and image → text (R@1/5/10), both in blocks of the similarity matrix. Target ≤ 5 s
    (median). Then `compare_retrieval` against ImGT and the ReGT snapshot in one pass.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_argus_tasks.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import MET, command_line, machine_line, write_section

from evaluator import LabelSets
from evaluator.chair import compare_chair
from evaluator.presence import ERROR, FAILED, NO, YES, compare_presence, probe_truth
from evaluator.presence_sampling import probes
from evaluator.retrieval import compare_retrieval, retrieval_scores

SECTION = "## Evaluator: presence probes, caption hallucination and retrieval"
PRESENCE_TARGET_S = 2.0
RETRIEVAL_TARGET_S = 5.0
N_CLASSES = 1000
N_BOOT = 1000
SIBLINGS = 5


def siblings() -> np.ndarray:
    """(C, C) 0/1: class c is related to c + 1..c + 5 (mod C), a stand-in for WordNet siblings."""
    related = np.zeros((N_CLASSES, N_CLASSES))
    for step in range(1, SIBLINGS + 1):
        related[np.arange(N_CLASSES), (np.arange(N_CLASSES) + step) % N_CLASSES] = 1.0
    return related


def references(images: int, seed: int) -> tuple[LabelSets, LabelSets]:
    """ImGT (one label per image) and a ReGT snapshot that adds a second class to 20 % of the images, one of the
    five "siblings" c + 1..c + 5 of the ImGT class c (the classes `siblings()` relates)."""
    rng = np.random.default_rng(seed)
    imgt = rng.integers(0, N_CLASSES, images)
    extra = (imgt + rng.integers(1, SIBLINGS + 1, images)) % N_CLASSES
    sets = [[int(a), int(b)] if add else [int(a)] for a, b, add in zip(imgt, extra, rng.random(images) < 0.2)]
    return LabelSets.from_single(imgt, N_CLASSES), LabelSets.from_lists(sets, N_CLASSES)


def answers(truth: np.ndarray, runs: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    right = rng.random((runs, len(truth))) < 0.8
    said = np.where(right == truth, YES, NO).astype(np.int8)
    draw = rng.random((runs, len(truth)))
    said[draw < 0.015] = FAILED
    said[draw < 0.005] = ERROR
    return said


def timed(repeats: int, call: Callable[[], Any]) -> tuple[list[float], Any]:
    call()  # warm-up: first calls allocate
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = call()
        seconds.append(time.perf_counter() - start)
    return seconds, result


def bench_presence(args: argparse.Namespace, imgt: LabelSets, regt: LabelSets) -> dict[str, Any]:
    build, built = {}, {}
    for sampling in ("random", "popular", "adversarial"):
        start = time.perf_counter()
        built[sampling] = probes(imgt, 5, sampling, seed=0, related=siblings() if sampling == "adversarial" else None)
        build[sampling] = time.perf_counter() - start
        if len(built[sampling]) != 6 * args.images:
            sys.exit(f"benchmark aborted: {sampling} gave {len(built[sampling])} probes, not {6 * args.images}")
    asked = built["adversarial"]
    said = answers(probe_truth(asked, regt)[0], args.runs, seed=2)  # the model sees what is in the image
    seconds, both = timed(args.repeats, lambda: compare_presence(asked, said, imgt, regt, n_boot=N_BOOT))
    if both.ci_low is None or not np.all(both.ci_low <= both.difference) or not 0.7 < both.score_b.accuracy[0] < 0.85:
        sys.exit("benchmark aborted: the presence scores are outside the expected range")
    return {"seconds": seconds, "build": build, "result": both, "probes": len(asked)}


def bench_chair(args: argparse.Namespace, imgt: LabelSets, regt: LabelSets) -> dict[str, Any]:
    rng = np.random.default_rng(3)
    sets = regt.to_lists()
    mentions = [
        [c if rng.random() < 0.7 else int(rng.integers(N_CLASSES)) for c in rng.choice(sets[i], rng.integers(0, 5))]
        for i in range(args.images)
    ]
    unmapped = (rng.random(args.images) < 0.1).astype(np.int64)
    seconds, both = timed(args.repeats, lambda: compare_chair(mentions, imgt, regt, n_unmapped=unmapped))
    return {"seconds": seconds, "result": both}


def bench_retrieval(args: argparse.Namespace, imgt: LabelSets, regt: LabelSets) -> dict[str, Any]:
    rng = np.random.default_rng(4)
    queries = rng.standard_normal((N_CLASSES, args.dim), dtype=np.float32)
    label = imgt.labels[:, 0]
    images = queries[label] * np.float32(0.06) + rng.standard_normal((args.images, args.dim), dtype=np.float32)
    with tempfile.TemporaryDirectory() as folder:
        np.save(Path(folder) / "queries.npy", queries)
        np.save(Path(folder) / "images.npy", images)
        stored_q, stored_i = np.load(Path(folder) / "queries.npy"), np.load(Path(folder) / "images.npy")
    embeddings = {"query_embeddings": stored_q, "image_embeddings": stored_i}
    one, result = timed(args.repeats, lambda: retrieval_scores(imgt, **embeddings))
    two, pair = timed(args.repeats, lambda: compare_retrieval([imgt, regt], **embeddings))
    if not 0.0 < result.text_to_image.mean_ap < 1.0:
        sys.exit("benchmark aborted: the retrieval scores are degenerate")
    return {"one": one, "two": two, "result": result, "pair": pair}


def stats(seconds: list[float]) -> str:
    return f"{statistics.median(seconds):.3f} | {min(seconds):.3f} | {max(seconds):.3f}"


def report(args: argparse.Namespace, machine: str, presence: dict, chair: dict, retrieval: dict) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    both = presence["result"]
    a, b = both.score_a.row(0), both.score_b.row(0)
    t2i, i2t = retrieval["result"].text_to_image, retrieval["result"].image_to_text
    pair_b = retrieval["pair"][1].text_to_image
    cap = chair["result"]
    p_med, r_med = statistics.median(presence["seconds"]), statistics.median(retrieval["one"])
    build = ", ".join(f"{name} {s:.2f} s" for name, s in presence["build"].items())
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}
- {args.repeats} timed runs after one warm-up; synthetic data, seeded: ImGT of {args.images:,} images × {N_CLASSES:,}
  classes, a ReGT snapshot adding a second class to 20 % of them

| step | median s | min s | max s |
|---|---:|---:|---:|
| presence: `compare_presence`, {args.runs} runs × {presence["probes"]:,} probes (6 per image, adversarial), ImGT \
and ReGT, {N_BOOT:,} resamples | {stats(presence["seconds"])} |
| captions: `compare_chair`, {args.images:,} captions, ImGT and ReGT | {stats(chair["seconds"])} |
| retrieval: `retrieval_scores`, {N_CLASSES:,} queries × {args.images:,} images, d = {args.dim}, both directions \
| {stats(retrieval["one"])} |
| retrieval: `compare_retrieval`, ImGT and ReGT in one pass | {stats(retrieval["two"])} |

Building the probes once (`probes`, 5 negatives per image, {args.images:,} images): {build}.

Run 0 of the presence workload: accuracy {100 * a.accuracy:.2f} % under ImGT, {100 * b.accuracy:.2f} % under ReGT
(paired Δ {100 * both.difference[0]:+.2f} points, 95 % CI {100 * both.ci_low[0]:+.2f} to {100 * both.ci_high[0]:+.2f}),
{int(both.yes_absent_a_present_b[0]):,} yes answers that are hallucinations under ImGT and objects under ReGT. Captions:
CHAIR-i {100 * cap.score_a.chair_i:.1f} % under ImGT, {100 * cap.score_b.chair_i:.1f} % under ReGT. Retrieval against
ImGT: R@1 {100 * t2i.recall_at_k[1]:.1f} %, R@10 {100 * t2i.recall_at_k[10]:.1f} %, mAP {100 * t2i.mean_ap:.2f} %
text → image; R@1 {100 * i2t.recall_at_k[1]:.1f} % image → text; mAP {100 * pair_b.mean_ap:.2f} % against ReGT.

| target | measured (median) | met |
|---|---|---|
| presence scoring, {args.runs} runs × {args.images:,} images × 6 probes ≤ {PRESENCE_TARGET_S:.0f} s | {p_med:.3f} s \
| {MET[p_med <= PRESENCE_TARGET_S]} |
| retrieval, {args.images:,} images × {N_CLASSES:,} queries on stored embeddings ≤ {RETRIEVAL_TARGET_S:.0f} s \
| {r_med:.3f} s | {MET[r_med <= RETRIEVAL_TARGET_S]} |
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per step (median reported; ≥ 3)")
    parser.add_argument("--images", type=int, default=50_000)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--dim", type=int, default=512, help="embedding dimensions")
    parser.add_argument("--write", action="store_true", help="replace this section of BENCHMARKS.md")
    args = parser.parse_args()
    machine = machine_line()
    imgt, regt = references(args.images, seed=0)
    presence = bench_presence(args, imgt, regt)
    chair = bench_chair(args, imgt, regt)
    retrieval = bench_retrieval(args, imgt, regt)
    text = report(args, machine, presence, chair, retrieval)
    print(text)
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
