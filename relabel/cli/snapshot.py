"""Snapshot commands: create, list, export, diff."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from relabel.cli.choices import registry_option
from relabel.cli.options import dataset_option, pass_settings
from relabel.cli.render import counts
from relabel.common.settings import Settings


@click.group()
def snapshot() -> None:
    """Immutable ReGT snapshots of the consensus labels.

    \b
    Examples:
      relabel snapshot create round-1
      relabel snapshot export round-1 --format jsonl --out round-1.jsonl
      relabel snapshot diff round-1 round-2
    """


@snapshot.command("create")
@click.argument("name")
@dataset_option()
@click.option(
    "--base",
    default="imgt",
    show_default=True,
    help="Label source that undecided images keep: imgt, or an imported prior such as real.",
)
@registry_option(
    "--undecided", entries="relabel.snapshots.freeze:UNDECIDED_POLICIES", help="{entries}. Default: the first."
)
@click.option(
    "--min-votes", type=int, default=1, show_default=True, help="Agreeing annotators needed when no lead adjudicated."
)
@registry_option(
    "--consensus",
    entries="relabel.votes.posteriors:consensus_choices",
    help="{entries}. Default: the first. A rule on the studio's decisions stores no posterior; an aggregation "
    "method reads the votes (imported and the studio's) and stores a posterior per (image, class).",
)
@click.option(
    "--threshold",
    type=float,
    help="Posterior a class needs to be a label; an image with a class between 1-T and T is uncertain (U). "
    "Default 0.9; with --calibrate 0.75 (chosen out of sample, see BENCHMARKS.md).",
)
@click.option(
    "--keep-original",
    type=float,
    help="Posterior an original (ImGT) class needs to stay: the burden of proof lies on a change; 0 turns it off. "
    "Default 0.5; with --calibrate off (the calibration learns how often an original class is right).",
)
@click.option(
    "--calibrate",
    metavar="SOURCE",
    help="Calibrate the posteriors (isotonic) against a label source you trust (an imported prior) or "
    "'adjudications' (the leads' decisions) before thresholds apply; ds and one-coin only.",
)
@click.option(
    "--reference",
    metavar="SOURCE",
    help="A label source (or 'adjudications') to check against: how many voted images the votes settle and how "
    "often those agree with it, at the threshold and along the curve.",
)
@click.option(
    "--votes", "vote_sources", multiple=True, help="Imported vote source to aggregate (repeat; default: all)."
)
@click.option("--with-model", help="A stored run that votes as one more worker (off by default).")
@click.option(
    "--studio-votes/--no-studio-votes", default=True, show_default=True, help="The studio's decisions vote too."
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
@pass_settings
def snapshot_create(
    settings: Settings,
    name: str,
    dataset: str | None,
    base: str,
    undecided: str | None,
    min_votes: int,
    consensus: str | None,
    threshold: float | None,
    keep_original: float | None,
    calibrate: str | None,
    reference: str | None,
    vote_sources: tuple[str, ...],
    with_model: str | None,
    studio_votes: bool,
    quiet: bool,
) -> None:
    """Freeze the current consensus labels under NAME (content-hashed, never changed afterwards).

    \b
    Each image gets a category: A original confirmed, B one different label, M several labels,
    Z no class fits, X unclear, U undecided (labels follow --base and --undecided). With a
    --consensus that reads votes (ds, one-coin, majority, set-majority), U also holds the images
    whose votes settle nothing: a class neither accepted (posterior >= T, or >= --keep-original
    for an original class) nor confidently absent (posterior <= 1-T); origin "uncertain".
    They go to the front of the review queue and carry their best estimate: the classes at
    posterior >= 0.5 (an original class at --keep-original), which the export writes.
    --calibrate SOURCE first maps the posteriors onto how often SOURCE holds such a class.
    \b
    Examples:
      relabel snapshot create round-1
      relabel snapshot create real-baseline --base real     # ReaL labels where nobody decided
      relabel snapshot create round-1-ds --consensus ds --threshold 0.9
      relabel snapshot create raters-ds --consensus ds --votes real-raters --no-studio-votes
      relabel snapshot create round-2 --consensus ds --calibrate adjudications
    """
    from relabel.decisions.rules import DEFAULT_RULE, reads_votes
    from relabel.snapshots.freeze import DEFAULT_UNDECIDED, consensus_defaults, create_snapshot

    default_threshold, default_keep = consensus_defaults(calibrate)

    s = create_snapshot(
        settings.engine,
        name,
        dataset=dataset,
        base=base,
        undecided=undecided or DEFAULT_UNDECIDED,
        min_votes=min_votes,
        consensus=consensus or DEFAULT_RULE,
        threshold=default_threshold if threshold is None else threshold,
        keep_original=default_keep if keep_original is None else keep_original or None,
        calibrate=calibrate,
        reference=reference,
        vote_sources=vote_sources or None,
        with_model=with_model,
        studio_votes=studio_votes,
        show_progress=not quiet,
    )
    click.echo(f"snapshot {s.name!r}: {s.n_images} image(s), sha256 {s.content_hash[:16]}…")
    click.echo(f"  consensus: {consensus_line(s.consensus)}")
    from relabel.votes.fit import calibration_line, shared_caution

    if (caution := shared_caution(s.consensus)) is not None:
        click.echo(f"  caution: {caution}")
    if s.consensus.get("calibration"):
        click.echo(f"  {calibration_line(s.consensus['calibration'])}")
    click.echo(f"  categories: {counts(s.counts)}")
    click.echo(f"  labels from: {counts(s.origins)}")
    if reads_votes(s.consensus):
        click.echo(f"  uncertain images (U, review first): {s.uncertain}; posteriors stored: {s.n_posteriors}")
    if s.consensus.get("risk_coverage"):
        from relabel.votes.risk_coverage import coverage_lines

        for line in coverage_lines(s.consensus["risk_coverage"], s.consensus["threshold"]):
            click.echo(f"  {line}")


def consensus_line(c: dict[str, Any] | None) -> str:
    """ "ds, threshold 0.9, votes real-raters + studio, model resnet50 voted, 37 EM steps": how a snapshot's
    consensus was reached, from `Snapshot.consensus` (None: an older snapshot, settled by the default rule)."""
    from relabel.decisions.rules import DEFAULT_RULE, reads_votes
    from relabel.votes.aggregation import METHODS

    c = c or {}
    rule = c.get("rule", DEFAULT_RULE)
    if not reads_votes(c):  # a rule on the studio's decisions
        return f"{rule}, min votes {c.get('min_votes', 1)}"
    voters = [*c.get("vote_sources", []), *(["studio"] if c.get("studio") else [])]
    parts = [rule]
    if rule in METHODS and METHODS[rule].probabilistic:  # a counting method decides by its own rule
        parts.append(f"threshold {c.get('threshold')}")
        if c.get("keep_original"):
            parts.append(f"original kept at {c['keep_original']}")
    parts.append(f"votes {' + '.join(voters) or 'none'}")
    if c.get("with_model"):
        parts.append(f"model {c['with_model']} voted")
    if c.get("calibration"):
        cal = c["calibration"]
        parts.append(f"calibrated against {cal.get('against')} ({sum(cal.get('pairs', [])):,} pairs)")
    if c.get("iterations"):
        parts.append(f"{c['iterations']} EM steps" + ("" if c.get("converged", True) else " (not converged)"))
    return ", ".join(parts)


@snapshot.command("list")
@dataset_option()
@pass_settings
def snapshot_list(settings: Settings, dataset: str | None) -> None:
    """List snapshots, oldest first.

    \b
    Example:
      relabel snapshot list
    """
    from relabel.snapshots.freeze import list_snapshots

    for s in list_snapshots(settings.engine, dataset):
        click.echo(
            f"{s.name}\t{s.created_at:%Y-%m-%d %H:%M}\t{s.n_images} images\t{s.content_hash[:12]}\t"
            f"base={s.base_source} undecided={s.undecided_policy}\t{consensus_line(s.consensus)}\t{counts(s.counts)}"
        )


@snapshot.command("export")
@click.argument("name")
@registry_option(
    "--format", "fmt", entries="relabel.exports.formats:export_summaries", required=True, help="{entries}."
)
@click.option("--out", type=click.Path(path_type=Path), required=True, help="Output file (hf: a new or empty folder).")
@dataset_option()
@click.option(
    "--image-root",
    help="label-studio: folder or URL written before each image path (e.g. /data/local-files/?d=val/); default: "
    "the path as stored.",
)
@click.option("--run", help="label-studio: a stored run whose suggestions become the tasks' predictions.")
@click.option(
    "--allow-partial",
    is_flag=True,
    help="real: write a dataset that is not the full ILSVRC-2012 val set (with a warning); list i is then its i-th "
    "image in file-name order.",
)
@click.option("--force", is_flag=True, help="hf: replace an earlier hf export in --out (files are always replaced).")
@pass_settings
def snapshot_export(
    settings: Settings,
    name: str,
    fmt: str,
    out: Path,
    dataset: str | None,
    image_root: str | None,
    run: str | None,
    allow_partial: bool,
    force: bool,
) -> None:
    """Write a snapshot to a file, or for hf a folder (atomically: a failed export leaves nothing partial).

    \b
    real.json gives labels by position in ILSVRC-2012 val, so it is refused for any other dataset
    unless --allow-partial. hf writes a Hugging Face dataset (datasets.load_from_disk reads it;
    needs `pip install 'relabel[hf]'`) with the images copied in. jsonl and csv give each image's
    absolute path in `path`.

    \b
    Examples:
      relabel snapshot export round-1 --format real --out regt-round-1.json
      relabel snapshot export round-1 --format csv --out regt-round-1.csv
      relabel snapshot export round-1 --format label-studio --run effnet --image-root https://host/val/ --out t.json
      relabel snapshot export round-1 --format hf --out regt-round-1/
    """
    from relabel.exports.formats import export_snapshot

    n = export_snapshot(
        settings.engine,
        name,
        fmt=fmt,
        out=out,
        dataset=dataset,
        image_root=image_root,
        run=run,
        allow_partial=allow_partial,
        replace=force,
        warn=lambda note: click.echo(f"warning: {note}", err=True),
    )
    click.echo(f"wrote {n} image(s) to {out}")


@snapshot.command("diff")
@click.argument("a")
@click.argument("b")
@dataset_option()
@click.option("--limit", type=int, default=20, show_default=True, help="Changed images to list (0: none).")
@pass_settings
def snapshot_diff(settings: Settings, a: str, b: str, dataset: str | None, limit: int) -> None:
    """Count and list what changed from snapshot A to snapshot B: a category transition table, then the
    changed images with the posteriors of the classes that changed (when a snapshot stores them).

    \b
    Examples:
      relabel snapshot diff round-1 round-2 --limit 50
      relabel snapshot diff round-1 round-1-ds     # unanimous vs Dawid-Skene
    """
    from relabel.snapshots.diff import diff_snapshots

    d = diff_snapshots(settings.engine, a, b, dataset=dataset)
    click.echo(
        f"{a} -> {b}: {len(d.changed)} changed, {d.unchanged} unchanged, "
        f"{len(d.only_in_a)} only in {a}, {len(d.only_in_b)} only in {b}"
    )
    if d.transitions:
        click.echo(f"  category changes: {counts(d.transitions)}")
    for line in matrix_lines(d.matrix, a, b):
        click.echo(f"  {line}")
    for path, ca, cb, cat_a, cat_b in d.changed[:limit]:
        shown = d.posteriors.get(path)
        extra = f"\tposteriors {posterior_changes(shown)}" if shown else ""
        click.echo(f"  {path}\t{cat_a} {ca} -> {cat_b} {cb}{extra}")


def matrix_lines(matrix: dict[str, dict[str, int]], a: str, b: str) -> list[str]:
    """The category transition table, rows the categories in A, columns those in B (images in both)."""
    if not matrix:
        return []
    columns = sorted({cb for row in matrix.values() for cb in row}, key="ABMZXU".index)
    width = max(6, *(len(str(n)) + 1 for row in matrix.values() for n in row.values()))
    lines = [f"categories ({a} down, {b} across):", " " * 4 + "".join(f"{c:>{width}}" for c in columns)]
    for ca, row in matrix.items():
        lines.append(f"  {ca} " + "".join(f"{row.get(cb, 0):>{width}}" for cb in columns))
    return lines


def posterior_changes(shown: dict[int, tuple[float | None, float | None]], floor: float = 0.01) -> str:
    """ "795: none -> 1.00, 57: 0.76 -> 0.76 (+12 under 0.01)": each class's posterior before and after (none: not
    stored there); classes under `floor` in both are only counted."""
    listed = {c: pair for c, pair in shown.items() if max(p or 0.0 for p in pair) >= floor}
    text = ", ".join(f"{c}: {_p(pa)} -> {_p(pb)}" for c, (pa, pb) in listed.items())
    hidden = len(shown) - len(listed)
    if not listed:
        return f"{hidden} class(es), all under {floor}"
    return text + (f" (+{hidden} under {floor})" if hidden else "")


def _p(value: float | None) -> str:
    return "none" if value is None else f"{value:.2f}"


COMMANDS = [snapshot]
