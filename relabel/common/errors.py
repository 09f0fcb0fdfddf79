"""One error hierarchy. Messages name the bad value, where it came from, and what would be accepted."""

from __future__ import annotations

from collections.abc import Sequence


class RelabelError(Exception):
    """Base class; the CLI prints the message as one line on stderr and exits non-zero."""

    exit_code = 1


class InputError(RelabelError):
    """A file, argument or value given by the user cannot be used. Nothing was written."""

    exit_code = 2


class NotFoundError(RelabelError):
    """A named dataset, source, run, snapshot or user does not exist."""

    exit_code = 3


class ConflictError(RelabelError):
    """The request clashes with what the workspace already holds (a name taken, an immutable object)."""

    exit_code = 4


class StaleCardError(ConflictError):
    """A decision answers a review card that is out of date: issued before a restart, answered since in another
    tab, its image since given to other annotators, or its suggestion since re-imported."""


class OutputError(RelabelError):
    """An output file cannot be written (disk full, no permission, a place that takes no files). No partial file
    was left behind."""

    exit_code = 6


def examples(items: Sequence[object], limit: int = 3) -> str:
    """A short, quoted list of the first few items, for error messages about many bad rows."""
    shown = ", ".join(repr(x) for x in list(items)[:limit])
    more = f", … ({len(items) - limit} more)" if len(items) > limit else ""
    return shown + more


def brief(value: object, limit: int = 80) -> str:
    """`repr(value)`, cut to about `limit` characters: a 100,000-character value must not become the message."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 12]}…({len(text):,} chars)"


def unknown_name(kind: str, name: str, known: Sequence[str]) -> NotFoundError:
    return NotFoundError(f"unknown {kind} {name!r}; known: {', '.join(sorted(known)) or '(none)'}")
