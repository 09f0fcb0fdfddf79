"""Figures of the task tables (`relabel.evaluation.tasks`): presence probes, captions and retrieval, each run under
every reference side by side, as PNG bytes (None when the table is empty); drawn as `relabel.evaluation.plots`
draws (object API on the Agg canvas, mathtext off: run and reference names are drawn as written)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import numpy as np

from relabel.evaluation.plots import _figure, _grouped_barh, _legend_outside, _plain_text, _png, _short
from relabel.evaluation.tasks import TaskTables

Row = TypeVar("Row")


def _by_reference(
    rows: Sequence[Row], group: Callable[[Row], str], reference: Callable[[Row], str], value: Callable[[Row], float]
) -> tuple[list[str], dict[str, np.ndarray]]:
    """Groups (in order of first appearance) and one series per reference, in %: NaN where a group has no row."""
    groups = list(dict.fromkeys(group(r) for r in rows))
    refs = list(dict.fromkeys(reference(r) for r in rows))
    series = {ref: np.full(len(groups), np.nan) for ref in refs}
    for r in rows:
        series[reference(r)][groups.index(group(r))] = 100 * value(r)
    return groups, series


@_plain_text
def presence_plot(tables: TaskTables | None) -> bytes | None:
    """Accuracy and F1 per run and sampling, one bar per reference (a row under b is on the images both label)."""
    if tables is None or not tables.presence:
        return None
    rows = tables.presence
    fig = _figure(10, 1.6 + 0.3 * len(rows) + 0.2 * len({(r.run, r.sampling) for r in rows}))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (name, metric) in zip(axes, (("accuracy", lambda r: r.score.accuracy), ("F1", lambda r: r.score.f1))):
        groups, series = _by_reference(rows, lambda r: f"{_short(r.run)} · {r.sampling}", lambda r: r.reference, metric)
        _grouped_barh(ax, groups, series)
        ax.set_xlim(0, 112)
        ax.set_xlabel(f"{name} (%)")
        ax.set_title(f"Presence probes: {name}", fontsize=10)
    _legend_outside(axes[1], "reference")
    fig.suptitle("after POPE; later references on the images both references label", fontsize=9)
    return _png(fig)


@_plain_text
def chair_plot(tables: TaskTables | None) -> bytes | None:
    """CHAIR-i, CHAIR-s (lower is better) and coverage per run, one bar per reference."""
    if tables is None or not tables.chair:
        return None
    rows = tables.chair
    metrics: tuple[tuple[str, Callable], ...] = (
        ("CHAIR-i", lambda r: r.score.chair_i),
        ("CHAIR-s", lambda r: r.score.chair_s),
        ("coverage", lambda r: r.score.coverage),
    )
    fig = _figure(12, 1.6 + 0.35 * len(rows))
    axes = fig.subplots(1, 3, sharey=True)
    for ax, (name, metric) in zip(axes, metrics):
        groups, series = _by_reference(rows, lambda r: _short(r.run), lambda r: r.reference, metric)
        _grouped_barh(ax, groups, series)
        ax.set_xlim(0, 112)
        ax.set_xlabel(f"{name} (%)")
        ax.set_title(name + (" (lower is better)" if name != "coverage" else ""), fontsize=10)
    _legend_outside(axes[2], "reference")
    fig.suptitle("Caption hallucination, after CHAIR; an ImageNet label set is not an exhaustive list", fontsize=9)
    return _png(fig)


@_plain_text
def retrieval_plot(tables: TaskTables | None) -> bytes | None:
    """Recall@K against K, text → image and image → text, one line per run and reference (mAP in the legend)."""
    if tables is None or not tables.retrieval:
        return None
    fig = _figure(11, 4.2)
    axes = fig.subplots(1, 2, sharey=True)
    for k, r in enumerate(tables.retrieval):
        style = {"marker": "o", "markersize": 4, "color": f"C{k % 10}"}
        label = f"{_short(r.run)} · {_short(r.reference)} (mAP {100 * r.t2i_map:.1f}, {r.n_images:,} images)"
        for ax, recall in zip(axes, (r.t2i_recall, r.i2t_recall)):
            ks = sorted(recall)
            ax.plot(ks, [100 * recall[x] for x in ks], label=label, **style)
    for ax, title in zip(axes, ("text → image: a relevant image in the top K", "image → text: a class in the top K")):
        ax.set_xscale("log")
        ks = sorted({x for r in tables.retrieval for x in r.t2i_recall})
        ax.set_xticks(ks, [str(x) for x in ks])
        ax.set_xlabel("K")
        ax.set_ylim(0, 102)
        ax.grid(alpha=0.3)
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("R@K (%)")
    _legend_outside(axes[1], "run · reference")
    return _png(fig)
