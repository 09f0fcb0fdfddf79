"""`relabel ARGS` run inside the test process the way the `relabel` executable runs it: through relabel.cli.main
(click's usage errors and ours as one line on stderr, the exit status of `sys.exit`), with stdout and stderr kept
apart, and handed back as the `subprocess.CompletedProcess` a run of `python -m relabel ARGS` gives.

A new Python for each command imported torch, the adapters and the database layer again: 1-2 CPU s a command, most
of an end-to-end CLI test's cost. Starting the executable itself is checked by tests/relabel/cli/test_cli_startup.py.
What a command changes in the process is put back afterwards: the environment (click's isolation), torch's thread
count (`--threads`, a model's own default) and the garbage collector's frozen objects (the start-up pause of main).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import traceback
from collections.abc import Mapping
from typing import Any

from click.testing import CliRunner


def run_relabel(args: list[str], env: Mapping[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """`relabel ARGS` in this process with `env` set on top of (None: removed from) this process's environment."""
    import torch

    from relabel.cli import main

    threads = torch.get_num_threads()
    frozen = gc.get_freeze_count()
    code: Any = 0
    with CliRunner().isolation(env=env) as (out, err, _):
        try:
            main(list(args))
        except SystemExit as exc:
            code = exc.code
        except Exception:  # an uncaught error: the traceback on stderr and status 1, as Python exits with
            traceback.print_exc(file=sys.stderr)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
    if code is None:
        code = 0
    elif not isinstance(code, int):  # sys.exit("message"): the message on stderr and status 1
        err.write(f"{code}\n".encode())
        code = 1
    if frozen == 0 and gc.get_freeze_count():
        gc.unfreeze()
    torch.set_num_threads(threads)
    return subprocess.CompletedProcess(
        ["relabel", *args], code, out.getvalue().decode("utf-8", "replace"), err.getvalue().decode("utf-8", "replace")
    )
