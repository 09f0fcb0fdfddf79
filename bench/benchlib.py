"""Helpers every benchmark script shares: the machine line, the command line, and BENCHMARKS.md sections."""

from __future__ import annotations

import os
import platform
import shlex
import sqlite3
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"
HEADER = (
    "# Benchmarks\n\nNumbers are medians (with min and max) from one run on a shared 2-core machine, so "
    "expect noise between runs; each section names the command that produced it, the date and the machine. "
    "`make bench` (`python bench/run_all.py`) reruns every benchmark and rewrites its section.\n"
)
MET = {True: "yes", False: "**NO**"}


def machine_line() -> str:
    import PIL

    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"nproc {nproc}, Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, "
        f"Pillow {PIL.__version__}, {platform.system()} {platform.machine()}, "
        f"load average {os.getloadavg()[0]:.2f} at the start"
    )


def command_line() -> str:
    script = Path(sys.argv[0]).resolve()
    shown = script.relative_to(REPO) if script.is_relative_to(REPO) else script
    env = "HF_HUB_OFFLINE=1 " if os.environ.get("HF_HUB_OFFLINE") == "1" else ""
    return f"{env}python {shlex.join([str(shown), *sys.argv[1:]])}"


def write_section(title: str, section: str, path: Path = REPO / "BENCHMARKS.md") -> None:
    """Replace the section headed `title` ("## ...") in BENCHMARKS.md, or append it; creates the file."""
    text = path.read_text(encoding="utf-8") if path.exists() else HEADER
    start = text.find(title)
    if start < 0:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + len(title))
        text = text[:start] + section.rstrip("\n") + ("\n\n" + text[end + 1 :] if end >= 0 else "")
    path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")
    print(f"wrote the section {title[3:]!r} of {path}", file=sys.stderr)
