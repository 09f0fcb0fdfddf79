"""What every command module shares: the workspace settings passed to a command, an existing-file argument, and
the `--dataset` option (one declaration, so every command's help says the same thing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from relabel.common.settings import Settings

pass_settings = click.make_pass_decorator(Settings)
EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)

DATASET_DEFAULT = "the only one"  # what `relabel.common.workspace.get_dataset` picks when no name is given


def dataset_help(default: str = DATASET_DEFAULT) -> str:
    """The `--dataset` help: "Dataset name (default: DEFAULT)." """
    return f"Dataset name (default: {default})."


def dataset_option(default: str = DATASET_DEFAULT) -> Callable[[Any], Any]:
    """`--dataset NAME`, passed to the command as `dataset` (None when left out). `default` says what a command
    that names a new dataset takes instead of the workspace's only one (`relabel ingest`: the root folder's name)."""
    return click.option("--dataset", help=dataset_help(default))
