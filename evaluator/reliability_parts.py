"""The parts of the reliability table's overall score (after ARGUS), as a registry: the only place that knows them.

Each part (`ReliabilityPart`) has a name (its key in weights, values and resamples), a short symbol (the weight's key
on the command line, the table's column, the plot's label), a help line (the CLI's `--weights` help, the
definitions printed with a table), how a table row gives its value and its resamples, and whether its interval
comes from resampled images or it is held fixed (a measurement, as E). Everything that lists the parts reads this
registry: `evaluator.model_reliability` (the overall score and its resamples), and in `relabel` the ranks, the
intervals, the CLI's help, the tables, the definitions and the plot. A part is added by registering it
(`register_part`).

This module imports no numpy, so a command's help can list the parts without loading it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from evaluator.errors import EvaluationError

if TYPE_CHECKING:
    import numpy as np

CAPABILITY = "capability"  # the part the overall ranking is compared against (rank by P vs rank by overall)
Interval = Literal["resampled", "fixed"]


@dataclass(frozen=True)
class ReliabilityPart:
    """One part of the overall score, as the registry holds it.

    name: its key in weights, values and resamples, and by default the attribute of a table row it is read from.
    symbol: short name: the weight's key on the command line (`P=1`), the table's column and the plot's label.
    help: one line saying what it is (the CLI's `--weights` help and the definitions printed with a table).
    interval: "resampled": a sample of images, whose resamples (n_boot,) a row keeps under `resampled[name]` and
        which enter the overall score's and the ranks' intervals; "fixed": a measurement, held fixed in every
        resample (as E).
    read: how a row gives its value in [0, 1] (None: unknown); default the row's attribute `name`.
    resample: how a row gives its resamples (None: none); default `row.resampled.get(name)` for "resampled".
    """

    name: str
    symbol: str
    help: str
    interval: Interval
    read: Callable[[Any], float | None] | None = None
    resample: Callable[[Any], np.ndarray | None] | None = None

    def value(self, row: object) -> float | None:
        """The part's value on `row`, or None when it is unknown."""
        return self.read(row) if self.read is not None else getattr(row, self.name)

    def resamples(self, row: object) -> np.ndarray | None:
        """The part's resamples on `row` (n_boot,), or None: always None for a fixed part."""
        if self.interval == "fixed":
            return None
        if self.resample is not None:
            return self.resample(row)
        found: Mapping[str, np.ndarray] = getattr(row, "resampled", {})
        return found.get(self.name)


RELIABILITY_PARTS: dict[str, ReliabilityPart] = {}


def register_part(part: ReliabilityPart) -> ReliabilityPart:
    """Add `part` to `RELIABILITY_PARTS`; its name and its symbol (case-insensitive) must be new."""
    for other in RELIABILITY_PARTS.values():
        if part.name == other.name or part.symbol.upper() == other.symbol.upper():
            raise EvaluationError(f"reliability part {part.name!r} ({part.symbol}) is taken by {other.name!r}")
    if part.interval not in ("resampled", "fixed"):
        raise EvaluationError(f"reliability part {part.name!r}: interval {part.interval!r}; use resampled or fixed")
    RELIABILITY_PARTS[part.name] = part
    return part


def parts() -> tuple[ReliabilityPart, ...]:
    """The registered parts, in registry order."""
    return tuple(RELIABILITY_PARTS.values())


def part_names() -> tuple[str, ...]:
    """The registered parts' names, in registry order."""
    return tuple(RELIABILITY_PARTS)


def weight_entries() -> dict[str, str]:
    """symbol -> help line of each part, for the CLI's `--weights` help."""
    return {p.symbol: p.help for p in RELIABILITY_PARTS.values()}


register_part(ReliabilityPart("capability", "P", "capability, top-1 on the evaluated dataset", "resampled"))
register_part(ReliabilityPart("consistency", "CDC", "cross-dataset consistency (the ARGUS formula)", "resampled"))
register_part(ReliabilityPart("robustness", "RR", "robustness retention under perturbations", "resampled"))
register_part(ReliabilityPart("efficiency", "E", "efficiency against fixed budgets (held fixed)", "fixed"))
