"""The tables of `relabel.evaluation.label_changes` as rows of plain strings: the parts of each paired difference,
and the classes of the original label that gain and lose the most. The terminal and the Markdown report render
the same rows (`relabel.evaluation.cells.Table`)."""

from __future__ import annotations

from relabel.evaluation.cells import NA, Table, pct, points, points_ci
from relabel.evaluation.label_changes import ClassShiftRow, LabelChange
from relabel.evaluation.results import Evaluation


def parts_table(ev: Evaluation) -> Table | None:
    """One row per run and reference: the three parts of the paired difference (points, 95 % paired interval,
    images) and their sum; None when nothing was taken apart."""
    if not ev.label_changes:
        return None
    a = ev.label_changes[0].baseline
    header = ["run", "reference", "images in common", "leniency Δ", "95 % CI", "images", f"{a} wrong Δ", "95 % CI",
              "images", "dropped Δ", "95 % CI", "images", "sum = Δ points"]  # fmt: skip
    rows = []
    for c in ev.label_changes:
        p = c.parts
        total = points(p.difference)
        if c.baseline_by_construction:
            paired = ev.score(c.run, c.reference).paired
            total += f" ({a} {pct(paired.accuracy_a if paired else None)} % by construction: no gain)"
        rows.append(
            [c.run, c.reference, str(p.n_common),
             points(p.leniency), _ci(p.leniency_ci), str(p.n_leniency),
             points(p.a_wrong), _ci(p.a_wrong_ci), str(p.n_a_wrong),
             points(p.dropped + 0.0), _ci(p.dropped_ci), str(p.n_dropped), total]
        )  # fmt: skip
    return header, rows


def class_shift_table(change: LabelChange) -> Table | None:
    """The classes of the original label that gain most, then those that lose most, under `change.reference`
    against its baseline on the same images; None when no class changed."""
    if not change.gains and not change.losses:
        return None
    a, b = change.baseline, change.reference
    header = ["", "class", "images", f"top-1 % {a}", f"top-1 % {b}", "Δ points", "95 % CI (paired)"]
    rows = [_class_row("gain", r) for r in change.gains] + [_class_row("loss", r) for r in change.losses]
    return header, rows


def _class_row(direction: str, r: ClassShiftRow) -> list[str]:
    return [direction, f"{r.name} ({r.class_index})", str(r.n_images), pct(r.accuracy_a), pct(r.accuracy_b),
            points(r.difference), points_ci(r.ci_low, r.ci_high)]  # fmt: skip


def _ci(ci: tuple[float, float] | None) -> str:
    return NA if ci is None else points_ci(ci[0], ci[1])
