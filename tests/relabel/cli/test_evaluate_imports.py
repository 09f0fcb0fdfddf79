"""`relabel evaluate --no-report` imports neither the report (plots, matplotlib) nor the libraries only robustness
runs need (scipy.signal, PIL) nor scipy.stats; with a report, the report modules are imported.

Each check runs in a fresh interpreter, as in test_cli_startup.py. The time evaluate takes is measured in
BENCHMARKS.md ("CLI: each step on 50,000 images"), not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from db import create_db_engine, init_db
from tests import evaluation_workspace as ws

REPORT_ONLY = ("relabel.evaluation.report", "relabel.evaluation.plots", "matplotlib")
UNUSED = ("scipy.stats", "scipy.signal", "scipy.ndimage", "PIL", "torch", "transformers", "gradio")

PROBE = """
import json, sys
from relabel.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps(sorted(m for m in {watched!r} if m in sys.modules)), file=sys.stderr)
"""


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("imports")
    engine = create_db_engine(f"sqlite:///{tmp / 'ws' / 'relabel.db'}")
    init_db(engine)
    ws.build(engine, tmp)
    engine.dispose()
    return tmp / "ws"


def imported(workspace: Path, *args: str) -> tuple[str, list[str]]:
    """The output of `relabel evaluate ARGS` in a fresh interpreter, and which watched modules it imported."""
    # one run: nothing is ranked (Kendall's tau between rankings is what needs scipy.stats)
    command = ["--workspace", str(workspace), "evaluate", "--run", "m5", "--reference", "imgt", "--reference", "team"]
    command += args
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(watched=REPORT_ONLY + UNUSED), *command],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1])


def test_no_report_imports_no_report_module_and_no_unused_library(workspace: Path) -> None:
    output, modules = imported(workspace, "--no-report", "--boot", "20")
    assert "stored as evaluation" in output and "report:" not in output
    assert modules == []


def test_a_report_imports_the_report_modules(workspace: Path) -> None:
    output, modules = imported(workspace, "--boot", "20", "--out", str(workspace.parent / "report"))
    assert "report:" in output
    assert {"relabel.evaluation.report", "relabel.evaluation.plots", "matplotlib"} <= set(modules)
