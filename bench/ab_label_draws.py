"""`relabel evaluate --reference snapshot:raters-ds` with N runs, this tree against another checkout: the seconds
with `--boot 0` (no label draws) and `--boot 1000`, so their difference is the time of the label draws (expected
top-1 and aggregation sensitivity). Both trees read one workspace, built by `bench_label_uncertainty.py`'s steps
with the cleanlab predictions imported N times; each tree runs twice, alternately.

Example (the tree before the label draws were shared):
  git worktree add /tmp/before c80830e
  python bench/ab_label_draws.py /tmp/before --runs 10
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_label_uncertainty import SNAPSHOT, build_workspace

HERE = Path(__file__).resolve().parent.parent
CODE = "import sys; from relabel.cli import main; main(sys.argv[1:])"


def seconds(tree: Path, base: list[str], boot: str, out: Path) -> float:
    """Wall-clock seconds of one `relabel evaluate` run from `tree`'s code."""
    env = dict(os.environ, PYTHONPATH=str(tree), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    args = [*base, "evaluate", "--reference", f"snapshot:{SNAPSHOT}", "--boot", boot, "--out", str(out)]
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", CODE, *args], env=env, check=True, capture_output=True, cwd=tempfile.gettempdir()
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("other", type=Path, help="another checkout of the project (its root)")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = build_workspace(Path(tmp), args.runs)
        for round_ in range(2):
            for name, tree in (("this tree", HERE), (str(args.other), args.other)):
                t0, t1 = (seconds(tree, base, boot, Path(tmp) / f"r{round_}-{boot}") for boot in ("0", "1000"))
                print(f"{name}, {args.runs} runs: --boot 0 {t0:.1f} s, --boot 1000 {t1:.1f} s, draws {t1 - t0:.1f} s")


if __name__ == "__main__":
    main()
