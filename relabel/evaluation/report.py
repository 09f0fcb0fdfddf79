"""Reports: a self-describing JSON file, a Markdown report and its PNG figures, written into one folder.

Every file is written to a temporary name and renamed, and `report.md` is written last, so a reader that finds
`report.md` (the studio's report tab, through `latest_report`) finds a complete report. Text that users chose
(run, model, dataset and class names) is escaped for Markdown: it can neither start HTML nor break a table.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from relabel.common.atomic import write_atomic
from relabel.evaluation import plots, text
from relabel.evaluation.citations import ARGUS_CITATION, cited
from relabel.evaluation.corruption_errors import ce_line, ce_section
from relabel.evaluation.label_changes_text import class_shift_table, parts_table
from relabel.evaluation.label_sensitivity import sensitivity_note, sensitivity_table
from relabel.evaluation.references import ReferenceInfo
from relabel.evaluation.reliability_text import (
    budgets_line,
    efficiency_table,
    reliability_basis_table,
    reliability_table,
    reliability_tasks,
    retention_line,
    robustness_table,
    weights_line,
)
from relabel.evaluation.results import DEFINITIONS, ROBUSTNESS_DEFINITIONS, Evaluation, RobustnessResult
from relabel.evaluation.robustness_summary import RobustnessSummary, build_robustness_summaries
from relabel.evaluation.tasks_report import task_figures, task_sections
from relabel.suggest.distractor_sources import distractors_line

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
    """`evaluation.json`, the figures and `report.md` for a scoring evaluation, into `folder`. The grids of its
    robustness runs are summarised first without resamples: the report shows no RR interval of its own (the
    reliability table has them)."""
    robustness = build_robustness_summaries(evaluation.robustness, n_boot=0)
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / EVALUATION_JSON
    write_atomic(data, json.dumps(evaluation.to_dict(), indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    figures = {
        "accuracy_by_reference.png": lambda: plots.accuracy_by_reference(evaluation),
        "paired.png": lambda: plots.paired_differences(evaluation),
        "protocols.png": lambda: plots.protocol_comparison(evaluation),
        "robustness.png": lambda: plots.robustness_curves(evaluation.robustness) if evaluation.robustness else None,
        "reliability.png": lambda: plots.reliability_parts(evaluation.reliability) if evaluation.reliability else None,
        **task_figures(evaluation.tasks),  # presence.png, chair.png, retrieval.png
    }
    written = _write_figures(folder, figures)
    markdown = folder / REPORT_MD
    write_atomic(markdown, scores_markdown(evaluation, {p.name for p in written}, robustness))
    return ReportFiles(folder, markdown, data, written)


def write_robustness_report(summary: RobustnessSummary, folder: Path) -> ReportFiles:
    """`robustness.json`, the robustness curves and `report.md` for one summarised robustness run
    (`robustness_summary.build_robustness_summary`), into `folder`."""
    result = summary.result
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / ROBUSTNESS_JSON
    write_atomic(data, json.dumps(result.to_dict(), indent=1, allow_nan=False, ensure_ascii=False) + "\n")
    written = _write_figures(folder, {"robustness.png": lambda: plots.robustness_curves([result])})
    markdown = folder / REPORT_MD
    write_atomic(markdown, robustness_markdown(summary, {p.name for p in written}))
    return ReportFiles(folder, markdown, data, written)


def _write_figures(folder: Path, figures: dict[str, Callable[[], bytes | None]]) -> list[Path]:
    written = []
    for name, draw in figures.items():
        png = draw()
        if png is not None:
            write_atomic(folder / name, png)
            written.append(folder / name)
    return written


def scores_markdown(ev: Evaluation, figures: set[str], robustness: Sequence[RobustnessSummary] = ()) -> str:
    """The Markdown report of a scoring evaluation; `figures` are the PNG names written beside it, `robustness`
    the summaries of `ev.robustness`, in order (`robustness_summary.build_robustness_summaries`)."""
    if len(robustness) != len(ev.robustness) or any(s.result is not r for s, r in zip(robustness, ev.robustness)):
        raise ValueError(
            f"the report of dataset {ev.dataset!r} needs the summaries of its {len(ev.robustness)} robustness run(s) "
            f"in order, got {len(robustness)}: build them with build_robustness_summaries"
        )
    stored = f"evaluation #{ev.id}" if ev.id is not None else "not stored"
    parts = [
        f"# Evaluation of dataset {escape_md(ev.dataset)}",
        f"- Date: {ev.created_at:%Y-%m-%d %H:%M:%S} UTC\n- Tool: relabel {escape_md(ev.tool_version)} ({stored})\n"
        f"- Intervals: 95 %; {_intervals_line(ev)}\n- Data: `{EVALUATION_JSON}` beside this file",
    ]
    if ev.warnings:
        parts += ["## Warnings", "\n".join(f"- {escape_md(w)}" for w in ev.warnings)]
    parts += [
        "## References",
        md_table(text.references_table(ev)),
        "Which images each number is on:\n\n" + "\n".join(f"- {_reference_line(r)}" for r in ev.references),
        "## Scores\n\n" + SCORES_NOTE,
        md_table(text.scores_table(ev)),
        _figure(figures, "accuracy_by_reference.png", "Top-1 per run and reference"),
    ]
    parts += _paired_markdown(ev, figures)
    parts += _label_changes_markdown(ev)
    for title, table in (
        ("## Label uncertainty\n\n" + text.UNCERTAINTY_NOTE + " " + UNCERTAIN_NOTE, text.uncertainty_table(ev)),
        ("## Aggregation sensitivity\n\n" + escape_md(sensitivity_note(ev.label_sensitivity)),
         sensitivity_table(ev.label_sensitivity)),
        ("## Published metrics\n\n" + PUBLISHED_NOTE, text.published_table(ev)),
        ("## Failed calls\n\n" + FAILURES_NOTE, text.failures_table(ev)),
        ("## Per category\n\nTop-1 % on the scored images of each snapshot category (images in brackets).",
         text.category_table(ev)),
        ("## Out-of-prompt answers", text.oop_table(ev)),
    ):  # fmt: skip
        if table is not None:
            parts += [title, md_table(table)]
    parts += [p if isinstance(p, str) else md_table(p) for p in task_sections(ev.tasks, figures)]
    parts += [
        "## Protocols",
        _figure(figures, "protocols.png", "Top-1 by protocol") or "No model was run with more than one protocol.",
    ]
    parts += _reliability_markdown(ev, figures, robustness)
    parts += ["## Definitions", "\n".join(f"- **{k}**: {escape_md(v)}" for k, v in DEFINITIONS.items())]
    return _with_references("\n\n".join(p for p in parts if p))


def _with_references(body: str) -> str:
    """`body` and a Works cited section listing the works it names (`relabel.evaluation.citations`)."""
    works = cited(body)
    if not works:
        return body + "\n"
    return body + "\n\n## Works cited\n\n" + "\n".join(f"- {escape_md(w)}" for w in works) + "\n"


def _label_changes_markdown(ev: Evaluation) -> list[str]:
    """The parts of each paired difference, and the classes that gain and lose most (`label_changes`)."""
    table = parts_table(ev)
    if table is None:
        return []
    a = escape_md(ev.label_changes[0].baseline)
    parts = [
        f"## Where each paired difference comes from\n\nEach row takes one paired difference above apart, on the "
        f"same images. *Leniency*: right only under the reference, whose set holds the original label ({a}) too: "
        f"the reference accepts a second class the model chose. *{a} wrong*: right only under the reference, whose "
        f"set lacks the original label. *Dropped*: right only under {a}: the prediction is the original label and "
        f"the reference's set lacks it. Δ = leniency + {a} wrong + dropped (dropped is negative), exactly, in "
        "percentage points of the images in common; each interval is a 95 % paired bootstrap of that part (the "
        "images resampled, the same ones under both references). A difference is a gain of the model against "
        f"{a}'s label noise only as far as it comes from the *{a} wrong* part.",
        md_table(table),
    ]
    for change in ev.label_changes:
        shifts = class_shift_table(change)
        if shifts is None:
            continue
        k = max(len(change.gains), len(change.losses))
        parts += [
            f"### Per class of the original label: {escape_md(change.run)} under {escape_md(change.reference)}\n\n"
            f"Top-1 of the images of each class ({a}'s label) under {a} and under {escape_md(change.reference)}, "
            f"on the same images; the up to {k} classes that gain most and the up to {k} that lose most, of the "
            f"{change.n_classes:,} classes with images in common. Interval: 95 % paired bootstrap within the class "
            "(its images resampled); with tens of images per class it is wide, so read a class as shifted only "
            "where its interval excludes 0. These classes are the extremes of many, picked for the size of their "
            "shift: each interval holds for its class alone, not for the selection (no multiple-comparison "
            "correction).",
            md_table(shifts),
        ]
    return parts


SCORES_NOTE = (
    "Accuracies in %, each on the images the run has scored under that reference (column *scored*): the images "
    "of the reference that the run predicted, less those the reference excludes (an empty label set) and those "
    "lost to infrastructure errors. Top-1 counts the model's failures (a reply that could not be used, a refusal, "
    "a final HTTP 400/413/422) as wrong; *excl. failures* leaves them out. Infrastructure and set-up errors "
    "(timeouts, HTTP 429/5xx, unreadable images; HTTP 401/403/404) are never scored; a warning gives each run's "
    "count and what asks them again. The interval is the 95 % Wilson score interval "
    "of top-1. Rows of different references are on different images: compare references in the paired table."
)
UNCERTAIN_NOTE = (  # one meaning of "uncertain" in a report, the snapshot workflow's own
    "*Uncertain images*: the run's images (answered or failed) whose votes settle nothing at the snapshot's "
    "threshold (category U with votes: the images its review queue shows first); this is the one meaning of "
    "uncertain in this report, the count of `relabel snapshot`. Category U also holds the images nobody rated "
    "(*unrated*: the base source's labels alone): every number of this table leaves them out, the top-1 against "
    "the labels too (so it is on fewer images than in the Scores table), and two rows of the "
    "aggregation-sensitivity table put them back; column U of the per-category table counts both (its scored ones)."
)
PUBLISHED_NOTE = (
    "Metrics as their authors define them (`--metric`). Shankar et al. (2020), as recommended with the TFDS "
    "release: problematic images skipped, a prediction among the correct or the unclear labels counts, accuracy "
    "per class of the original label, averaged over the classes (interval: percentile bootstrap of images). "
    "Beside it, the ReGT-style reading of the same source: pooled top-1 over every image it labels, problematic "
    "ones included, unclear labels not counted."
)
FAILURES_NOTE = (
    "A failed reply (the model answered, but not in a usable form, e.g. a multi-image reply that broke the "
    "numbered format, or a refusal) or a final HTTP 4xx about the request (400, 413, 422) is the model's failure "
    "and counts as wrong. An infrastructure or set-up error (timeouts, connection failures, HTTP 429/5xx after "
    "retries, unreadable images; HTTP 401/403/404) is not an answer: it is left out of every accuracy, with a "
    "warning; running `relabel suggest` again asks the retryable ones again, `--retry-errors` all of them."
)


def _intervals_line(ev: Evaluation) -> str:
    if not ev.n_boot:
        return "top-1: Wilson score interval; differences, ranks and label uncertainty: none (--boot 0)"
    line = (
        f"top-1: Wilson score interval; differences and ranks: {ev.n_boot} bootstrap resamples of images "
        f"(paired: the same images under both references; ranks: one resample for every run), seed {ev.seed}"
    )
    if any(s.uncertain is not None for s in ev.scores):
        line += "; label uncertainty: as many draws of label sets from the posteriors, each with a resample"
    return line


def _reference_line(r: ReferenceInfo) -> str:
    """What a reference scores, in words: its images, the excluded ones, and how a multi-label set is read."""
    kind = {"original": "the original labels (ImGT)", "snapshot": "a ReGT snapshot"}.get(r.kind, "an imported prior")
    excluded = r.n_images - r.n_labelled
    line = f"**{escape_md(r.name)}**, {kind}: covers {r.n_images:,} images and labels {r.n_labelled:,}"
    if excluded:
        line += f"; {excluded:,} with an empty set are excluded from every score against it"
    line += "; a prediction is right when it is in the image's set (ReaL rule)" if r.multi_label else "; one label each"
    if r.n_posteriors:
        rule = escape_md((r.consensus or {}).get("rule", "?"))
        line += (f"; probabilistic ({rule} consensus): {r.n_posteriors:,} (image, class) posteriors, a class in a "
                 f"set at posterior ≥ {(r.consensus or {}).get('threshold', 0.9)}")  # fmt: skip
    note = SOURCE_NOTES.get(r.source_format or "")
    return line + (f". {note}" if note else "") + "."


SOURCE_NOTES = {  # what a reader of each paper should know about how its labels are read here
    "real": "ReaL (Beyer et al. 2020): only the images whose label proposals from its models did not all agree "
    "with the original label were sent to raters (24,889 of the 50,000 val images in the release): their set is "
    "the classes the raters accepted, and one none fitted is excluded, as the paper prescribes; every other image "
    "(25,111 in the release) was never rated and keeps its original label, so ReaL equals ImGT there by "
    "construction",
    "shankar": "Shankar et al. (2020), read the ReGT way: the proposed labels, problematic images scored, unclear "
    "labels never counted, pooled over images; the authors' own metric is `--metric shankar` (below)",
    "mturk": "The MTurk review of cleanlab's candidate label errors (Northcutt et al. 2021): the strict majority of "
    "5 workers (given label, guessed label, or both); neither and no majority are excluded. The images (5,440 "
    "in the release) are those cleanlab's confident learning flagged as label issues, among the images where its "
    "cross-validated prediction differs from the original label (13,634 of the 50,000 val images for the "
    "released predictions): not a sample of the dataset, and chosen where that prediction is wrong under the "
    "original labels",
}


def _paired_markdown(ev: Evaluation, figures: set[str]) -> list[str]:
    parts = []
    paired = text.paired_table(ev)
    if paired is not None:
        a = escape_md(ev.references[0].name)
        parts += [
            f"## Paired with {a}: the same images under both references\n\nEach row holds one run on the images it "
            f"has scored under both {a} and the reference, so the difference is the change of labels alone. "
            f"Δ = reference − {a} in percentage points; the interval resamples those images, the same ones under "
            f"both references (paired bootstrap). Set the reference's top-1 beside {a} on these images, not beside "
            f"{a} in the table above.",
            md_table(paired),
            _figure(figures, "paired.png", f"Paired differences against {a}"),
        ]
    ranking = text.ranking_table(ev)
    if ranking is not None and ev.ranking is not None:
        a, b = escape_md(ev.references[0].name), escape_md(ev.references[1].name)
        tau = text.num(ev.ranking.kendall_tau)
        parts += [
            f"## Ranking shift: {a} → {b}\n\nOn the {ev.ranking_images:,} images every run has scored under both "
            f"references. Rank 1 is the best; tied runs share the best rank. Intervals: 95 % percentile intervals "
            f"over bootstrap resamples of these images, one resample for all runs. Kendall's τ-b = {tau}.",
            md_table(ranking),
        ]
    return parts


def _reliability_markdown(ev: Evaluation, figures: set[str], robustness: Sequence[RobustnessSummary]) -> list[str]:
    table = ev.reliability
    if table is None:
        return []
    parts = [
        f"## {escape_md(table.title)}\n\n{escape_md(table.method)} ARGUS: {ARGUS_CITATION} (Works cited).",
        f"Weights: {escape_md(weights_line(table))}. Rows are runs; every number of a row is on the images that "
        "run scored, whatever other runs are evaluated. A row is ranked only against the rows of its task, among "
        "those with an overall score, on the common images each title counts (P recomputed there); places gained = "
        "rank by P − rank by overall. E is against "
        f"fixed budgets ({escape_md(budgets_line(table))}; a measure at its budget scores 0.5), so a row's E "
        "does not depend on the other rows.",
        f"Uncertainty: {escape_md(table.uncertainty)}.",
    ]
    for task, title in reliability_tasks(table):
        tau = table.kendall_tau.get(task)
        parts += [
            f"### {escape_md(title)}" + (f"\n\nKendall's τ-b between the two rankings: {text.num(tau)}." if tau
                                          is not None else ""),
            md_table(reliability_table(table, task)),
            md_table(reliability_basis_table(table, task)),
        ]  # fmt: skip
    parts += [
        "\n".join(f"- {escape_md(n)}" for n in table.notes),
        _figure(figures, "reliability.png", "Reliability parts per run"),
        "### Reliability definitions\n\n" + "\n".join(f"- **{k}**: {escape_md(v)}" for k, v in
                                                      table.definitions.items()),
    ]  # fmt: skip
    if robustness:
        parts += ["## Robustness and efficiency", md_table(efficiency_table([s.result for s in robustness]))]
        for s in robustness:
            r = s.result
            parts += [f"### {escape_md(r.model)} on {escape_md(r.dataset)}", md_table(_first_table(s))]
        parts.append(_figure(figures, "robustness.png", "Robustness curves"))
    return parts


def _first_table(summary: RobustnessSummary) -> text.Table:
    ref = "imgt" if "imgt" in summary.references else next(iter(summary.references))
    return robustness_table(summary, ref)


def robustness_markdown(summary: RobustnessSummary, figures: set[str]) -> str:
    """The Markdown report of one robustness run, from its finished numbers (`build_robustness_summary`);
    `figures` are the PNG names written beside it."""
    r = summary.result
    e = r.efficiency
    parts = [
        f"# Robustness of {escape_md(r.model)} on dataset {escape_md(r.dataset)}",
        f"- Date: {r.created_at:%Y-%m-%d %H:%M:%S} UTC\n- Tool: relabel {escape_md(r.tool_version)} "
        f"({'robustness run #' + str(r.id) if r.id is not None else 'not stored'})\n"
        f"- Images: {r.n_images} (seed {r.seed}); over all passes, model failures (scored as wrong): {r.failed}, "
        f"failures left out: {r.errors}\n"
        f"- Read through: {escape_md(_protocol_line(r))}\n"
        f"- Time: {r.seconds:.1f} s\n- Data: `{ROBUSTNESS_JSON}` beside this file",
    ]
    if r.warnings:
        parts += ["## Warnings", "\n".join(f"- {escape_md(w)}" for w in r.warnings)]
    for ref, numbers in summary.references.items():
        ce = ce_line(numbers.corruption)
        parts += [
            f"## Top-1 % against {escape_md(ref)}",
            f"{escape_md(retention_line(numbers.retention))} (the interval resamples the images, clean and perturbed "
            "alike)" + (f"; {escape_md(ce)}." if ce else "."),
            md_table(robustness_table(summary, ref)),
        ]
        section = ce_section(numbers.corruption, r.perturbations)
        parts += [f"### {escape_md(section[0])}", escape_md(section[1]), md_table(section[2])] if section else []
    parts += [
        _figure(figures, "robustness.png", "Robustness curves"),
        "## Efficiency",
        md_table(efficiency_table([r])),
        f"Peak RSS scope: {escape_md(e.peak_rss_scope)}." + (f" FLOPs: {escape_md(e.flops_note)}." if e.flops_note
                                                               else ""),
        "## Definitions",
        "\n".join(f"- **{k}**: {escape_md(v)}" for k, v in ROBUSTNESS_DEFINITIONS.items()),
    ]  # fmt: skip
    return _with_references("\n\n".join(p for p in parts if p))


def _protocol_line(r: RobustnessResult) -> str:
    name = text.protocol_name(r)
    line = "ranked scores (topk)" if name == "topk" else f"protocol {name}"
    if "prompt_version" in r.protocol and name != "topk":
        line += f", prompt version {r.protocol['prompt_version']}"
    if distractors := distractors_line(r.protocol):
        line += f"; {distractors}"
    if r.text_perturbations:
        line += f"; text perturbations change the {r.text_target}, the images stay clean"
    return line


def _figure(figures: set[str], name: str, alt: str) -> str:
    return f"![{alt}]({name})" if name in figures else ""
