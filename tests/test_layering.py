"""Imports go one way: ui -> relabel -> db; evaluator imports none of gradio, torch or db; no module imports itself
back through others (an import cycle), even through an import inside a function; the review rules are pure; tests/
mirrors the package folders."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PACKAGES = ("db", "relabel", "ui", "evaluator")
FORBIDDEN = {
    "db": {"relabel", "ui", "evaluator", "gradio", "torch"},
    "relabel": {"ui"},
    "evaluator": {"db", "relabel", "ui", "gradio", "torch", "sqlmodel", "sqlalchemy"},
}
# relabel.decisions.rules holds the rules of review: no database, no UI, no third-party library
PURE_RULES = {"relabel.decisions.rules": {"db.enums", "relabel.common.errors"}}


def module_files(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `packages` under `root` (a package as its __init__)."""
    out = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _type_checking_only(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported_names(path: Path, module: str, is_package: bool) -> set[str]:
    """Every dotted name `module` imports when it runs, inside functions included (a lazy import still ties two
    modules together); imports under `if TYPE_CHECKING:` are left out. Relative imports are made absolute, and
    `from a import b` gives `a.b`: module b of package a, or name b of module a (`import_graph` tells which)."""
    names: set[str] = set()
    here = module.split(".") if is_package else module.split(".")[:-1]

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = here[: len(here) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            names.update(f"{source}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return names


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    """Module -> the modules of `packages` it imports (the most specific module each imported name is in)."""
    files = module_files(root, packages)

    def owner(name: str) -> str | None:
        while name and name not in files:
            name = name.rpartition(".")[0]
        return name or None

    graph = {}
    for module, path in files.items():
        targets = {owner(n) for n in imported_names(path, module, path.name == "__init__.py")}
        graph[module] = {t for t in targets if t is not None and t != module}
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of `graph`: one per strongly connected group of modules, each as a closed path
    [a, b, ..., a]; sorted. Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.add(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(group)
    return sorted(_closed_path(graph, group) for group in groups)


def _closed_path(graph: dict[str, set[str]], group: set[str]) -> list[str]:
    """A shortest cycle through the first module of `group`, as [first, ..., first] (breadth-first in the group)."""
    first = min(group)
    came_from: dict[str, str] = {}
    frontier = [first]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & group):
                if child == first:
                    path = [node]
                    while path[-1] != first:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), first]
                if child not in came_from:
                    came_from[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{sorted(group)} is not strongly connected")


def test_import_direction() -> None:
    violations = [
        f"{module} imports {sorted(top & FORBIDDEN[package])}"
        for module, path in module_files(REPO, PACKAGES).items()
        if (package := module.split(".")[0]) in FORBIDDEN
        and (top := {n.split(".")[0] for n in imported_names(path, module, path.name == "__init__.py")})
        & FORBIDDEN[package]
    ]
    assert not violations


def test_no_import_cycles() -> None:
    assert import_cycles(import_graph(REPO, PACKAGES)) == []


def test_the_cycle_check_finds_a_cycle_through_a_lazy_import(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    for name in ("pkg/__init__.py", "pkg/sub/__init__.py", "pkg/leaf.py"):
        (tmp_path / name).write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg.sub import b\nfrom pkg import leaf\n")
    (tmp_path / "pkg" / "sub" / "b.py").write_text("def f():\n    from ..c import g\n")
    (tmp_path / "pkg" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import leaf\ndef g():\n    import pkg.a\n"
    )
    graph = import_graph(tmp_path, ("pkg",))
    assert graph["pkg.sub.b"] == {"pkg.c"} and graph["pkg.c"] == {"pkg.a"}  # relative, lazy; TYPE_CHECKING left out
    assert import_cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]]


def test_the_review_rules_import_no_database_ui_or_library() -> None:
    files, graph = module_files(REPO, PACKAGES), import_graph(REPO, PACKAGES)
    for module, allowed in PURE_RULES.items():
        assert graph[module] <= allowed, f"{module} imports {sorted(graph[module] - allowed)}"
        tops = {n.split(".")[0] for n in imported_names(files[module], module, files[module].name == "__init__.py")}
        libraries = tops - set(PACKAGES) - set(sys.stdlib_module_names) - {"__future__"}
        assert not libraries, f"{module} imports {sorted(libraries)}"


def test_evaluator_and_cli_help_load_no_heavy_modules() -> None:
    code = (
        "import sys, evaluator, relabel.cli; "
        "print(sorted(m for m in ('gradio', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def unmirrored_test_folders(root: Path) -> list[str]:
    """Folders under root/tests holding Python files that are not a package beside a package of the same path.

    tests/ mirrors the packages (tests/relabel/suggest/ for relabel/suggest/), so a test is found where its module
    lives; data-only folders such as tests/data are left out, as are the shared helpers at the top of tests/."""
    tests = root / "tests"
    folders = sorted({path.parent for path in tests.rglob("*.py")} - {tests})
    return [
        folder.relative_to(tests).as_posix()
        for folder in folders
        if not (folder / "__init__.py").is_file() or not (root / folder.relative_to(tests) / "__init__.py").is_file()
    ]


def test_the_tests_mirror_the_packages() -> None:
    assert unmirrored_test_folders(REPO) == []


def test_the_mirror_check_finds_a_folder_without_a_package(tmp_path: Path) -> None:
    for name in ("relabel/__init__.py", "tests/relabel/__init__.py", "tests/studio/__init__.py", "tests/data/a.csv"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    (tmp_path / "relabel" / "suggest").mkdir()
    (tmp_path / "tests" / "relabel" / "suggest").mkdir()
    (tmp_path / "tests" / "relabel" / "suggest" / "test_x.py").write_text("")  # no __init__.py on either side
    assert unmirrored_test_folders(tmp_path) == ["relabel/suggest", "studio"]


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(exe), "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(root)}
    )


def test_the_import_contracts_hold() -> None:
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout[-2000:]
    assert "4 kept, 0 broken" in done.stdout


def stage_skeleton(root: Path) -> None:
    """Empty packages of every folder the import contracts name, under `root`, with the contracts themselves."""
    config = (REPO / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(config[config.index("\n[tool.importlinter]\n") :])
    stages = [p.name for p in (REPO / "relabel").iterdir() if (p / "__init__.py").exists()]
    for package in ("ui", "relabel", "db", "evaluator", *(f"relabel/{s}" for s in stages)):
        (root / package).mkdir(parents=True, exist_ok=True)
        (root / package / "__init__.py").write_text("")
    for module in ("relabel/demo.py", "relabel/decisions/rules.py", "relabel/decisions/annotations.py",
                   "relabel/decisions/log.py", "db/engine.py", "db/models.py"):  # fmt: skip
        (root / module).write_text("")


def test_the_import_contracts_catch_a_lazy_import_upwards(tmp_path: Path) -> None:
    stage_skeleton(tmp_path)
    (tmp_path / "db" / "models.py").write_text("def f():\n    from relabel.decisions import rules\n")
    done = lint_imports(tmp_path)
    assert done.returncode == 1 and "layers: ui above relabel above db BROKEN" in done.stdout, done.stdout[-2000:]


def test_a_stage_importing_a_later_stage_is_caught(tmp_path: Path) -> None:
    stage_skeleton(tmp_path)
    (tmp_path / "relabel" / "votes" / "posteriors.py").write_text(
        "def f():\n    from relabel.snapshots import reader\n"
    )
    (tmp_path / "relabel" / "snapshots" / "reader.py").write_text("")
    done = lint_imports(tmp_path)
    assert done.returncode == 1, done.stdout[-2000:]
    assert "relabel.votes is not allowed to import relabel.snapshots" in done.stdout, done.stdout[-2000:]
