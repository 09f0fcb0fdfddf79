"""Vote commands: import workers' answers, aggregate them into labels, and list each worker's reliability."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from relabel.cli.choices import ListingOption, RegistryChoice, lazy_entries, registry_option
from relabel.cli.options import EXISTING_FILE, dataset_option, pass_settings
from relabel.cli.render import counts
from relabel.common.settings import Settings

if TYPE_CHECKING:
    from relabel.votes.report import AggregationReport, WorkerRow


@click.group()
def votes() -> None:
    """Workers' answers ("is class c in image i?": yes / maybe / no): import, aggregate, worker reliability.

    \b
    Examples:
      relabel votes import real_raters.npz --format real-raters
      relabel votes aggregate --method ds --compare real
    """


@votes.command("import")
@click.argument("path", type=EXISTING_FILE)
@registry_option("--format", "fmt", entries="relabel.votes.formats:VOTE_FORMATS", required=True, help="{entries}.")
@click.option("--name", help="Vote source name (default: the format's name).")
@dataset_option()
@click.option("--replace", is_flag=True, help="Replace an existing vote source of the same name.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@pass_settings
def votes_import(
    settings: Settings, path: Path, fmt: str, name: str | None, dataset: str | None, replace: bool, quiet: bool
) -> None:
    """Import a file of workers' answers as a vote source. All votes or nothing.

    \b
    Examples:
      relabel votes import real_raters.npz --format real-raters --name real-raters
      relabel votes import mturk_label_errors.json --format mturk
      relabel votes import round2.csv --format long --name round2     # worker,image,label,answer
    """
    from relabel.votes.importing import import_votes

    r = import_votes(
        settings.engine, path, fmt=fmt, name=name, dataset=dataset, replace=replace, show_progress=not quiet
    )
    click.echo(
        f"vote source {r.source!r}: {r.votes:,} vote(s) from {r.workers:,} worker(s) on {r.items:,} (image, class) "
        f"pair(s) of {r.images:,} image(s) in {r.seconds:.1f} s ({r.rate:,.0f} votes/s)"
    )
    click.echo(f"  answers: {counts(r.answers)}")


@votes.command("list")
@dataset_option()
@pass_settings
def votes_list(settings: Settings, dataset: str | None) -> None:
    """List the imported vote sources.

    \b
    Example:
      relabel votes list
    """
    from relabel.votes.report import list_sources

    rows = list_sources(settings.engine, dataset=dataset)
    if not rows:
        click.echo("no vote source yet; import one with `relabel votes import FILE --format ...`")
    for s in rows:
        who = "workers" if s.workers_identified else "anonymous ballots per image"
        click.echo(
            f"{s.name}  ({s.format})  {s.n_votes:,} votes, {s.n_workers:,} {who}, {s.n_images:,} images, "
            f"imported {s.imported_at:%Y-%m-%d %H:%M} from {s.origin}"
        )


def _split(sources: tuple[str, ...]) -> tuple[str, ...] | None:
    """--sources a,b --sources c as (a, b, c); None when not given (every source)."""
    names = tuple(n.strip() for s in sources for n in s.split(",") if n.strip())
    return names or None


Command = TypeVar("Command", bound=Callable[..., Any])  # a command function, before click wraps it


def vote_options(command: Command) -> Command:
    """The options that choose which votes a command reads."""
    for option in reversed(
        [
            dataset_option(),
            click.option(
                "--sources",
                multiple=True,
                help="Imported vote sources to read (repeatable or comma-separated; default: all of them).",
            ),
            click.option("--no-studio", is_flag=True, help="Leave out the studio annotators' decisions."),
            click.option(
                "--with-model",
                metavar="RUN",
                help="Let a stored run vote as one more worker (yes to its top-1, no to the other candidates).",
            ),
        ]
    ):
        command = option(command)
    return command


class MethodChoice(RegistryChoice):
    """The aggregation methods' names (`relabel.votes.aggregation.METHODS`); an old name (`RENAMED`) is taken as the
    method's name now, with a one-line note on stderr."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from relabel.votes.aggregation import RENAMED

        if value in RENAMED:
            click.echo(f"note: --method {value} is now called {RENAMED[value]}; the old name will go", err=True)
            value = RENAMED[value]
        return super().convert(value, param, ctx)


@votes.command("aggregate")
@click.option(
    "--method",
    cls=ListingOption,
    entries=lazy_entries("relabel.votes.aggregation:method_summaries"),
    type=MethodChoice(lazy_entries("relabel.votes.aggregation:METHODS")),
    default="ds",
    show_default=True,
    help="{entries}.",
)
@click.option(
    "--threshold",
    type=float,
    help="Posterior a class needs (ds, one-coin), at least 0.5. Default 0.9; with --calibrate 0.75 (as snapshot "
    "create).",
)
@click.option(
    "--keep-original",
    type=float,
    help="Posterior an original (ImGT) class needs to stay: the burden of proof lies on a change; 0 turns it off. "
    "Default 0.5; with --calibrate off.",
)
@click.option(
    "--calibrate",
    metavar="SOURCE",
    help="Calibrate the posteriors (isotonic) against a label source you trust or 'adjudications' before the "
    "threshold applies, as snapshot create --calibrate does; ds and one-coin only.",
)
@click.option("--compare", metavar="SOURCE", help="A label source (e.g. real) to measure agreement with.")
@vote_options
@pass_settings
def votes_aggregate(
    settings: Settings,
    method: str,
    threshold: float | None,
    keep_original: float | None,
    calibrate: str | None,
    compare: str | None,
    dataset: str | None,
    sources: tuple[str, ...],
    no_studio: bool,
    with_model: str | None,
) -> None:
    """Aggregate the votes into labels and print the method's figures (majority vote's beside, with --compare).
    Compared against the source it was calibrated on, the figure is in-sample; the line after it calibrates each
    half of the images on the other half alone (out of sample).

    \b
    Examples:
      relabel votes aggregate --method ds --threshold 0.9 --compare real
      relabel votes aggregate --method ds --calibrate real --compare real   # in- and out-of-sample
      relabel votes aggregate --method majority --sources mturk --no-studio
      relabel votes aggregate --with-model effnet    # a model run joins as a worker
    """
    from relabel.snapshots.freeze import consensus_defaults
    from relabel.votes.report import VoteChoice, aggregate_dataset

    default_threshold, default_keep = consensus_defaults(calibrate)
    choice = VoteChoice(_split(sources), not no_studio, with_model)
    report = aggregate_dataset(
        settings.engine,
        dataset=dataset,
        method=method,
        threshold=default_threshold if threshold is None else threshold,
        keep_original=default_keep if keep_original is None else keep_original or None,
        choice=choice,
        compare=compare,
        calibrate=calibrate,
    )
    aggregation_report(report)


@votes.command("workers")
@click.option(
    "--sort",
    type=RegistryChoice(lazy_entries("relabel.votes.report:SORT_KEYS")),
    default="sensitivity",
    show_default=True,
    help="Order of the rows (weakest first; answers: most first).",
)
@click.option("--limit", type=click.IntRange(min=1), help="Show at most this many workers.")
@vote_options
@pass_settings
def votes_workers(
    settings: Settings,
    sort: str,
    limit: int | None,
    dataset: str | None,
    sources: tuple[str, ...],
    no_studio: bool,
    with_model: str | None,
) -> None:
    """Each worker's sensitivity P(yes | present), specificity P(no | absent) and answers, from a Dawid-Skene fit;
    flags spammers (answers that barely depend on the truth) and workers who need feedback.

    \b
    Examples:
      relabel votes workers --sort sensitivity --limit 10
      relabel votes workers --sources real-raters --no-studio
    """
    from relabel.votes.report import VoteChoice, worker_reliability

    choice = VoteChoice(_split(sources), not no_studio, with_model)
    rows = worker_reliability(settings.engine, dataset=dataset, choice=choice, sort=sort, limit=limit)
    if not rows:
        click.echo("no votes yet; import some with `relabel votes import` or decide images in the studio")
    reliability_table(rows)


def aggregation_report(r: AggregationReport) -> None:
    """The figures of one aggregation, and its agreement with a reference, one line per method."""
    from relabel.votes.aggregation import METHODS

    keep = (
        f", original classes kept at >= {r.keep_original}"
        if r.keep_original and METHODS[r.method].probabilistic
        else ""
    )
    rule = f"threshold {r.threshold}{keep}" if METHODS[r.method].probabilistic else "its own rule"
    model = f"; model {r.with_model} votes as a worker" if r.with_model else ""
    click.echo(f"method {r.method} ({rule}) on sources {', '.join(r.sources) or 'none'}{model}")
    click.echo(
        f"  {r.votes:,} votes by {r.workers:,} workers on {r.items:,} (image, class) pairs of {r.images:,} images; "
        f"fit in {r.seconds:.2f} s"
        + (f", {r.iterations} EM steps" if r.iterations else "")
        + ("" if r.converged else " (not converged)")
    )
    click.echo(
        f"  labels: {r.accepted:,} pairs accepted; {r.uncertain:,} pairs uncertain on {r.uncertain_images:,} images "
        "(neither accepted nor confidently absent: the images a snapshot makes U, origin uncertain)"
    )
    from relabel.votes.fit import calibration_line, shared_caution

    if r.calibration:
        click.echo(f"  {calibration_line(r.calibration)}")
    if (caution := shared_caution({"rule": r.method, "shared_answers": r.shared_answers})) is not None:
        click.echo(f"  caution: {caution}")
    for k, a in enumerate(r.agreement):
        caveat = " (in-sample: the posteriors were calibrated on it)" if k == 0 and r.in_sample else ""
        click.echo(
            f"  vs {r.reference} [{a.method}]: {a.pair_share:.2%} of {a.pairs:,} rated pairs agree; "
            f"{a.set_share:.2%} of {a.images:,} rated images have the same label set{caveat}"
        )


def reliability_table(rows: list[WorkerRow]) -> None:
    """Workers' reliability as a plain-text table."""
    from relabel.votes.report import reliability_lines

    for line in reliability_lines(rows):
        click.echo(line)


COMMANDS = [votes]
