"""Options whose choices and help are read from a registry (protocols, export formats) when they are needed.

A registry is the only place that knows its names: `--protocol` and `--format` list what the registry holds at
the moment a command parses its arguments or prints its help, so a new entry needs no edit here, and
`relabel --help` does not import the registries' modules (the protocols pull in numpy and scipy).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

import click

Entries = Callable[[], Mapping[str, str]]  # name -> a few words saying what it is, in the registry's order


class RegistryChoice(click.Choice):
    """A click.Choice whose names are the keys of `entries()`, asked again each time they are read."""

    def __init__(self, entries: Entries) -> None:
        self.entries = entries
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(self.entries())

    @choices.setter
    def choices(self, value: Any) -> None:
        """click sets the choices once at start; they are read from the registry instead."""


class ListingOption(click.Option):
    """An option whose help lists a registry: `{entries}` in it becomes "name: what; name: what; ..." (or
    "name, name, ..." when no entry says what it is)."""

    def __init__(self, *args: Any, entries: Entries, **kwargs: Any) -> None:
        self.entries = entries
        super().__init__(*args, **kwargs)

    @property
    def help(self) -> str | None:
        entries = self.entries()
        listing = ("; " if any(entries.values()) else ", ").join(
            f"{name}: {what}" if what else name for name, what in entries.items()
        )
        return self._help.replace("{entries}", listing) if self._help else self._help

    @help.setter
    def help(self, value: str | None) -> None:
        self._help = value


class RegistryOption(ListingOption):
    """A ListingOption whose value must be one of the registry's names."""

    def __init__(self, *args: Any, entries: Entries, **kwargs: Any) -> None:
        super().__init__(*args, entries=entries, type=RegistryChoice(entries), **kwargs)


def registry_option(*names: str, entries: str, choose: bool = True, **kwargs: Any) -> Callable[[Any], Any]:
    """`click.option(*names, ...)` whose help lists the entries named by `entries` ("module:name", see
    lazy_entries) and, with `choose`, whose value must be one of them; the module is imported the first time the
    choices or the help are read (see RegistryOption, ListingOption)."""
    cls = RegistryOption if choose else ListingOption
    return click.option(*names, cls=cls, entries=lazy_entries(entries), **kwargs)


def lazy_entries(target: str) -> Entries:
    """The entries named by "module:name", imported when first asked for: a function returning {name: what}, or
    the registry itself (an entry's `summary` says what it is; a registry whose entries have none lists its names
    alone)."""

    def entries() -> Mapping[str, str]:
        module, _, attribute = target.partition(":")
        found = getattr(importlib.import_module(module), attribute)
        registry: Mapping[str, Any] = found() if callable(found) else found
        return {
            name: what if isinstance(what, str) else str(getattr(what, "summary", ""))
            for name, what in registry.items()
        }

    return entries
