"""`relabel users`: add, list, disable and enable the workspace's annotators and leads; set a password or a role."""

from __future__ import annotations

import json

import click
from click.core import ParameterSource

from relabel.cli.choices import RegistryChoice
from relabel.cli.options import pass_settings
from relabel.common.settings import Settings

PASSWORD_ENV = "RELABEL_PASSWORD"


def role_names() -> dict[str, str]:
    """The roles of db.enums.Role by value; the database layer is imported only when a command reads them."""
    from db.enums import Role

    return {r.value: "" for r in Role}


ROLE_CHOICE = RegistryChoice(role_names)


@click.group()
def users() -> None:
    """Annotators and leads of the workspace.

    \b
    Example:
      relabel users list
    """


def new_password(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The password option's check: too short a password is asked for again (or, given, refused, naming where it
    came from: the option or the RELABEL_PASSWORD variable)."""
    from relabel.common.errors import InputError
    from relabel.decisions.annotations import check_new_password

    try:
        return check_new_password(value)
    except InputError as exc:
        source = ctx.get_parameter_source(param.name) if param.name else None
        hint = f"environment variable {PASSWORD_ENV}" if source is ParameterSource.ENVIRONMENT else None
        raise click.BadParameter(str(exc), ctx=ctx, param=param, param_hint=hint) from exc


def existing_user(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """The NAME argument's check: an unknown user is refused before the password is asked for."""
    from relabel.review.users import require_user

    settings = ctx.find_object(Settings)
    if settings is not None:
        require_user(settings.engine, value)
    return value


password_option = click.option(
    "--password",
    prompt=True,
    hide_input=True,
    confirmation_prompt=True,
    envvar=PASSWORD_ENV,
    callback=new_password,
    help=f"At least 8 characters; prompted for when not given (env {PASSWORD_ENV}).",
)


@users.command("add")
@click.argument("name")
@click.option("--role", type=ROLE_CHOICE, default="annotator", show_default=True)
@password_option
@pass_settings
def users_add(settings: Settings, name: str, role: str, password: str) -> None:
    """Add a user with a password (stored as a salted scrypt hash; at least 8 characters).

    \b
    Example:
      relabel users add alice --role annotator
      RELABEL_PASSWORD='correct horse battery' relabel users add lena --role lead
    """
    from db.enums import Role
    from relabel.decisions.annotations import add_user

    add_user(settings.engine, name, Role(role), password)
    click.echo(f"added {role} {name!r}")


@users.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON list instead of a table.")
@pass_settings
def users_list(settings: Settings, as_json: bool) -> None:
    """List users by name: role, active or disabled, when added, and how many decisions they made (undos not
    counted).

    \b
    Examples:
      relabel users list
      relabel users list --json > users.json
    """
    from relabel.review.users import list_users

    rows = list_users(settings.engine)
    if as_json:
        keys = ("name", "role", "active", "created_at", "decisions")
        values = [(u.name, u.role.value, u.active, u.created_at.isoformat(), u.decisions) for u in rows]
        click.echo(json.dumps([dict(zip(keys, v)) for v in values], ensure_ascii=False))
        return
    if not rows:
        click.echo("no users yet; add one with `relabel users add NAME --role lead`")
        return
    width = max(len("name"), *(len(u.name) for u in rows))
    click.echo(f"{'name':<{width}}  role       status    created           decisions")
    for u in rows:
        status = "active" if u.active else "disabled"
        click.echo(
            f"{u.name:<{width}}  {u.role.value:<9}  {status:<8}  {u.created_at:%Y-%m-%d %H:%M}  {u.decisions:>9}"
        )


@users.command("disable")
@click.argument("name")
@pass_settings
def users_disable(settings: Settings, name: str) -> None:
    """Stop a user signing in to the studio or saving decisions; their decisions so far stay and count.

    \b
    Example:
      relabel users disable bob
    """
    from relabel.review.users import set_active

    changed = set_active(settings.engine, name, False)
    click.echo(f"disabled {name!r}" if changed else f"{name!r} was already disabled")


@users.command("enable")
@click.argument("name")
@pass_settings
def users_enable(settings: Settings, name: str) -> None:
    """Let a disabled user sign in again, with the password they had.

    \b
    Example:
      relabel users enable bob
    """
    from relabel.review.users import set_active

    changed = set_active(settings.engine, name, True)
    click.echo(f"enabled {name!r}" if changed else f"{name!r} was already enabled")


@users.command("passwd")
@click.argument("name", callback=existing_user)
@password_option
@pass_settings
def users_passwd(settings: Settings, name: str, password: str) -> None:
    """Set a user's password (at least 8 characters, as for `users add`).

    \b
    Examples:
      relabel users passwd alice                                   # prompts twice, hidden
      RELABEL_PASSWORD='a new passphrase' relabel users passwd alice
    """
    from relabel.review.users import set_password

    set_password(settings.engine, name, password)
    click.echo(f"password of {name!r} changed")


@users.command("role")
@click.argument("name")
@click.argument("role", type=ROLE_CHOICE)
@pass_settings
def users_role(settings: Settings, name: str, role: str) -> None:
    """Make a user an annotator or a lead. The last active lead cannot be demoted. The studio applies the new role
    when the user next signs in.

    \b
    Examples:
      relabel users role lee lead
      relabel users role alice annotator
    """
    from db.enums import Role
    from relabel.review.users import set_role

    previous = set_role(settings.engine, name, Role(role))
    click.echo(f"{name!r} is now {role}" if previous.value != role else f"{name!r} was already {role}")


COMMANDS = [users]
