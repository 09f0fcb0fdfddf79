"""The studio's Dashboard tab without a server: its figures stay readable when one category dominates, rates need
enough active time, and the tab loads its values when a lead opens it."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gradio as gr
import pytest
from matplotlib.figure import Figure

from db.enums import Role, Verdict
from relabel.decisions.annotations import record_annotation
from relabel.review.dashboard import AnnotatorThroughput, LiveCategories
from relabel.review.studio import Studio
from tests.studio_workspace import build_workspace
from ui import dashboard_tab, handlers
from ui.context import WorkspaceContext
from ui.events import guarded


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    return Studio(build_workspace(tmp_path, db_url), cache_dir=tmp_path / "cache", overlap=2)


def texts(fig: Figure) -> list[str]:
    """Every text drawn in `fig`'s first axes: the titles, then the labels written on the bars, top first."""
    ax = fig.axes[0]
    return [ax.get_title(), *(t.get_text() for t in ax.texts)]


def throughput(name: str, decisions: int, active_s: float, rate: float) -> AnnotatorThroughput:
    return AnnotatorThroughput(1, name, Role.annotator, decisions, 0, decisions, math.nan, active_s, rate, [])


def build_tab(studio: Studio, tab: gr.Tab) -> None:
    """The tab as the app builds it: on the studio's workspace context, rebuilding the studio's queue on request."""
    ws = WorkspaceContext.of(studio, Path(studio.root) / "reports")
    dashboard_tab.build(ws, guarded, tab, lambda u: handlers.reload_queue(studio, u))


def wired(app: gr.Blocks, block: Any, event: str) -> Any:
    """The function `app` runs on `event` of `block`."""
    [fn] = [f for f in app.fns.values() if (block._id, event) in f.targets]
    return fn


class TestFigures:
    def test_small_categories_stay_readable_beside_a_huge_undecided_count(self) -> None:
        fig = dashboard_tab.category_figure(LiveCategories({"U": 990, "A": 6, "B": 3, "M": 1}, disputed=2))
        title, *bar_texts = texts(fig)
        assert bar_texts == ["6", "3", "1", "0", "0", "2"]  # A B M Z X, then the disputed part of U
        assert "1000 images" in title and "U undecided 990 (99.0 %)" in title and "2 of them disputed" in title
        [ax] = fig.axes
        assert [t.get_text() for t in ax.get_yticklabels()][:3] == ["A original", "B other class", "M several"]
        assert ax.get_xlim()[1] < 10  # U is not drawn, so A's 6 images fill most of the axis
        assert [round(bar.get_width()) for bar in ax.containers[0]] == [6, 3, 1, 0, 0, 2]

    def test_an_empty_dataset_draws_an_empty_chart(self) -> None:
        fig = dashboard_tab.category_figure(LiveCategories(dict.fromkeys("ABMZXU", 0), disputed=0))
        assert texts(fig)[1:] == ["0"] * 6 and fig.axes[0].get_xlim() == (0, 1)

    def test_a_rate_is_drawn_only_after_enough_active_time(self) -> None:
        quick = throughput("quick", 3, 5, math.nan)
        steady = throughput("steady $x$", 240, 3600, 240.0)  # `$` stays a character, not math
        fig = dashboard_tab.throughput_figure([quick, steady], [])
        assert texts(fig)[1:] == ["— · 3 decisions in 0.1 active min", "240/h · 240 decisions in 60.0 active min"]
        assert [bar.get_width() for bar in fig.axes[0].containers[0]] == [0, 240]
        assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["quick", "steady $x$"]
        assert "under 10 active min" in texts(fig)[0]


class TestTab:
    def test_opening_the_tab_loads_the_dashboard(self, studio: Studio) -> None:
        record_annotation(studio.engine, image_id=1, user="alice", verdict=Verdict.labels, classes=[281])
        with gr.Blocks() as app, gr.Tab("Dashboard") as tab:
            build_tab(studio, tab)
        on_open, on_refresh = wired(app, tab, "select"), next(f for f in app.fns.values() if f.api_name == "dashboard")
        assert on_open.api_visibility == "private" and on_open.outputs == on_refresh.outputs
        summary, categories, throughput_plot, _, annotators, *_ = on_open.fn(SimpleNamespace(username="lena"))
        assert "6 reviewable images" in summary and "with a decision" in summary
        assert isinstance(categories, Figure) and isinstance(throughput_plot, Figure)
        [alice] = annotators
        headers = dashboard_tab.ANNOTATOR_HEADERS
        row = dict(zip(headers, alice))
        assert row["annotator"] == "alice" and row["decisions"] == 1
        assert row["images/h (from 10 active min)"] == "—"  # one decision is no pace
        assert float(row["active min"]) < 10

    def test_an_annotator_opening_it_gets_a_one_line_error(self, studio: Studio) -> None:
        with gr.Blocks() as app, gr.Tab("Dashboard") as tab:
            build_tab(studio, tab)
        with pytest.raises(gr.Error, match="'alice' is an annotator"):
            wired(app, tab, "select").fn(SimpleNamespace(username="alice"))
