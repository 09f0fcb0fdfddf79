"""Every registry is the single source of its names: a protocol, an export format and a card flag added to their
registries alone appear in the CLI's choices and help and in the studio, an adapter kind's capabilities are read
from its entry, and a consensus rule or a vote aggregation method is offered by the studio (their CLI runs are in
tests/relabel/snapshots/test_snapshots_consensus.py).

Files a developer touches for each of the nine extensions (counted on this code, by what the tests add; the
README's tables are regenerated from the registries by `python scripts/readme_tables.py --write`):

| change                   | files | where                                                                        |
|--------------------------|-------|------------------------------------------------------------------------------|
| a new protocol           | 2     | relabel/suggest/protocols.py (the Protocol subclass: name, summary,          |
|                          |       | generative, needs_reference; its PROTOCOLS entry) and its prompt file in     |
|                          |       | relabel/resources/prompts/ (a scoring protocol needs none: 1)                |
| a new export format      | 1     | relabel/exports/formats.py (a renderer returning str, or bytes for a binary  |
|                          |       | format, and its ExportFormat entry: suffix, summary, binary)                 |
| a new review-card flag   | 1     | relabel/decisions/card_flags.py (a CardFlag: stored name, key, label)        |
| a new model-adapter kind | 2     | its module in relabel/suggest/adapters/ and its AdapterKind entry in         |
|                          |       | relabel/suggest/adapters/__init__.py (ranks top-k, reads text, remote)       |
| a new ingest layout      | 1     | relabel/ingest/layouts.py (the Layout function and its LAYOUTS entry)        |
| a new consensus rule     | 1     | relabel/decisions/rules.py (a ConsensusRule: name, description, agree)       |
| a new aggregation method | 1     | relabel/votes/aggregation.py (its fit and its Method entry: name, summary,   |
|                          |       | probabilistic)                                                               |
| a new import format      | 1     | the import's registry (SOURCE_FORMATS, PREDICTION_FORMATS, VOTE_FORMATS,     |
|                          |       | DECISION_FORMATS): a reader and its ImportFormat entry                       |
|                          |       | (tests/relabel/common/test_import_formats.py)                                |
| a new reliability part   | 1     | evaluator/reliability_parts.py (register_part: name, symbol, help, interval, |
|                          |       | value; tests/relabel/evaluation/test_reliability_parts.py)                   |
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click
import gradio as gr
import pytest
from click.testing import CliRunner
from sqlalchemy import select
from sqlmodel import Session

from db.models import Annotation, Snapshot
from relabel.cli import cli
from relabel.common.errors import InputError, NotFoundError, RelabelError
from relabel.common.vocabulary import Vocabulary
from relabel.decisions.card_flags import CARD_FLAGS, CardFlag, register_flag
from relabel.decisions.rules import DEFAULT_RULE, RULES, ConsensusRule, DecisionKey, Outcome, Vote
from relabel.exports.formats import EXPORT_FORMATS, ExportFormat, export_snapshot, render_snapshot
from relabel.ingest.layouts import LAYOUTS
from relabel.review.studio import Studio
from relabel.snapshots.freeze import DEFAULT_UNDECIDED, UNDECIDED_POLICIES, create_snapshot
from relabel.snapshots.reader import SnapshotRow
from relabel.suggest import protocols
from relabel.suggest.adapters import REGISTRY, AdapterKind, adapter_kind, load_adapter, ranks_classes, reads_text
from relabel.suggest.setup import default_protocol
from relabel.votes.aggregation import METHODS, Method
from relabel.votes.posteriors import consensus_choices
from tests.conftest import REPO
from tests.studio_workspace import build_workspace
from ui import card_api, snapshots_tab
from ui.events import guarded

LEAD = SimpleNamespace(username="lena")  # what `guarded` reads from a gr.Request
MAGIC = b"DUMMY\x00\xff"


class Riddle(protocols.OpenWorld):
    """A dummy generative protocol: asks as OW does, under its own name."""

    name, summary = "riddle", "a dummy question"


def render_dummy(rows: list[SnapshotRow], vocab: Vocabulary) -> bytes:
    """A dummy binary format: a magic number, then one byte per image (its number of classes)."""
    return MAGIC + bytes(len(r.classes) for r in rows)


@pytest.fixture
def dummies(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A protocol, a binary export format and a card flag, registered for one test and removed after it."""
    monkeypatch.setitem(protocols.PROTOCOLS, "riddle", Riddle)
    monkeypatch.setitem(EXPORT_FORMATS, "dummy", ExportFormat(render_dummy, "bin", "a dummy binary", binary=True))
    monkeypatch.setitem(CARD_FLAGS, "blurry", CardFlag("blurry", "b", "blurry photo"))
    yield


@pytest.fixture
def studio(db_url: str, tmp_path: Path) -> Studio:
    studio = Studio(build_workspace(tmp_path, db_url), cache_dir=tmp_path / "cache", overlap=1)
    create_snapshot(studio.engine, "r1", created_by="lena")
    return studio


def option(path: list[str], name: str) -> click.Parameter:
    command: Any = cli
    for part in path:
        command = command.commands[part]
    [found] = [p for p in command.params if p.name == name]
    return found


def help_text(path: list[str]) -> str:
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


class TestProtocols:
    def test_a_registered_protocol_is_a_choice_of_both_commands_with_its_summary(self, dummies: None) -> None:
        for path in (["suggest"], ["evaluate", "robustness"]):
            assert "riddle" in option(path, "protocol").type.choices  # type: ignore[attr-defined]
            assert "riddle: a dummy question" in help_text(path)

    def test_the_cli_accepts_it_and_refuses_an_unknown_one_listing_it(self, dummies: None) -> None:
        result = CliRunner().invoke(cli, ["suggest", "--protocol", "nope"])
        assert result.exit_code == 2 and "'riddle'" in result.output
        assert option(["suggest"], "protocol").type.convert("riddle", None, None) == "riddle"

    def test_its_declared_kind_places_its_runs(self, dummies: None) -> None:
        """Generative and asked without a reference: its runs are suggestions on the cards, never ranked votes."""
        assert "riddle" in protocols.suggestion_protocols() and "riddle" not in protocols.ranked_protocols()
        assert "mc" not in protocols.suggestion_protocols() and "topk" in protocols.ranked_protocols()

    def test_a_scoring_protocol_is_not_offered_for_generative_models(self, monkeypatch: pytest.MonkeyPatch) -> None:
        class Ranks(protocols.TopK):
            name, summary = "ranks", "dummy scores"

        monkeypatch.setitem(protocols.PROTOCOLS, "ranks", Ranks)
        assert "ranks" in option(["suggest"], "protocol").type.choices  # type: ignore[attr-defined]
        assert "ranks" not in option(["evaluate", "robustness"], "protocol").type.choices  # type: ignore[attr-defined]
        assert "ranks" in protocols.ranked_protocols()

    def test_without_registration_the_dummies_are_gone(self) -> None:
        assert "riddle" not in help_text(["suggest"]) and "dummy" not in help_text(["snapshot", "export"])
        assert "blurry" not in CARD_FLAGS


class TestExportFormats:
    def test_a_registered_format_is_a_choice_of_the_cli_and_the_studio(
        self, dummies: None, studio: Studio, tmp_path: Path
    ) -> None:
        assert "dummy: a dummy binary" in help_text(["snapshot", "export"])
        with gr.Blocks() as app, gr.Tab("Snapshots") as tab:
            snapshots_tab.build(studio, guarded, tmp_path / "exports", tab)
        [fn] = [f for f in app.fns.values() if f.api_name == "export_snapshot"]
        [radio] = [c for c in fn.inputs if isinstance(c, gr.Radio)]
        one_file = [f for f, kind in EXPORT_FORMATS.items() if kind.folder is None]  # hf writes a folder
        assert [v for _, v in radio.choices] == ["jsonl", *(f for f in one_file if f != "jsonl")]
        assert list(EXPORT_FORMATS)[-1] == "dummy" and radio.choices[-1][1] == "dummy"
        served = Path(fn.fn("r1", "dummy", LEAD))
        [written] = (tmp_path / "exports").glob("r1-*.dummy.bin")
        assert written.read_bytes() == served.read_bytes() == MAGIC + bytes([1] * 6)

    def test_the_cli_writes_the_binary_format_as_bytes(self, dummies: None, studio: Studio, tmp_path: Path) -> None:
        out = tmp_path / "r1.bin"
        assert export_snapshot(studio.engine, "r1", fmt="dummy", out=out, dataset=studio.dataset_name) == 6
        assert out.read_bytes() == MAGIC + bytes([1] * 6)

    def test_a_renderer_of_the_wrong_kind_is_caught(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(EXPORT_FORMATS, "text-as-binary", ExportFormat(lambda rows, vocab: "", "x", binary=True))
        with pytest.raises(TypeError, match="must render bytes"):
            render_snapshot("text-as-binary", [], Vocabulary("none", []))
        with pytest.raises(NotFoundError, match="known: ") as unknown:
            render_snapshot("nope", [], Vocabulary("none", []))
        assert str(unknown.value).endswith(f"known: {', '.join(sorted(EXPORT_FORMATS))}")


class TestCardFlags:
    def test_a_registered_flag_reaches_the_card_page_and_is_stored(self, dummies: None, studio: Studio) -> None:
        flags = card_api.page_info(studio, "alice")["flags"]
        assert flags[0] == {"name": "drawing", "label": "drawing or render", "key": "d"}
        assert flags[-1] == {"name": "blurry", "label": "blurry photo", "key": "b"}
        assert card_api.parse_flags(["blurry", "drawing"]) == ["blurry", "drawing"]
        card = card_api.next_card(studio, "alice", {})["card"]
        card_api.decide(studio, "alice", {"key": card["key"], "action": "unclear", "flags": ["blurry"]})
        with studio.engine.connect() as conn:
            [stored] = conn.execute(select(Annotation.flags)).scalars().all()
        assert stored == ["blurry"]

    def test_the_page_script_names_no_flag(self) -> None:
        """The card's script builds its flag buttons, keys and help from the boot payload alone."""
        script = (REPO / "ui" / "static" / "card.js").read_text(encoding="utf-8")
        for flag in CARD_FLAGS.values():
            assert f'"{flag.name}"' not in script and flag.label not in script

    def test_a_flag_cannot_take_a_key_in_use(self) -> None:
        with pytest.raises(InputError, match="must be a free lower-case letter"):
            register_flag(CardFlag("dotted", "d", "dotted"))  # D toggles "drawing"
        with pytest.raises(InputError, match="must be a free lower-case letter"):
            register_flag(CardFlag("zoomed", "f", "zoomed"))  # F opens the zoom
        with pytest.raises(InputError, match="already registered"):
            register_flag(CardFlag("drawing", "q", "drawing"))
        assert set(CARD_FLAGS) == {"drawing", "multiple_objects", "duplicate", "inappropriate"}


class TestAdapterKinds:
    def test_a_kind_declares_how_it_is_asked_and_is_named_in_the_help(self, monkeypatch: pytest.MonkeyPatch) -> None:
        scorer = AdapterKind("tests.fakes:Scorer", "scorer:ID", ranks_topk=True, reads_text=False)
        monkeypatch.setitem(REGISTRY, "scorer", scorer)
        monkeypatch.setitem(REGISTRY, "talker", AdapterKind("tests.fakes:Talker", "talker:ID", False, True))
        assert (default_protocol("scorer:x"), default_protocol("talker:y")) == ("topk", "ow")
        assert "scorer:ID, talker:ID" in help_text(["suggest"]) and "talker:ID" in help_text(["evaluate", "robustness"])
        assert adapter_kind("openai:gpt-4o").remote and not adapter_kind("clip:x").remote
        for name, kind in REGISTRY.items():  # what the runtime checks is the entry of the adapter's kind
            adapter = SimpleNamespace(kind=name, name=name)
            assert (ranks_classes(adapter), reads_text(adapter)) == (kind.ranks_topk, kind.reads_text)  # type: ignore[arg-type]

    def test_a_class_that_does_not_do_what_its_kind_declares_is_refused(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(REGISTRY, "chatty", AdapterKind("tests.fakes:ScriptedChatModel", "chatty:ID", True, True))
        with pytest.raises(RelabelError, match="kind 'chatty' declares that it scores classes .* does not"):
            load_adapter("chatty:x")


class FirstSays(ConsensusRule):
    """A dummy consensus rule: the oldest annotator decision stands."""

    name, description = "first-says", "the oldest annotator decision stands"

    def agree(self, votes: Sequence[Vote], min_votes: int) -> tuple[Outcome, DecisionKey | None]:
        return (Outcome.consensus, votes[0][1]) if votes else (Outcome.undecided, None)


class TestConsensusChoices:
    """The studio's Snapshots tab offers what `relabel.votes.posteriors.consensus_choices` and
    `relabel.snapshots.freeze.UNDECIDED_POLICIES` hold, as `relabel snapshot create` does (tests/relabel/
    test_snapshots_consensus.py runs a registered method and rule through the CLI)."""

    def test_a_registered_rule_and_method_are_offered_by_the_studio_and_the_rule_is_stored(
        self, studio: Studio, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(RULES, FirstSays.name, FirstSays())
        monkeypatch.setitem(METHODS, "any-yes", Method("any-yes", "some answer is yes", METHODS["majority"].fit, False))
        with gr.Blocks() as app, gr.Tab("Snapshots") as tab:
            snapshots_tab.build(studio, guarded, tmp_path / "exports", tab)
        [fn] = [f for f in app.fns.values() if f.api_name == "create_snapshot"]
        [consensus] = [c for c in fn.inputs if isinstance(c, gr.Dropdown) and c.label == "consensus"]
        [undecided] = [c for c in fn.inputs if isinstance(c, gr.Radio)]
        offered = [v for _, v in consensus.choices]
        assert offered == list(consensus_choices()) and offered[0] == consensus.value == DEFAULT_RULE
        assert {"first-says", "any-yes", "all-yes"} <= set(offered) and offered.count("unanimous") == 1
        assert [v for _, v in undecided.choices] == list(UNDECIDED_POLICIES) and undecided.value == DEFAULT_UNDECIDED
        assert "snapshot 'r2'" in fn.fn("r2", "keep", 1, "first-says", 0.9, "off", LEAD)
        with Session(studio.engine) as s:
            stored = s.scalars(select(Snapshot.consensus).where(Snapshot.name == "r2")).one()
        assert stored == {"rule": "first-says", "min_votes": 1}


def test_a_registered_ingest_layout_is_named_in_the_help(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(LAYOUTS, "flat-dummy", LAYOUTS["unlabeled"])
    assert "auto, imagenet-val, folders, wnid-prefix, manifest, unlabeled, flat-dummy." in help_text(["ingest"])
