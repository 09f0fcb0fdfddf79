"""Import commands: prior label sources and model predictions."""

from __future__ import annotations

from pathlib import Path

import click

from relabel.cli.choices import registry_option
from relabel.cli.options import EXISTING_FILE, dataset_option, pass_settings
from relabel.cli.render import counts
from relabel.common.settings import Settings


@click.group()
def labels() -> None:
    """Label sources: the original labels (ImGT) and imported priors (ReaL, Shankar, MTurk).

    \b
    Examples:
      relabel labels import real.json --format real
      relabel labels import shankar_multilabel.csv --format shankar
    """


@labels.command("import")
@click.argument("path", type=EXISTING_FILE)
@registry_option("--format", "fmt", entries="relabel.sources.labels:SOURCE_FORMATS", required=True, help="{entries}.")
@click.option("--name", help="Source name (default: the format's name).")
@dataset_option()
@click.option("--skip-unknown", is_flag=True, help="Import rows for images the dataset has; skip the rest.")
@click.option("--replace", is_flag=True, help="Replace an existing source of the same name.")
@pass_settings
def labels_import(
    settings: Settings, path: Path, fmt: str, name: str | None, dataset: str | None, skip_unknown: bool, replace: bool
) -> None:
    """Import an earlier relabeling effort as a prior label source. All rows or nothing.

    \b
    Examples:
      relabel labels import real.json --format real
      relabel labels import shankar_multilabel.csv --format shankar
      relabel labels import mturk_label_errors.json --format mturk --skip-unknown
    """
    from relabel.sources.labels import import_source

    r = import_source(
        settings.engine, path, fmt=fmt, dataset=dataset, name=name, skip_unknown=skip_unknown, replace=replace
    )
    click.echo(
        f"source {r.source!r}: {r.written} label(s) imported"
        + (f", {r.skipped_unknown} row(s) for unknown images skipped" if r.skipped_unknown else "")
    )
    if r.categories:
        click.echo(f"  categories: {counts(dict(sorted(r.categories.items())))}")


@click.group()
def predictions() -> None:
    """Model predictions made elsewhere, stored as model runs.

    \b
    Examples:
      relabel predictions import preds.csv --run resnet50 --model timm/resnet50
    """


@predictions.command("import")
@click.argument("path", type=EXISTING_FILE)
@click.option("--run", required=True, help="Name of the model run (unique per dataset).")
@click.option("--model", help="Model name (default: the run name).")
@click.option(
    "--protocol",
    default="imported",
    show_default=True,
    help="How the predictions were made: supervised, or a protocol of `relabel suggest --protocol`.",
)
@registry_option(
    "--format",
    "fmt",
    entries="relabel.sources.predictions:PREDICTION_FORMATS",
    help="{entries}. Default: the file extension.",
)
@click.option("--order", help="For NPY: a file of image keys in row order (JSON list or one per line), or 'sorted'.")
@click.option(
    "--keep-scores",
    is_flag=True,
    help="NPY/NPZ score matrix: also keep every class's score (float32, in the workspace's scores/ folder), for "
    "cleanlab and calibration; `relabel predictions scores RUN --out FILE.npz` gives them back.",
)
@click.option("--quiet", is_flag=True, help="Do not show each step on stderr.")
@dataset_option()
@click.option("--skip-unknown", is_flag=True, help="Import rows for images the dataset has; skip the rest.")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace an existing run of the same name (refused once decisions cite its predictions as suggestions).",
)
@pass_settings
def predictions_import(
    settings: Settings,
    path: Path,
    run: str,
    model: str | None,
    protocol: str,
    fmt: str | None,
    order: str | None,
    dataset: str | None,
    skip_unknown: bool,
    replace: bool,
    keep_scores: bool,
    quiet: bool,
) -> None:
    """Import model outputs: CSV/JSONL (image, label or ranked labels, scores), an NPY array, or an NPZ archive of
    score vectors (`scores`: N x C floats, `ids`: N image keys, optional `classes`: the columns' wnids).

    \b
    Examples:
      relabel predictions import preds.csv --run resnet50 --protocol supervised
      relabel predictions import top1.npy --run cv --order index_to_filepath.json
      relabel predictions import logits.npy --run vit --order sorted    # (N, 1000) scores: top-5 kept
      relabel predictions import probs.npz --run vit --keep-scores      # every class's score kept too
    """
    from relabel.sources.predictions import import_predictions

    r = import_predictions(
        settings.engine,
        path,
        run=run,
        model=model,
        protocol=protocol,
        fmt=fmt,
        order=order,
        dataset=dataset,
        skip_unknown=skip_unknown,
        replace=replace,
        keep_scores=settings.workspace if keep_scores else None,
        show_progress=not quiet,
    )
    click.echo(
        f"run {r.run!r}: {r.ok} prediction(s), {r.errors} error(s)"
        + (f", {r.skipped_unknown} row(s) for unknown images skipped" if r.skipped_unknown else "")
        + (", every class's score kept" if keep_scores else "")
    )


@predictions.command("scores")
@click.argument("run")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), required=True, help="The .npz to write.")
@dataset_option()
@pass_settings
def predictions_scores(settings: Settings, run: str, out: Path, dataset: str | None) -> None:
    """Write a run's full score vectors (imported with --keep-scores) to an .npz, in the dataset's image order:
    `scores` (N x C float32), `ids` (image paths), `image_ids`, `labels` (ImGT top-1, -1 where none), `classes`.

    \b
    Example:
      relabel predictions scores vit --out vit-scores.npz
      # then: cleanlab.filter.find_label_issues(labels, pred_probs) on the file's labels and scores
    """
    from relabel.sources.score_vectors import export_run_scores

    s = export_run_scores(settings.engine, settings.workspace, run, out, dataset)
    click.echo(f"run {run!r}: {s.scores.shape[0]:,} x {s.scores.shape[1]:,} scores written to {out}")


COMMANDS = [labels, predictions]
