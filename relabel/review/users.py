"""The workspace's user accounts as a lead manages them: list, disable and enable, set a password or a role.

A user is never deleted or renamed: their decisions stay in the log under their name. A disabled user cannot sign
in to the studio (`relabel.review.studio.Studio.login` answers as for a wrong password) nor save or undo a decision
(`relabel.decisions.annotations.disabled_user`), and disabling them ends their studio sessions in every
process (`relabel.review.sessions`); enabling them gives both back. The workspace keeps at least one active lead
once it has one: the last one can be neither demoted nor disabled. Creating a user and hashing a password is
`relabel.decisions.annotations`' job (`add_user`, `check_new_password`, `hash_password`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session, col

from db.engine import session_scope
from db.enums import Role, Verdict
from db.models import Annotation, User, stored_id
from relabel.common.errors import ConflictError
from relabel.decisions.annotations import check_new_password, get_user, hash_password
from relabel.review.sessions import end_user_sessions


@dataclass(frozen=True)
class UserSummary:
    """One row of `relabel users list`."""

    name: str
    role: Role
    active: bool
    created_at: datetime
    decisions: int  # decision events the user made, undos not counted (a decision later undone counts)


def list_users(engine: Engine) -> list[UserSummary]:
    """Every user by name, with their number of decisions: one query, whatever the number of users."""
    decisions = func.count(col(Annotation.id))
    query = (
        select(col(User.name), col(User.role), col(User.active), col(User.created_at), decisions)
        .join(
            Annotation,
            and_(col(Annotation.user_id) == col(User.id), col(Annotation.verdict) != Verdict.retract),
            isouter=True,
        )
        .group_by(col(User.id), col(User.name), col(User.role), col(User.active), col(User.created_at))
        .order_by(col(User.name))
    )
    with engine.connect() as conn:
        return [
            UserSummary(name, Role(role), bool(active), created_at, int(n))
            for name, role, active, created_at, n in conn.execute(query)
        ]


def require_user(engine: Engine, name: str) -> None:
    """Raise NotFoundError unless user `name` exists (checked before a new password is asked for)."""
    with Session(engine) as s:
        get_user(s, name)


def set_active(engine: Engine, name: str, active: bool) -> bool:
    """Enable (`active`) or disable user `name`; False when they already were. Disabling ends their sign-in
    sessions. Raises NotFoundError for an unknown name, ConflictError for disabling the last active lead."""
    with session_scope(engine) as s:
        user = get_user(s, name)
        if not active:
            _keep_a_lead(s, user, "disable")
            end_user_sessions(s.connection(), stored_id(user))  # one left over from before is ended too
        if user.active == active:
            return False
        user.active = active
        s.add(user)
    return True


def set_password(engine: Engine, name: str, password: str) -> None:
    """Replace user `name`'s password (checked as a new user's: `check_new_password`); their sessions in a running
    studio go on until they sign out."""
    check_new_password(password)
    with session_scope(engine) as s:
        user = get_user(s, name)
        user.password_hash = hash_password(password)
        s.add(user)


def set_role(engine: Engine, name: str, role: Role) -> Role:
    """Give user `name` the role `role`; returns their previous role. Raises ConflictError for demoting the last
    active lead. A running studio reads the new role when the user next signs in."""
    with session_scope(engine) as s:
        user = get_user(s, name)
        previous = Role(user.role)
        if previous is Role.lead and role is not Role.lead:
            _keep_a_lead(s, user, "demote")
        user.role = role
        s.add(user)
    return previous


def _keep_a_lead(s: Session, user: User, verb: str) -> None:
    """Refuse to `verb` `user` when they are the workspace's only active lead. The other leads' rows are locked
    (PostgreSQL), so two leads demoting each other at once cannot both succeed."""
    if user.role is not Role.lead or not user.active:
        return
    others = s.scalars(
        select(col(User.name))
        .where(col(User.role) == Role.lead, col(User.active), col(User.id) != user.id)
        .with_for_update()
    ).all()
    if not others:
        raise ConflictError(
            f"cannot {verb} {user.name!r}: they are the last active lead; make another user a lead first "
            "(`relabel users role NAME lead`)"
        )
