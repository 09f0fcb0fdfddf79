"""Decision commands: import annotators' decisions made in another tool, as if made in the studio."""

from __future__ import annotations

from pathlib import Path

import click

from relabel.cli.choices import registry_option
from relabel.cli.options import EXISTING_FILE, dataset_option, pass_settings
from relabel.common.settings import Settings


@click.group()
def decisions() -> None:
    """Annotators' per-image decisions made outside the studio: import them.

    \b
    Examples:
      relabel decisions import decisions.csv --format csv
      relabel decisions import project.json --format label-studio --user 7=alice
    """


@decisions.command("import")
@click.argument("path", type=EXISTING_FILE)
@registry_option(
    "--format",
    "fmt",
    entries="relabel.interop.decisions:DECISION_FORMATS",
    required=True,
    help="{entries}.",
)
@click.option(
    "--user",
    "users",
    multiple=True,
    metavar="NAME|ID=NAME",
    help="NAME: every decision is NAME's. ID=NAME (repeatable): store the file's user ID (Label Studio's numeric "
    "completed_by) as studio user NAME; users not listed keep the name the file gives.",
)
@dataset_option()
@click.option(
    "--empty-as",
    type=click.Choice(["none-fit", "unclear"]),
    help="Store an empty label set as 'no class fits' or 'unclear' (default: refuse it).",
)
@click.option("--image-root", default="", help="Folder or URL prefix to strip from image paths (as exported).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@pass_settings
def decisions_import(
    settings: Settings,
    path: Path,
    fmt: str,
    users: tuple[str, ...],
    dataset: str | None,
    empty_as: str | None,
    image_root: str,
    quiet: bool,
) -> None:
    """Import per-image label sets, each checked as the studio checks a saved decision (the user exists and is
    active, the image is in the dataset, every class is in its vocabulary, the set is not empty), all or nothing:
    one bad or repeated row (one image, one user, twice) is refused with its line, and nothing is stored. Importing
    the same file again stores nothing twice. A running studio shows them after "Reload queue".

    \b
    An image is its relative path, file name or id; classes are names, wnids or indices
    (';'-separated in CSV). Label Studio's completed_by is a numeric user id: map it with
    --user 7=alice --user 9=bob, or pass --user alice when one person made them all.
    \b
    Examples:
      relabel decisions import round1.csv --format csv          # image,user,classes,note
      relabel decisions import round1.jsonl --format jsonl --empty-as none-fit
      relabel decisions import project-3.json --format label-studio --user 7=alice --user 9=bob
    """
    from relabel.interop.decisions import import_decisions

    r = import_decisions(
        settings.engine,
        path,
        fmt=fmt,
        users=users,
        dataset=dataset,
        empty_as=empty_as,
        image_root=image_root,
        show_progress=not quiet,
    )
    click.echo(
        f"{r.stored:,} decision(s) stored for {r.images:,} image(s) by {r.users:,} user(s) in {r.seconds:.1f} s"
        + (f"; {r.already:,} already stored by an earlier import of this file" if r.already else "")
    )


COMMANDS = [decisions]
