"""Figures of the protocol analysis, one per table, as PNG bytes (None when the table is empty); drawn as
`relabel.evaluation.plots` draws (object API, mathtext off: run and model names are drawn as written)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relabel.evaluation.plots import _figure, _grouped_barh, _plain_text, _png, _short
from relabel.evaluation.protocol_analysis import ProtocolAnalysis, Rate


def _errors(values: np.ndarray, low: Sequence[float | None], high: Sequence[float | None]) -> np.ndarray | None:
    lo = np.array([np.nan if v is None else 100 * v for v in low])
    hi = np.array([np.nan if v is None else 100 * v for v in high])
    return np.nan_to_num(np.vstack([values - lo, hi - values])) if np.isfinite(lo).any() else None


def _points(labels: list[str], diff: np.ndarray, err: np.ndarray | None, xlabel: str, title: str) -> bytes:
    fig = _figure(8, 1.4 + 0.35 * len(labels))
    ax = fig.add_subplot()
    y = np.arange(len(labels))
    ax.errorbar(diff, y, xerr=err, fmt="o", capsize=3, color="C0", ecolor="0.3", elinewidth=0.8)
    ax.axvline(0, color="0.5", linewidth=0.8)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    return _png(fig)


def _rates(labels: list[str], rates: list[Rate], xlabel: str, title: str) -> bytes:
    values = np.array([100 * r.rate for r in rates])
    err = _errors(values, [r.low for r in rates], [r.high for r in rates])
    fig = _figure(8, 1.4 + 0.3 * len(labels))
    ax = fig.add_subplot()
    _grouped_barh(ax, labels, {"rate": values}, {"rate": err} if err is not None else None)
    ax.set_xlim(0, 109)
    ax.set_xlabel(xlabel)
    ax.set_title(title, fontsize=10)
    return _png(fig)


@_plain_text
def pairs_plot(a: ProtocolAnalysis) -> bytes | None:
    if not a.pairs:
        return None
    labels = [f"{_short(p.model)}: {p.protocol_a} → {p.protocol_b} ({p.n:,} images)" for p in a.pairs]
    diff = np.array([100 * p.difference for p in a.pairs])
    err = _errors(diff, [p.ci_low for p in a.pairs], [p.ci_high for p in a.pairs])
    return _points(labels, diff, err, "Δ top-1 (points), 95 % paired interval", "Protocols compared on common images")


@_plain_text
def oop_plot(a: ProtocolAnalysis) -> bytes | None:
    rows = [(f"{_short(o.run)} · {c.class_name}", c.oop) for o in a.oop for c in o.classes]
    rows = [(f"{_short(o.run)} · (all)", o.overall) for o in a.oop] + rows
    if not rows:
        return None
    return _rates([r for r, _ in rows], [x for _, x in rows], "out-of-prompt answers (%), 95 % Wilson interval",
                  "Out-of-prompt rate per run and reference class")  # fmt: skip


@_plain_text
def failures_plot(a: ProtocolAnalysis) -> bytes | None:
    if not a.failures:
        return None
    labels = [f"{_short(f.run)} ({f.protocol})" for f in a.failures]
    return _rates(labels, [f.errors for f in a.failures], "failed calls (%), 95 % Wilson interval",
                  "Failure rate per run and protocol")  # fmt: skip


def _ablation(a: ProtocolAnalysis, batches: bool) -> bytes | None:
    groups = a.batches if batches else a.orders
    if not groups:
        return None
    fig = _figure(7, 1.2 + 3.0 * len(groups))
    axes = fig.subplots(len(groups), 1, squeeze=False)[:, 0]
    for ax, g in zip(axes, groups):
        x = np.arange(len(g.variants))
        top1 = np.array([100 * v.top1.rate for v in g.variants])
        err = _errors(top1, [v.top1.low for v in g.variants], [v.top1.high for v in g.variants])
        ax.errorbar(x, top1, yerr=err, fmt="o-", capsize=3, color="C0", ecolor="0.3", elinewidth=0.8)
        ax.set_xticks(x, [str(v.setting) for v in g.variants])
        ax.set_xlabel("images per request" if batches else "seed of the option shuffle")
        ax.set_ylabel("top-1 (%), 95 % Wilson")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        changed = f"; answer changed on {100 * g.changed.rate:.1f} %" if g.changed else ""
        ax.set_title(f"{_short(g.model)} · {g.protocol}: {g.n:,} images{changed}", fontsize=10)
    return _png(fig)


@_plain_text
def batches_plot(a: ProtocolAnalysis) -> bytes | None:
    return _ablation(a, batches=True)


@_plain_text
def orders_plot(a: ProtocolAnalysis) -> bytes | None:
    return _ablation(a, batches=False)
