"""The studio's Reports tab called directly, without a server: the newest and older reports with their figures and
files, leads only, untrusted text shown as text, report names checked on the server, the empty workspace."""

from __future__ import annotations

import os
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from sqlmodel import Session

from relabel.common.errors import ConflictError, InputError
from relabel.common.workspace import get_dataset, image_index
from relabel.evaluation import evaluate, latest_report, write_report
from relabel.evaluation.report import ReportFiles, default_report_dir
from relabel.review.studio import Studio
from relabel.sources.bulk import store_run
from tests.studio_workspace import CLASSIFIER, build_workspace
from ui import reports_tab
from ui.context import WorkspaceContext

EVIL_RUN = "<img src=x onerror=alert(1)>"
EVIL_CLASS = "<script>alert(2)</script>"


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    engine = build_workspace(tmp_path, db_url)
    add_run(engine, EVIL_RUN)
    return Studio(engine, cache_dir=tmp_path / "cache")


def context(studio: Studio, tmp_path: Path) -> WorkspaceContext:
    """What the Reports tab sees of `studio`, with reports in tmp_path/reports (where `relabel evaluate` writes)."""
    return WorkspaceContext.of(studio, tmp_path / "reports")


def add_run(engine, name: str) -> None:  # type: ignore[no-untyped-def]
    """A second top-k run of the workspace's classifier, named `name`: two protocols of one model, so the report
    draws the protocol figure too."""
    with Session(engine) as s:
        ds = get_dataset(s, "photos")
        ids = image_index(s, ds).ids_by_path
        rows = [
            {"image_id": ids[file], "classes": [c for c, _ in top], "scores": [p for _, p in top]}
            for file, top in CLASSIFIER.items()
        ]
        store_run(s, dataset_id=ds.id, name=name, model="efficientnet-lite0", protocol="mc", predictions=rows)  # type: ignore[arg-type]
        s.commit()


def write_evaluation_report(studio: Studio, workspace: Path, references: list[str]) -> ReportFiles:
    """What `relabel evaluate` does: score the stored runs, store the evaluation, write its report."""
    ev = evaluate(studio.engine, references=references, n_boot=0)
    return write_report(ev, default_report_dir(workspace))


def rendered_tags(markdown: str) -> list[str]:
    """The HTML elements a Markdown renderer that lets raw HTML through (the worst case) makes of `markdown`."""
    tags: list[str] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            tags.append(tag)

    Collect().feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    return tags


def rendered_text(markdown: str) -> str:
    chunks: list[str] = []

    class Collect(HTMLParser):
        def handle_data(self, data: str) -> None:
            chunks.append(data)

    Collect().feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown))
    return "".join(chunks)


class TestReports:
    def test_a_lead_sees_the_newest_report_with_its_figures_and_files(self, studio: Studio, tmp_path: Path) -> None:
        write_evaluation_report(studio, tmp_path, ["imgt"])
        files = write_evaluation_report(studio, tmp_path, ["imgt", "real"])
        view = reports_tab.report_view(context(studio, tmp_path), "lena")
        assert latest_report(tmp_path) == files.markdown
        assert view.name == files.folder.name and [v for _, v in view.choices][0] == view.name
        assert "(evaluation)" in view.summary and "1 of 2" in view.summary
        assert "# Evaluation of dataset photos" in view.markdown and "## Scores" in view.markdown
        assert "efficientnet-lite0@topk" in rendered_text(view.markdown)
        # figures come through the gallery, in the report's order; no image link is left for the browser to fetch
        assert [Path(p) for p, _ in view.figures] == files.figures
        assert {p.name for p in files.figures} >= {"accuracy_by_reference.png", "protocols.png"}
        assert "![" not in view.markdown and "img" not in rendered_tags(view.markdown)
        assert "Figure: Top-1 per run and reference" in view.markdown
        assert [Path(f) for f in view.files] == [files.markdown, files.data]

    def test_tab_values_fill_every_output(self, studio: Studio, tmp_path: Path) -> None:
        files = write_evaluation_report(studio, tmp_path, ["imgt"])
        chooser, summary, downloads, figures, body, evaluations, moved = reports_tab.tab_values(
            context(studio, tmp_path), "lena"
        )
        assert chooser.value == files.folder.name and chooser.choices == [
            (f"{files.folder.name} · evaluation", files.folder.name)
        ]
        assert files.folder.name in summary and "# Evaluation" in body
        assert downloads == [str(files.markdown), str(files.data)] and len(figures) == len(files.figures)
        assert len(evaluations["data"]) == 1 and moved["headers"][0] == "run"

    def test_choosing_an_older_report_shows_it(self, studio: Studio, tmp_path: Path) -> None:
        older = write_evaluation_report(studio, tmp_path, ["imgt"])
        newer = write_evaluation_report(studio, tmp_path, ["imgt", "real"])
        os.utime(older.markdown, (1_000_000_000, 1_000_000_000))  # whatever the clock did between the two writes
        reports = WorkspaceContext.of(studio, tmp_path / "reports")
        assert [name for _, name in reports_tab.report_view(reports, "lena").choices] == [
            newer.folder.name,
            older.folder.name,
        ]
        view = reports_tab.report_view(reports, "lena", older.folder.name)
        assert view.name == older.folder.name and "2 of 2" in view.summary
        assert "evaluation #1" in view.markdown and "## Ranking shift" not in view.markdown
        assert "evaluation #2" in reports_tab.report_view(reports, "lena", newer.folder.name).markdown

    def test_the_stored_history_shows_how_each_run_moved(self, studio: Studio, tmp_path: Path) -> None:
        write_evaluation_report(studio, tmp_path, ["imgt"])
        write_evaluation_report(studio, tmp_path, ["imgt", "real"])
        evaluations, moved = reports_tab.history_tables(context(studio, tmp_path), "lena")
        assert [row[:2] for row in evaluations["data"]] == [["1", "scores"], ["2", "scores"]]
        assert moved["headers"][0] == "run" and len(moved["headers"]) == 3  # imgt and real, one version each
        assert {row[0] for row in moved["data"]} == {"efficientnet-lite0@topk", EVIL_RUN}

    def test_an_empty_workspace_says_how_to_create_a_report(self, studio: Studio, tmp_path: Path) -> None:
        view = reports_tab.report_view(context(studio, tmp_path), "lena")  # the folder does not exist yet
        assert view.name is None and view.choices == [] and view.figures == [] and view.files == []
        assert "No report yet" in view.summary and "`relabel evaluate`" in view.summary
        assert "<" not in view.summary
        evaluations, moved = reports_tab.history_tables(context(studio, tmp_path), "lena")
        assert evaluations["data"] == [] and moved["data"] == []


class TestSafety:
    def test_an_annotator_is_refused(self, studio: Studio, tmp_path: Path) -> None:
        write_evaluation_report(studio, tmp_path, ["imgt"])
        with pytest.raises(ConflictError, match="for leads"):
            reports_tab.report_view(context(studio, tmp_path), "alice")
        with pytest.raises(ConflictError, match="for leads"):
            reports_tab.history_tables(context(studio, tmp_path), "bob")

    def test_html_in_a_run_name_is_shown_as_text(self, studio: Studio, tmp_path: Path) -> None:
        write_evaluation_report(studio, tmp_path, ["imgt"])
        view = reports_tab.report_view(context(studio, tmp_path), "lena")
        assert "<" not in view.markdown and "<" not in view.summary
        assert not {"img", "script"} & set(rendered_tags(view.markdown))
        assert EVIL_RUN in rendered_text(view.markdown)  # readable, as characters

    def test_html_written_into_a_report_by_hand_stays_text(self, studio: Studio, tmp_path: Path) -> None:
        """The tab does not trust the report writer's escaping: raw HTML, outside links and image links that leave
        the folder are all inert."""
        folder = tmp_path / "reports" / "by-hand"
        folder.mkdir(parents=True)
        (tmp_path / "secret.png").write_bytes(b"\x89PNG\r\n\x1a\n")
        (folder / "leak.png").symlink_to(tmp_path / "secret.png")
        (folder / "report.md").write_text(
            f"# {EVIL_RUN}\n\n| run |\n|---|\n| {EVIL_CLASS} |\n\n<div onclick=alert(3)>x</div>\n\n"
            "![up](../../secret.png)\n\n![remote](https://example.com/p.png)\n\n![linked](leak.png)\n\n"
            "<https://example.com> <!-- comment -->\n"
        )
        view = reports_tab.report_view(context(studio, tmp_path), "lena")
        assert view.name == "by-hand" and view.figures == [] and view.files == [str(folder / "report.md")]
        assert "<" not in view.markdown and "(report)" in view.summary
        assert not {"img", "script", "div", "a"} & set(rendered_tags(view.markdown))
        assert EVIL_CLASS in rendered_text(view.markdown) and view.markdown.count("Figure not shown") == 3

    @pytest.mark.parametrize("choice", ["..", "../reports", "../../etc/passwd", "/etc", ".", "a/../..", "missing"])
    def test_a_report_name_that_is_not_a_report_folder_is_refused(
        self, studio: Studio, tmp_path: Path, choice: str
    ) -> None:
        files = write_evaluation_report(studio, tmp_path, ["imgt"])
        with pytest.raises(InputError, match="unknown report"):
            reports_tab.report_view(context(studio, tmp_path), "lena", choice)
        with pytest.raises(InputError, match="unknown report"):
            reports_tab.report_view(context(studio, tmp_path), "lena", f"{files.folder.name}/../../{choice}")

    def test_a_linked_report_folder_outside_the_reports_folder_is_not_offered(
        self, studio: Studio, tmp_path: Path
    ) -> None:
        outside = tmp_path / "elsewhere"
        outside.mkdir()
        (outside / "report.md").write_text("# outside\n")
        (tmp_path / "reports").mkdir()
        (tmp_path / "reports" / "linked").symlink_to(outside, target_is_directory=True)
        view = reports_tab.report_view(context(studio, tmp_path), "lena")
        assert view.name is None and view.choices == []
        with pytest.raises(InputError, match="unknown report"):
            reports_tab.report_view(context(studio, tmp_path), "lena", "linked")
