"""Collects the command modules onto the root group."""

from __future__ import annotations

import click


def register(root: click.Group) -> None:
    from relabel.cli import data, labels, snapshot, suggest

    for module in (data, labels, snapshot, suggest):
        for command in module.COMMANDS:
            root.add_command(command)
