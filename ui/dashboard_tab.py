"""The leads' dashboard: progress, live categories, suggestion acceptance, throughput and agreement, with plots.

`dashboard_values` is a plain function (tests call it); `build` lays out the tab and wires the refresh button.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import gradio as gr
import matplotlib

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from relabel.agreement import agreement_report  # noqa: E402
from relabel.dashboard import Dashboard, dashboard  # noqa: E402
from relabel.review.studio import Studio  # noqa: E402
from ui import handlers  # noqa: E402

CATEGORY_ORDER = ("A", "B", "M", "Z", "X", "U")


def _num(x: float, digits: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def summary_text(d: Dashboard) -> str:
    p = d.progress
    return (
        f"{p.reviewable} reviewable images ({p.unreadable} unreadable, {p.missing} missing) · "
        f"{p.with_decision} with a decision, {p.with_overlap} with {p.overlap}+ annotators · "
        f"consensus {p.consensus}, adjudicated {p.adjudicated}, disputed {p.disputed}, undecided {p.undecided}"
    )


def category_figure(d: Dashboard) -> Figure:
    counts = d.categories.counts
    fig, ax = plt.subplots(figsize=(5, 3))
    keys = [k for k in CATEGORY_ORDER if k in counts] + ["disputed"]
    values = [counts.get(k, 0) for k in keys[:-1]] + [d.categories.disputed]
    ax.bar(keys, values, color=["#4c72b0"] * (len(keys) - 1) + ["#dd8452"])
    ax.set_title("what a snapshot taken now would hold")
    ax.set_ylabel("images")
    fig.tight_layout()
    return fig


def throughput_figure(d: Dashboard) -> Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3))
    names = [a.name for a in d.annotators]
    left.bar(names, [0 if math.isnan(a.images_per_hour) else a.images_per_hour for a in d.annotators])
    left.set_title("images per active hour")
    left.tick_params(axis="x", rotation=30)
    hours = [h.strftime("%H:00") for h, _ in d.hourly]
    right.plot(hours, [n for _, n in d.hourly], marker="o")
    right.set_title("decisions per hour, last 24 h (UTC)")
    right.tick_params(axis="x", rotation=60, labelsize=7)
    fig.tight_layout()
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


def annotator_rows(d: Dashboard, reference: dict[Any, list[Any]]) -> list[list[Any]]:
    return [
        [
            a.name,
            a.role.value,
            a.decisions,
            a.undos,
            a.images_decided,
            _num(a.median_seconds, 1),
            _num(a.images_per_hour, 1),
            *reference.get(a.name, ["—", "—", "—"]),
        ]
        for a in d.annotators
    ]


def class_rows(d: Dashboard, limit: int = 25) -> list[list[Any]]:
    """The classes furthest behind: most disputed first, then least decided."""
    ranked = sorted(d.classes, key=lambda c: (-c.disputed, c.decided / max(c.images, 1), c.index))
    return [[c.index, c.name, c.images, c.decided, c.disputed] for c in ranked[:limit]]


def dashboard_values(studio: Studio, user: str) -> list[Any]:
    """The dashboard tab's values; leads only."""
    studio.require_lead(user)
    d = dashboard(studio.engine, studio.dataset_name, overlap=studio.overlap)
    agreement = agreement_report(studio.engine, studio.dataset_name)
    alpha = ", ".join(f"{k} {_num(v)}" for k, v in agreement.alpha.items())
    agreement_text = (
        f"{agreement.n_multi_rated} images with 2+ annotators · "
        f"percent agreement {_num(agreement.percent_agreement)} · "
        f"Fleiss' κ {_num(agreement.fleiss_kappa)} · Krippendorff's α {alpha}"
    )
    pairs = [[p.annotator_a, p.annotator_b, p.n_items, _num(p.observed), _num(p.kappa)] for p in agreement.pairs]
    reference = {r.annotator: [r.n_items, _num(r.exact), _num(r.mean_jaccard)] for r in agreement.reference}
    figures = [category_figure(d), throughput_figure(d)]
    values = [
        summary_text(d),
        figures[0],
        figures[1],
        suggestion_rows(d),
        annotator_rows(d, reference),
        agreement_text,
        pairs,
        class_rows(d),
    ]
    for fig in figures:
        plt.close(fig)
    return values


def build(studio: Studio, guarded: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    with gr.Row():
        refresh = gr.Button("Refresh", size="sm", elem_id="dash-refresh")
        reload = gr.Button("Rebuild the review queue (after imports or new suggestion runs)", size="sm")
    reloaded = gr.Textbox(show_label=False, interactive=False, lines=1)
    reload.click(guarded(lambda u: handlers.reload_queue(studio, u)), None, reloaded, api_name="reload_queue")
    summary = gr.Textbox(label="progress", interactive=False, lines=2)
    with gr.Row():
        categories = gr.Plot(label="live categories")
        throughput = gr.Plot(label="throughput")
    suggestions = gr.Dataframe(
        headers=["run", "shown", "accepted", "edited", "rejected"], label="suggestion acceptance", interactive=False
    )
    annotators = gr.Dataframe(
        headers=[
            "annotator",
            "role",
            "decisions",
            "undos",
            "images",
            "median s",
            "images/h",
            "adjudicated items",
            "= lead",
            "mean Jaccard",
        ],
        label="annotators (agreement with adjudicated labels)",
        interactive=False,
    )
    agreement = gr.Textbox(label="agreement", interactive=False, lines=2)
    pairs = gr.Dataframe(headers=["a", "b", "shared images", "observed", "Cohen's κ"], label="pairs", interactive=False)
    classes = gr.Dataframe(
        headers=["class", "name", "images", "decided", "disputed"], label="classes furthest behind", interactive=False
    )
    with gr.Accordion("Audit trail: every decision, newest first", open=False):
        with gr.Row():
            who = gr.Textbox(label="user (empty: everyone)", lines=1, scale=2)
            limit = gr.Number(value=200, precision=0, label="events", scale=1)
            audit_btn = gr.Button("Show", size="sm", scale=1)
        audit = gr.Dataframe(
            headers=["#", "when", "who", "image", "decision", "suggestion", "note"], interactive=False, wrap=True
        )
    audit_btn.click(
        guarded(lambda u, w, n: handlers.audit_log(studio, u, w, n)), [who, limit], audit, api_name="audit_log"
    )
    refresh.click(
        guarded(lambda u: dashboard_values(studio, u)),
        None,
        [summary, categories, throughput, suggestions, annotators, agreement, pairs, classes],
        api_name="dashboard",
    )
