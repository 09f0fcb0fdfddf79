"""`relabel --help` and a group's help import no heavy library, and the root help's summaries are the commands' own.

Each check runs in a fresh interpreter: the test process has imported numpy, sqlalchemy and the rest long before.
The time these helps take is measured in BENCHMARKS.md ("CLI start-up"), not asserted here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from relabel.cli import RelabelGroup
from relabel.cli.commands import COMMANDS, ENTRY_POINT_GROUP, LazyCommands

HEAVY = ("sqlalchemy", "sqlmodel", "numpy", "scipy", "torch", "transformers", "gradio", "PIL", "db")
COMMAND_MODULES = {entry.target.partition(":")[0] for entry in COMMANDS.values()}

PROBE = """
import json, sys
from relabel.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
loaded = sorted(m for m in sys.modules if m.startswith("relabel.cli."))
print(json.dumps({{"heavy": heavy, "loaded": loaded}}), file=sys.stderr)
"""


def probe(*args: str) -> tuple[str, dict[str, list[str]]]:
    """The help printed by `relabel ARGS` in a fresh interpreter, and which heavy and command modules it imported."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(done.stderr.strip().splitlines()[-1])


def test_root_help_imports_no_command_module_and_no_heavy_library() -> None:
    output, modules = probe("--help")
    assert modules["heavy"] == []
    assert "relabel.cli.commands" in modules["loaded"]
    assert not COMMAND_MODULES & set(modules["loaded"])
    listed = [line.split()[0] for line in output.split("Commands:\n")[1].splitlines() if line.strip()]
    assert listed == sorted([*COMMANDS, "serve"])


@pytest.mark.parametrize(
    ("group", "imported", "subcommands"),
    [
        ("snapshot", {"snapshot"}, ["create", "diff", "export", "list"]),
        ("votes", {"votes"}, ["aggregate", "import", "list", "workers"]),
        ("users", {"users"}, ["add", "disable", "enable", "list", "passwd", "role"]),
        ("evaluate", {"evaluate", "suggest"}, ["robustness"]),  # evaluate shares suggest's --model option
    ],
)
def test_a_group_help_imports_only_its_module(group: str, imported: set[str], subcommands: list[str]) -> None:
    output, modules = probe(group, "--help")
    assert modules["heavy"] == []
    assert COMMAND_MODULES & set(modules["loaded"]) == {f"relabel.cli.{name}" for name in imported}
    listed = [line.split()[0] for line in output.split("Commands:\n")[1].splitlines() if line[2:3].strip()]
    assert listed == subcommands


def test_serve_is_listed_without_importing_gradio() -> None:
    output, modules = probe("serve", "--help")
    assert "Usage: relabel serve" in output
    assert "gradio" not in modules["heavy"]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_summary_is_the_first_paragraph_of_the_commands_help(name: str) -> None:
    command = COMMANDS[name].load()
    assert command.short_help is None, "a short_help would be shown instead of the summary"
    first_paragraph = " ".join((command.help or "").split("\n\n")[0].split())
    assert COMMANDS[name].summary == first_paragraph


def commands_section(group: click.Group, width: int) -> str:
    ctx = click.Context(group, terminal_width=width, max_content_width=100)
    formatter = ctx.make_formatter()
    group.format_commands(ctx, formatter)
    return formatter.getvalue()


@pytest.mark.parametrize(
    ("width", "line"),
    [
        (50, "  snapshot     Immutable ReGT snapshots of...\n"),
        (100, "  snapshot     Immutable ReGT snapshots of the consensus labels.\n"),
    ],
)
def test_root_help_lists_the_summaries_the_loaded_commands_would_show(width: int, line: str) -> None:
    lazy = commands_section(RelabelGroup("relabel"), width)  # a fresh group: no core command loaded yet
    loaded = commands_section(click.Group("relabel", commands=dict(LazyCommands(COMMANDS, ENTRY_POINT_GROUP))), width)
    assert lazy == loaded
    assert line in lazy


def test_commands_maps_every_core_command_and_the_plugins() -> None:
    commands = LazyCommands(COMMANDS, ENTRY_POINT_GROUP)
    assert "serve" in commands and "nope" not in commands
    assert commands["snapshot"].name == "snapshot"
    with pytest.raises(KeyError):
        commands["nope"]
    assert sorted(commands) == sorted([*COMMANDS, "serve"])
