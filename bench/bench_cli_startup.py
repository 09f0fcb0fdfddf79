"""CLI start-up benchmark: the wall time of `relabel --help` and of three group helps, in fresh processes.

Each help runs --repeats times (after one run not timed) through the installed `relabel` script, from an empty
directory; the figure is the median wall time, with min and max. With --before REV, the same helps run on the
package as committed at REV (`git archive`, put first on PYTHONPATH) beside the working tree. A bare Python start
(`python -c pass`) is the floor. Goal: <= 0.3 s for each help.

Example:
  python bench/bench_cli_startup.py --before 0cf91f7 --write
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import REPO, command_line, machine_line, write_section  # noqa: E402

TITLE = "## CLI: start-up of `relabel --help`"
HELPS = (["--help"], ["snapshot", "--help"], ["votes", "--help"], ["users", "--help"])
PACKAGES = ("relabel", "db", "ui", "evaluator")
GOAL_S = 0.3


def timed(command: list[str], env: dict[str, str], cwd: Path, repeats: int) -> list[float]:
    """Wall seconds of `repeats` runs of `command`, after one run not timed."""
    seconds = []
    for k in range(repeats + 1):
        start = time.perf_counter()
        subprocess.run(command, env=env, cwd=cwd, check=True, capture_output=True)
        if k:
            seconds.append(time.perf_counter() - start)
    return seconds


def tree_of(rev: str, into: Path) -> Path:
    """The packages as committed at `rev`, extracted under `into`."""
    archive = subprocess.run(["git", "archive", rev, *PACKAGES], cwd=REPO, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def row(label: str, seconds: list[float]) -> str:
    median = statistics.median(seconds)
    met = "yes" if median <= GOAL_S else "**NO**"
    return f"| {label} | {median:.3f} | {min(seconds):.3f} | {max(seconds):.3f} | {met} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--before", metavar="REV", help="also time the package as committed at this revision")
    parser.add_argument("--write", action="store_true", help="replace this section of BENCHMARKS.md")
    args = parser.parse_args()

    relabel = Path(sys.executable).parent / "relabel"
    machine = machine_line()
    lines = [
        TITLE,
        "",
        f"`{command_line()}`, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; {machine}.",
        "",
        f"Wall seconds of one process, median of {args.repeats} (min, max), after one run not timed.",
        "",
        f"| command | median s | min s | max s | <= {GOAL_S} s |",
        "|---|---:|---:|---:|:-:|",
    ]
    with tempfile.TemporaryDirectory(prefix="cli-startup-") as tmp:
        empty = Path(tmp) / "cwd"
        empty.mkdir()
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        lines.append(row("`python -c pass` (floor)", timed([sys.executable, "-c", "pass"], env, empty, args.repeats)))
        trees = [("", REPO)]
        if args.before:
            before = Path(tmp) / "before"
            before.mkdir()
            trees.insert(0, (f" at {args.before}", tree_of(args.before, before)))
        for suffix, tree in trees:
            for helps in HELPS:
                seconds = timed([str(relabel), *helps], {**env, "PYTHONPATH": str(tree)}, empty, args.repeats)
                lines.append(row(f"`relabel {' '.join(helps)}`{suffix}", seconds))
                print(lines[-1], file=sys.stderr)
    lines.append(f"\nLoad average at the end: {os.getloadavg()[0]:.2f}.")
    section = "\n".join(lines) + "\n"
    print(section)
    if args.write:
        write_section(TITLE, section)


if __name__ == "__main__":
    main()
