"""Reports: a self-describing JSON file, a Markdown report and its PNG figures, written into one folder.

Every file is written to a temporary name and renamed, and `report.md` is written last, so a reader that finds
`report.md` (the studio's report tab, through `latest_report`) finds a complete report. Text that users chose
(run, model, dataset and class names) is escaped for Markdown: it can neither start HTML nor break a table.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from relabel.evaluation import plots, text
from relabel.evaluation.results import DEFINITIONS, ROBUSTNESS_DEFINITIONS, Evaluation, RobustnessResult
from relabel.exports import write_atomic

REPORTS_DIR = "reports"
REPORT_MD, EVALUATION_JSON, ROBUSTNESS_JSON = "report.md", "evaluation.json", "robustness.json"
_MD_ESCAPES = {"\\": "\\\\", "`": "\\`", "|": "\\|", "[": "\\[", "]": "\\]", "*": "\\*", "_": "\\_",
               "&": "&amp;", "<": "&lt;", ">": "&gt;"}  # fmt: skip


@dataclass
class ReportFiles:
    folder: Path
    markdown: Path
    data: Path
    figures: list[Path] = field(default_factory=list)


def escape_md(value: object) -> str:
    """`value` as inert Markdown text: no HTML (`<`, `>`, `&` become entities), no code spans, links, emphasis or
    table cells (backslash-escaped), and one line."""
    flat = " ".join(str(value).split())
    return "".join(_MD_ESCAPES.get(ch, ch) for ch in flat)


def md_table(table: text.Table) -> str:
    header, rows = table
    lines = ["| " + " | ".join(escape_md(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(escape_md(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def default_report_dir(workspace: Path, now: datetime | None = None) -> Path:
    """WORKSPACE/reports/<UTC time>, with a suffix when that folder exists already."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%S")
    base = workspace / REPORTS_DIR / stamp
    folder, n = base, 1
    while folder.exists():
        n += 1
        folder = base.with_name(f"{stamp}-{n}")
    return folder


def latest_report(workspace: Path) -> Path | None:
    """The newest complete report (`report.md`) under WORKSPACE/reports, or None when there is none."""
    reports = [p for p in (Path(workspace) / REPORTS_DIR).glob(f"*/{REPORT_MD}") if p.is_file()]
    return max(reports, key=lambda p: (p.stat().st_mtime_ns, p.parent.name), default=None)


def write_report(evaluation: Evaluation, folder: Path) -> ReportFiles:
    """`evaluation.json`, the figures and `report.md` for a scoring evaluation, into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / EVALUATION_JSON
    write_atomic(data, json.dumps(evaluation.to_dict(), indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    figures = {
        "accuracy_by_reference.png": lambda: plots.accuracy_by_reference(evaluation),
        "protocols.png": lambda: plots.protocol_comparison(evaluation),
        "robustness.png": lambda: plots.robustness_curves(evaluation.robustness) if evaluation.robustness else None,
        "argus.png": lambda: plots.argus_parts(evaluation.argus) if evaluation.argus else None,
    }
    written = _write_figures(folder, figures)
    markdown = folder / REPORT_MD
    write_atomic(markdown, scores_markdown(evaluation, {p.name for p in written}))
    return ReportFiles(folder, markdown, data, written)


def write_robustness_report(result: RobustnessResult, folder: Path) -> ReportFiles:
    """`robustness.json`, the robustness curves and `report.md` for one robustness run, into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / ROBUSTNESS_JSON
    write_atomic(data, json.dumps(result.to_dict(), indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    written = _write_figures(folder, {"robustness.png": lambda: plots.robustness_curves([result])})
    markdown = folder / REPORT_MD
    write_atomic(markdown, robustness_markdown(result, {p.name for p in written}))
    return ReportFiles(folder, markdown, data, written)


def _write_figures(folder: Path, figures: dict[str, Callable[[], bytes | None]]) -> list[Path]:
    written = []
    for name, draw in figures.items():
        png = draw()
        if png is not None:
            write_atomic(folder / name, png)
            written.append(folder / name)
    return written


def scores_markdown(ev: Evaluation, figures: set[str]) -> str:
    """The Markdown report of a scoring evaluation; `figures` are the PNG names written beside it."""
    stored = f"evaluation #{ev.id}" if ev.id is not None else "not stored"
    parts = [
        f"# Evaluation of dataset {escape_md(ev.dataset)}",
        f"- Date: {ev.created_at:%Y-%m-%d %H:%M:%S} UTC\n- Tool: relabel {escape_md(ev.tool_version)} ({stored})\n"
        f"- Bootstrap: {ev.n_boot} resamples, seed {ev.seed}\n- Data: `{EVALUATION_JSON}` beside this file",
        "## References",
        md_table(text.references_table(ev)),
        "## Scores\n\nAccuracies in %; an error (failed model call) is never scored as wrong.",
        md_table(text.scores_table(ev)),
        _figure(figures, "accuracy_by_reference.png", "Top-1 per run and reference"),
    ]
    ranking = text.ranking_table(ev)
    if ranking is not None and ev.ranking is not None:
        a, b = escape_md(ev.references[0].name), escape_md(ev.references[1].name)
        tau = text.num(ev.ranking.kendall_tau)
        parts += [f"## Ranking shift: {a} → {b}\n\nKendall's τ-b = {tau}.", md_table(ranking)]
    for title, table in (
        ("## Per category", text.category_table(ev)),
        ("## Out-of-prompt answers", text.oop_table(ev)),
    ):
        if table is not None:
            parts += [title, md_table(table)]
    parts += [
        "## Protocols",
        _figure(figures, "protocols.png", "Top-1 by protocol") or "No model was run with more than one protocol.",
    ]
    parts += _argus_markdown(ev, figures)
    parts += ["## Definitions", "\n".join(f"- **{k}**: {escape_md(v)}" for k, v in DEFINITIONS.items())]
    return "\n\n".join(p for p in parts if p) + "\n"


def _argus_markdown(ev: Evaluation, figures: set[str]) -> list[str]:
    if ev.argus is None:
        return []
    parts = [
        f"## Reliability (ARGUS)\n\nWeights: {escape_md(text.weights_line(ev.argus))}. Ranks among the models "
        "with an overall score; places gained = rank by P − rank by overall."
        + (f" Kendall's τ-b between the two rankings: {text.num(ev.argus.kendall_tau)}." if ev.argus.kendall_tau
           is not None else ""),
        md_table(text.argus_table(ev.argus)),
        "\n".join(f"- {escape_md(n)}" for n in ev.argus.notes),
        _figure(figures, "argus.png", "ARGUS parts per model"),
    ]  # fmt: skip
    if ev.robustness:
        parts += ["## Robustness and efficiency", md_table(text.efficiency_table(ev.robustness))]
        for r in ev.robustness:
            parts += [f"### {escape_md(r.model)} on {escape_md(r.dataset)}", md_table(_first_table(r))]
        parts.append(_figure(figures, "robustness.png", "Robustness curves"))
    return parts


def _first_table(result: RobustnessResult) -> text.Table:
    ref = "imgt" if "imgt" in result.grid else next(iter(result.grid))
    return text.robustness_table(result, ref)


def robustness_markdown(r: RobustnessResult, figures: set[str]) -> str:
    e = r.efficiency
    parts = [
        f"# Robustness of {escape_md(r.model)} on dataset {escape_md(r.dataset)}",
        f"- Date: {r.created_at:%Y-%m-%d %H:%M:%S} UTC\n- Tool: relabel {escape_md(r.tool_version)} "
        f"({'robustness run #' + str(r.id) if r.id is not None else 'not stored'})\n"
        f"- Images: {r.n_images} (seed {r.seed}); failed outputs over all passes: {r.errors}\n"
        f"- Read through: {escape_md(_protocol_line(r))}\n"
        f"- Time: {r.seconds:.1f} s\n- Data: `{ROBUSTNESS_JSON}` beside this file",
    ]
    for ref in r.grid:
        parts += [f"## Top-1 % against {escape_md(ref)}", md_table(text.robustness_table(r, ref))]
    parts += [
        _figure(figures, "robustness.png", "Robustness curves"),
        "## Efficiency",
        md_table(text.efficiency_table([r])),
        f"Peak RSS scope: {escape_md(e.peak_rss_scope)}." + (f" FLOPs: {escape_md(e.flops_note)}." if e.flops_note
                                                               else ""),
        "## Definitions",
        "\n".join(f"- **{k}**: {escape_md(v)}" for k, v in ROBUSTNESS_DEFINITIONS.items()),
    ]  # fmt: skip
    return "\n\n".join(p for p in parts if p) + "\n"


def _protocol_line(r: RobustnessResult) -> str:
    name = text.protocol_name(r)
    line = "ranked scores (topk)" if name == "topk" else f"protocol {name}"
    if "prompt_version" in r.protocol and name != "topk":
        line += f", prompt version {r.protocol['prompt_version']}"
    if r.text_perturbations:
        line += f"; text perturbations change the {r.text_target}, the images stay clean"
    return line


def _figure(figures: set[str], name: str, alt: str) -> str:
    return f"![{alt}]({name})" if name in figures else ""
