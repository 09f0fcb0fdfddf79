"""The README's tables of the registries, rendered from what each registry holds.

Each table sits in README.md between `<!-- registry:NAME -->` and `<!-- /registry:NAME -->`; `render_readme`
rewrites every such block from `TABLES`, and `stale_tables` names the blocks that differ from what the registries
hold now (or that the README lacks). `scripts/readme_tables.py --write` / `--check` runs them, and a test keeps the
README current, so a new protocol, model kind, export format, card flag, ingest layout, import format, aggregation
method or reliability part reaches the README by its registry entry alone.

The registries are imported when a table is rendered, not before (the protocols pull in numpy and scipy).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from relabel.common.errors import InputError
from relabel.common.import_formats import ImportFormat

Rows = Iterable[Sequence[str]]


def cell(text: str) -> str:
    """`text` as one table cell: on one line, `|` escaped, and `<` outside code spans written as `&lt;` (so
    `root/<class>/` is not read as an HTML tag)."""
    parts = " ".join(text.split()).replace("|", "\\|").split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;") for i, part in enumerate(parts))


def markdown_table(header: Sequence[str], rows: Rows) -> str:
    """A Markdown table of `header` and `rows` (each a cell per column; see `cell`)."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell(c) for c in cells) + " |"

    body = [line(r) for r in rows]
    return "\n".join([line(header), "|" + "---|" * len(header), *body])


def code(name: str) -> str:
    return f"`{name}`"


def yes(flag: bool) -> str:
    return "yes" if flag else "—"


def protocols_table() -> str:
    from relabel.suggest.protocols import PROTOCOLS

    return markdown_table(
        ("protocol", "what", "asks", "needs a reference", "scored as", "free answers mapped by"),
        (
            (
                code(name),
                p.summary,
                "a generative model" if p.generative else "a scoring model's scores",
                yes(p.needs_reference),
                p.task,
                code(p.default_encoder) if p.needs_mapper else "—",
            )
            for name, p in PROTOCOLS.items()
        ),
    )


def model_kinds_table() -> str:
    from relabel.suggest.adapters import REGISTRY

    return markdown_table(
        ("kind", "what", "needs", "ranks top-k", "reads text", "remote", "default protocol"),
        (
            (
                code(k.example),
                k.summary,
                k.needs,
                yes(k.ranks_topk),
                yes(k.reads_text),
                yes(k.remote),
                k.default_protocol,
            )
            for k in REGISTRY.values()
        ),
    )


def export_formats_table() -> str:
    from relabel.exports.formats import EXPORT_FORMATS, OPTIONS

    def written(name: str) -> str:
        f = EXPORT_FORMATS[name]
        if f.folder is not None:
            return "a folder"
        return f"{'binary' if f.binary else 'text'} `.{f.suffix}`"

    return markdown_table(
        ("format", "what", "writes", "takes"),
        (
            (code(name), f.summary, written(name), ", ".join(f"`{OPTIONS.get(o, o)}`" for o in f.options) or "—")
            for name, f in EXPORT_FORMATS.items()
        ),
    )


def card_flags_table() -> str:
    from relabel.decisions.card_flags import CARD_FLAGS

    return markdown_table(
        ("flag (stored as)", "key", "the card's button"),
        ((code(f.name), f"`{f.key.upper()}`", f.label) for f in CARD_FLAGS.values()),
    )


def ingest_layouts_table() -> str:
    from relabel.ingest.layouts import LAYOUTS

    def what(layout: Callable[..., object]) -> str:
        return (layout.__doc__ or "").strip().split("\n\n")[0]

    return markdown_table(("layout", "what"), ((code(name), what(f)) for name, f in LAYOUTS.items()))


def import_formats_table() -> str:
    from relabel.interop.decisions import DECISION_FORMATS
    from relabel.sources.labels import SOURCE_FORMATS
    from relabel.sources.predictions import PREDICTION_FORMATS
    from relabel.votes.formats import VOTE_FORMATS

    registries: dict[str, Mapping[str, ImportFormat[Any]]] = {
        "relabel labels import": SOURCE_FORMATS,
        "relabel predictions import": PREDICTION_FORMATS,
        "relabel votes import": VOTE_FORMATS,
        "relabel decisions import": DECISION_FORMATS,
    }
    return markdown_table(
        ("command", "`--format`", "the file"),
        ((code(command), code(name), f.summary) for command, r in registries.items() for name, f in r.items()),
    )


def aggregation_methods_table() -> str:
    from relabel.votes.aggregation import METHODS

    return markdown_table(
        ("method", "what", "posteriors are probabilities"),
        ((code(name), m.summary, yes(m.probabilistic)) for name, m in METHODS.items()),
    )


def reliability_parts_table() -> str:
    from evaluator.reliability_parts import RELIABILITY_PARTS

    return markdown_table(
        ("part", "symbol (`--weights`)", "what", "interval"),
        (
            (p.name, code(p.symbol), p.help, "bootstrap over images" if p.interval == "resampled" else "held fixed")
            for p in RELIABILITY_PARTS.values()
        ),
    )


TABLES: dict[str, Callable[[], str]] = {
    "protocols": protocols_table,
    "model-kinds": model_kinds_table,
    "export-formats": export_formats_table,
    "card-flags": card_flags_table,
    "ingest-layouts": ingest_layouts_table,
    "import-formats": import_formats_table,
    "aggregation-methods": aggregation_methods_table,
    "reliability-parts": reliability_parts_table,
}

BLOCK = re.compile(r"<!-- registry:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /registry:(?P=name) -->", re.S)


def blocks(text: str) -> dict[str, str]:
    """The README's registry blocks, name -> the text between the markers; a name not in TABLES, or one given
    twice, is an InputError."""
    found: dict[str, str] = {}
    for m in BLOCK.finditer(text):
        name = m["name"]
        if name not in TABLES:
            raise InputError(f"README block registry:{name} names no table; known: {', '.join(TABLES)}")
        if name in found:
            raise InputError(f"README block registry:{name} appears twice")
        found[name] = m["body"]
    return found


def render_readme(text: str) -> str:
    """`text` with every registry block rewritten from its registry (blocks it lacks are not added)."""
    blocks(text)  # refuses unknown and repeated names
    return BLOCK.sub(
        lambda m: f"<!-- registry:{m['name']} -->\n{TABLES[m['name']]()}\n<!-- /registry:{m['name']} -->", text
    )


def stale_tables(text: str) -> list[str]:
    """Names of the tables whose README block differs from what the registry holds now, or that have none."""
    found = blocks(text)
    return [name for name, render in TABLES.items() if found.get(name) != render() + "\n"]
