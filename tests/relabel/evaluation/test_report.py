"""Reports: files written whole, self-describing JSON, escaped Markdown, readable figures, the latest report."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from relabel.evaluation import evaluate, latest_report, write_report
from relabel.evaluation.report import default_report_dir, escape_md
from tests import evaluation_workspace as ws
from tests.evaluation_workspace import TENCH

PNG = b"\x89PNG\r\n\x1a\n"
EVIL_RUN = "<img src=x onerror=alert(1)>|`rm -rf`"
EVIL_MODEL = "$\\frac{1}{0}$ [click](javascript:alert(1)) **bold** & <script>"


@pytest.fixture
def evaluation(sqlite_engine, tmp_path: Path):
    ids = ws.build(sqlite_engine, tmp_path)
    ws.add_run(sqlite_engine, EVIL_RUN, EVIL_MODEL, "ow\n# heading", {"a": ([TENCH], "ok", None)}, ids)
    ws.add_run(sqlite_engine, "m5-again", "ranker", "mc", ws.M5, ids)  # a second protocol for "ranker"
    return evaluate(sqlite_engine, references=["imgt", "team"], n_boot=100)


def markdown_tables(md: str) -> list[list[str]]:
    """The Markdown tables of `md`: runs of consecutive lines starting with a pipe."""
    tables: list[list[str]] = []
    previous = False
    for line in md.splitlines():
        if line.startswith("|"):
            if not previous:
                tables.append([])
            tables[-1].append(line)
        previous = line.startswith("|")
    return tables


def cells(line: str) -> list[str]:
    """The cells of a Markdown table row, splitting on pipes that are not backslash-escaped."""
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


def test_report_files_are_written_with_figures(evaluation, tmp_path: Path) -> None:
    files = write_report(evaluation, tmp_path / "out")

    assert files.markdown.name == "report.md" and files.data.name == "evaluation.json"
    assert {p.name for p in files.figures} == {"accuracy_by_reference.png", "paired.png", "protocols.png",
                                              "reliability.png"}  # fmt: skip
    assert all(p.read_bytes().startswith(PNG) and p.stat().st_size > 5_000 for p in files.figures)
    md = files.markdown.read_text()
    for p in files.figures:
        assert f"]({p.name})" in md
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.endswith(".tmp")]


def test_json_is_self_describing(evaluation, tmp_path: Path) -> None:
    data = json.loads(write_report(evaluation, tmp_path / "out").data.read_text())

    assert data["kind"] == "scores" and data["tool"] == "relabel" and data["tool_version"]
    assert data["dataset"] == "five" and data["id"] == evaluation.id
    assert [r["name"] for r in data["references"]] == ["imgt", "team"]
    assert all(len(r["content_hash"]) == 64 for r in data["references"])
    assert {"top1", "top5"} <= set(data["definitions"])
    assert {"capability", "consistency", "robustness", "efficiency"} <= set(data["reliability"]["definitions"])
    assert data["ranking"]["reference_a"] == "imgt" and data["ranking"]["reference_b"] == "team"
    assert data["reliability"]["weights"] == {"P": 1.0, "CDC": 1.0, "RR": 1.0, "E": 1.0}


def test_untrusted_names_are_escaped_in_markdown(evaluation, tmp_path: Path) -> None:
    md = write_report(evaluation, tmp_path / "out").markdown.read_text()

    assert "<img" not in md and "<script" not in md
    assert not re.search(r"(?<!\\)\]\(javascript:", md)  # no live link: the bracket is escaped
    assert "&lt;img src=x onerror=alert(1)&gt;\\|\\`rm -rf\\`" in md
    assert "\\[click\\](javascript:alert(1)) \\*\\*bold\\*\\* &amp; &lt;script&gt;" in md
    assert "ow # heading" in md  # newlines cannot start a Markdown block
    tables = markdown_tables(md)
    assert any("onerror" in line for table in tables for line in table)
    for table in tables:  # every row of every table keeps its header's columns
        assert {len(cells(line)) for line in table} == {len(cells(table[0]))}, table[0]


def test_escape_md() -> None:
    assert escape_md("a|b`c<d>e&f[g]h*i_j\\k\nl") == "a\\|b\\`c&lt;d&gt;e&amp;f\\[g\\]h\\*i\\_j\\\\k l"


def test_latest_report_is_the_newest_complete_one(evaluation, tmp_path: Path) -> None:
    workspace = tmp_path / "wsdir"
    assert latest_report(workspace) is None
    first = write_report(evaluation, default_report_dir(workspace)).markdown
    second = write_report(evaluation, default_report_dir(workspace)).markdown
    assert first.parent != second.parent  # the same second gets a suffixed folder
    os.utime(first, (1, 1))
    assert latest_report(workspace) == second
    (workspace / "reports" / "half-written").mkdir()  # a folder without report.md is not a report
    assert latest_report(workspace) == second
