"""Schema versions: a tiny ordered registry of migrations.

A new workspace gets every table of `db.models` at once and is stamped with the newest version. An existing
workspace gets each migration newer than its stamp, in order, each in its own transaction. A migration is a
function of a connection; append new ones to `MIGRATIONS` and never edit a released one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter

from sqlalchemy import inspect, select, text
from sqlalchemy.engine import Connection, Engine
from sqlmodel import SQLModel, col

from db import models
from db.models import SchemaVersion
from db.vote_packing import ANSWER_BYTES, pack_pair


class SchemaError(RuntimeError):
    """The workspace's schema cannot be used by this version of the tool."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    apply: Callable[[Connection], None]


IMMUTABLE_TABLES = ("snapshots", "snapshot_labels", "snapshot_posteriors")


def _install_immutability_triggers(conn: Connection) -> None:
    """Refuse UPDATE and DELETE on frozen snapshot tables, whatever client writes to the database."""
    dialect = conn.dialect.name
    for table in IMMUTABLE_TABLES:
        if dialect == "sqlite":
            for op in ("UPDATE", "DELETE"):
                conn.execute(
                    text(
                        f"CREATE TRIGGER IF NOT EXISTS {table}_no_{op.lower()} BEFORE {op} ON {table} "
                        f"BEGIN SELECT RAISE(ABORT, '{table} are immutable'); END"
                    )
                )
        elif dialect == "postgresql":
            conn.execute(
                text(
                    "CREATE OR REPLACE FUNCTION relabel_refuse_change() RETURNS trigger AS $$ "
                    "BEGIN RAISE EXCEPTION '% are immutable', TG_TABLE_NAME; END; $$ LANGUAGE plpgsql"
                )
            )
            conn.execute(text(f"DROP TRIGGER IF EXISTS {table}_immutable ON {table}"))
            conn.execute(
                text(
                    f"CREATE TRIGGER {table}_immutable BEFORE UPDATE OR DELETE ON {table} "
                    "FOR EACH ROW EXECUTE FUNCTION relabel_refuse_change()"
                )
            )


def _initial_schema(conn: Connection) -> None:
    SQLModel.metadata.create_all(conn)
    _install_immutability_triggers(conn)


def _suggestion_support(conn: Connection) -> None:
    SQLModel.metadata.tables["response_cache"].create(conn, checkfirst=True)
    if "details" not in {c["name"] for c in inspect(conn).get_columns("predictions")}:
        conn.execute(text("ALTER TABLE predictions ADD COLUMN details JSON"))


def _evaluations(conn: Connection) -> None:
    SQLModel.metadata.tables["evaluations"].create(conn, checkfirst=True)


def _votes(conn: Connection) -> None:
    # the one-row-per-answer `votes` table this created is packed by migration 12, which creates the tables that
    # replace it (`_packed_votes`): a workspace older than both goes straight to those
    for table in ("vote_sources", "snapshot_posteriors"):
        SQLModel.metadata.tables[table].create(conn, checkfirst=True)
    if "consensus" not in {c["name"] for c in inspect(conn).get_columns("snapshots")}:
        conn.execute(text("ALTER TABLE snapshots ADD COLUMN consensus JSON"))
    _install_immutability_triggers(conn)


def _user_active(conn: Connection) -> None:
    """Every existing user stays able to sign in: the new column defaults to true."""
    if "active" not in {c["name"] for c in inspect(conn).get_columns("users")}:
        default = "1" if conn.dialect.name == "sqlite" else "TRUE"  # what `db.models.User.active` creates
        conn.execute(text(f"ALTER TABLE users ADD COLUMN active BOOLEAN NOT NULL DEFAULT {default}"))


def _queue_leases(conn: Connection) -> None:
    SQLModel.metadata.tables["queue_leases"].create(conn, checkfirst=True)


def _studio_sessions(conn: Connection) -> None:
    SQLModel.metadata.tables["studio_sessions"].create(conn, checkfirst=True)


def _card_tokens(conn: Connection) -> None:
    SQLModel.metadata.tables["card_tokens"].create(conn, checkfirst=True)


def _sign_in_failures(conn: Connection) -> None:
    SQLModel.metadata.tables["sign_in_failures"].create(conn, checkfirst=True)


def _guidelines_and_comments(conn: Connection) -> None:
    for table in ("guidelines", "image_comments"):
        SQLModel.metadata.tables[table].create(conn, checkfirst=True)


def _assignments(conn: Connection) -> None:
    SQLModel.metadata.tables["assignments"].create(conn, checkfirst=True)


def _packed_votes(conn: Connection) -> None:
    """Votes one row per (image, class) pair, the answers packed (`db.vote_packing`): every row of the older
    one-row-per-answer `votes` table is moved over, then that table is dropped."""
    for table in ("vote_workers", "vote_pairs"):
        SQLModel.metadata.tables[table].create(conn, checkfirst=True)
    if not inspect(conn).has_table("votes"):
        return
    sources = conn.execute(text("SELECT DISTINCT source_id FROM votes")).scalars().all()
    for source_id in sources:
        _pack_source(conn, source_id)
    conn.execute(text("DROP TABLE votes"))
    if conn.dialect.name == "postgresql":
        conn.execute(text("DROP TYPE IF EXISTS answer"))  # the answer column's enum, used by no other table


def _pack_source(conn: Connection, source_id: int) -> None:
    """Pack one source's rows of the older `votes` table; its workers are numbered in code point order (what an
    import numbers them by), whatever order the database collates names in."""
    names = conn.execute(text("SELECT DISTINCT worker FROM votes WHERE source_id = :s"), {"s": source_id})
    number = {name: k for k, name in enumerate(sorted(names.scalars()))}
    conn.execute(
        SQLModel.metadata.tables["vote_workers"].insert(),
        [{"source_id": source_id, "number": k, "name": name} for name, k in number.items()],
    )
    query = text(
        "SELECT image_id, class_index, worker, answer FROM votes WHERE source_id = :s ORDER BY image_id, class_index"
    )
    insert = SQLModel.metadata.tables["vote_pairs"].insert()
    pairs: list[dict[str, object]] = []
    for (image_id, class_index), answers in groupby(conn.execute(query, {"s": source_id}), key=itemgetter(0, 1)):
        ordered = sorted((number[worker], ANSWER_BYTES[str(answer)]) for _, _, worker, answer in answers)
        workers, codes = pack_pair([w for w, _ in ordered], [a for _, a in ordered])
        pairs.append(
            dict(source_id=source_id, image_id=image_id, class_index=class_index, workers=workers, answers=codes)
        )
        if len(pairs) == _PACKED_PER_INSERT:
            conn.execute(insert, pairs)
            pairs = []
    if pairs:
        conn.execute(insert, pairs)


_PACKED_PER_INSERT = 20_000  # pairs written at a time while the older rows are read


MIGRATIONS: list[Migration] = [
    Migration(1, "initial schema", _initial_schema),
    Migration(2, "response cache and prediction details for suggestions", _suggestion_support),
    Migration(3, "stored evaluations", _evaluations),
    Migration(4, "workers' votes on (image, class) pairs; snapshot consensus and posteriors", _votes),
    Migration(5, "users can be disabled", _user_active),
    Migration(6, "review queue leases shared by every studio process", _queue_leases),
    Migration(7, "sign-in sessions shared by every studio process", _studio_sessions),
    Migration(8, "card tokens shared by every studio process", _card_tokens),
    Migration(9, "sign-in throttle counters shared by every studio process", _sign_in_failures),
    Migration(10, "labeling guidelines and comments on images", _guidelines_and_comments),
    Migration(11, "images and classes assigned to annotators", _assignments),
    Migration(12, "votes one row per (image, class) pair, the answers packed", _packed_votes),
]
SCHEMA_VERSION = MIGRATIONS[-1].version


def current_version(conn: Connection) -> int | None:
    """The workspace's schema version, or None for an empty database."""
    if not inspect(conn).has_table(SchemaVersion.__tablename__):
        return None
    return conn.execute(select(col(SchemaVersion.version)).order_by(col(SchemaVersion.version).desc())).scalar()


def _stamp(conn: Connection, m: Migration) -> None:
    conn.execute(
        SchemaVersion.__table__.insert().values(  # type: ignore[attr-defined]
            version=m.version, name=m.name, applied_at=models.utcnow()
        )
    )


def init_db(engine: Engine, migrations: list[Migration] | None = None) -> int:
    """Create or upgrade the workspace schema; safe to call any number of times. Returns the version."""
    migrations = MIGRATIONS if migrations is None else migrations
    newest = migrations[-1].version
    with engine.begin() as conn:
        version = current_version(conn)
        if version is None:
            # A new workspace: today's tables at once, stamped with every migration they already contain.
            _initial_schema(conn)
            for m in migrations:
                _stamp(conn, m)
            return newest
    if version > newest:
        raise SchemaError(
            f"the workspace has schema version {version}, newer than this relabel knows ({newest}); upgrade relabel"
        )
    for m in migrations:
        if m.version > version:
            with engine.begin() as conn:
                m.apply(conn)
                _stamp(conn, m)
    return newest
