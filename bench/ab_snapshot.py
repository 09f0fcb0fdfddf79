"""`relabel snapshot create NAME --consensus ds --votes real-raters --no-studio-votes` (and with `--calibrate real
--reference real`) on the 50,000 ImageNet val images with ReaL's raters, this tree against another checkout: the
seconds of `create_snapshot` in a fresh process, wall-clock and CPU, each tree in turn for --rounds rounds, so both
meet the same load. Both trees read copies of one workspace built as bench_consensus.py builds it.

Example (the tree before the bulk snapshot path):
  mkdir /tmp/before && git archive ad38ae9 | tar -x -C /tmp/before
  python bench/ab_snapshot.py /tmp/before --rounds 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_consensus import VAL, build_workspace

HERE = Path(__file__).resolve().parent.parent
CODE = """import sys, time
from db import create_db_engine
from relabel.snapshots.freeze import consensus_defaults, create_snapshot
url, name, calibrate = sys.argv[1:4]
options = {"calibrate": calibrate, "reference": calibrate} if calibrate else {}
threshold, keep = consensus_defaults(calibrate or None)
engine = create_db_engine(url)
wall, cpu = time.perf_counter(), time.process_time()
create_snapshot(engine, name, consensus="ds", vote_sources=["real-raters"], studio_votes=False, threshold=threshold,
                keep_original=keep, **options)
print(time.perf_counter() - wall, time.process_time() - cpu)
"""
VARIANTS = {"plain": "", "--calibrate real --reference real": "real"}


def timed(tree: Path, db: Path, name: str, calibrate: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one `create_snapshot` from `tree`'s code."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run(
        [sys.executable, "-c", CODE, f"sqlite:///{db}", name, calibrate],
        env=env, check=True, capture_output=True, text=True, cwd=tempfile.gettempdir(),
    )  # fmt: skip
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="another checkout of the project (its root)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from relabel.votes.importing import import_votes

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        engine = build_workspace(folder)
        import_votes(engine, VAL / "real_raters.npz", fmt="real-raters", name="real-raters")
        engine.dispose()
        trees = {"this tree": HERE, str(args.other): args.other}
        dbs = {label: folder / f"tree-{k}.db" for k, label in enumerate(trees)}  # each tree writes into its own copy
        for db in dbs.values():
            shutil.copy(folder / "relabel.db", db)
        times: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for round_ in range(args.rounds):
            for variant, calibrate in VARIANTS.items():
                for label, tree in trees.items():
                    run = timed(tree, dbs[label], f"ab-{round_}-{variant}", calibrate)
                    times.setdefault((label, variant), []).append(run)
        for (label, variant), runs in times.items():
            walls, cpus = [w for w, _ in runs], [c for _, c in runs]
            print(
                f"{label}, {variant}: wall median {statistics.median(walls):.2f} s ({min(walls):.2f}-"
                f"{max(walls):.2f}), CPU median {statistics.median(cpus):.2f} s ({min(cpus):.2f}-{max(cpus):.2f}), "
                f"{len(runs)} runs"
            )
        print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
