"""Each command-line step on the 50,000 ImageNet val images, as a user runs it: `relabel ...` in a process of its
own, start-up included, on a SQLite workspace in a temporary folder (no pixels: the images are planned from the
built-in val labels and stored as missing).

Steps: ingest (a fresh workspace each repeat), `labels import real.json`, `predictions import` of a 50,000-row
top-5 JSONL file and of a 50,000 x 1,000 float32 score matrix (`--keep-scores`), `votes import real_raters.npz`
(924,810 answers), `snapshot create` on the ReaL base and with `--consensus ds` on the raters' votes,
`snapshot diff` of the two, `snapshot export` (real, jsonl, csv), `evaluate` of one run against ImGT and the ds
snapshot, and `stats`. Each is timed in CPU seconds (user + system of the process and its children, from
`os.wait4`) and wall seconds; median of --repeats. Goal: <= 3 CPU seconds each.

Example:
  python bench/bench_scale_cli.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import compileall
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from benchlib import MET, REPO, SHARED, command_line, machine_line, write_section

TITLE = "## CLI: each step on 50,000 images"
VAL = SHARED / "imagenet-val"
GOAL_S = 3.0
RELABEL = Path(sys.executable).parent / "relabel"
# Where the time goes (cProfile and `python -X importtime` of each step on the same workspace, 2026-12-02); kept
# with the table so that a rerun keeps the reading beside its numbers.
NOTES = """\
Where the time goes (cProfile and `-X importtime` on this workspace; the previous table, 2026-12-02 at load 7-10, is
in git history: ingest 8.85, imports 6.66-22.74, snapshots 4.60 / 10.69, diff 5.40, exports 3.88-5.74, evaluate
30.30 CPU s. Busy cores inflate CPU seconds about twofold, so compare against the paired before/after figures in
the commit messages, each taken on one machine state):

- **Start-up floor:** Python, click, SQLAlchemy, SQLModel and the schema (`db.models`) cost about 1 CPU second
  before any command does its work. Every step here pays it.
- **Reading:** snapshots, exports, diff, evaluate and the vote readers run their queries on the driver's cursor
  (`db.bulk.plain_rows`) and decode JSON class lists once per distinct list, instead of SQLAlchemy result rows
  and its JSON type processor per row; the garbage collector is paused while rows are built.
- **Writing:** ingest, labels, predictions and votes insert with one statement compiled once and the driver's
  executemany (`db.bulk.insert_plain`); whole-file formats are checked as arrays; JSON Lines are read by Python's
  C reader whenever a scan shows nothing the strict reader would refuse (the strict reader still names the line).
- **evaluate** (2026-12-04): the workspace's cache holds, besides a snapshot's arrays and the other methods'
  fits, the image resamples of each (image count, seed) (`evaluator.stored_resamples`: 50 MB for 1,000 x 50,000,
  read through a map with its CRC in about 0.02 s against 0.35 s to draw), every expected top-1 by the digest of
  its inputs (`evaluator.kept_scores`) and each vote source's answers (`relabel.votes.scan`, kept by the first
  command that reads them, such as the consensus snapshot: 0.01 s against 0.2 s of rows); scipy is no longer
  imported and set-majority sorts once. Evaluating again reads everything. The first evaluate after a snapshot of
  new votes still draws 7 label passes over 1,000 draws (about 0.9 s, of which the uniforms about 0.45 s: PCG64's
  words at about 1.5 ns each, as fast as numpy's own `random`) and fits the other methods. Every statistic of one
  dataset now reads one set of image resamples (2026-12-04, later): the expected top-1 keeps the unrated images
  among the images resampled (scored in no draw) instead of drawing a set of its own for the rated ones, and the
  reliability table draws the evaluated dataset's with the same seed; a label pass widens from the kept bytes only
  the columns it reads. A workspace's first evaluate drew three sets (24,889 and twice 50,000 images: 125 M index
  draws plus 125 MB written, 3.90 CPU s) and draws one (50 M, 50 MB). `snapshot create` keeps the snapshot's
  arrays as it writes its rows (`relabel.snapshots.arrays`), so the first evaluate no longer reads 50,000 labels
  and 185,000 posteriors back (about 0.25 s). With `cache/` deleted, evaluate reads the snapshot's rows and the
  vote source's 924,810 answers (about 0.2 s) as well.
- **Earlier readings:** `votes import` writes 184,962 rows, one per (image, class) pair with its answers packed
  (`db.models.VotePair`); its rater file is inflated by zlib-ng a megabyte at a time
  (`relabel.common.arrays.open_member`); `predictions import` of scores memory-maps an uncompressed `.npz` and
  writes and hashes the score file in place; `snapshot create --consensus ds` is start-up, collecting the votes,
  the fit, the rows written and the hash.
"""


@dataclass
class Step:
    name: str
    command: str
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)

    def row(self) -> str:
        cpu = statistics.median(self.cpu)
        return (
            f"| {self.name} | `{self.command}` | {cpu:.2f} | {min(self.cpu):.2f} | {max(self.cpu):.2f} | "
            f"{statistics.median(self.wall):.2f} | {MET[cpu <= GOAL_S]} |"
        )


def run(workspace: Path, args: list[str]) -> tuple[float, float, str]:
    """(CPU seconds of the process and the children it waited for, wall seconds, stdout) of `relabel ARGS`."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen([str(RELABEL), "--workspace", str(workspace), *args], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(), err.read().decode()
    if proc.returncode:
        sys.exit(f"benchmark aborted: relabel {' '.join(args)} exited {proc.returncode}: {stderr[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall, stdout


def timed(step: Step, workspace: Path, args: list[str]) -> str:
    cpu, wall, stdout = run(workspace, args)
    step.cpu.append(cpu)
    step.wall.append(wall)
    print(f"{step.name}: {cpu:.2f} s CPU, {wall:.2f} s wall", file=sys.stderr)
    return stdout


def write_inputs(folder: Path) -> tuple[Path, Path, Path]:
    """A top-5 prediction file (JSONL), a 50,000 x 1,000 score matrix (.npz with ids) in the val order, and the
    image order: scores peaked at the original label, so the top-5 of the two agree in spirit, not exactly."""
    order = json.loads((VAL / "index_to_filepath.json").read_text(encoding="utf-8"))
    labels = np.load(VAL / "original_labels_by_index.npy")
    keys = [Path(p).name for p in order]
    rng = np.random.default_rng(0)
    top5 = folder / "top5.jsonl"
    with top5.open("w", encoding="utf-8") as f:
        for key, label in zip(keys, labels.tolist()):
            others = rng.choice(1000, size=4, replace=False).tolist()
            ranked = [label] + [c for c in others if c != label][:4]
            f.write(json.dumps({"image": key, "labels": ranked, "scores": [0.6, 0.2, 0.1, 0.05, 0.05][: len(ranked)]}))
            f.write("\n")
    logits = rng.standard_normal((len(keys), 1000), dtype=np.float32)
    logits[np.arange(len(keys)), labels] += 4.0
    scores = np.exp(logits - logits.max(axis=1, keepdims=True))
    scores /= scores.sum(axis=1, keepdims=True)
    matrix = folder / "scores.npz"
    np.savez(matrix, scores=scores.astype(np.float32), ids=np.array(keys))
    return top5, matrix, folder / "unused"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--write", action="store_true", help="replace this section of BENCHMARKS.md")
    parser.add_argument("--keep", type=Path, help="build the workspace in this folder and keep it")
    args = parser.parse_args()
    for needed in ("real.json", "real_raters.npz", "index_to_filepath.json", "original_labels_by_index.npy"):
        if not (VAL / needed).exists():
            sys.exit(f"{VAL / needed} is not here; nothing to measure")
    n_val = len(np.load(VAL / "original_labels_by_index.npy"))
    # every module compiled first, as after a user's first command: a stale or missing .pyc (an edited tree, or a
    # shell with PYTHONDONTWRITEBYTECODE set) would otherwise be compiled again in every timed process
    for package in ("relabel", "db", "evaluator", "ui"):
        compileall.compile_dir(REPO / package, quiet=1)
    machine = machine_line()
    started = datetime.datetime.now(datetime.UTC)
    with tempfile.TemporaryDirectory(prefix="scale-cli-") as tmp_name:
        tmp = args.keep or Path(tmp_name)
        tmp.mkdir(parents=True, exist_ok=True)
        top5, matrix, _ = write_inputs(tmp)
        root = tmp / "not-mounted"
        ws = tmp / "ws"
        ingest = ["ingest", str(root), "--layout", "imagenet-val", "--dataset", "val", "--quiet"]
        steps = {
            "ingest": Step(
                "ingest (fresh workspace, 50,000 missing images)", "relabel ingest ROOT --layout imagenet-val"
            ),
            "labels": Step("labels import", "relabel labels import real.json --format real --replace"),
            "top5": Step("predictions import, top-5 JSONL", "relabel predictions import top5.jsonl --run r50"),
            "scores": Step(
                "predictions import, 50,000 x 1,000 scores",
                "relabel predictions import scores.npz --run vit --keep-scores",
            ),
            "votes": Step(
                "votes import (924,810 answers)", "relabel votes import real_raters.npz --format real-raters"
            ),
            "base": Step("snapshot create (base real)", "relabel snapshot create base-i --base real"),
            "ds": Step(
                "snapshot create --consensus ds",
                "relabel snapshot create ds-i --consensus ds --votes real-raters --no-studio-votes",
            ),
            "diff": Step("snapshot diff", "relabel snapshot diff base-1 ds-1"),
            **{
                f"export-{fmt}": Step(f"snapshot export {fmt}", f"relabel snapshot export ds-1 --format {fmt}")
                for fmt in ("real", "jsonl", "csv")
            },
            "evaluate-first": Step(
                "evaluate, a workspace's first (1 run, ImGT + ds snapshot; the cache holds only what the consensus "
                "snapshot kept: its arrays and the vote answers)",
                "relabel evaluate --run r50 --reference imgt --reference snapshot:ds-1 --no-report",
            ),
            "evaluate-bare": Step(
                "evaluate with cache/ deleted (the snapshot and the vote answers read from their rows as well)",
                "relabel evaluate --run r50 --reference imgt --reference snapshot:ds-1 --no-report",
            ),
            "evaluate-cold": Step(
                "evaluate, first after a snapshot of new votes (reads, fits and draws; the dataset's resamples "
                "kept by an earlier evaluate, its arrays and the votes by the snapshot)",
                "relabel evaluate --run r50 --reference imgt --reference snapshot:ds-1 --no-report",
            ),
            "evaluate": Step(
                "evaluate again (the snapshot's arrays, the other methods' fits and the scores read from the cache)",
                "relabel evaluate --run r50 --reference imgt --reference snapshot:ds-1 --no-report",
            ),
            "stats": Step("stats", "relabel stats"),
            "stats-fit": Step("stats, first after a vote import (fits)", "relabel stats"),
        }
        if "--keep-scores" not in run(ws, ["predictions", "import", "--help"])[2]:
            del steps["scores"]  # a tree from before score matrices were stored
        for r in range(args.repeats):
            fresh = tmp / f"ws-ingest-{r}"
            timed(steps["ingest"], fresh, ingest)
        run(ws, ingest)
        for r in range(1, args.repeats + 1):
            again = ["--replace"] if r > 1 else []
            timed(steps["labels"], ws, ["labels", "import", str(VAL / "real.json"), "--format", "real", *again])
            timed(steps["top5"], ws, ["predictions", "import", str(top5), "--run", "r50", *again])
            if "scores" in steps:
                timed(
                    steps["scores"], ws, ["predictions", "import", str(matrix), "--run", "vit", "--keep-scores", *again]
                )
            votes = [
                "votes",
                "import",
                str(VAL / "real_raters.npz"),
                "--format",
                "real-raters",
                "--name",
                "real-raters",
            ]
            timed(steps["votes"], ws, [*votes, *again])
            timed(steps["stats-fit"], ws, ["stats"])
        for r in range(1, args.repeats + 1):
            timed(steps["base"], ws, ["snapshot", "create", f"base-{r}", "--base", "real", "--quiet"])
            ds = ["snapshot", "create", f"ds-{r}", "--consensus", "ds", "--votes", "real-raters", "--no-studio-votes"]
            timed(steps["ds"], ws, [*ds, "--quiet"])
        for _ in range(args.repeats):
            timed(steps["diff"], ws, ["snapshot", "diff", "base-1", "ds-1"])
            for fmt in ("real", "jsonl", "csv"):
                out = tmp / f"export.{fmt}"
                timed(steps[f"export-{fmt}"], ws, ["snapshot", "export", "ds-1", "--format", fmt, "--out", str(out)])
            evaluate = ["evaluate", "--run", "r50", "--reference", "imgt", "--reference", "snapshot:ds-1"]
            shutil.rmtree(ws / "cache", ignore_errors=True)
            timed(steps["evaluate-bare"], ws, [*evaluate, "--no-report"])
            # a workspace's first evaluate follows its consensus snapshot, which kept its own arrays and the vote
            # source's answers
            for kept in (ws / "cache").iterdir():
                if not kept.name.startswith(("votes-", "snapshot-arrays-")):
                    kept.unlink()
            timed(steps["evaluate-first"], ws, [*evaluate, "--no-report"])
            # what a snapshot of new votes would not find: everything but the resamples of the dataset's images
            # (they depend on the image count and seed alone; any other set goes, as new votes may rate other
            # images), the vote source's answers and the snapshot's arrays (kept by the snapshot)
            for kept in (ws / "cache").iterdir():
                dataset_resamples = kept.name.startswith("resamples-") and f"-{n_val}-" in kept.name
                if not (dataset_resamples or kept.name.startswith(("votes-", "snapshot-arrays-"))):
                    kept.unlink()
            timed(steps["evaluate-cold"], ws, [*evaluate, "--no-report"])
            timed(steps["evaluate"], ws, [*evaluate, "--no-report"])
            timed(steps["stats"], ws, ["stats"])
    met = sum(statistics.median(s.cpu) <= GOAL_S for s in steps.values())
    lines = [
        TITLE,
        "",
        f"`{command_line()}`, {started:%Y-%m-%d %H:%M} UTC; {machine}.",
        "",
        f"Each step is `relabel --workspace WS ...` in a process of its own (start-up included) on a SQLite workspace "
        f"of the 50,000 val images; CPU seconds are user + system of the process and its children (`os.wait4`), "
        f"median of {args.repeats} (min, max); wall seconds beside them. Goal: <= {GOAL_S:g} CPU seconds each; "
        f"{met} of {len(steps)} steps meet it.",
        "",
        "| step | command | CPU s median | min | max | wall s median | <= 3 s CPU |",
        "|---|---|---:|---:|---:|---:|:-:|",
        *(s.row() for s in steps.values()),
        "",
        f"Load average at the end: {os.getloadavg()[0]:.2f}.",
        "",
        NOTES,
    ]
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(TITLE, section)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
