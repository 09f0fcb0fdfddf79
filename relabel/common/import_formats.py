"""The entry of every import-format registry: labels (`relabel.sources.labels.SOURCE_FORMATS`), predictions
(`relabel.sources.predictions.PREDICTION_FORMATS`), votes (`relabel.votes.formats.VOTE_FORMATS`) and decisions
(`relabel.interop.decisions.DECISION_FORMATS`).

An entry is all the rest of the code knows of a format: the import reads the file with `read`, and the CLI's
`--format` choices and help, and the README's tables, list the registry's names with their `summary`; so a new
format is one entry.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Reader = TypeVar("Reader")  # the registry's reader signature: (path, vocabulary, ...) -> rows


@dataclass(frozen=True)
class ImportFormat(Generic[Reader]):
    """One kind of file an import command reads."""

    read: Reader  # turns the file into the import's rows; raises InputError naming the file, the line, the value
    summary: str  # a few words for the CLI's help and the README: what the file is, its columns


def format_summaries(registry: Mapping[str, ImportFormat[Any]]) -> dict[str, str]:
    """Each format's name and summary, in the registry's order."""
    return {name: f.summary for name, f in registry.items()}
