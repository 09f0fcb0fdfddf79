"""`--dataset` is declared once (relabel.cli.options.dataset_option): every command that takes it says the same."""

from __future__ import annotations

from collections.abc import Iterator

import click

from relabel.cli import cli
from relabel.cli.options import DATASET_DEFAULT, dataset_help
from ui.cli import serve

NEW_DATASET = {"ingest": "the root folder's name"}  # commands that name a new dataset, and what they take instead


def walk(command: click.Command, path: str) -> Iterator[tuple[str, click.Command]]:
    yield path, command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"{path} {name} is listed but cannot be loaded"
            yield from walk(sub, f"{path} {name}".strip())


def dataset_options() -> dict[str, click.Option]:
    found = {}
    for path, command in [*walk(cli, ""), ("serve", serve)]:
        for param in command.params:
            if isinstance(param, click.Option) and "--dataset" in param.opts:
                found[path] = param
    return found


def test_every_dataset_option_has_the_one_help_and_no_default() -> None:
    options = dataset_options()
    assert len(options) >= 15  # the commands that read a stored dataset, and ingest
    for path, option in options.items():
        default = NEW_DATASET.get(path, DATASET_DEFAULT)
        assert option.help == dataset_help(default), path
        assert option.name == "dataset" and not isinstance(option.default, str), path  # left out: no name


def test_commands_that_read_a_dataset_all_take_it() -> None:
    options = dataset_options()
    for path in ("labels import", "predictions import", "votes import", "decisions import", "snapshot create", "serve"):
        assert path in options
