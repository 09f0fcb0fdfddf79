"""Each paired difference taken apart on the five-image workspace (every count by hand), the per-class shift, the
row whose baseline is 0 % by construction, and the report sentences a reviewer struck."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from db import create_db_engine, init_db
from relabel.evaluation import evaluate, write_report
from relabel.evaluation.citations import cited
from relabel.evaluation.report import scores_markdown
from relabel.evaluation.text import paired_table, render_evaluation
from relabel.sources.labels import import_source
from tests import evaluation_workspace as ws
from tests.relabel.evaluation.test_label_uncertainty_report import add_ds_snapshot
from tests.relabel.evaluation.test_label_uncertainty_report import evaluate as evaluate_cli
from tests.relabel.evaluation.test_report import cells, markdown_tables

# "picked" labels only a and d, the images where m5 is wrong under ImGT (as cleanlab's candidate errors are where
# its own prediction is): m5's ImGT top-1 there is 0 % by construction; m1 is right on a, so its row is no such row.
PICKED = "image,labels\nn01440764_a.jpg,goldfish\nn02123045_d.jpg,tiger cat\n"


@pytest.fixture
def evaluation(sqlite_engine, tmp_path: Path):
    ws.build(sqlite_engine, tmp_path)
    (tmp_path / "picked.csv").write_text(PICKED)
    import_source(sqlite_engine, tmp_path / "picked.csv", fmt="csv", name="picked")
    return evaluate(sqlite_engine, references=["imgt", "team", "picked"], n_boot=200, store=False)


def change(ev, run: str, reference: str):
    return next(c for c in ev.label_changes if (c.run, c.reference) == (run, reference))


class TestParts:
    def test_hand_counted_parts_sum_to_the_paired_difference(self, evaluation) -> None:
        # m5 on a, b, d, e: a (goldfish in {tench, goldfish}) and d (tiger cat in {tabby, tiger cat}) right only
        # under team, their ImGT label in the set: leniency; b and e right only under ImGT (tench, tabby dropped)
        m5 = change(evaluation, "m5", "team").parts
        assert (m5.n_common, m5.n_leniency, m5.n_a_wrong, m5.n_dropped) == (4, 2, 0, 2)
        # m1: e (tiger cat) right only under team, whose set lacks ImGT's tabby: ImGT wrong
        m1 = change(evaluation, "m1", "team").parts
        assert (m1.n_common, m1.n_leniency, m1.n_a_wrong, m1.n_dropped) == (4, 0, 1, 0)
        for c in evaluation.label_changes:
            paired = evaluation.score(c.run, c.reference).paired
            assert c.parts.difference == pytest.approx(paired.difference, abs=0)
            assert c.parts.n_leniency + c.parts.n_a_wrong - c.parts.n_dropped == paired.n_only_b - paired.n_only_a
        assert m1.a_wrong_ci is not None and m1.a_wrong_ci[0] <= 0.25 <= m1.a_wrong_ci[1]

    def test_per_class_shift_by_hand(self, evaluation) -> None:
        # m1 on tabby (d, e): ImGT 0 of 2, team 1 of 2; on tench (a, b): 1 of 2 under both: no shift
        m1 = change(evaluation, "m1", "team")
        assert [(r.name, r.n_images, r.accuracy_a, r.accuracy_b) for r in m1.gains] == [("tabby", 2, 0.0, 0.5)]
        assert m1.losses == () and m1.n_classes == 2
        assert m1.gains[0].ci_low is not None and m1.gains[0].ci_low < 0.5 < m1.gains[0].ci_high
        assert change(evaluation, "m5", "team").gains == ()  # each class: one right under each reference


class TestByConstruction:
    def test_a_zero_baseline_on_a_chosen_subset_is_flagged_not_shown_as_a_gain(self, evaluation) -> None:
        assert change(evaluation, "m5", "picked").baseline_by_construction
        assert not change(evaluation, "m1", "picked").baseline_by_construction
        assert not change(evaluation, "m5", "team").baseline_by_construction
        header, rows = paired_table(evaluation)  # type: ignore[misc]
        row = next(dict(zip(header, r)) for r in rows if r[:2] == ["m5", "picked"])
        assert row["Δ points"] == "— (imgt 0.00 % by construction)" and row["95 % CI (paired)"] == "—"
        other = next(dict(zip(header, r)) for r in rows if r[:2] == ["m1", "picked"])
        assert other["Δ points"].startswith(("+", "-", "0"))
        assert change(evaluation, "m5", "picked").gains == ()  # no per-class table for such a row

    def test_the_report_and_json_carry_the_flag(self, evaluation, tmp_path: Path) -> None:
        files = write_report(evaluation, tmp_path / "out")
        md = files.markdown.read_text()
        data = json.loads(files.data.read_text())

        flagged = [c for c in data["label_changes"] if c["baseline_by_construction"]]
        assert [(c["run"], c["reference"]) for c in flagged] == [("m5", "picked")]
        assert "label_changes" in data["definitions"]
        parts = next(t for t in markdown_tables(md) if "leniency Δ" in t[0])
        m5 = next(cells(line) for line in parts if cells(line)[:2] == [" m5 ", " picked "])
        assert "by construction: no gain" in m5[-1]
        assert "## Where each paired difference comes from" in md
        assert "### Per class of the original label: m1 under team" in md and "tabby (281)" in md


STRUCK = (
    "the classes its raters accepted",  # ReaL: 25,111 images were never rated
    "The images are where cleanlab",  # MTurk: 5,440 of the 13,634 images where the prediction differs
    "re-running the command asks again",
    "the next run of the same command asks again",
    "label noise is removed",
)


def test_none_of_the_struck_sentences_is_in_a_report(evaluation) -> None:
    # the sentences about a source's format appear only for that format: render the references as ReaL and MTurk
    refs = evaluation.references
    formats = [dataclasses.replace(refs[1], source_format="real"), dataclasses.replace(refs[2], source_format="mturk")]
    as_published = dataclasses.replace(evaluation, references=[refs[0], *formats])
    md = scores_markdown(as_published, set())
    text = render_evaluation(evaluation)

    for phrase in STRUCK:
        assert phrase not in md and phrase not in text
    assert "was never rated and keeps its original label" in md and "13,634" in md
    assert "each paired difference taken apart" in text and "(imgt 0.00 % by construction: no gain)" in text


def test_the_report_cites_what_it_names(evaluation) -> None:
    md = scores_markdown(evaluation, set())
    references = md.split("## Works cited")[1]
    assert "Joshi, H." in references and "arXiv:2507.01042" in references  # the report names ARGUS
    assert "ARGUS: Joshi et al. (2025)" in md
    assert "Beyer, L." in references  # the ReaL rule
    assert cited("nothing named here") == []


def test_uncertain_is_counted_one_way(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    add_ds_snapshot(engine, ws.build(engine, tmp_path))  # b is U; a and e are A with an unsettled second class
    engine.dispose()
    _, report, _ = evaluate_cli(folder, capsys, "--reference", "imgt", "--reference", "ds-1", "--boot", "50")

    # a and e hold an unsettled class posterior beside their accepted label but are category A; only b is U
    table = next(t for t in markdown_tables(report) if "uncertain images" in t[0])
    header = [c.strip() for c in cells(table[0])]
    assert cells(table[2])[header.index("uncertain images")].strip() == "1"
    per_category = next(t for t in markdown_tables(report) if cells(t[0])[:2] == [" run ", " reference "]
                        and " U " in cells(t[0]))  # fmt: skip
    assert "(1)" in cells(per_category[2])[[c.strip() for c in cells(per_category[0])].index("U")]
    assert "the one meaning of uncertain in this report" in report
