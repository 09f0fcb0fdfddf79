"""Table cells of an evaluation as plain strings: percentages, numbers, intervals and signed differences, and
aligned terminal columns. Shared by the evaluation's tables (`relabel.evaluation.text`) and the reliability and
robustness tables (`relabel.evaluation.reliability_text`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from evaluator.scoring import Score

Table = tuple[list[str], list[list[str]]]

NA = "—"


def pct(value: float | None, digits: int = 2) -> str:
    """A share in [0, 1] as a percentage; NA for None or NaN."""
    return NA if value is None or not math.isfinite(value) else f"{100 * value:.{digits}f}"


def num(value: float | None, digits: int = 3) -> str:
    return NA if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def ci(score: Score) -> str:
    if score.ci_low is None or score.ci_high is None or not math.isfinite(score.ci_low):
        return NA
    return f"{pct(score.ci_low)}–{pct(score.ci_high)}"


def columns(table: Table, indent: str = "") -> str:
    """Aligned plain-text columns; numbers (cells starting with a digit or NA) are right-aligned."""
    header, rows = table
    widths = [max(len(c) for c in col) for col in zip(header, *rows)]
    numeric = [
        any(_number(r[i]) for r in rows) and all(_number(r[i]) or r[i] in (NA, "") for r in rows)
        for i in range(len(header))
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return (indent + "  ".join(parts)).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def _number(cell: str) -> bool:
    return cell[:1].isdigit() or (cell[:1] in "+-" and cell[1:2].isdigit())


def points(value: float | None) -> str:
    """A difference of two shares in percentage points, signed; NA for None or NaN."""
    return NA if value is None or not math.isfinite(value) else f"{100 * value:+.2f}"


def points_ci(low: float | None, high: float | None) -> str:
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return NA
    return f"{points(low)} to {points(high)}"


def span(low: float | None, high: float | None) -> str:
    """An interval of shares as percentages; NA when a bound is missing."""
    if low is None or high is None or not (math.isfinite(low) and math.isfinite(high)):
        return NA
    return f"{pct(low)}–{pct(high)}"


def rank_span(bounds: tuple[int, int] | None, signed: bool = False) -> str:
    """An interval of ranks (or of places gained, `signed`): "2" when both bounds agree, else "1 to 3"; NA for
    None."""
    if bounds is None:
        return NA
    form = "{:+d}" if signed else "{:d}"
    low, high = (form.format(v).replace("+0", "0") for v in bounds)
    return low if bounds[0] == bounds[1] else f"{low} to {high}"
