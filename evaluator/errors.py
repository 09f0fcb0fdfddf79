"""The evaluator's one error type. Messages name the bad value, where it is, and what would be accepted."""

from __future__ import annotations

from collections.abc import Iterable


class EvaluationError(ValueError):
    """Input to a public evaluator function cannot be scored; nothing was computed.

    A `ValueError`, so callers that do not know this package still catch it as bad input.
    """


def unknown_name(kind: str, name: str, known: Iterable[str]) -> EvaluationError:
    """The error for a name that is not in a registry, listing the names that are."""
    return EvaluationError(f"unknown {kind} {name!r}; known: {', '.join(sorted(known)) or '(none)'}")
