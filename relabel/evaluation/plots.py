"""Report figures as PNG bytes, drawn with matplotlib's object API on the Agg canvas (no pyplot, no GUI state).

Names in figures come from users (run and model names): mathtext parsing is off, so a `$` in a name is drawn as
it is and cannot break the figure.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import numpy as np

from evaluator.reliability_parts import parts
from relabel.evaluation.results import Evaluation, ReliabilityRow, ReliabilityTable, RobustnessResult

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

P = ParamSpec("P")
R = TypeVar("R")
DPI = 110
MAX_LABEL = 40  # characters of a name shown on an axis


def _figure(width: float, height: float) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=DPI, layout="constrained")


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def _plain_text(draw: Callable[P, R]) -> Callable[P, R]:
    """Run `draw` with mathtext off: Text objects read the setting when they are created, so it spans the call."""

    @functools.wraps(draw)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        import matplotlib

        with matplotlib.rc_context({"text.parse_math": False}):
            return draw(*args, **kwargs)

    return wrapper


def _short(name: str) -> str:
    flat = " ".join(name.split())
    return flat if len(flat) <= MAX_LABEL else flat[: MAX_LABEL - 1] + "…"


def _legend_outside(ax: Axes, title: str | None) -> None:
    ax.legend(title=title, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, title_fontsize=8)


def _grouped_barh(ax: Axes, groups: Sequence[str], series: dict[str, np.ndarray], errors: dict | None = None) -> None:
    """Horizontal bars: one group per label (top to bottom), one bar per series within it; values in %."""
    n = max(len(series), 1)
    height = 0.8 / n
    y = np.arange(len(groups))
    for i, (name, values) in enumerate(series.items()):
        xerr = None if not errors or name not in errors else errors[name]
        bars = ax.barh(y - 0.4 + height * (i + 0.5), np.nan_to_num(values), height, xerr=xerr, label=_short(name),
                       capsize=2, error_kw={"elinewidth": 0.8, "ecolor": "0.3"})  # fmt: skip
        ax.bar_label(bars, labels=[f"{v:.1f}" if np.isfinite(v) else "n/a" for v in values], padding=3, fontsize=7)
    ax.set_yticks(y, [_short(g) for g in groups])
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


@_plain_text
def accuracy_by_reference(ev: Evaluation) -> bytes:
    """Top-1 % of every run under every reference (ImGT vs ReGT), with 95 % intervals."""
    runs = [r.name for r in ev.runs]
    refs = [r.name for r in ev.references]
    series, errors = {}, {}
    for ref in refs:
        scores = [ev.score(run, ref).top1 for run in runs]
        acc = np.array([100 * s.accuracy for s in scores])
        low = np.array([100 * s.ci_low if s.ci_low is not None else np.nan for s in scores])
        high = np.array([100 * s.ci_high if s.ci_high is not None else np.nan for s in scores])
        series[ref] = acc
        if np.isfinite(low).any():
            errors[ref] = np.nan_to_num(np.vstack([acc - low, high - acc]))
    fig = _figure(8, 1.2 + 0.28 * len(runs) * len(refs) + 0.2 * len(runs))
    ax = fig.add_subplot()
    _grouped_barh(ax, runs, series, errors)
    ax.set_xlabel("top-1 accuracy (%), 95 % Wilson interval")
    ax.set_xlim(0, 109)
    ax.set_title(
        f"Top-1 per run and reference (dataset {_short(ev.dataset)})\neach on the images the run scored under that "
        "reference; differences on common images: paired.png",
        fontsize=10,
    )
    _legend_outside(ax, "reference")
    return _png(fig)


@_plain_text
def paired_differences(ev: Evaluation) -> bytes | None:
    """Top-1 under each later reference minus under the first, per run, on the images the run scored under both
    (percentage points, with the paired bootstrap interval); None when there is no pair."""
    built = {(c.run, c.reference) for c in ev.label_changes if c.baseline_by_construction}  # no gain to draw
    rows = [(s, s.paired) for s in ev.scores if s.paired is not None and s.paired.n_common
            and (s.run, s.reference) not in built]  # fmt: skip
    if not rows:
        return None
    labels = [f"{_short(s.run)} · {_short(s.reference)} ({p.n_common:,} images)" for s, p in rows]
    diff = np.array([100 * p.difference for _, p in rows])
    low = np.array([np.nan if p.ci_low is None else 100 * p.ci_low for _, p in rows])
    high = np.array([np.nan if p.ci_high is None else 100 * p.ci_high for _, p in rows])
    fig = _figure(8, 1.4 + 0.35 * len(rows))
    ax = fig.add_subplot()
    y = np.arange(len(rows))
    xerr = np.nan_to_num(np.vstack([diff - low, high - diff])) if np.isfinite(low).any() else None
    ax.errorbar(diff, y, xerr=xerr, fmt="o", capsize=3, color="C0", ecolor="0.3", elinewidth=0.8)
    for yi, d in zip(y, diff):
        ax.annotate(f"{d:+.2f}", (d, yi), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=7)
    ax.axvline(0, color="0.5", linewidth=0.8)
    ax.set_yticks(y, labels)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)
    base = _short(ev.references[0].name)
    ax.set_xlabel(f"Δ top-1 against {base} (percentage points), 95 % paired interval")
    ax.set_title(f"Paired differences against {base}, on the images both references score", fontsize=10)
    return _png(fig)


@_plain_text
def protocol_comparison(ev: Evaluation) -> bytes | None:
    """Top-1 % per protocol for each model that was run with more than one; None when no model was."""
    by_model: dict[str, list[str]] = {}
    for r in ev.runs:
        by_model.setdefault(r.model, []).append(r.name)
    models = {m: names for m, names in by_model.items() if len(names) > 1}
    if not models:
        return None
    protocol = {r.name: r.protocol for r in ev.runs}
    fig = _figure(8, 1.0 + sum(1.0 + 0.35 * len(n) * len(ev.references) for n in models.values()))
    axes = fig.subplots(len(models), 1, squeeze=False)[:, 0]
    for ax, (model, names) in zip(axes, models.items()):
        series = {
            ref.name: np.array([100 * ev.score(n, ref.name).top1.accuracy for n in names]) for ref in ev.references
        }
        _grouped_barh(ax, [f"{protocol[n]} ({n})" for n in names], series)
        ax.set_xlim(0, 109)
        ax.set_title(f"{_short(model)}: top-1 by protocol", fontsize=10)
        _legend_outside(ax, "reference")
    axes[-1].set_xlabel("top-1 accuracy (%)")
    return _png(fig)


@_plain_text
def robustness_curves(results: Sequence[RobustnessResult], reference: str = "imgt") -> bytes:
    """Top-1 % against severity (0 = clean) for each perturbation (text ones dashed); one panel per model."""
    fig = _figure(6.8 * len(results), 4.2)
    axes = fig.subplots(1, len(results), squeeze=False)[0]
    for ax, result in zip(axes, results):
        ref = reference if reference in result.grid else next(iter(result.grid))
        clean = 100 * result.clean[ref].accuracy
        x = [0, *result.severities]
        for name, values in zip(result.perturbations, result.grid[ref]):
            text = name in result.text_perturbations  # dashed: the text changed, not the image
            label = f"{name} ({result.text_target})" if text else name
            ax.plot(x, [clean, *(100 * v for v in values)], marker="o", markersize=3, label=label,
                    linestyle="--" if text else "-")  # fmt: skip
        ax.set_xticks(x, ["clean", *map(str, result.severities)])
        ax.set_xlabel("severity")
        ax.set_ylabel(f"top-1 accuracy (%) against {_short(ref)}")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        rr = result.retention[ref]
        ax.set_title(f"{_short(result.model)}: RR {rr:.3f} on {result.n_images} images", fontsize=10)
        _legend_outside(ax, "perturbation")
    return _png(fig)


@_plain_text
def reliability_parts(table: ReliabilityTable) -> bytes:
    """Each registered part (P, CDC, RR, E, labelled by symbol) and the overall score of each row (run, protocol);
    unknown parts are marked n/a."""
    models = [f"{r.run} ({r.protocol})" for r in table.rows]
    read: dict[str, Callable[[ReliabilityRow], float | None]] = {p.symbol: p.value for p in parts()}
    read["overall"] = lambda row: row.overall
    series = {
        label: np.array([np.nan if (v := value(r)) is None else 100 * v for r in table.rows])
        for label, value in read.items()
    }
    fig = _figure(8, 1.4 + 0.9 * len(models))
    ax = fig.add_subplot()
    _grouped_barh(ax, models, series)
    ax.set_xlim(0, 112)
    ax.set_xlabel("part × 100 (higher is better)")
    weights = ", ".join(f"{k}={v:g}" for k, v in table.weights.items())
    ax.set_title(f"Reliability parts, after ARGUS (overall weights {weights})", fontsize=10)
    _legend_outside(ax, None)
    return _png(fig)
