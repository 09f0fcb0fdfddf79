"""Snapshot commands: create, list, export, diff."""

from __future__ import annotations

from pathlib import Path

import click

from relabel.cli.render import counts
from relabel.settings import Settings

pass_settings = click.make_pass_decorator(Settings)


@click.group()
def snapshot() -> None:
    """Immutable ReGT snapshots of the consensus labels."""


@snapshot.command("create")
@click.argument("name")
@click.option("--dataset", help="Dataset name (default: the only one).")
@click.option(
    "--base",
    default="imgt",
    show_default=True,
    help="Label source that undecided images keep: imgt, or an imported prior such as real.",
)
@click.option(
    "--undecided",
    type=click.Choice(["keep", "exclude"]),
    default="keep",
    show_default=True,
    help="keep: undecided images keep the base labels; exclude: they get an empty set.",
)
@click.option(
    "--min-votes", type=int, default=1, show_default=True, help="Agreeing annotators needed when no lead adjudicated."
)
@pass_settings
def snapshot_create(
    settings: Settings, name: str, dataset: str | None, base: str, undecided: str, min_votes: int
) -> None:
    """Freeze the current consensus labels under NAME (content-hashed, never changed afterwards).

    \b
    Each image gets a category: A original confirmed, B one different label, M several labels,
    Z no class fits, X unclear, U undecided (labels follow --base and --undecided).
    \b
    Examples:
      relabel snapshot create round-1
      relabel snapshot create real-baseline --base real     # ReaL labels where nobody decided
    """
    from relabel.snapshots import create_snapshot

    s = create_snapshot(settings.engine, name, dataset=dataset, base=base, undecided=undecided, min_votes=min_votes)
    click.echo(f"snapshot {s.name!r}: {s.n_images} image(s), sha256 {s.content_hash[:16]}…")
    click.echo(f"  categories: {counts(s.counts)}")
    click.echo(f"  labels from: {counts(s.origins)}")


@snapshot.command("list")
@click.option("--dataset", help="Dataset name (default: the only one).")
@pass_settings
def snapshot_list(settings: Settings, dataset: str | None) -> None:
    """List snapshots, oldest first.

    \b
    Example:
      relabel snapshot list
    """
    from relabel.snapshots import list_snapshots

    for s in list_snapshots(settings.engine, dataset):
        click.echo(
            f"{s.name}\t{s.created_at:%Y-%m-%d %H:%M}\t{s.n_images} images\t{s.content_hash[:12]}\t"
            f"base={s.base_source} undecided={s.undecided_policy}\t{counts(s.counts)}"
        )


@snapshot.command("export")
@click.argument("name")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["real", "jsonl", "csv"]),
    required=True,
    help="real: ReaL-style real.json (lists in file-name order); jsonl; csv.",
)
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="Output file.")
@click.option("--dataset", help="Dataset name (default: the only one).")
@pass_settings
def snapshot_export(settings: Settings, name: str, fmt: str, out: Path, dataset: str | None) -> None:
    """Write a snapshot to a file (atomically: a failed export leaves no partial file).

    \b
    Examples:
      relabel snapshot export round-1 --format real --out regt-round-1.json
      relabel snapshot export round-1 --format csv --out regt-round-1.csv
    """
    from relabel.exports import export_snapshot

    n = export_snapshot(settings.engine, name, fmt=fmt, out=out, dataset=dataset)
    click.echo(f"wrote {n} image(s) to {out}")


@snapshot.command("diff")
@click.argument("a")
@click.argument("b")
@click.option("--dataset", help="Dataset name (default: the only one).")
@click.option("--limit", type=int, default=20, show_default=True, help="Changed images to list (0: none).")
@pass_settings
def snapshot_diff(settings: Settings, a: str, b: str, dataset: str | None, limit: int) -> None:
    """Count and list what changed from snapshot A to snapshot B.

    \b
    Example:
      relabel snapshot diff round-1 round-2 --limit 50
    """
    from relabel.snapshots import diff_snapshots

    d = diff_snapshots(settings.engine, a, b, dataset=dataset)
    click.echo(
        f"{a} -> {b}: {len(d.changed)} changed, {d.unchanged} unchanged, "
        f"{len(d.only_in_a)} only in {a}, {len(d.only_in_b)} only in {b}"
    )
    if d.transitions:
        click.echo(f"  category changes: {counts(d.transitions)}")
    for path, ca, cb, cat_a, cat_b in d.changed[:limit]:
        click.echo(f"  {path}\t{cat_a} {ca} -> {cat_b} {cb}")


COMMANDS = [snapshot]
