"""`relabel assign`: assign images, or the images of an original class, to annotators; list and remove assignments."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from relabel.cli.options import EXISTING_FILE, dataset_option, pass_settings
from relabel.common.settings import Settings


@click.group()
def assign() -> None:
    """Images and classes assigned to annotators. An image assigned to some annotators (directly, or through a
    class of its original labels) is served only to them, before any unassigned image; unassigned images go to
    everyone.

    \b
    Examples:
      relabel assign add --user alice --class tabby
      relabel assign add --user bob --images hard-cases.txt
      relabel assign list
    """


def _target(settings: Settings, dataset: str | None, class_name: str | None, images: Path | None) -> dict[str, Any]:
    """The keyword arguments naming what an add or remove is about, each name checked (one-line errors)."""
    from sqlmodel import Session

    from db.models import stored_id
    from relabel.common.errors import InputError
    from relabel.common.workspace import dataset_vocabulary, get_dataset
    from relabel.review.assignments import read_image_tokens, resolve_images

    with Session(settings.engine) as s:
        ds = get_dataset(s, dataset)
        vocab = dataset_vocabulary(s, ds)
    dataset_id = stored_id(ds)
    if class_name is not None and images is None:
        return {"dataset_id": dataset_id, "class_index": vocab.resolve(class_name), "vocab": vocab}
    if images is not None and class_name is None:
        tokens = read_image_tokens(images)
        return {"dataset_id": dataset_id, "image_ids": resolve_images(settings.engine, dataset_id, tokens)}
    raise InputError("name either --class or --images (one of them)")


class_option = click.option("--class", "class_name", metavar="NAME_OR_WNID", help="A class of the images' ImGT labels.")
images_option = click.option(
    "--images", type=EXISTING_FILE, help="A file of image ids, relative paths or file names, one a line."
)


@assign.command("add")
@click.option("--user", required=True, help="The annotator (or lead) the images go to.")
@class_option
@images_option
@dataset_option()
@pass_settings
def assign_add(settings: Settings, user: str, class_name: str | None, images: Path | None, dataset: str | None) -> None:
    """Assign a class (every image whose original labels hold it) or the images listed in a file to a user, all or
    nothing: an unknown user, class or image is refused by name and nothing is stored. A running studio honours it
    on the next card.

    \b
    Examples:
      relabel assign add --user alice --class n02123045
      relabel assign add --user bob --images ids.txt      # 17, n01440764_tench.jpg, ...
    """
    from relabel.review.assignments import add_assignments

    target = _target(settings, dataset, class_name, images)
    added = add_assignments(settings.engine, user=user, by="relabel assign", **target)
    what = f"class {class_name!r}" if class_name is not None else f"{len(target['image_ids']):,} image(s)"
    click.echo(f"assigned {what} to {user!r}: {added:,} new assignment(s)")


@assign.command("list")
@click.option("--user", help="Only this user's assignments.")
@dataset_option()
@pass_settings
def assign_list(settings: Settings, user: str | None, dataset: str | None) -> None:
    """List the assignments: user, image or class, when and by whom.

    \b
    Examples:
      relabel assign list
      relabel assign list --user alice
    """
    from sqlmodel import Session

    from db.models import stored_id
    from relabel.common.workspace import dataset_vocabulary, get_dataset
    from relabel.review.assignments import list_assignments

    with Session(settings.engine) as s:
        ds = get_dataset(s, dataset)
        vocab = dataset_vocabulary(s, ds)
    rows = list_assignments(settings.engine, stored_id(ds), vocab, user=user)
    if not rows:
        click.echo("no assignments: every image goes to every annotator")
        return
    width = max(len("user"), *(len(r.user) for r in rows))
    click.echo(f"{'user':<{width}}  what   {'assigned (UTC)':<16}  by  target")
    for r in rows:
        target = f"{r.image_id} {r.target}" if r.image_id is not None else r.target
        click.echo(f"{r.user:<{width}}  {r.what:<5}  {r.created_at:%Y-%m-%d %H:%M}  {r.created_by or '-'}  {target}")


@assign.command("remove")
@click.option("--user", required=True, help="Whose assignment ends.")
@class_option
@images_option
@click.option("--all", "everything", is_flag=True, help="End all of the user's assignments in the dataset.")
@dataset_option()
@pass_settings
def assign_remove(
    settings: Settings,
    user: str,
    class_name: str | None,
    images: Path | None,
    everything: bool,
    dataset: str | None,
) -> None:
    """End a user's assignment of a class, of the images listed in a file, or (--all) every one of theirs; the
    images go to everyone again.

    \b
    Examples:
      relabel assign remove --user alice --class n02123045
      relabel assign remove --user bob --all
    """
    from sqlmodel import Session

    from db.models import stored_id
    from relabel.common.errors import InputError
    from relabel.common.workspace import get_dataset
    from relabel.review.assignments import remove_assignments

    if everything:
        if class_name is not None or images is not None:
            raise InputError("--all ends every assignment of the user; do not name a class or images with it")
        with Session(settings.engine) as s:
            target: dict[str, Any] = {"dataset_id": stored_id(get_dataset(s, dataset)), "everything": True}
    else:
        target = _target(settings, dataset, class_name, images)
    ended = remove_assignments(settings.engine, user=user, **target)
    click.echo(f"ended {ended:,} assignment(s) of {user!r}")


COMMANDS = [assign]
