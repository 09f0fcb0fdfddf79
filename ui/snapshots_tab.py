"""The leads' Snapshots tab: freeze the current consensus as an immutable snapshot, list the snapshots, export one,
and compare two.

`snapshot_table`, `list_values`, `create_message`, `diff_view`, `diff_values` and `detail_values` are plain
functions (tests call them), leads only; `build` lays out the tab, loads the list when the tab is opened and again
after a snapshot is created, when the export and compare pickers move to the new snapshot. A vote-based snapshot can
be calibrated against an imported label source or the leads' adjudications (`relabel snapshot create --calibrate`),
at the calibrated defaults; the result then says what it was calibrated on, as the command prints it. The minimum of
agreeing votes starts at the studio's overlap: with two annotators per image, one vote is not yet a consensus. Snapshot
names, user names, image paths and class names are untrusted text: they are shown only in Dataframe, Textbox and
Dropdown components, never as HTML or Markdown. The pickers accept a typed name too (the API takes a name); the
server looks every name up in the dataset's snapshots and refuses an unknown one, listing the known names.

Comparing, say, a unanimous snapshot with a Dawid-Skene one (`relabel snapshot create --consensus ds`) shows the
category transition table (categories before down, after across, every image in both) and, for the changed images
of a snapshot that stores posteriors, each changed class's posterior before and after. A diff is computed once per
pair of names and kept (`diff_of`): snapshots never change, so neither does their diff.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import gradio as gr

from relabel.common.errors import InputError
from relabel.decisions.rules import DEFAULT_RULE
from relabel.exports.formats import EXPORT_FORMATS
from relabel.review.studio import Studio
from relabel.snapshots.diff import SnapshotDiff, diff_snapshots
from relabel.snapshots.freeze import DEFAULT_UNDECIDED, UNDECIDED_POLICIES, consensus_defaults, list_snapshots
from relabel.votes.fit import calibration_references
from relabel.votes.posteriors import consensus_choices
from ui import handlers
from ui.files import served_copy


# the formats a lead downloads from the studio as one file (hf writes a folder: `relabel snapshot export`); jsonl
# first, as it names every image: real.json is by position and is refused for a dataset that is not ILSVRC-2012 val
def downloadable_formats() -> list[str]:
    """The registry's one-file export formats, jsonl first (read when the tab is built: a format registered later
    is offered too)."""
    return sorted((f for f, kind in EXPORT_FORMATS.items() if kind.folder is None), key=lambda f: f != "jsonl")


SNAPSHOT_HEADERS = ["name", "created (UTC)", "created by", "images", "categories", "content hash"]
TRANSITION_HEADERS = ["category change", "images"]
CHANGED_HEADERS = ["image", "classes before", "classes after", "category before", "category after"]
POSTERIOR_HEADERS = ["image", "class", "posterior before", "posterior after"]
POSTERIOR_FLOOR = 0.01  # classes under it in both snapshots are left out of the posterior table
DIFF_ROW_LIMIT = 500  # changed images listed in the table; a Dataframe of 50,000 rows would stall the page
HASH_PREFIX = 12  # as `relabel snapshot list` prints it
CATEGORY_ORDER = ("A", "B", "M", "Z", "X", "U")
NO_CLASS = "(no class)"
NOT_CALIBRATED = handlers.NOT_CALIBRATED

Guard = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass(frozen=True)
class DiffView:
    """What the tab shows of `diff_snapshots(before, after)`: a one-line summary, (transition, images) rows such as
    ("A->B", 3), and the first `DIFF_ROW_LIMIT` changed images as `CHANGED_HEADERS` rows, out of `n_changed`."""

    summary: str
    transitions: list[list[Any]]
    changed: list[list[str]]
    n_changed: int
    matrix: list[list[Any]] = field(default_factory=list)  # `matrix_headers` rows: a category before, counts after
    matrix_headers: list[str] = field(default_factory=list)
    posteriors: list[list[str]] = field(default_factory=list)  # POSTERIOR_HEADERS rows of the changed images shown

    @property
    def changed_label(self) -> str:
        shown = f", the first {len(self.changed)} shown" if len(self.changed) < self.n_changed else ""
        return f"changed images: {self.n_changed}{shown}"


def category_counts(counts: dict[str, int]) -> str:
    """ "A 3 · B 1 · U 2": the non-zero categories in the order A B M Z X U."""
    rank = {k: i for i, k in enumerate(CATEGORY_ORDER)}
    order = sorted(counts, key=lambda k: (rank.get(k, len(rank)), k))
    return " · ".join(f"{k} {counts[k]}" for k in order if counts[k])


def snapshot_table(studio: Studio, user: str) -> list[list[Any]]:
    """The dataset's snapshots, newest first, as `SNAPSHOT_HEADERS` rows; leads only."""
    studio.require_lead(user)
    return [
        [
            s.name,
            f"{s.created_at:%Y-%m-%d %H:%M:%S}",
            s.created_by,
            s.n_images,
            category_counts(s.counts),
            s.content_hash[:HASH_PREFIX],
        ]
        for s in reversed(list_snapshots(studio.engine, studio.dataset_name))
    ]


def _pick(current: str | None, names: Sequence[str], default: int) -> str | None:
    """`current` while it still names a snapshot, else `names[default]` (the last name when there are fewer)."""
    if current in names:
        return current
    return names[min(default, len(names) - 1)] if names else None


def list_values(studio: Studio, user: str, export_pick: str | None, before: str | None, after: str | None) -> list[Any]:
    """The list and the three pickers, in `build`'s order; a pick that still names a snapshot is kept, the others
    become the newest snapshot (export, after) and the one before it (before)."""
    rows = snapshot_table(studio, user)
    names = [row[0] for row in rows]
    return [
        rows,
        gr.Dropdown(choices=names, value=_pick(export_pick, names, 0)),
        gr.Dropdown(choices=names, value=_pick(before, names, 1)),
        gr.Dropdown(choices=names, value=_pick(after, names, 0)),
    ]


def created_values(studio: Studio, user: str) -> list[Any]:
    """`list_values` after a snapshot was created: the export and compare pickers move to the new snapshot (compare
    before: the one before it)."""
    return list_values(studio, user, None, None, None)


def calibration_choices(studio: Studio) -> list[str]:
    """The calibration picker's choices: `NOT_CALIBRATED`, then the references of `calibration_references`."""
    with studio.engine.connect() as conn:
        return [NOT_CALIBRATED, *calibration_references(conn, studio.dataset_id)]


def create_message(
    studio: Studio,
    user: str,
    name: str,
    undecided: str,
    min_votes: Any,
    consensus: str | None = None,
    threshold: Any = None,
    calibrate: str | None = None,
) -> str:
    """A lead freezes a snapshot (`ui.handlers.create_snapshot`); returns its one-line result."""
    return handlers.create_snapshot(studio, user, name, undecided, min_votes, consensus, threshold, calibrate)


def threshold_default(calibrate: str | None) -> float:
    """The threshold field's value when the calibration picker changes: 0.9, or 0.75 when calibrated."""
    return consensus_defaults(None if calibrate in (None, "", NOT_CALIBRATED) else calibrate)[0]


def class_names(studio: Studio, classes: Sequence[int]) -> str:
    """Class names joined by " | " (the separator of the label tables); NO_CLASS for an empty set."""
    vocab = studio.vocab.classes
    return " | ".join(vocab[c].name if 0 <= c < len(vocab) else str(c) for c in classes) or NO_CLASS


def diff_view(
    studio: Studio, user: str, before: str | None, after: str | None, limit: int = DIFF_ROW_LIMIT
) -> DiffView:
    """What changed from snapshot `before` to snapshot `after`; leads only. Raises InputError when a name is
    missing, NotFoundError (listing the known names) when one is not a snapshot of the dataset."""
    studio.require_lead(user)
    a, b = (before or "").strip(), (after or "").strip()
    if not a or not b:
        raise InputError("pick two snapshots to compare: the one before and the one after")
    d = diff_of(studio.engine, studio.dataset_name, a, b)
    summary = f"{a} -> {b}: {len(d.changed)} changed, {d.unchanged} unchanged"
    if d.only_in_a or d.only_in_b:
        summary += f", {len(d.only_in_a)} only in {a}, {len(d.only_in_b)} only in {b}"
    changed = [
        [path, class_names(studio, ca), class_names(studio, cb), cat_a, cat_b]
        for path, ca, cb, cat_a, cat_b in d.changed[:limit]
    ]
    headers, matrix = matrix_rows(d)
    return DiffView(
        summary,
        [[t, n] for t, n in d.transitions.items()],
        changed,
        len(d.changed),
        matrix,
        headers,
        posterior_rows(studio, d, limit),
    )


@lru_cache(maxsize=2)  # a diff of 50,000 images holds some megabytes
def diff_of(engine: Any, dataset: str | None, a: str, b: str) -> SnapshotDiff:
    """`diff_snapshots`, kept per (workspace, dataset, a, b): snapshots are immutable, so is their diff."""
    return diff_snapshots(engine, a, b, dataset=dataset)


def matrix_rows(d: SnapshotDiff) -> tuple[list[str], list[list[Any]]]:
    """Headers and rows of the category transition table: a category before, then images per category after."""
    columns = [c for c in CATEGORY_ORDER if any(c in row for row in d.matrix.values())]
    rows = [[f"{before} ->", *(str(row.get(c, 0)) for c in columns)] for before, row in d.matrix.items()]
    return ["before \\ after", *columns], rows


def posterior_rows(studio: Studio, d: SnapshotDiff, limit: int) -> list[list[str]]:
    """POSTERIOR_HEADERS rows: each changed class's posterior in both snapshots ("" where one stores none), for the
    first `limit` changed images; classes under POSTERIOR_FLOOR in both are left out."""
    rows = []
    for path, *_ in d.changed[:limit]:
        for c, (pa, pb) in d.posteriors.get(path, {}).items():
            if max(pa or 0.0, pb or 0.0) >= POSTERIOR_FLOOR:
                rows.append([path, class_names(studio, [c]), _p(pa), _p(pb)])
    return rows


def _p(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


def diff_values(studio: Studio, user: str, before: str | None, after: str | None) -> list[Any]:
    """The diff's summary, transitions and changed images, in `build`'s order."""
    view = diff_view(studio, user, before, after)
    return [
        view.summary,
        view.transitions,
        gr.Dataframe(value=view.changed, label=view.changed_label),
    ]


def detail_values(studio: Studio, user: str, before: str | None, after: str | None) -> list[Any]:
    """The category transition table and the posteriors of the changed classes, in `build`'s order."""
    view = diff_view(studio, user, before, after)
    return [
        gr.Dataframe(value=view.matrix, headers=view.matrix_headers),
        gr.Dataframe(value=view.posteriors, label=f"posteriors of the changed classes ({len(view.posteriors)})"),
    ]


def build(studio: Studio, guarded: Guard, exports_dir: Path, tab: gr.Tab) -> None:
    """The tab's layout inside `tab`; the snapshot list loads when the tab is opened and after each creation."""
    gr.Markdown("Freeze the current consensus as an immutable snapshot, then export it or compare two snapshots.")
    with gr.Row():
        name = gr.Textbox(label="snapshot name", lines=1)
        undecided = gr.Radio(list(UNDECIDED_POLICIES), value=DEFAULT_UNDECIDED, label="undecided images")
        min_votes = gr.Number(value=max(studio.overlap, 1), precision=0, label="minimum agreeing votes")
        # the rules on the studio's decisions, then the vote aggregation methods: read when the tab is built
        consensus = gr.Dropdown(list(consensus_choices()), value=DEFAULT_RULE, label="consensus")
        calibrate = gr.Dropdown(
            [NOT_CALIBRATED], value=NOT_CALIBRATED, label="calibrate against (ds, one-coin)", filterable=False
        )
        threshold = gr.Number(
            value=threshold_default(None), minimum=0.5, maximum=1.0, step=0.05, label="posterior threshold"
        )
        create_btn = gr.Button("Create snapshot", variant="primary")
    created = gr.Textbox(label="result", interactive=False)
    with gr.Row():
        listed = gr.Dataframe(headers=SNAPSHOT_HEADERS, label="snapshots (newest first)", interactive=False, scale=4)
        refresh = gr.Button("Refresh list", size="sm", scale=1, elem_id="snapshots-refresh")
    with gr.Row():
        export_pick = _picker("snapshot to export")
        fmt = gr.Radio(downloadable_formats(), value="jsonl", label="format")
        export_btn = gr.Button("Export")
    exported = gr.File(label="export", interactive=False)
    with gr.Row():
        before = _picker("compare: before")
        after = _picker("compare: after")
        diff_btn = gr.Button("Compare")
    summary = gr.Textbox(label="difference", interactive=False, lines=1)
    transitions = gr.Dataframe(headers=TRANSITION_HEADERS, label="category changes", interactive=False)
    changed = gr.Dataframe(headers=CHANGED_HEADERS, label="changed images", interactive=False, wrap=True)
    with gr.Row():
        matrix = gr.Dataframe(label="categories: before (rows) -> after (columns)", interactive=False)
        posteriors = gr.Dataframe(
            headers=POSTERIOR_HEADERS, label="posteriors of the changed classes", interactive=False, wrap=True
        )

    pickers = [export_pick, before, after]
    reload = guarded(lambda u, e, a, b: list_values(studio, u, e, a, b))
    tab.select(reload, pickers, [listed, *pickers], api_visibility="private")
    tab.select(guarded(lambda u: _choices(studio, u)), None, calibrate, api_visibility="private")
    refresh.click(reload, pickers, [listed, *pickers], api_name="list_snapshots")
    calibrate.change(threshold_default, calibrate, threshold, api_visibility="private")
    create_btn.click(
        guarded(lambda u, n, p, m, c, t, k: create_message(studio, u, n, p, m, c, t, k)),
        [name, undecided, min_votes, consensus, threshold, calibrate],
        created,
        api_name="create_snapshot",
    ).success(guarded(lambda u: created_values(studio, u)), None, [listed, *pickers], api_visibility="private")
    export_btn.click(
        guarded(lambda u, n, f: served_copy(handlers.export_snapshot(studio, u, n, f, exports_dir))),
        [export_pick, fmt],
        exported,
        api_name="export_snapshot",
    )
    diff_btn.click(
        guarded(lambda u, a, b: diff_values(studio, u, a, b)),
        [before, after],
        [summary, transitions, changed],
        api_name="diff_snapshots",
    ).success(
        guarded(lambda u, a, b: detail_values(studio, u, a, b)),
        [before, after],
        [matrix, posteriors],
        api_visibility="private",
    )


def _choices(studio: Studio, user: str) -> gr.Dropdown:
    studio.require_lead(user)
    return gr.Dropdown(choices=calibration_choices(studio))


def _picker(label: str) -> gr.Dropdown:
    # a typed name is accepted: the API sends names, and the server checks each against the dataset's snapshots
    return gr.Dropdown([], value=None, label=label, allow_custom_value=True, filterable=True)
