"""The root group's commands: the core ones named in COMMANDS, plus those other packages register under the
`relabel.commands` entry-point group (the studio's `serve`).

A command's module is imported the first time the command is looked up (to run it or print its own help), so
`relabel --help` imports none of them and `relabel snapshot --help` imports only `relabel.cli.snapshot`. The root
help lists each core command by the summary kept here; a test checks every summary against the command's help.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

ENTRY_POINT_GROUP = "relabel.commands"


@dataclass(frozen=True)
class Entry:
    target: str  # "module:attribute" of the click command
    summary: str  # the first paragraph of the command's help, shown beside its name in `relabel --help`

    def load(self) -> click.Command:
        module, _, attribute = self.target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), attribute)
        return command


COMMANDS = {
    "init": Entry(
        "relabel.cli.data:init",
        "Create the workspace database, or upgrade it to the current schema. Safe to run again.",
    ),
    "ingest": Entry(
        "relabel.cli.data:ingest",
        "Add a dataset's images and original labels (ImGT) to the workspace. Re-run to resume or refresh.",
    ),
    "stats": Entry(
        "relabel.cli.data:stats",
        "Counts per dataset: image status, label sources, model runs, decisions, snapshot categories.",
    ),
    "demo": Entry(
        "relabel.cli.data:demo",
        "Build the offline demo workspace from photos shipped inside installed packages, then open the studio.",
    ),
    "users": Entry("relabel.cli.users:users", "Annotators and leads of the workspace."),
    "guidelines": Entry(
        "relabel.cli.guidelines:guidelines",
        "Labeling guidelines: Markdown a lead writes, shown to annotators on the review card (key G).",
    ),
    "comments": Entry("relabel.cli.guidelines:comments", "Comments left on images from the studio's cards (key O)."),
    "labels": Entry(
        "relabel.cli.labels:labels",
        "Label sources: the original labels (ImGT) and imported priors (ReaL, Shankar, MTurk).",
    ),
    "predictions": Entry("relabel.cli.labels:predictions", "Model predictions made elsewhere, stored as model runs."),
    "votes": Entry(
        "relabel.cli.votes:votes",
        'Workers\' answers ("is class c in image i?": yes / maybe / no): import, aggregate, worker reliability.',
    ),
    "decisions": Entry(
        "relabel.cli.decisions:decisions",
        "Annotators' per-image decisions made outside the studio: import them.",
    ),
    "assign": Entry(
        "relabel.cli.assign:assign",
        "Images and classes assigned to annotators. An image assigned to some annotators (directly, or through a "
        "class of its original labels) is served only to them, before any unassigned image; unassigned images go "
        "to everyone.",
    ),
    "snapshot": Entry("relabel.cli.snapshot:snapshot", "Immutable ReGT snapshots of the consensus labels."),
    "queue": Entry(
        "relabel.cli.queue:queue",
        "List the next images of the review queue: rank, image id, file, original class, benefit, reason.",
    ),
    "suggest": Entry(
        "relabel.cli.suggest:suggest",
        "Run a model over the images and store its answers (suggestions for annotators, predictions for scoring).",
    ),
    "evaluate": Entry(
        "relabel.cli.evaluate:evaluate",
        "Score stored model runs against ImGT and ReGT references; store the evaluation and write a report.",
    ),
    "plan": Entry(
        "relabel.cli.plan:plan",
        "How many more reviews, in the active order, until (a) each run's top-1 interval from label uncertainty is "
        "within ±TARGET points and (b) the ranking of the runs holds with probability STABILITY.",
    ),
    "simulate": Entry(
        "relabel.cli.simulate:simulate",
        "Replay work on answers a dataset holds already (e.g. ReaL's raters), to see what an order of review buys.",
    ),
}


class LazyCommands(MutableMapping[str, click.Command]):
    """Commands by name, each imported when first looked up; a group's `commands` mapping.

    A plugin (an entry point) with the name of a core command replaces it, as `add_command` would."""

    def __init__(self, entries: dict[str, Entry], entry_point_group: str) -> None:
        self._entries = entries
        self._entry_point_group = entry_point_group
        self._plugins: dict[str, EntryPoint] | None = None
        self._loaded: dict[str, click.Command] = {}

    def plugins(self) -> dict[str, EntryPoint]:
        if self._plugins is None:
            from importlib.metadata import entry_points

            self._plugins = {entry.name: entry for entry in entry_points(group=self._entry_point_group)}
        return self._plugins

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name in self.plugins():
                self._loaded[name] = self.plugins()[name].load()
            elif name in self._entries:
                self._loaded[name] = self._entries[name].load()
            else:
                raise KeyError(name)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._loaded.pop(name, None)
        self._entries = {n: e for n, e in self._entries.items() if n != name}
        self._plugins = {n: e for n, e in self.plugins().items() if n != name}

    def __iter__(self) -> Iterator[str]:
        return iter({**self._entries, **self.plugins(), **self._loaded})

    def __len__(self) -> int:
        return len({**self._entries, **self.plugins(), **self._loaded})

    def __contains__(self, name: object) -> bool:
        return name in self._loaded or name in self._entries or name in self.plugins()

    def listed(self, name: str) -> click.Command:
        """The command as the group's help lists it: a core command not imported yet stands in as its summary."""
        if name in self._loaded or name in self.plugins() or name not in self._entries:
            return self[name]
        return click.Command(name, help=self._entries[name].summary)
