"""The README's registry tables are generated from the registries (`relabel.cli.doc_tables`): they are current, an
entry added to a registry shows up in its table (and leaves the README stale until rewritten), and
`scripts/readme_tables.py` rewrites and checks them."""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from evaluator.reliability_parts import RELIABILITY_PARTS
from relabel.cli.doc_tables import TABLES, render_readme, stale_tables
from relabel.common.errors import InputError
from relabel.common.import_formats import ImportFormat
from relabel.decisions.card_flags import CARD_FLAGS
from relabel.exports.formats import EXPORT_FORMATS
from relabel.ingest.layouts import LAYOUTS
from relabel.interop.decisions import DECISION_FORMATS
from relabel.suggest.adapters import REGISTRY
from relabel.suggest.protocols import PROTOCOLS
from relabel.votes.aggregation import METHODS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ADDED = "added by this test"


def first(registry: dict[str, Any]) -> Any:
    return next(iter(registry.values()))


def dummy_layout(*args: Any) -> Any:
    """A layout added by this test."""
    raise AssertionError("never run")


# table -> (its registry, the new entry's name, the entry, the text the table must show for it)
NEW_ENTRIES: dict[str, Callable[[], tuple[dict[str, Any], str, Any, str]]] = {
    "protocols": lambda: (
        PROTOCOLS,
        "dummy",
        type("Dummy", (first(PROTOCOLS),), {"name": "dummy", "summary": ADDED}),
        "`dummy`",
    ),
    "model-kinds": lambda: (
        REGISTRY,
        "dummy",
        dataclasses.replace(first(REGISTRY), example="dummy:ID", summary=ADDED),
        "`dummy:ID`",
    ),
    "export-formats": lambda: (
        EXPORT_FORMATS,
        "dummy",
        dataclasses.replace(first(EXPORT_FORMATS), summary=ADDED),
        "`dummy`",
    ),
    "card-flags": lambda: (
        CARD_FLAGS,
        "dummy_flag",
        dataclasses.replace(first(CARD_FLAGS), name="dummy_flag", key="q", label=ADDED),
        "`Q`",
    ),
    "ingest-layouts": lambda: (LAYOUTS, "dummy", dummy_layout, "`dummy`"),
    "import-formats": lambda: (DECISION_FORMATS, "dummy", ImportFormat(lambda path: [], ADDED), "`dummy`"),
    "aggregation-methods": lambda: (
        METHODS,
        "dummy",
        dataclasses.replace(first(METHODS), name="dummy", summary=ADDED),
        "`dummy`",
    ),
    "reliability-parts": lambda: (
        RELIABILITY_PARTS,
        "dummy",
        dataclasses.replace(first(RELIABILITY_PARTS), name="dummy", symbol="DUM", help=ADDED),
        "`DUM`",
    ),
}


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("readme_tables", ROOT / "scripts" / "readme_tables.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_holds_every_table_and_each_is_current() -> None:
    assert stale_tables(README.read_text(encoding="utf-8")) == []


def test_every_table_is_tested_with_a_new_entry() -> None:
    assert set(NEW_ENTRIES) == set(TABLES)


@pytest.mark.parametrize("table", sorted(NEW_ENTRIES))
def test_an_entry_added_to_a_registry_is_rendered_and_makes_the_readme_stale(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, name, entry, shown = NEW_ENTRIES[table]()
    readme = README.read_text(encoding="utf-8")
    before = TABLES[table]()
    monkeypatch.setitem(registry, name, entry)

    rendered = TABLES[table]()
    new_lines = [line for line in rendered.splitlines() if line not in before.splitlines()]
    assert len(new_lines) == 1 and shown in new_lines[0] and ADDED in new_lines[0]
    assert stale_tables(readme) == [table]
    assert new_lines[0] in render_readme(readme)
    assert stale_tables(render_readme(readme)) == []


def test_the_script_names_a_stale_table_then_rewrites_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(README.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setitem(CARD_FLAGS, "dummy_flag", dataclasses.replace(first(CARD_FLAGS), name="dummy_flag", key="q"))
    main = script().main

    assert main(["--check", "--readme", str(readme)]) == 1
    assert capsys.readouterr().err.strip() == (
        "README.md: table registry:card-flags is stale or missing; run scripts/readme_tables.py --write"
    )
    assert main(["--write", "--readme", str(readme)]) == 0
    assert "`dummy_flag`" in readme.read_text(encoding="utf-8")
    assert main(["--check", "--readme", str(readme)]) == 0


def test_a_missing_table_is_stale_and_an_unknown_one_refused() -> None:
    text = README.read_text(encoding="utf-8")
    start, end = text.index("<!-- registry:card-flags -->"), text.index("<!-- /registry:card-flags -->")
    without = text[:start] + text[end + len("<!-- /registry:card-flags -->") :]
    assert stale_tables(without) == ["card-flags"]
    with pytest.raises(InputError, match="registry:cards names no table; known: protocols"):
        stale_tables(text + "\n<!-- registry:cards -->\n<!-- /registry:cards -->\n")
