"""Workspace commands: init, ingest, stats, demo (users: `relabel.cli.users`)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from relabel.cli import render
from relabel.cli.choices import registry_option
from relabel.cli.options import EXISTING_FILE, dataset_option, pass_settings
from relabel.common.settings import Settings


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
@dataset_option("the root folder's name")
@registry_option(
    "--layout",
    entries="relabel.ingest.layouts:LAYOUTS",
    choose=False,
    default="auto",
    show_default=True,
    help="auto, {entries}.",
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
    from relabel.common.vocabulary import load_builtin, load_vocabulary_file
    from relabel.ingest import ingest_dataset, plan_ingest
    from relabel.ingest.layouts import LayoutOptions

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
    from relabel.review.stats import workspace_stats

    render.stats(workspace_stats(settings.engine, settings.workspace / "cache"))


@click.command()
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option(
    "--serve/--no-serve", default=True, show_default=True, help="Open the studio when the workspace is ready."
)
@click.option("--port", type=int, default=7860, show_default=True, help="Studio port.")
@click.pass_context
def demo(ctx: click.Context, quiet: bool, serve: bool, port: int) -> None:
    """Build the offline demo workspace from photos shipped inside installed packages, then open the studio.

    The 8 photos get ambiguous original labels and EfficientNet-Lite0 suggestions (plus an MLLM's, when an
    OpenAI-compatible endpoint is configured with OPENAI_BASE_URL / OPENAI_API_KEY / RELABEL_DEMO_MODEL), and
    three users: annotators alice and bob, lead lena, password "relabel-demo".

    \b
    Examples:
      relabel --workspace demo-workspace demo                # then open http://127.0.0.1:7860
      relabel --workspace demo-workspace demo --no-serve     # build only
    """
    from relabel.demo import DEMO_PASSWORD, build_demo, ensure_demo_users, suggest_demo
    from relabel.review.stats import workspace_stats

    settings: Settings = ctx.obj
    report, absent = build_demo(settings.engine, settings.workspace, show_progress=not quiet)
    render.ingest_report(report)
    for a in absent:
        click.echo(f"warning: demo photo {a} not found; skipped", err=True)
    for sug in suggest_demo(settings.engine, settings.workspace / "cache", show_progress=not quiet):
        if sug.problem:
            click.echo(f"warning: suggestions {sug.run}: {sug.problem}", err=True)
        else:
            click.echo(f"suggestions {sug.run}: {sug.ok} image(s), {sug.errors} error(s)")
    users = ensure_demo_users(settings.engine)
    first_report(settings, report.dataset)
    render.stats([s for s in workspace_stats(settings.engine) if s.name == report.dataset])
    ws = settings.workspace
    logins = ", ".join(f"{name} ({role})" for name, role in users)
    click.echo(f"\nSign in as {logins}; password {DEMO_PASSWORD!r}.")
    if shutil.which("relabel") is None:  # run through `make demo`: the virtualenv is not on PATH
        click.echo(f"`relabel` lives in {Path(sys.executable).parent}; activate it first: . .venv/bin/activate")
    click.echo(f"""Next steps (workspace {ws}):
  relabel --workspace {ws} serve                              # the studio again, later
  relabel --workspace {ws} snapshot create round-0          # freeze the current labels
  relabel --workspace {ws} snapshot export round-0 --format jsonl --out round-0.jsonl
  relabel --workspace {ws} evaluate                         # rescore the runs (Reports tab)""")
    serve_command = ctx.parent.command.get_command(ctx.parent, "serve") if ctx.parent else None  # type: ignore[attr-defined]
    if serve and serve_command is not None:
        click.echo(f"\nOpening the studio on http://127.0.0.1:{port} ...")
        ctx.invoke(serve_command, port=port)


def first_report(settings: Settings, dataset: str) -> None:
    """Score the demo's runs against ImGT once, so the studio's Reports tab has a report to show (kept when one
    exists: `relabel evaluate` writes the next)."""
    from relabel.common.errors import RelabelError
    from relabel.evaluation import evaluate as evaluate_runs
    from relabel.evaluation.report import default_report_dir, latest_report, write_report

    if latest_report(settings.workspace) is not None:
        return
    try:
        evaluation = evaluate_runs(settings.engine, dataset, references=["imgt"], n_boot=200)
        files = write_report(evaluation, default_report_dir(settings.workspace))
    except (RelabelError, OSError) as exc:  # the demo goes on to the studio without it
        click.echo(f"warning: no first evaluation report: {exc}", err=True)
        return
    click.echo(f"evaluation of the suggestion runs against ImGT: {files.markdown}")


COMMANDS = [init, ingest, stats, demo]
