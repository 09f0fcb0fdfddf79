"""Collects the command modules onto the root group, plus commands other packages register under the
`relabel.commands` entry-point group (the studio's `serve`)."""

from __future__ import annotations

from importlib.metadata import entry_points

import click

ENTRY_POINT_GROUP = "relabel.commands"


def register(root: click.Group) -> None:
    from relabel.cli import data, decisions, evaluate, labels, plan, queue, simulate, snapshot, suggest, users, votes

    for module in (data, users, labels, votes, decisions, snapshot, queue, suggest, evaluate, plan, simulate):
        for command in module.COMMANDS:
            root.add_command(command)
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        root.add_command(entry.load(), entry.name)
