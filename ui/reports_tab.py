"""The leads' Reports tab: the newest evaluation report (or an earlier one), its figures and files, and the stored
history of evaluations.

`relabel evaluate` writes each report into WORKSPACE/reports/<UTC time>/. A report's Markdown holds text that users
and models chose (run, model, dataset and class names). The report writer escapes it, but this tab does not rely on
that: `safe_markdown` turns every `<` and `>` into an entity, so nothing in a report can become an HTML tag whatever
wrote the file, and Gradio's own sanitizer stays on as a second layer. A report is asked for by its folder name,
and only the names of report folders found inside the reports folder are accepted: a value sent by the browser
cannot reach any other file.

`report_view` and `history_tables` are plain functions (tests call them); `build` lays out the tab and wires it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import gradio as gr

from relabel.common.errors import InputError
from relabel.evaluation import evaluation_history, text
from relabel.evaluation.report import EVALUATION_JSON, REPORT_MD, REPORTS_DIR, ROBUSTNESS_JSON
from ui.context import WorkspaceContext
from ui.files import served_copy

__all__ = [
    "REPORTS_DIR",
    "ReportView",
    "build",
    "history_tables",
    "list_reports",
    "report_view",
    "safe_markdown",
    "tab_values",
]

NO_REPORT = (
    "**No report yet.** Create one with `relabel evaluate` in the workspace: it scores every stored model run "
    "and writes its report into a new folder of WORKSPACE/reports (`relabel evaluate robustness` writes a "
    "robustness report). Then press Refresh."
)
NOT_LOADED = "Press Refresh to show the newest evaluation report."
DATA_FILES = {EVALUATION_JSON: "evaluation", ROBUSTNESS_JSON: "robustness"}
_FIGURE = re.compile(r"!\[([^\]\n]*)\]\(([^)\n]*)\)")  # a Markdown image: ![alt](target)
_PLAIN_PNG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.png")  # a file name beside report.md, no folder part


@dataclass(frozen=True)
class ReportView:
    """What the tab shows of one report. `name` is None when the workspace has no report yet.

    `choices` are (label, folder name) of every report, newest first; `summary` and `markdown` are safe to render
    as Markdown (no `<` or `>` left); `figures` are (PNG path, caption) in the report's order; `files` are the
    Markdown report and its JSON data.
    """

    choices: list[tuple[str, str]]
    name: str | None
    summary: str
    markdown: str = ""
    figures: list[tuple[str, str]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def safe_markdown(markdown: str) -> str:
    """`markdown` with every `<` and `>` written as an entity: a renderer shows them as characters and can never
    start an HTML tag, comment or autolink from them. Entities already in the text (the report writer's `&lt;`)
    still show as the character they stand for."""
    return markdown.replace("<", "&lt;").replace(">", "&gt;")


def list_reports(reports_dir: Path) -> list[Path]:
    """The report folders directly inside `reports_dir` that hold a `report.md`, newest first (the order of
    `relabel.evaluation.latest_report`). A folder that resolves outside `reports_dir` (a link) is left out."""
    if not reports_dir.is_dir():
        return []
    root = reports_dir.resolve()
    found = [p.parent for p in reports_dir.glob(f"*/{REPORT_MD}") if p.is_file() and _inside(root, p)]
    return sorted(found, key=lambda f: ((f / REPORT_MD).stat().st_mtime_ns, f.name), reverse=True)


def report_view(ws: WorkspaceContext, user: str, choice: str | None = None) -> ReportView:
    """The report in the folder named `choice`, or the newest when `choice` is empty; leads only.

    Raises InputError, naming what is accepted, when `choice` is not the name of a report folder in
    `ws.reports_dir`.
    """
    ws.require_lead(user)
    reports_dir = ws.reports_dir
    folders = list_reports(reports_dir)
    choices = [(f"{f.name} · {report_kind(f)}", f.name) for f in folders]
    if choice:
        by_name = {f.name: f for f in folders}
        if choice not in by_name:
            # the value came from the browser: not echoed, the listed names are what is accepted
            raise InputError(
                f"unknown report; choose one of the {len(folders)} report folder(s) listed, "
                f"from {reports_dir} (Refresh reloads the list)"
            )
        folder = by_name[choice]
    elif folders:
        folder = folders[0]
    else:
        return ReportView(choices, None, safe_markdown(NO_REPORT))
    return _view(folder, choices, reports_dir.resolve())


def report_kind(folder: Path) -> str:
    """evaluation or robustness, from the JSON data file beside report.md ("report" when there is none)."""
    return next((kind for name, kind in DATA_FILES.items() if (folder / name).is_file()), "report")


def _view(folder: Path, choices: list[tuple[str, str]], root: Path) -> ReportView:
    markdown = (folder / REPORT_MD).read_text(encoding="utf-8", errors="replace")
    figures: list[tuple[str, str]] = []

    def figure_note(match: re.Match[str]) -> str:
        alt, target = match.group(1), match.group(2).strip()
        path = folder / target
        if _PLAIN_PNG.fullmatch(target) and path.is_file() and _inside(root, path):
            figures.append((str(path), _caption(alt)))
            return f"*Figure: {alt} (under Figures).*"
        return f"*Figure not shown: {alt}.*"

    # relative image links cannot load in the page: figures are served through the gallery instead
    body = _FIGURE.sub(figure_note, markdown)
    files = [str(folder / REPORT_MD)] + [str(folder / n) for n in DATA_FILES if (folder / n).is_file()]
    position = [name for _, name in choices].index(folder.name) + 1
    summary = (
        f"Report **{_inline(folder.name)}** ({report_kind(folder)}), created {_created(folder):%Y-%m-%d %H:%M:%S} "
        f"UTC · {position} of {len(choices)}, newest first"
    )
    return ReportView(choices, folder.name, safe_markdown(summary), safe_markdown(body), figures, files)


def _created(folder: Path) -> datetime:
    """The evaluation's own time from its JSON data; the report file's time when that cannot be read."""
    for name in DATA_FILES:
        try:
            return datetime.fromisoformat(json.loads((folder / name).read_text(encoding="utf-8"))["created_at"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return datetime.fromtimestamp((folder / REPORT_MD).stat().st_mtime, timezone.utc)


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root)


def _inline(value: str) -> str:
    """A folder name as inert Markdown text: no emphasis, code, links or HTML."""
    return re.sub(r"([\\`*_\[\]|!#])", r"\\\1", " ".join(value.split()))


def _caption(alt: str) -> str:
    return re.sub(r"[<>&\"']", "", alt).strip() or "figure"


def history_tables(ws: WorkspaceContext, user: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The stored evaluations of the workspace's dataset (oldest first) and each run's top-1 % under each
    reference version, as Dataframe values (`headers`, `data`); leads only."""
    ws.require_lead(user)
    entries = evaluation_history(ws.engine, ws.dataset_name)
    listed, moved = text.history_list(entries), text.history_table([e for e in entries if e.kind == "scores"])
    return {"headers": listed[0], "data": listed[1]}, {"headers": moved[0], "data": moved[1]}


def tab_values(ws: WorkspaceContext, user: str, choice: str | None = None) -> list[Any]:
    """The tab's component values, in `build`'s output order."""
    view = report_view(ws, user, choice)
    evaluations, moved = history_tables(ws, user)
    return [
        gr.Dropdown(choices=view.choices, value=view.name),
        view.summary,
        view.files or None,
        view.figures or None,
        view.markdown,
        evaluations,
        moved,
    ]


def build(ws: WorkspaceContext, guarded: Callable[[Callable[..., Any]], Callable[..., Any]], tab: gr.Tab) -> None:
    """The tab's layout; it loads the newest report when the tab is opened and on Refresh."""
    with gr.Row():
        refresh = gr.Button("Refresh", size="sm", elem_id="reports-refresh", scale=1)
        chooser = gr.Dropdown([], value=None, label="report (newest first)", scale=3, elem_id="reports-choice")
    # no LaTeX: `$` in a model name must stay a character; sanitize_html stays on behind safe_markdown
    summary = gr.Markdown(NOT_LOADED, latex_delimiters=[], sanitize_html=True)
    files = gr.File(label="report files (Markdown and JSON)", file_count="multiple", interactive=False)
    body = gr.Markdown(latex_delimiters=[], sanitize_html=True, elem_id="report-body")
    figures = gr.Gallery(label="figures", columns=2, object_fit="contain", height=440, interactive=False)
    with gr.Accordion("Stored evaluations: how each run's score moved across rounds", open=False):
        evaluations = gr.Dataframe(label="stored evaluations (oldest first)", interactive=False, wrap=True)
        moved = gr.Dataframe(label="top-1 % by run and reference version (name@hash)", interactive=False, wrap=True)
    outputs = [chooser, summary, files, figures, body, evaluations, moved]

    def served(values: list[Any]) -> list[Any]:
        """The report's files and figures as copies Gradio may serve (the reports folder itself is not)."""
        values[2] = [served_copy(f) for f in values[2] or []] or None
        values[3] = [(served_copy(path), caption) for path, caption in values[3] or []] or None
        return values

    newest = guarded(lambda u: served(tab_values(ws, u)))
    refresh.click(newest, None, outputs, api_name="report")
    tab.select(newest, None, outputs, api_visibility="private")
    # .input, not .change: setting the list on Refresh must not load the report a second time
    chooser.input(
        guarded(lambda u, name: served(tab_values(ws, u, name))),
        chooser,
        outputs,
        api_name="report_named",
    )
