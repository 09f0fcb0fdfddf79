"""Several `relabel serve` processes on one PostgreSQL database: a team of simulated annotators, one process killed
with SIGKILL mid-run.

For each number of processes (`--processes`, default 1 2 4) and each overlap (`--overlaps`, default 1 2): a fresh
schema on the PostgreSQL server named by RELABEL_TEST_PG_URL (dropped afterwards) holding a workspace of `--images`
photos, `--annotators` annotators spread round-robin over the processes, each driving the card's server functions
over HTTP as the page's script does (sign in, load the page, decide each card with its card token; the reply
carries the next card) until nothing is left. With two or more processes the last one is killed with SIGKILL once
`--kill-at` of the work is acknowledged; its annotators move to the next live process with the cookies they have.
Then the database is checked (`tests.team_load`): the most annotators holding one image at once, images decided
by more annotators than the overlap, acknowledged decisions lost or stored twice.

Decisions/s is measured up to the kill (for one process: up to the same number of decisions), so it compares the
processes all up; the whole run's rate, the kill included, is shown beside it. `--write` replaces its section of
BENCHMARKS.md.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_team_load.py --write
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchlib import REPO, command_line, machine_line, write_section

sys.path.insert(0, str(REPO))  # the load harness lives in tests/, which is not an installed package
from tests.team_load import build_team_workspace, check_database, drive, pg_schema, servers  # noqa: E402

SECTION = "## Studio: several processes on one PostgreSQL"


def one_run(n: int, overlap: int, args: argparse.Namespace) -> dict[str, float | int | str]:
    work = args.images * overlap
    kill_after = round(work * args.kill_at)
    folder = Path(tempfile.mkdtemp(prefix="team-load-"))
    try:
        with pg_schema("bload") as url:
            build_team_workspace(folder, url, args.images, args.annotators)
            t = time.monotonic()
            with servers(folder, url, overlap, n) as team:
                startup = time.monotonic() - t
                run = drive(team, args.annotators, kill_after=kill_after if n > 1 else None)
            found = check_database(url, run, overlap)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    times = sorted(at for _, _, _, at in run.acked)
    upto = run.killed_at if run.killed_at is not None else times[min(kill_after, len(times)) - 1]
    before = sum(at <= upto for at in times)
    row: dict[str, float | int | str] = {
        "processes": n,
        "overlap": overlap,
        "startup_s": startup,
        "rate": before / (upto - run.started),
        "rate_whole": len(times) / (run.ended - run.started),
        "acked": len(times),
        "unanswered": run.unanswered,
        "refused": run.refused,
        "moved": run.moved,
        "errors": len(run.errors),
        "killed": "yes" if run.killed_at is not None else "no",
        **found,
    }
    print(row, file=sys.stderr)
    for e in run.errors[:5]:
        print("  error:", e, file=sys.stderr)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--overlaps", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--images", type=int, default=400)
    parser.add_argument("--annotators", type=int, default=16)
    parser.add_argument("--kill-at", type=float, default=0.5, help="share of the work acknowledged at the kill")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each setting; the median rate is shown")
    parser.add_argument("--write", action="store_true", help="write the section of BENCHMARKS.md")
    args = parser.parse_args()
    machine = machine_line()
    results: list[list[dict[str, float | int | str]]] = []
    for overlap in args.overlaps:
        for n in args.processes:
            try:
                results.append([one_run(n, overlap, args) for _ in range(args.repeats)])
            except RuntimeError as exc:  # a studio that did not start: reported, the other settings go on
                print(f"processes {n}, overlap {overlap}: {exc}", file=sys.stderr)
    report(args, machine, results)


def report(args: argparse.Namespace, machine: str, results: list[list[dict[str, float | int | str]]]) -> None:
    rate = {(rs[0]["processes"], rs[0]["overlap"]): statistics.median(float(r["rate"]) for r in rs) for rs in results}
    lines = [
        SECTION,
        "",
        f"`{command_line()}`; {datetime.date.today().isoformat()}; {machine}",
        "",
        f"{args.images} photos, {args.annotators} annotators deciding over HTTP as fast as the studio answers, "
        f"each run on a fresh PostgreSQL schema; with 2 or more processes the last one is killed with SIGKILL once "
        f"{args.kill_at:.0%} of the decisions are acknowledged, and its annotators move on to the next process. "
        "The annotators, the studio processes and PostgreSQL all share this machine's cores. Decisions/s is measured "
        "up to the kill (one process: up to as many decisions), median of "
        f"{args.repeats} run(s); 'whole run' includes the kill and the queue's last images.",
        "",
        "| overlap | processes | decisions/s | whole run | × 1 process | acknowledged | in flight at the kill | "
        "moved | most holding one image at once | decided beyond the overlap | lost | stored twice | errors |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for rs in results:
        r = rs[len(rs) // 2]
        n, overlap = r["processes"], r["overlap"]
        ratio = rate[(n, overlap)] / rate[(1, overlap)] if (1, overlap) in rate else float("nan")
        lines.append(
            f"| {overlap} | {n} | {rate[(n, overlap)]:.1f} | {float(r['rate_whole']):.1f} | {ratio:.2f} | "
            f"{r['acked']} | {r['unanswered']} | {r['moved']} | {r['held_at_once_max']} | "
            f"{r['stored_beyond_overlap']} | {r['lost']} | {r['duplicated']} | {r['errors']} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write:
        write_section(SECTION, text)


if __name__ == "__main__":
    main()
