"""Run every bench/bench_*.py with --write, so each one rewrites its section of BENCHMARKS.md.

Example:
  python bench/run_all.py               # what `make bench` runs
  python bench/run_all.py --repeats 3   # extra arguments go to every script
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    if {"-h", "--help"} & set(argv):
        print(__doc__)
        return 0
    failed = []
    for script in sorted(BENCH.glob("bench_*.py")):
        command = [sys.executable, str(script.relative_to(BENCH.parent)), "--write", *argv]
        print(f"$ {' '.join(command[1:])}", file=sys.stderr, flush=True)
        if subprocess.run(command, cwd=BENCH.parent).returncode != 0:
            failed.append(script.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
