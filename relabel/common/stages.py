"""What a long command is doing, step by step, on stderr: "reading probs.npz ... 1.8 s".

A step without a count to show (loading a workspace, reading a file, storing rows in one transaction) says what
it does when it starts, so a user never watches a silent terminal, and how long it took when it ends; steps that
count items use `relabel.common.progress` bars instead. Off with `enabled=False` (a command's --quiet).

The steps show on a terminal, or anywhere with RELABEL_PROGRESS=1: a script or a log that reads stderr gets the
command's errors alone, one line each. On a terminal a failed step's line is cleared, leaving only the error.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def stage(what: str, *, enabled: bool = True) -> Iterator[None]:
    """Print `what ...` on stderr, run the block, then its seconds (or `failed`) on the same line."""
    terminal = sys.stderr.isatty()
    if not enabled or not (terminal or os.environ.get("RELABEL_PROGRESS") == "1"):
        yield
        return
    sys.stderr.write(f"{what} ...")
    sys.stderr.flush()
    started = time.perf_counter()
    try:
        yield
    except BaseException:
        sys.stderr.write("\r\033[K" if terminal else " failed\n")
        sys.stderr.flush()
        raise
    sys.stderr.write(f" {time.perf_counter() - started:.1f} s\n")
    sys.stderr.flush()
