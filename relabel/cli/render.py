"""Plain-text rendering of service results for the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from relabel.common.errors import examples

if TYPE_CHECKING:
    from relabel.ingest import IngestReport
    from relabel.review.stats import DatasetStats
    from relabel.votes.report import Reliability


def counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"


def ingest_report(r: IngestReport) -> None:
    click.echo(f"dataset {r.dataset!r} ({r.layout}): {r.planned} image(s): {counts(dict(r.status_counts))}")
    click.echo(
        f"  checked {r.checked}, unchanged since last ingest {r.unchanged}, ImGT labels written {r.labels_written}"
    )
    for w in r.warnings:
        click.echo(f"warning: {w}", err=True)
    if r.problems:
        click.echo(f"warning: {len(r.problems)} unreadable image(s):", err=True)
        for path, reason in r.problems[:10]:
            click.echo(f"  {path}: {reason}", err=True)
        if len(r.problems) > 10:
            click.echo(f"  … {len(r.problems) - 10} more (see `relabel stats`)", err=True)
    if r.notes:
        click.echo(f"  notes: {counts(dict(r.notes))}")
    if r.duplicate_groups:
        click.echo(
            f"warning: {len(r.duplicate_groups)} group(s) of byte-identical images: "
            f"{examples([' = '.join(g) for g in r.duplicate_groups])}",
            err=True,
        )


STATS_WORKERS = 10  # the weakest workers `relabel stats` lists; `relabel votes workers` lists all


def reliability(r: Reliability) -> None:
    """The weakest workers by sensitivity, from a Dawid-Skene fit on the dataset's votes."""
    from relabel.votes.report import reliability_lines

    rows = sorted(r.rows, key=lambda w: w.sensitivity)
    flagged = sum(1 for w in rows if w.flag)
    click.echo(
        f"  worker reliability (Dawid-Skene on {r.votes:,} votes): {len(rows):,} worker(s), {flagged:,} flagged; "
        f"lowest sensitivity first{', all: relabel votes workers' if len(rows) > STATS_WORKERS else ''}"
    )
    for line in reliability_lines(rows[:STATS_WORKERS]):
        click.echo(f"    {line}")


def stats(rows: list[DatasetStats]) -> None:
    if not rows:
        click.echo("the workspace is empty; start with `relabel ingest` or `relabel demo`")
    for s in rows:
        click.echo(f"dataset {s.name}  (root {s.root})")
        click.echo(f"  images:      {counts(s.images)}")
        click.echo(f"  labels:      {counts(s.sources)}")
        click.echo(f"  model runs:  {'; '.join(f'{k}: {counts(v)}' for k, v in s.runs.items()) or 'none'}")
        for run, note in s.run_notes.items():
            click.echo(f"    {run}: {note}")
        click.echo(f"  decisions:   {s.decisions} on {s.decided_images} image(s)")
        for name, c in s.snapshots.items():
            click.echo(f"  snapshot {name}: {counts(c)}")
        if s.duplicate_groups:
            click.echo(f"  duplicates:  {s.duplicate_groups} group(s) of byte-identical images")
        if s.reliability is not None:
            reliability(s.reliability)
    if rows and rows[0].users:
        click.echo(f"users: {counts(rows[0].users)}")
