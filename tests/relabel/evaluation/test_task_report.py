"""The report's task sections: presence probes and captions (stored pope and caption runs of the five-image
workspace, tests/relabel/evaluation/test_tasks.py) get their table and figure, user-chosen names stay inert text,
and an evaluation without task runs gets no task section."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import Engine

from db import create_db_engine, init_db
from relabel.evaluation import evaluate
from relabel.evaluation.report import write_report
from relabel.evaluation.task_plots import chair_plot, presence_plot, retrieval_plot
from relabel.evaluation.tasks_report import task_sections
from tests import evaluation_workspace as ws
from tests.relabel.evaluation.test_tasks import CAPTIONS, POPE

PNG = b"\x89PNG"
RUN = "<b>probe</b>|x"  # a run name with markup and a table bar


@pytest.fixture
def engine(tmp_path: Path) -> Engine:
    engine = create_db_engine(f"sqlite:///{tmp_path / 'relabel.db'}")
    init_db(engine)
    ids = ws.build(engine, tmp_path)
    ws.add_run(engine, RUN, "vlm", "pope", POPE, ids)
    ws.add_run(engine, "k", "vlm", "caption", CAPTIONS, ids)
    return engine


def test_presence_and_caption_sections_with_their_figures(engine: Engine, tmp_path: Path) -> None:
    ev = evaluate(engine, references=["imgt", "team"], n_boot=0, store=False)
    files = write_report(ev, tmp_path / "report")
    names = {p.name for p in files.figures}
    assert {"presence.png", "chair.png"} <= names and "retrieval.png" not in names
    assert all((tmp_path / "report" / n).read_bytes()[:4] == PNG for n in ("presence.png", "chair.png"))
    md = files.markdown.read_text()
    for heading in ("## Tasks beyond classification", "### Presence probes", "### Caption hallucination"):
        assert md.count(heading) == 1
    assert "### Retrieval" not in md
    assert "![Presence probes](presence.png)" in md and "![Caption hallucination](chair.png)" in md
    assert md.index("### Presence probes") < md.index("![Presence probes](presence.png)") < md.index("## Protocols")
    assert "<b>" not in md and "&lt;b&gt;probe&lt;/b&gt;\\|x" in md
    # the presence table: a row per sampling and reference, random under imgt as test_tasks counts it (3 of 7)
    line = next(ln for ln in md.splitlines() if ln.startswith("| &lt;b&gt;") and "| random | imgt |" in ln)
    assert "| 42.86 |" in line
    assert "Reliability (P, CDC, RR, E) is computed for runs that choose classes only" in md


def test_the_figures_draw_every_row(engine: Engine) -> None:
    ev = evaluate(engine, references=["imgt", "team"], n_boot=0, store=False)
    assert ev.tasks is not None
    assert presence_plot(ev.tasks)[:4] == PNG and chair_plot(ev.tasks)[:4] == PNG  # type: ignore[index]
    assert retrieval_plot(ev.tasks) is None and presence_plot(None) is None
    sections = task_sections(ev.tasks, set())  # no figure written: no figure linked
    assert not any(isinstance(p, str) and "](" in p for p in sections)
    tables = [p for p in sections if not isinstance(p, str)]
    assert len(tables[0][1]) == len(ev.tasks.presence) == 6 and len(tables[1][1]) == len(ev.tasks.chair) == 2


def test_no_task_runs_no_task_section(engine: Engine, tmp_path: Path) -> None:
    ev = evaluate(engine, runs=["m5"], references=["imgt"], n_boot=0, store=False)
    md = write_report(ev, tmp_path / "report").markdown.read_text()
    assert ev.tasks is None and "Tasks beyond classification" not in md
