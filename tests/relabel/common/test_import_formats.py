"""Each import command's formats are one registry of `ImportFormat`s: a format added to its registry alone is
listed with its summary in the command's help, accepted by `--format`, and its reader is what the import runs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from relabel.cli import cli
from relabel.common.import_formats import ImportFormat, format_summaries
from relabel.interop.decisions import DECISION_FORMATS
from relabel.sources.labels import SOURCE_FORMATS
from relabel.sources.predictions import PREDICTION_FORMATS
from relabel.votes.formats import VOTE_FORMATS
from tests.studio_workspace import build_workspace

TENCH, ESPRESSO = "n01440764_tench.jpg", "n07920052_espresso.jpg"


@dataclass(frozen=True)
class Case:
    registry: dict[str, ImportFormat[Any]]
    command: tuple[str, ...]  # the import command, before the file
    like: str  # an existing format whose reader the new one wraps
    content: str  # a file that format reads: two rows, for the tench and the espresso photo
    stored: str  # what the command says it stored


CASES = {
    "labels": Case(
        SOURCE_FORMATS, ("labels", "import"), "csv", f"image,labels\n{TENCH},0\n{ESPRESSO},967|968\n", "2 label(s)"
    ),
    "predictions": Case(
        PREDICTION_FORMATS,
        ("predictions", "import", "--quiet", "--run", "tsv-run"),
        "csv",
        f"image,labels\n{TENCH},0\n{ESPRESSO},968\n",
        "2 prediction(s)",
    ),
    "votes": Case(
        VOTE_FORMATS,
        ("votes", "import", "--quiet"),
        "long",
        f"worker,image,label,answer\nw1,{TENCH},0,yes\nw1,{ESPRESSO},968,no\n",
        "2 vote(s)",
    ),
    "decisions": Case(
        DECISION_FORMATS,
        ("decisions", "import", "--quiet"),
        "csv",
        f"image,user,classes\n{TENCH},alice,0\n{ESPRESSO},bob,968\n",
        "2 decision(s) stored",
    ),
}


def relabel(where: list[str], *args: str) -> Result:
    return CliRunner().invoke(cli, [*where, *args])


def recording(read: Callable[..., Any], calls: list[Path]) -> Callable[..., Any]:
    def read_and_record(path: Path, *rest: Any) -> Any:
        calls.append(path)
        return read(path, *rest)

    return read_and_record


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_format_added_to_its_registry_alone_is_listed_accepted_and_read(
    kind: str, tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = CASES[kind]
    where = ["--workspace", str(tmp_path / "ws"), "--db", db_url]
    build_workspace(tmp_path / "ws", db_url)
    calls: list[Path] = []
    new = ImportFormat(recording(case.registry[case.like].read, calls), "a format this test adds")
    monkeypatch.setitem(case.registry, "test-format", new)

    shown = relabel(where, *case.command, "--help")
    assert shown.exit_code == 0, shown.output
    assert "test-format: a format this test adds" in " ".join(shown.output.split())

    path = tmp_path / f"{kind}.table"  # a suffix no format is named after: --format alone chooses
    path.write_text(case.content)
    result = relabel(where, *case.command, str(path), "--format", "test-format")
    assert result.exit_code == 0, result.output
    assert case.stored in result.output
    assert calls == [path]


@pytest.mark.parametrize("kind", sorted(CASES))
def test_an_unknown_format_is_refused_with_the_registrys_names(kind: str, tmp_path: Path) -> None:
    case = CASES[kind]
    path = tmp_path / "file.csv"
    path.write_text(case.content)
    result = relabel(["--workspace", str(tmp_path / "ws")], *case.command, str(path), "--format", "nope")
    assert result.exit_code != 0
    for name in case.registry:
        assert name in result.output


def test_every_entry_says_what_its_files_are() -> None:
    for case in CASES.values():
        summaries = format_summaries(case.registry)
        assert list(summaries) == list(case.registry)
        assert all(summary.strip() for summary in summaries.values())
