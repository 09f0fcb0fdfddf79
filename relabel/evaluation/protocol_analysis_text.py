"""The protocol analysis (`relabel.evaluation.protocol_analysis`) as terminal tables and as a report section.

`render_protocol_analysis` gives the text `relabel evaluate --protocol-analysis` prints; `add_protocol_section`
writes one figure per table beside a report's `report.md` and appends the section to it (the file is replaced
whole, never left half-written).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from relabel.common.atomic import write_atomic
from relabel.common.errors import InputError
from relabel.evaluation import protocol_analysis_plots as plots
from relabel.evaluation.cells import NA, Table, columns, pct, points, points_ci, span
from relabel.evaluation.protocol_analysis import Ablation, ProtocolAnalysis, Rate
from relabel.evaluation.report import escape_md, md_table

TITLES = {
    "pairs": "protocols compared, after Kisel et al. (top-1 %; Δ = b − a in points on the images every compared run "
    "of the model scored, 95 % paired bootstrap interval)",
    "oop": "out-of-prompt answers per reference class (answers that are not a listed name / answered images; the "
    "highest rates first; 95 % Wilson intervals)",
    "failures": "failed calls per run (status error / predictions; 95 % Wilson interval); 'by the model': the model's "
    "own failures, scored as wrong, the rest are left out of the scores",
    "batches": "batch-size ablation: the same images asked k per request (top-1 %; Δ against the smallest batch, "
    "paired, on the images every run of the group scored)",
    "orders": "option-order ablation: mc runs differing only in the seed of their option shuffles (top-1 %; Δ "
    "against the lowest seed, paired; 'changed': images whose answer differs between some two seeds)",
}
FIGURES = {
    "pairs": "protocol_pairs.png",
    "oop": "protocol_oop.png",
    "failures": "protocol_failures.png",
    "batches": "protocol_batches.png",
    "orders": "protocol_orders.png",
}
SECTION = "## Protocol analysis"


def _rate(r: Rate) -> list[str]:
    return [f"{r.k:,}/{r.n:,}", pct(r.rate), span(r.low, r.high)]


def pairs_table(a: ProtocolAnalysis) -> Table:
    header = ["model", "a", "b", "run a", "run b", "images", "top-1 a", "top-1 b", "Δ", "95 % interval"]
    rows = [[p.model, p.protocol_a, p.protocol_b, p.run_a, p.run_b, f"{p.n:,}", pct(p.top1_a), pct(p.top1_b),
             points(p.difference), points_ci(p.ci_low, p.ci_high)] for p in a.pairs]  # fmt: skip
    return header, rows


def oop_table(a: ProtocolAnalysis) -> Table:
    header = ["run", "protocol", "class", "out of prompt", "rate", "95 % interval"]
    rows = []
    for o in a.oop:
        rows.append([o.run, o.protocol, "(all)", *_rate(o.overall)])
        rows += [[o.run, o.protocol, c.class_name, *_rate(c.oop)] for c in o.classes]
    return header, rows


def failures_table(a: ProtocolAnalysis) -> Table:
    header = ["model", "run", "protocol", "failed", "rate", "95 % interval", "by the model"]
    rows = [[f.model, f.run, f.protocol, *_rate(f.errors), str(f.n_failed)] for f in a.failures]
    return header, rows


def ablation_table(ablations: tuple[Ablation, ...], setting: str) -> Table:
    header = ["model", "protocol", setting, "run", "images", "top-1", "95 % interval", "Δ", "95 % interval"]
    with_changed = any(x.changed is not None for x in ablations)
    header += ["changed", "95 % interval"] if with_changed else []
    rows = []
    for x in ablations:
        for i, v in enumerate(x.variants):
            row = [x.model, x.protocol, str(v.setting), v.run, f"{x.n:,}", pct(v.top1.rate),
                   span(v.top1.low, v.top1.high), points(v.difference), points_ci(v.ci_low, v.ci_high)]  # fmt: skip
            if with_changed:
                changed = x.changed if i == 0 else None
                row += [pct(changed.rate), span(changed.low, changed.high)] if changed else [NA, NA]
            rows.append(row)
    return header, rows


def _tables(a: ProtocolAnalysis) -> dict[str, Table]:
    found = {
        "pairs": pairs_table(a) if a.pairs else None,
        "oop": oop_table(a) if a.oop else None,
        "failures": failures_table(a) if a.failures else None,
        "batches": ablation_table(a.batches, "per request") if a.batches else None,
        "orders": ablation_table(a.orders, "seed") if a.orders else None,
    }
    return {k: t for k, t in found.items() if t is not None}


def _missing(a: ProtocolAnalysis) -> list[str]:
    notes = {
        "pairs": "no model has runs of two protocols to compare",
        "batches": "no runs differ only in --images-per-request",
        "orders": "no mc runs differ only in --seed",
    }
    return [line for key, line in notes.items() if not getattr(a, key)]


def render_protocol_analysis(a: ProtocolAnalysis) -> str:
    """The analysis as terminal text, one table per part, against the reference named at the top."""
    parts = [f"protocol analysis against {a.reference}"]
    for key, table in _tables(a).items():
        parts += [TITLES[key], columns(table, "  ")]
    parts += [f"  ({line})" for line in _missing(a)]
    return "\n".join(parts)


def protocol_markdown(a: ProtocolAnalysis, figures: set[str]) -> str:
    """The report section; `figures` are the PNG names written beside the report."""
    parts = [SECTION, f"Top-1 against {escape_md(a.reference)}; after Kisel et al."]
    for key, table in _tables(a).items():
        parts += [escape_md(TITLES[key]), md_table(table)]
        if FIGURES[key] in figures:
            parts.append(f"![{key}]({FIGURES[key]})")
    missing = _missing(a)
    parts += ["\n".join(f"- {escape_md(line)}" for line in missing)] if missing else []
    return "\n\n".join(parts) + "\n"


def add_protocol_section(a: ProtocolAnalysis, markdown: Path) -> list[Path]:
    """Write the analysis' figures beside the report `markdown` and append its section; returns the figures."""
    if not markdown.is_file():
        raise InputError(f"report {markdown} not found; the protocol analysis is added to a written report")
    draw: dict[str, Callable[[ProtocolAnalysis], bytes | None]] = {
        "pairs": plots.pairs_plot,
        "oop": plots.oop_plot,
        "failures": plots.failures_plot,
        "batches": plots.batches_plot,
        "orders": plots.orders_plot,
    }
    written = []
    for key, name in FIGURES.items():
        png = draw[key](a)
        if png is not None:
            write_atomic(markdown.parent / name, png)
            written.append(markdown.parent / name)
    body = markdown.read_text(encoding="utf-8").rstrip("\n")
    write_atomic(markdown, body + "\n\n" + protocol_markdown(a, {p.name for p in written}))
    return written
