"""What every command module shares: the workspace settings passed to a command, and an existing-file argument."""

from __future__ import annotations

from pathlib import Path

import click

from relabel.settings import Settings

pass_settings = click.make_pass_decorator(Settings)
EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
