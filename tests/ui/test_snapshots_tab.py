"""The studio's Snapshots tab without a server: the snapshot list, the pickers, exports and the diff of two
snapshots; leads only, untrusted text only in text components."""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gradio as gr
import pytest
from sqlmodel import Session

from db.enums import Verdict
from relabel.common.errors import ConflictError, InputError, NotFoundError
from relabel.common.workspace import get_dataset, image_index
from relabel.decisions.annotations import record_annotation
from relabel.exports.formats import EXPORT_FORMATS
from relabel.review.studio import Studio
from relabel.snapshots.freeze import create_snapshot, list_snapshots
from tests.relabel.snapshots.test_snapshot_best_estimate import add_absent_classes, import_trusted
from tests.relabel.snapshots.test_snapshots_consensus import ws  # noqa: F401
from tests.studio_workspace import build_workspace
from ui import snapshots_tab
from ui.events import guarded

XSS = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
LEAD = SimpleNamespace(username="lena")  # what `guarded` reads from a gr.Request
EXPECTED_CHANGES = [
    ["n01440764_tench.jpg", "tench", "tench | goldfish", "U", "M"],
    ["n02123045_tabby.jpg", "tabby", "tabby", "U", "A"],  # same class, now decided: a change of category
    ["n03773504_missile.jpg", "missile", "projectile", "U", "B"],
    ["n07920052_espresso.jpg", "espresso", snapshots_tab.NO_CLASS, "U", "Z"],
]


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    return Studio(build_workspace(tmp_path, db_url), cache_dir=tmp_path / "cache", overlap=1)


def decide(studio: Studio, user: str, file: str, verdict: Verdict, classes: list[int] = []) -> None:  # noqa: B006
    with Session(studio.engine) as s:
        image_id = image_index(s, get_dataset(s, studio.dataset_name)).lookup(file)
    assert image_id is not None
    record_annotation(studio.engine, image_id=image_id, user=user, verdict=verdict, classes=classes)


@pytest.fixture
def two_rounds(studio: Studio) -> Studio:
    """r1 before any decision (every image U, keeping its ImGT label); r2 after alice decided four images."""
    create_snapshot(studio.engine, "r1", created_by="lena")
    decide(studio, "alice", "n02123045_tabby.jpg", Verdict.labels, [281])  # A
    decide(studio, "alice", "n01440764_tench.jpg", Verdict.labels, [0, 1])  # M
    decide(studio, "alice", "n03773504_missile.jpg", Verdict.labels, [744])  # B: projectile
    decide(studio, "alice", "n07920052_espresso.jpg", Verdict.none_fit)  # Z
    create_snapshot(studio.engine, "r2", created_by="lena")
    return studio


def build_tab(studio: Studio, exports: Path) -> tuple[gr.Blocks, gr.Tab]:
    with gr.Blocks() as app, gr.Tab("Snapshots") as tab:
        snapshots_tab.build(studio, guarded, exports, tab)
    return app, tab


def api(app: gr.Blocks, name: str) -> Any:
    """The function `app` exposes as `name`."""
    [fn] = [f for f in app.fns.values() if f.api_name == name]
    return fn


def wired(app: gr.Blocks, match: Callable[[Any], bool]) -> Any:
    """The one function of `app` that `match` picks."""
    [fn] = [f for f in app.fns.values() if match(f)]
    return fn


class TestList:
    def test_the_list_is_newest_first_with_counts_and_hash(self, two_rounds: Studio) -> None:
        rows = snapshots_tab.snapshot_table(two_rounds, "lena")
        assert [r[0] for r in rows] == ["r2", "r1"]
        name, created, by, n_images, counts, digest = rows[0]
        assert (by, n_images, counts) == ("lena", 6, "A 1 · B 1 · M 1 · Z 1 · U 2")
        assert rows[1][4] == "U 6" and len(digest) == snapshots_tab.HASH_PREFIX and created[:2] == "20"

    def test_pickers_default_to_the_newest_and_keep_a_pick_that_still_exists(self, two_rounds: Studio) -> None:
        rows, export, before, after = snapshots_tab.list_values(two_rounds, "lena", None, None, None)
        assert len(rows) == 2 and export.choices == [("r2", "r2"), ("r1", "r1")]
        assert (export.value, before.value, after.value) == ("r2", "r1", "r2")
        _, export, before, after = snapshots_tab.list_values(two_rounds, "lena", "r1", "r2", "gone")
        assert (export.value, before.value, after.value) == ("r1", "r2", "r2")

    def test_an_empty_workspace_lists_nothing(self, studio: Studio) -> None:
        rows, export, before, after = snapshots_tab.list_values(studio, "lena", None, None, None)
        assert rows == [] and export.choices == [] and (export.value, before.value, after.value) == (None,) * 3


class TestDiff:
    def test_the_diff_counts_transitions_and_lists_changed_images_by_class_name(self, two_rounds: Studio) -> None:
        view = snapshots_tab.diff_view(two_rounds, "lena", "r1", "r2")
        assert view.summary == "r1 -> r2: 4 changed, 2 unchanged"
        assert sorted(view.transitions) == [["U->A", 1], ["U->B", 1], ["U->M", 1], ["U->Z", 1]]
        assert view.changed == EXPECTED_CHANGES and view.changed_label == "changed images: 4"

    def test_the_table_is_limited_and_says_how_many_changed(self, two_rounds: Studio) -> None:
        view = snapshots_tab.diff_view(two_rounds, "lena", "r1", "r2", limit=2)
        assert view.changed == EXPECTED_CHANGES[:2] and view.n_changed == 4
        assert view.changed_label == "changed images: 4, the first 2 shown"
        summary, transitions, changed = snapshots_tab.diff_values(two_rounds, "lena", "r2", "r2")
        assert summary == "r2 -> r2: 0 changed, 6 unchanged" and transitions == [] and changed.value["data"] == []

    def test_missing_and_unknown_names_are_refused(self, two_rounds: Studio) -> None:
        with pytest.raises(InputError, match="pick two snapshots"):
            snapshots_tab.diff_view(two_rounds, "lena", "r1", " ")
        with pytest.raises(NotFoundError, match="unknown snapshot of dataset 'photos' 'r3'; known: r1, r2"):
            snapshots_tab.diff_view(two_rounds, "lena", "r1", "r3")


class TestSafety:
    def test_an_annotator_is_refused(self, two_rounds: Studio) -> None:
        for call in (
            lambda: snapshots_tab.snapshot_table(two_rounds, "alice"),
            lambda: snapshots_tab.list_values(two_rounds, "alice", None, None, None),
            lambda: snapshots_tab.diff_view(two_rounds, "bob", "r1", "r2"),
        ):
            with pytest.raises(ConflictError, match="is an annotator"):
                call()

    def test_html_in_names_is_passed_on_as_plain_text(self, two_rounds: Studio) -> None:
        create_snapshot(two_rounds.engine, XSS, created_by=XSS)
        [row, *_] = snapshots_tab.snapshot_table(two_rounds, "lena")
        assert row[:3] == [XSS, row[1], XSS]  # verbatim, not escaped or dropped
        assert snapshots_tab.diff_view(two_rounds, "lena", "r2", XSS).summary == f"r2 -> {XSS}: 0 changed, 6 unchanged"

    def test_every_output_of_the_tab_is_a_text_component(self, studio: Studio, tmp_path: Path) -> None:
        app, _ = build_tab(studio, tmp_path / "exports")
        outputs = {o for f in app.fns.values() for o in f.outputs}
        text = (gr.Dataframe, gr.Textbox, gr.Dropdown, gr.File, gr.Number)  # a number holds no markup
        assert outputs and all(isinstance(o, text) for o in outputs)
        assert all(c.datatype == "str" for c in outputs if isinstance(c, gr.Dataframe))


class TestTab:
    def test_opening_the_tab_lists_the_snapshots_and_creating_one_refreshes_the_list(
        self, two_rounds: Studio, tmp_path: Path
    ) -> None:
        app, tab = build_tab(two_rounds, tmp_path / "exports")
        on_open = wired(app, lambda f: (tab._id, "select") in f.targets and len(f.outputs) == 4)  # list, pickers
        assert on_open.api_visibility == "private"
        rows, export, *_ = on_open.fn(None, None, None, LEAD)
        assert [r[0] for r in rows] == ["r2", "r1"] and export.value == "r2"
        create = api(app, "create_snapshot")
        after_create = wired(app, lambda f: f.trigger_after == create._id)
        assert after_create.trigger_only_on_success and after_create.outputs == on_open.outputs
        assert "snapshot 'r3': 6 images" in create.fn("r3", "keep", 1, "unanimous", 0.9, "off", LEAD)
        rows, export, before, after = after_create.fn(LEAD)  # the pickers follow the new snapshot
        assert [r[0] for r in rows] == ["r3", "r2", "r1"]
        assert (export.value, before.value, after.value) == ("r3", "r2", "r3")
        rows, export, before, after = on_open.fn("r1", "r1", "r2", LEAD)  # opening the tab keeps a standing pick
        assert (export.value, before.value, after.value) == ("r1", "r1", "r2")

    def test_the_minimum_of_agreeing_votes_starts_at_the_studios_overlap(self, db_url: str, tmp_path: Path) -> None:
        engine = build_workspace(tmp_path, db_url)
        for overlap in (1, 2):
            studio = Studio(engine, cache_dir=tmp_path / "cache", overlap=overlap)
            app, _ = build_tab(studio, tmp_path / "exports")
            [min_votes] = [c for c in api(app, "create_snapshot").inputs if c.label == "minimum agreeing votes"]
            assert min_votes.value == overlap

    def test_export_serves_a_copy_in_the_chosen_format(self, two_rounds: Studio, tmp_path: Path) -> None:
        app, _ = build_tab(two_rounds, tmp_path / "exports")
        [fmt] = [c for c in api(app, "export_snapshot").inputs if isinstance(c, gr.Radio)]
        one_file = [f for f, kind in EXPORT_FORMATS.items() if kind.folder is None]  # hf writes a folder
        assert [v for _, v in fmt.choices] == ["jsonl", *(f for f in one_file if f != "jsonl")] and fmt.value == "jsonl"
        assert "hf" in EXPORT_FORMATS and "hf" not in one_file
        served = Path(api(app, "export_snapshot").fn("r2", "csv", LEAD))
        [written] = (tmp_path / "exports").glob("r2-*.csv")  # not .csv.csv
        assert served != written and served.read_bytes() == written.read_bytes()
        assert len(list(csv.reader(served.open()))) == 7  # a header and six images
        with pytest.raises(gr.Error, match="is an annotator"):
            api(app, "export_snapshot").fn("r2", "csv", SimpleNamespace(username="alice"))

    def test_the_compare_button_fills_the_diff(self, two_rounds: Studio, tmp_path: Path) -> None:
        app, _ = build_tab(two_rounds, tmp_path / "exports")
        summary, transitions, changed = api(app, "diff_snapshots").fn("r1", "r2", LEAD)
        assert summary.startswith("r1 -> r2: 4 changed") and len(transitions) == 4
        assert changed.value["data"] == EXPECTED_CHANGES and changed.label == "changed images: 4"


class TestCalibration:
    """A vote-based snapshot calibrated against an imported label source or the adjudications, from the tab."""

    @pytest.fixture
    def voted(self, ws, vocab, tmp_path: Path) -> SimpleNamespace:  # noqa: F811
        engine, ids = ws
        add_absent_classes(engine, ids)
        import_trusted(engine, tmp_path)
        return SimpleNamespace(
            engine=engine, dataset_name="d", dataset_id=1, vocab=vocab, overlap=1, require_lead=lambda user: None
        )

    def test_the_picker_offers_imported_sources_and_the_adjudications_not_the_original_labels(self, voted) -> None:
        assert snapshots_tab.calibration_choices(voted) == ["off", "trusted", "adjudications"]
        assert snapshots_tab.threshold_default("trusted") == 0.75 and snapshots_tab.threshold_default("off") == 0.9

    def test_the_result_says_what_the_snapshot_was_calibrated_on_as_the_command_does(self, voted) -> None:
        message = snapshots_tab.create_message(voted, "lena", "cal", "keep", 1, "ds", None, "trusted")
        assert message.startswith("snapshot 'cal': 7 images")
        assert message.endswith(
            "; calibrated against trusted (isotonic, original and other classes apart) on 35 other and 5 original "
            "pairs of 5 images"
        )
        [snap] = list_snapshots(voted.engine)
        settings = snap.consensus
        assert (settings["threshold"], settings["keep_original"], settings["calibration"]["against"]) == (
            0.75, None, "trusted"
        )  # fmt: skip
        plain = snapshots_tab.create_message(voted, "lena", "plain", "keep", 1, "ds", 0.9, "off")
        assert "calibrated" not in plain and list_snapshots(voted.engine)[-1].consensus["keep_original"] == 0.5

    def test_a_calibration_needs_a_probabilistic_consensus_and_enough_reference_pairs(self, voted) -> None:
        with pytest.raises(InputError, match="calibration needs a probabilistic consensus .* not 'unanimous'"):
            snapshots_tab.create_message(voted, "lena", "x", "keep", 1, "unanimous", None, "trusted")
        with pytest.raises(InputError, match="--calibrate adjudications: it labels"):
            snapshots_tab.create_message(voted, "lena", "x", "keep", 1, "ds", None, "adjudications")
        assert list_snapshots(voted.engine) == []

    def test_the_tab_wires_the_picker_into_create_and_the_threshold(self, studio: Studio, tmp_path: Path) -> None:
        app, tab = build_tab(studio, tmp_path / "exports")
        [picker] = [c for c in api(app, "create_snapshot").inputs if c.label.startswith("calibrate against")]
        assert picker.value == "off"
        change = wired(app, lambda f: (picker._id, "change") in f.targets)
        assert [o.label for o in change.outputs] == ["posterior threshold"] and change.fn("real") == 0.75
        on_open = [f for f in app.fns.values() if (tab._id, "select") in f.targets]
        [choices] = [f for f in on_open if f.outputs == [picker]]
        assert choices.fn(LEAD).constructor_args["choices"] == ["off", "real", "adjudications"]
