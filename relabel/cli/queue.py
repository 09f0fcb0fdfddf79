"""`relabel queue`: the next images of the review queue, in the order the studio serves them, and why."""

from __future__ import annotations

import json

import click

from relabel.cli.options import dataset_option, pass_settings
from relabel.common.settings import Settings


@click.command("queue")
@dataset_option()
@click.option("--limit", type=int, default=20, show_default=True, help="How many images to list.")
@click.option(
    "--overlap", type=int, default=1, show_default=True, help="Annotators per image, as `relabel serve --overlap`."
)
@click.option("--suggestion-run", help="As `relabel serve`: the run whose answers are the suggestion.")
@click.option("--classifier-run", help="As `relabel serve`: the run shown as the classifier's top-5.")
@click.option(
    "--user", help="List the queue as this user gets it: their assigned images first, none assigned only to others."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a table.")
@pass_settings
def queue(
    settings: Settings,
    dataset: str | None,
    limit: int,
    overlap: int,
    suggestion_run: str | None,
    classifier_run: str | None,
    user: str | None,
    as_json: bool,
) -> None:
    """List the next images of the review queue: rank, image id, file, original class, benefit, reason.

    \b
    With a snapshot whose consensus read votes (`snapshot create --consensus ds`), the images
    come by the expected benefit of one more review: how uncertain the label set is plus how
    many stored runs' top-1 it would settle ("P(tabby cat) = 0.55; changes 3 runs' top-1").
    The rest follow by the evidence against the original label (benefit "-"). Images a lead
    assigned (`relabel assign`) go only to their assignees, first: without --user the list is
    a newcomer's, who has nothing assigned.
    \b
    Examples:
      relabel queue
      relabel queue --limit 50 --overlap 3
      relabel queue --dataset val --json > next.json
      relabel queue --user alice --limit 10
    """
    from relabel.review.upcoming import list_queue

    listing = list_queue(
        settings.engine,
        dataset,
        limit=limit,
        overlap=overlap,
        suggestion_run=suggestion_run,
        classifier_run=classifier_run,
        user=user,
    )
    if as_json:
        entries = [
            {
                "rank": e.rank,
                "image_id": e.image_id,
                "path": e.path,
                "original": [{"index": c, "name": n} for c, n in zip(e.original, e.original_names)],
                "benefit": None if e.benefit is None else round(e.benefit, 4),
                "reason": e.reason,
            }
            for e in listing.entries
        ]
        head = {"dataset": listing.dataset, "snapshot": listing.snapshot, "runs": list(listing.runs), "user": user}
        click.echo(json.dumps(head | {"open_images": listing.open_images, "images": entries}, ensure_ascii=False))
        return
    by = (
        f"by benefit from snapshot {listing.snapshot!r} and {len(listing.runs)} run(s), then by evidence"
        if listing.snapshot
        else "by evidence (no snapshot reads votes)"
    )
    who = "" if user is None else f" for {user}"
    click.echo(
        f"dataset {listing.dataset!r}: next {len(listing.entries)} of {listing.open_images} open image(s){who}, {by}"
    )
    click.echo("rank\timage\tfile\toriginal\tbenefit\treason")
    for e in listing.entries:
        benefit = "-" if e.benefit is None else f"{e.benefit:.3f}"
        original = "; ".join(e.original_names) or "-"
        click.echo(f"{e.rank}\t{e.image_id}\t{e.path}\t{original}\t{benefit}\t{e.reason}")


COMMANDS = [queue]
