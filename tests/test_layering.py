"""Imports go one way: ui -> relabel -> db; evaluator imports none of gradio, torch or db."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import REPO

FORBIDDEN = {
    "db": {"relabel", "ui", "evaluator", "gradio", "torch"},
    "relabel": {"ui"},
    "evaluator": {"db", "relabel", "ui", "gradio", "torch", "sqlmodel", "sqlalchemy"},
}


def imported_modules(package: str) -> dict[str, set[str]]:
    out = {}
    for path in (REPO / package).rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        out[str(path.relative_to(REPO))] = names
    return out


def test_import_direction() -> None:
    violations = [
        f"{f} imports {sorted(mods & FORBIDDEN[pkg])}"
        for pkg in FORBIDDEN
        for f, mods in imported_modules(pkg).items()
        if mods & FORBIDDEN[pkg]
    ]
    assert not violations


def test_evaluator_and_cli_help_load_no_heavy_modules() -> None:
    code = (
        "import sys, evaluator, relabel.cli; "
        "print(sorted(m for m in ('gradio', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
