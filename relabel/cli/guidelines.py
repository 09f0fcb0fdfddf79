"""`relabel guidelines`: the labeling guidelines annotators read on the review card (key G); `relabel comments`:
the comments left on images from their cards (key O)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from relabel.cli.options import EXISTING_FILE, pass_settings
from relabel.common.settings import Settings

MAX_FILE_BYTES = 4 * 64 * 1024  # 64 KiB of text in UTF-32, the widest encoding read; bigger is refused unread


@click.group()
def guidelines() -> None:
    """Labeling guidelines: Markdown a lead writes, shown to annotators on the review card (key G).

    \b
    Example:
      relabel guidelines set guidelines.md --author lena
    """


@guidelines.command("set")
@click.argument("file", type=EXISTING_FILE)
@click.option("--author", required=True, help="The lead who wrote them (a user with role lead).")
@pass_settings
def guidelines_set(settings: Settings, file: Path, author: str) -> None:
    """Save FILE (Markdown, at most 64 KiB) as the current guidelines; the earlier versions are kept.

    The studio shows headings, bullet lists and **bold**; everything else as plain text, never as HTML.

    \b
    Example:
      relabel guidelines set guidelines.md --author lena
    """
    from relabel.common.errors import InputError
    from relabel.common.textfiles import decode_text
    from relabel.review.guidelines import MAX_GUIDELINES_BYTES, save_guidelines

    if not file.is_file():  # a device or a pipe could be read without end
        raise InputError(f"{file}: not a regular file; save the guidelines in a .md file first")
    try:
        with file.open("rb") as fh:
            data = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{file}: cannot read ({exc.strerror or exc})") from None
    if len(data) > MAX_FILE_BYTES:
        raise InputError(f"{file}: more than {MAX_FILE_BYTES:,} bytes; the guidelines hold at most "
                         f"{MAX_GUIDELINES_BYTES:,} bytes (64 KiB) of UTF-8")  # fmt: skip
    text = decode_text(data, str(file))
    try:
        version, added = save_guidelines(settings.engine, text, author=author)
    except InputError as exc:
        raise InputError(f"{file}: {exc}") from None
    if added:
        click.echo(f"saved guidelines version {version.id} by {version.author} ({len(text.encode()):,} bytes)")
    else:
        click.echo(f"unchanged: {file} is the current guidelines (version {version.id})")


@guidelines.command("show")
@pass_settings
def guidelines_show(settings: Settings) -> None:
    """Print the current guidelines as they were saved.

    \b
    Example:
      relabel guidelines show > guidelines.md
    """
    from relabel.review.guidelines import current_guidelines

    version = current_guidelines(settings.engine)
    if version is None:
        click.echo("no guidelines yet; a lead saves some with `relabel guidelines set FILE.md --author NAME`", err=True)
        return
    click.echo(version.text, nl=not version.text.endswith("\n"))


@guidelines.command("history")
@click.option("--json", "as_json", is_flag=True, help="One JSON list, texts included.")
@pass_settings
def guidelines_history_command(settings: Settings, as_json: bool) -> None:
    """List the saved versions of the guidelines, newest (the current one) first: version, when, author, size.

    \b
    Examples:
      relabel guidelines history
      relabel guidelines history --json > guidelines-history.json
    """
    from relabel.review.guidelines import guidelines_history

    versions = guidelines_history(settings.engine)
    if as_json:
        rows = [{"version": v.id, "created_at": v.created_at.isoformat(), "author": v.author, "text": v.text}
                for v in versions]  # fmt: skip
        click.echo(json.dumps(rows, ensure_ascii=False))
        return
    if not versions:
        click.echo("no guidelines yet")
        return
    click.echo("version  created (UTC)     author  bytes")
    for v in versions:
        click.echo(f"{v.id:>7}  {v.created_at:%Y-%m-%d %H:%M}  {v.author}  {len(v.text.encode()):,}")


@click.group()
def comments() -> None:
    """Comments left on images from the studio's cards (key O).

    \b
    Example:
      relabel comments list --image 42
    """


@comments.command("list")
@click.option("--image", "image_id", type=click.IntRange(min=1), help="Only the comments on this image id.")
@click.option("--user", help="Only the comments of this user.")
@click.option("--json", "as_json", is_flag=True, help="One JSON list instead of lines.")
@pass_settings
def comments_list(settings: Settings, image_id: int | None, user: str | None, as_json: bool) -> None:
    """List comments, oldest first: when (UTC), image id and file, author, text.

    \b
    Examples:
      relabel comments list
      relabel comments list --image 42
      relabel comments list --user alice --json > alice-comments.json
    """
    from relabel.review.comments import list_comments

    rows = list_comments(settings.engine, image_id=image_id, user=user)
    if as_json:
        keys = ("id", "image_id", "path", "user", "text", "created_at")
        values = [(c.id, c.image_id, c.path, c.user, c.text, c.created_at.isoformat()) for c in rows]
        click.echo(json.dumps([dict(zip(keys, v)) for v in values], ensure_ascii=False))
        return
    if not rows:
        click.echo("no comments")
        return
    for c in rows:
        text = c.text.replace("\r", " ").replace("\n", " ")  # one comment, one line
        click.echo(f"{c.created_at:%Y-%m-%d %H:%M}  image {c.image_id} ({c.path})  {c.user}: {text}")
