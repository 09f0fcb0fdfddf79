"""Workspace commands: init, ingest, stats, demo, users."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from relabel.cli import render
from relabel.settings import Settings

pass_settings = click.make_pass_decorator(Settings)
EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)


@click.command()
@pass_settings
def init(settings: Settings) -> None:
    """Create the workspace database, or upgrade it to the current schema. Safe to run again.

    \b
    Example:
      relabel --workspace ~/regt init
      RELABEL_DB=postgresql+psycopg://me@localhost/regt relabel init
    """
    from db.migrations import current_version

    with settings.engine.connect() as conn:
        click.echo(f"workspace database ready: {settings.redacted_url()} (schema version {current_version(conn)})")


@click.command()
@click.argument("root", type=click.Path(file_okay=False, path_type=Path))
@click.option("--dataset", help="Dataset name (default: the root folder's name).")
@click.option(
    "--layout",
    default="auto",
    show_default=True,
    help="auto, imagenet-val, folders, wnid-prefix, manifest or unlabeled.",
)
@click.option(
    "--labels",
    "labels_file",
    type=EXISTING_FILE,
    help="ImageNet val labels: LOC_val_solution.csv or the devkit's ..._ground_truth.txt.",
)
@click.option("--devkit-meta", type=EXISTING_FILE, help="The devkit's data/meta.mat (maps ILSVRC ids to wnids).")
@click.option("--manifest", type=EXISTING_FILE, help="CSV/JSONL with path and label or labels.")
@click.option("--vocabulary", type=EXISTING_FILE, help="Custom class list (.txt/.csv/.json); default ImageNet-1k.")
@click.option("--workers", type=int, default=None, help="Processes that check images (default: up to 4).")
@click.option("--header-only", is_flag=True, help="Check hashes and headers only; skip the decode test.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@pass_settings
def ingest(
    settings: Settings,
    root: Path,
    dataset: str | None,
    layout: str,
    labels_file: Path | None,
    devkit_meta: Path | None,
    manifest: Path | None,
    vocabulary: Path | None,
    workers: int | None,
    header_only: bool,
    quiet: bool,
) -> None:
    """Add a dataset's images and original labels (ImGT) to the workspace. Re-run to resume or refresh.

    \b
    Examples:
      relabel ingest /data/ILSVRC/val --labels LOC_val_solution.csv --dataset val
      relabel ingest /data/val --labels ILSVRC2012_validation_ground_truth.txt --devkit-meta meta.mat
      relabel ingest ./imagenet-sample                 # n01440764_tench.JPEG: wnid in the name
      relabel ingest ./photos --manifest labels.csv    # columns: path,label  (or labels, '|'-separated)
    """
    from relabel.ingest import ingest_dataset, plan_ingest
    from relabel.ingest.layouts import LayoutOptions
    from relabel.vocabulary import load_builtin, load_vocabulary_file

    vocab = load_vocabulary_file(vocabulary) if vocabulary else load_builtin()
    plan = plan_ingest(root, vocab, layout, LayoutOptions(labels_file, devkit_meta, manifest))
    report = ingest_dataset(
        settings.engine,
        plan,
        dataset=dataset or root.resolve().name,
        root=root,
        vocab=vocab,
        workers=workers,
        decode=not header_only,
        show_progress=not quiet,
    )
    render.ingest_report(report)


@click.command()
@pass_settings
def stats(settings: Settings) -> None:
    """Counts per dataset: image status, label sources, model runs, decisions, snapshot categories.

    \b
    Example:
      relabel stats
    """
    from relabel.stats import workspace_stats

    render.stats(workspace_stats(settings.engine))


@click.command()
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def demo(ctx: click.Context, quiet: bool) -> None:
    """Build the offline demo workspace from photos shipped inside installed packages.

    \b
    Example:
      relabel --workspace demo-workspace demo
    """
    from relabel.demo import build_demo, suggest_demo
    from relabel.stats import workspace_stats

    settings: Settings = ctx.obj
    report, absent = build_demo(settings.engine, settings.workspace, show_progress=not quiet)
    render.ingest_report(report)
    for a in absent:
        click.echo(f"warning: demo photo {a} not found; skipped", err=True)
    for sug in suggest_demo(settings.engine, settings.workspace / "cache", show_progress=not quiet):
        if sug.problem:
            click.echo(f"warning: suggestions {sug.run} skipped: {sug.problem}", err=True)
        else:
            click.echo(f"suggestions {sug.run}: {sug.ok} image(s), {sug.errors} error(s)")
    render.stats([s for s in workspace_stats(settings.engine) if s.name == report.dataset])
    ws = settings.workspace
    if shutil.which("relabel") is None:  # run through `make demo`: the virtualenv is not on PATH
        click.echo(f"\n`relabel` lives in {Path(sys.executable).parent}; activate it first: . .venv/bin/activate")
    click.echo(f"""
Next steps (workspace {ws}):
  relabel --workspace {ws} stats
  relabel --workspace {ws} snapshot create round-0          # freeze the current labels
  relabel --workspace {ws} snapshot export round-0 --format jsonl --out round-0.jsonl""")


@click.group()
def users() -> None:
    """Annotators and leads of the workspace."""


@users.command("add")
@click.argument("name")
@click.option("--role", type=click.Choice(["annotator", "lead"]), default="annotator", show_default=True)
@click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    envvar="RELABEL_PASSWORD",
    help="Prompted for when not given (env RELABEL_PASSWORD).",
)
@pass_settings
def users_add(settings: Settings, name: str, role: str, password: str) -> None:
    """Add a user with a password (stored as a salted scrypt hash).

    \b
    Example:
      relabel users add alice --role annotator
    """
    from db.enums import Role
    from relabel.annotations import add_user

    add_user(settings.engine, name, Role(role), password)
    click.echo(f"added {role} {name!r}")


COMMANDS = [init, ingest, stats, demo, users]
