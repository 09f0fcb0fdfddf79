"""The `relabel` command line: a thin edge that parses options, calls one service, prints the result.

Errors become one line on stderr and a non-zero exit; Ctrl-C leaves finished work saved for a re-run.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from relabel import __version__
from relabel.cli.commands import COMMANDS, ENTRY_POINT_GROUP, LazyCommands
from relabel.common.collector import pause_for_start_up, start_up_done
from relabel.common.errors import RelabelError
from relabel.common.settings import Settings


class RelabelGroup(click.Group):
    """The root group: commands imported when first used (see relabel.cli.commands), errors as one line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands(COMMANDS, ENTRY_POINT_GROUP)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """As click's, but listing a core command not imported yet by its summary, without importing it."""
        assert isinstance(self.commands, LazyCommands)
        listed = [(name, self.commands.listed(name)) for name in self.list_commands(ctx)]
        rows = [(name, command) for name, command in listed if not command.hidden]
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section("Commands"):
                formatter.write_dl([(name, command.get_short_help_str(limit)) for name, command in rows])

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except RelabelError as exc:
            _fail(str(exc), exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted; finished work is saved, run the same command again to resume", 130)
        except Exception as exc:
            _fail_on_database_error(exc)
            raise
        return None


def _fail_on_database_error(exc: Exception) -> None:
    """One line for a database that is out of date or unreachable. Only a command that used the database can
    raise these, so the database layer is looked at only once it is imported (the help never imports it)."""
    if "db.migrations" in sys.modules:
        from db.migrations import SchemaError

        if isinstance(exc, SchemaError):
            _fail(str(exc), 5)
    if "sqlalchemy.exc" in sys.modules:
        from sqlalchemy.exc import OperationalError

        if isinstance(exc, OperationalError):
            _fail(f"database error: {str(exc.orig).strip().splitlines()[0]}", 5)


def _fail(message: str, code: int) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


@click.group(cls=RelabelGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--workspace",
    type=click.Path(file_okay=False),
    envvar="RELABEL_WORKSPACE",
    default="workspace",
    show_default=True,
    help="Workspace directory (env RELABEL_WORKSPACE); holds relabel.db and caches.",
)
@click.option(
    "--db",
    "db_url",
    envvar="RELABEL_DB",
    default=None,
    help="SQLAlchemy URL of the workspace database (env RELABEL_DB); default: WORKSPACE/relabel.db.",
)
@click.version_option(__version__, prog_name="relabel")
@click.pass_context
def cli(ctx: click.Context, workspace: str, db_url: str | None) -> None:
    """ReGT studio: re-annotate image classification labels and re-score models against them.

    \b
    Typical workflow:
      relabel ingest /data/imagenet/val --labels LOC_val_solution.csv --dataset val
      relabel labels import real.json --format real
      relabel predictions import preds.csv --run resnet50
      relabel snapshot create regt-v1
      relabel snapshot export regt-v1 --format real --out regt-v1.json
    """
    from pathlib import Path

    ctx.obj = Settings(workspace=Path(workspace), db_url=db_url)
    ctx.call_on_close(ctx.obj.close)


def main(argv: list[str] | None = None) -> None:
    """Entry point; click's usage errors are folded into the same one-line form as ours.

    The cyclic garbage collector is paused from here until the workspace's database is open (or the command ends):
    see `relabel.common.collector.pause_for_start_up`."""
    pause_for_start_up()
    try:
        cli.main(args=argv, prog_name="relabel", standalone_mode=False)
    except click.exceptions.Abort:
        _fail("aborted", 130)
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "relabel"
        _fail(f"{exc.format_message()} (see `{where} --help`)", exc.exit_code)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    finally:
        start_up_done(freeze=False)  # a command that never opened the workspace: the collector as it was
