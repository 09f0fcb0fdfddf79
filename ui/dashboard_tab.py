"""The leads' dashboard: progress, live categories, suggestion acceptance, throughput and agreement, with plots.

`dashboard_values` is a plain function (tests call it), as are the figure builders; `build` lays out the tab and
loads its values when the tab is opened and on Refresh.

Figures are plain `matplotlib.figure.Figure`s, never pyplot ones: handlers run in worker threads and pyplot's
figure registry is global. Annotator names are drawn with `parse_math=False`, so a `$` in a name stays a character.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import gradio as gr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from relabel.review.agreement import agreement_report
from relabel.review.dashboard import (
    RATE_MIN_ACTIVE_S,
    AnnotatorThroughput,
    Dashboard,
    LiveCategories,
    dashboard,
    worker_reliability_table,
)
from relabel.snapshots.freeze import vote_snapshot_lines
from ui import handlers
from ui.context import WorkspaceContext

DECIDED_CATEGORIES = {
    "A": "A original",
    "B": "B other class",
    "M": "M several",
    "Z": "Z none fits",
    "X": "X unclear",
}
DISPUTED_LABEL = "U disputed"
BAR, DISPUTED_BAR, NO_RATE_BAR = "#4c72b0", "#dd8452", "#bbbbbb"
RATE_FROM_MIN = int(RATE_MIN_ACTIVE_S // 60)
RATE_HEADER = f"images/h (from {RATE_FROM_MIN} active min)"


def _num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def summary_text(d: Dashboard) -> str:
    p = d.progress
    return (
        f"{p.reviewable} reviewable images ({p.unreadable} unreadable, {p.missing} missing) · "
        f"{p.with_decision} with a decision, {p.with_overlap} with {p.overlap}+ annotators · "
        f"consensus {p.consensus}, adjudicated {p.adjudicated}, disputed {p.disputed}, undecided {p.undecided}"
    )


def category_figure(categories: LiveCategories) -> Figure:
    """Horizontal bars of the decided categories (A B M Z X) and of the disputed part of U, each with its count
    written beside it. U itself is stated in the title, not drawn: early in a round it holds nearly every image and
    would flatten every other bar to nothing."""
    counts = categories.counts
    total = sum(counts.values())
    undecided = counts.get("U", 0)
    labels = [*DECIDED_CATEGORIES.values(), DISPUTED_LABEL]
    values = [counts.get(k, 0) for k in DECIDED_CATEGORIES] + [categories.disputed]
    fig = Figure(figsize=(5, 3.2), layout="constrained")
    ax = fig.subplots()
    _count_bars(ax, labels, values, [BAR] * len(DECIDED_CATEGORIES) + [DISPUTED_BAR], [str(v) for v in values])
    share = f" ({100 * undecided / total:.1f} %)" if total else ""
    ax.set_title(
        f"a snapshot taken now: {total} images\nU undecided {undecided}{share}, not drawn; "
        f"{categories.disputed} of them disputed",
        fontsize=9,
    )
    ax.set_xlabel("images")
    return fig


def _count_bars(
    ax: Axes, labels: Sequence[str], values: Sequence[float], colors: Sequence[str], texts: Sequence[str]
) -> None:
    """Horizontal bars, first label on top, each with its text beside it; room is left on the right for the text."""
    positions = list(range(len(labels)))
    bars = ax.barh(positions, values, color=colors)
    ax.set_yticks(positions, labels=labels, parse_math=False)
    ax.invert_yaxis()
    ax.bar_label(bars, labels=texts, padding=3, fontsize=8, parse_math=False)
    ax.set_xlim(0, max(values, default=0) * 1.35 or 1)


def rate_text(a: AnnotatorThroughput) -> str:
    """The rate as "28/h"; "—" while the active time is too short for one."""
    return "—" if math.isnan(a.images_per_hour) else f"{a.images_per_hour:.0f}/h"


def throughput_figure(annotators: Sequence[AnnotatorThroughput], hourly: Sequence[tuple[datetime, int]]) -> Figure:
    """Left: images per active hour per annotator, with decisions and active minutes written on each bar; an
    annotator with less than `RATE_MIN_ACTIVE_S` of active time gets no bar, only the text. Right: everyone's
    decisions per clock hour over the last 24 hours."""
    height = max(3.0, 1.4 + 0.35 * len(annotators))
    fig = Figure(figsize=(10, height), layout="constrained")
    left, right = fig.subplots(1, 2)
    rates = [0.0 if math.isnan(a.images_per_hour) else a.images_per_hour for a in annotators]
    texts = [f"{rate_text(a)} · {a.decisions} decisions in {a.active_minutes:.1f} active min" for a in annotators]
    colors = [NO_RATE_BAR if math.isnan(a.images_per_hour) else BAR for a in annotators]
    _count_bars(left, [a.name for a in annotators], rates, colors, texts)
    left.set_xlim(0, max(rates, default=0) * 2.4 or 1)  # the texts are longer than a count
    left.set_title(f"images per active hour (— under {RATE_FROM_MIN} active min)", fontsize=9)
    hours = [h.strftime("%H:00") for h, _ in hourly]
    right.plot(hours, [n for _, n in hourly], marker="o")
    right.set_title("decisions per hour, last 24 h (UTC)", fontsize=9)
    right.tick_params(axis="x", rotation=60, labelsize=7)
    return fig


def suggestion_rows(d: Dashboard) -> list[list[Any]]:
    rows = [["all runs", *_use_cells(d.suggestions.overall)]]
    rows += [[run, *_use_cells(use)] for run, use in d.suggestions.by_run.items()]
    return rows


def _use_cells(use: Any) -> list[Any]:
    rate = (lambda n: _num(n / use.shown, 2)) if use.shown else (lambda n: "—")
    return [
        use.shown,
        f"{use.accepted} ({rate(use.accepted)})",
        f"{use.edited} ({rate(use.edited)})",
        f"{use.rejected} ({rate(use.rejected)})",
    ]


ANNOTATOR_HEADERS = [
    "annotator",
    "role",
    "decisions",
    "undos",
    "images",
    "median s",
    "active min",
    RATE_HEADER,
    "adjudicated items",
    "= lead",
    "mean Jaccard",
]


def annotator_rows(d: Dashboard, reference: dict[Any, list[Any]]) -> list[list[Any]]:
    """One row per annotator in `ANNOTATOR_HEADERS` order; `reference` maps a name to its last three cells."""
    return [
        [
            a.name,
            a.role.value,
            a.decisions,
            a.undos,
            a.images_decided,
            _num(a.median_seconds, 1),
            f"{a.active_minutes:.1f}",
            _num(a.images_per_hour, 1),
            *reference.get(a.name, ["—", "—", "—"]),
        ]
        for a in d.annotators
    ]


def class_rows(d: Dashboard, limit: int = 25) -> list[list[Any]]:
    """The classes furthest behind: most disputed first, then least decided."""
    ranked = sorted(d.classes, key=lambda c: (-c.disputed, c.decided / max(c.images, 1), c.index))
    return [[c.index, c.name, c.images, c.decided, c.disputed] for c in ranked[:limit]]


def dashboard_values(ws: WorkspaceContext, user: str) -> list[Any]:
    """The dashboard tab's values; leads only."""
    ws.require_lead(user)
    d = dashboard(ws.engine, ws.dataset_name, overlap=ws.overlap)
    agreement = agreement_report(ws.engine, ws.dataset_name)
    alpha = ", ".join(f"{k} {_num(v)}" for k, v in agreement.alpha.items())
    agreement_text = (
        f"{agreement.n_multi_rated} images with 2+ annotators · "
        f"percent agreement {_num(agreement.percent_agreement)} · "
        f"Fleiss' κ {_num(agreement.fleiss_kappa)} · Krippendorff's α {alpha}"
    )
    pairs = [[p.annotator_a, p.annotator_b, p.n_items, _num(p.observed), _num(p.kappa)] for p in agreement.pairs]
    reference = {r.annotator: [r.n_items, _num(r.exact), _num(r.mean_jaccard)] for r in agreement.reference}
    return [
        "\n".join([summary_text(d), *vote_snapshot_lines(ws.engine, ws.dataset_name)]),
        category_figure(d.categories),
        throughput_figure(d.annotators, d.hourly),
        suggestion_rows(d),
        annotator_rows(d, reference),
        agreement_text,
        pairs,
        class_rows(d),
    ]


RELIABILITY_HEADERS = ["worker", "kind", "sensitivity", "specificity", "answers", "no / maybe / yes", "flag"]


def reliability_values(ws: WorkspaceContext, user: str) -> tuple[str, list[list[Any]]]:
    """The workers' reliability (a Dawid-Skene fit on every vote of the dataset) as a line and table rows; leads
    only. Names are cells of text, never markup."""
    ws.require_lead(user)
    fitted = worker_reliability_table(ws.engine, ws.dataset_name)
    if fitted is None:
        return "no votes yet: decisions in the studio and imported votes (relabel votes import) count", []
    flagged = sum(1 for r in fitted.rows if r.flag)
    line = f"Dawid-Skene on {fitted.votes:,} votes · {len(fitted.rows)} workers, {flagged} flagged"
    rows = [
        [r.name, r.kind, _num(r.sensitivity, 2), _num(r.specificity, 2), r.total,
         " / ".join(str(n) for n in r.answers), r.flag or "—"]
        for r in fitted.rows
    ]  # fmt: skip
    return line, rows


TRUST_HEADERS = [
    "by",
    "group",
    "shown",
    "accepted",
    "edited",
    "rejected",
    "confirmed or integrated",
    "kept by adjudication",
]


def trust_values(ws: WorkspaceContext, user: str) -> tuple[str, list[list[Any]]]:
    """Suggestion trust (`relabel.review.suggestion_trust`) as a line and table rows; leads only. Run, model and
    protocol names are cells of text, never markup."""
    from relabel.review.suggestion_trust import share_text, suggestion_trust

    ws.require_lead(user)
    rows = suggestion_trust(ws.engine, ws.dataset_name)
    if not rows:
        return "no standing decision was made with a stored suggestion on screen yet", []
    shown = sum(r.shown for r in rows if r.group == "run")
    line = f"{shown:,} standing decisions with a suggestion on screen · shares with 95 % Wilson intervals"
    cells = [
        [r.group, r.name, r.shown, *(share_text(s) for s in (r.accepted, r.edited, r.rejected, r.taken_up, r.survives))]
        for r in rows
    ]
    return line, cells


def build(
    ws: WorkspaceContext,
    guarded: Callable[[Callable[..., Any]], Callable[..., Any]],
    tab: gr.Tab,
    reload_queue: Callable[[str], str],
) -> None:
    """The tab's layout inside `tab`; its values load when the lead opens the tab and on Refresh. `reload_queue`
    (user -> message) rebuilds the studio's review queue: the one action here that is not a read."""
    with gr.Row():
        refresh = gr.Button("Refresh", size="sm", elem_id="dash-refresh")
        reload = gr.Button("Rebuild the review queue (after imports or new suggestion runs)", size="sm")
    reloaded = gr.Textbox(show_label=False, interactive=False, lines=1)
    reload.click(guarded(reload_queue), None, reloaded, api_name="reload_queue")
    summary = gr.Textbox(label="progress", interactive=False, lines=2)
    with gr.Row():
        categories = gr.Plot(label="live categories")
        throughput = gr.Plot(label="throughput")
    suggestions = gr.Dataframe(
        headers=["run", "shown", "accepted", "edited", "rejected"], label="suggestion acceptance", interactive=False
    )
    annotators = gr.Dataframe(
        headers=ANNOTATOR_HEADERS,
        label=f"annotators (agreement with adjudicated labels; a rate needs {RATE_FROM_MIN} active minutes)",
        interactive=False,
    )
    agreement = gr.Textbox(label="agreement", interactive=False, lines=2)
    pairs = gr.Dataframe(headers=["a", "b", "shared images", "observed", "Cohen's κ"], label="pairs", interactive=False)
    classes = gr.Dataframe(
        headers=["class", "name", "images", "decided", "disputed"], label="classes furthest behind", interactive=False
    )
    with gr.Accordion("Worker reliability: sensitivity, specificity and answers of every worker", open=False):
        fit_btn = gr.Button("Fit Dawid-Skene on all votes", size="sm")
        fitted = gr.Textbox(show_label=False, interactive=False, lines=1)
        reliability = gr.Dataframe(headers=RELIABILITY_HEADERS, interactive=False)
    fit_btn.click(
        guarded(lambda u: reliability_values(ws, u)), None, [fitted, reliability], api_name="worker_reliability"
    )
    with gr.Accordion(
        "Suggestion trust: accepted, integrated and kept, by run, protocol, model and confidence", open=False
    ):
        trust_btn = gr.Button("Count", size="sm")
        trusted = gr.Textbox(show_label=False, interactive=False, lines=1)
        trust = gr.Dataframe(headers=TRUST_HEADERS, interactive=False, wrap=True)
    trust_btn.click(guarded(lambda u: trust_values(ws, u)), None, [trusted, trust], api_name="suggestion_trust")
    with gr.Accordion("Audit trail: every decision, newest first", open=False):
        with gr.Row():
            who = gr.Textbox(label="user (empty: everyone)", lines=1, scale=2)
            limit = gr.Number(value=200, precision=0, label="events", scale=1)
            audit_btn = gr.Button("Show", size="sm", scale=1)
        audit = gr.Dataframe(
            headers=["#", "when", "who", "image", "decision", "suggestion", "note"], interactive=False, wrap=True
        )
    audit_btn.click(guarded(lambda u, w, n: handlers.audit_log(ws, u, w, n)), [who, limit], audit, api_name="audit_log")
    outputs = [summary, categories, throughput, suggestions, annotators, agreement, pairs, classes]
    values = guarded(lambda u: dashboard_values(ws, u))
    refresh.click(values, None, outputs, api_name="dashboard")
    tab.select(values, None, outputs, api_visibility="private")
