"""Test databases that hold today's schema without building it for every test.

Building the schema costs 0.6-2.9 s on PostgreSQL (CREATE SCHEMA, every table, index and trigger, then DROP SCHEMA)
and about 0.15 s on SQLite. A test run builds it once per backend instead:

- SQLite: one schema file per run, copied to each test's workspace by the `engine` fixtures (about 1 ms).
- PostgreSQL: a pool of schemas. A test takes one; when it ends the schema is checked for changes to its structure
  (tables, columns, constraints, triggers, functions, schema versions) and, if unchanged, emptied in one round trip
  (DELETE of every table with triggers off, sequences restarted: a few ms) and handed to the next test. A schema
  whose structure a test changed, or that cannot be emptied (a lock held by a connection the test left open), is
  dropped at the end of the run and never reused, so no row and no DDL leaks from one test into another.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from sqlalchemy import Connection, Engine, create_engine, make_url, text

from db import create_db_engine, init_db

# One query: the structure of a schema (columns with types, triggers, constraints, functions, enum labels) as five
# digests; with its schema-version rows, the fingerprint. Equal fingerprints before and
# after a test mean the test wrote rows at most.
_FINGERPRINT = """
SELECT
  (SELECT md5(coalesce(string_agg(c.relname || '.' || a.attname || ':'
      || replace(format_type(a.atttypid, a.atttypmod), :schema || '.', '') || ':' || a.attnotnull::text
      || ':' || a.atthasdef::text, ',' ORDER BY c.relname, a.attnum), ''))
     FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = :schema AND a.attnum > 0 AND NOT a.attisdropped),
  (SELECT md5(coalesce(string_agg(c.relname || '.' || t.tgname || ':' || t.tgenabled::text, ','
      ORDER BY c.relname, t.tgname), ''))
     FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = :schema AND NOT t.tgisinternal),
  (SELECT md5(coalesce(string_agg(k.conname || ':' || replace(pg_get_constraintdef(k.oid), :schema || '.', ''), ','
      ORDER BY k.conname), ''))
     FROM pg_constraint k JOIN pg_namespace n ON n.oid = k.connamespace WHERE n.nspname = :schema),
  (SELECT md5(coalesce(string_agg(p.proname || ':' || md5(p.prosrc), ',' ORDER BY p.proname), ''))
     FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = :schema),
  (SELECT md5(coalesce(string_agg(t.typname || ':' || e.enumlabel, ',' ORDER BY t.typname, e.enumsortorder), ''))
     FROM pg_enum e JOIN pg_type t ON t.oid = e.enumtypid JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname = :schema)
"""


def _fingerprint(conn: Connection, schema: str) -> tuple[object, ...]:
    digests = tuple(conn.execute(text(_FINGERPRINT), {"schema": schema}).one())
    versions = conn.execute(text(f"SELECT version, name FROM {schema}.schema_version ORDER BY version, name")).all()
    return (*digests, tuple(map(tuple, versions)))


def _tables(conn: Connection, schema: str) -> list[str]:
    """The tables of `schema` that hold a workspace's rows (all but the schema versions), by name."""
    query = "SELECT tablename FROM pg_tables WHERE schemaname = :schema AND tablename <> 'schema_version'"
    return sorted(conn.execute(text(query), {"schema": schema}).scalars())


def _schema_url(base_url: str, schema: str) -> str:
    return f"{base_url}?options=-csearch_path%3D{schema}"


class SqliteTemplate:
    """A SQLite file holding today's schema, built on first use and copied to each test's workspace."""

    def __init__(self, folder: Path) -> None:
        self._file = folder / "template.db"
        self._built = False

    def copy_to(self, target: Path) -> None:
        """Make `target` a fresh copy of the template (its folder is created)."""
        if not self._built:
            engine = create_db_engine(f"sqlite:///{self._file}")
            init_db(engine)
            engine.dispose()  # the last connection closed: the WAL is folded into the file, which then stands alone
            self._built = True
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(self._file, target)


class PostgresSchemas:
    """Schemas on one PostgreSQL server for the tests of one run: empty ones, and ones holding today's schema that
    are emptied and reused between tests."""

    def __init__(self, base_url: str) -> None:
        self._base_url = base_url
        self._admin: Engine | None = None
        self._ready: list[str] = []  # hold today's schema, no rows
        self._fingerprints: dict[str, tuple[object, ...]] = {}
        self._reset_sql: dict[str, str] = {}
        self._created: list[str] = []

    @property
    def admin(self) -> Engine:
        if self._admin is None:
            self._admin = create_engine(self._base_url)
        return self._admin

    def empty(self) -> str:
        """A new schema without tables; dropped at the end of the run."""
        schema = f"t_{uuid.uuid4().hex[:12]}"
        with self.admin.begin() as conn:
            conn.execute(text(f"CREATE SCHEMA {schema}"))
        self._created.append(schema)
        return schema

    def take(self) -> str:
        """A schema holding today's tables and no rows, reused from an earlier test when one is free."""
        if self._ready:
            return self._ready.pop()
        schema = self.empty()
        engine = create_db_engine(_schema_url(self._base_url, schema))
        init_db(engine)
        engine.dispose()
        with self.admin.connect() as conn:
            self._fingerprints[schema] = _fingerprint(conn, schema)
            deletes = " ".join(f'DELETE FROM {schema}."{table}";' for table in _tables(conn, schema))
        # Triggers off for the transaction (the snapshot tables refuse DELETE; foreign keys are triggers too), every
        # table emptied, every used sequence back to 1: the state a fresh schema starts in, in one round trip.
        self._reset_sql[schema] = (
            "SET LOCAL session_replication_role = replica; SET LOCAL lock_timeout = '5s'; "
            f"SET LOCAL synchronous_commit = off; {deletes} "
            "SELECT setval(format('%I.%I', schemaname, sequencename), 1, false) FROM pg_sequences "
            f"WHERE schemaname = '{schema}' AND last_value IS NOT NULL;"
        )
        return schema

    def give_back(self, schema: str) -> None:
        """Empty `schema` after a test and keep it for the next one, unless the test changed its structure."""
        expected = self._fingerprints.get(schema)
        if expected is None:
            return
        raw = self.admin.raw_connection()
        try:
            with self.admin.connect() as conn:
                unchanged = _fingerprint(conn, schema) == expected
            if unchanged:
                cursor = raw.cursor()
                cursor.execute(self._reset_sql[schema])
                raw.commit()
                self._ready.append(schema)
        except Exception:  # a lock timeout or a table a test dropped: this schema is not used again
            raw.rollback()
        finally:
            raw.close()

    def url(self, schema: str) -> str:
        return _schema_url(self._base_url, schema)

    def close(self) -> list[str]:
        """Drop every schema made in this run; returns the one-line reasons of those that could not be dropped."""
        problems: list[str] = []
        if self._admin is None:
            return problems
        for schema in self._created:
            try:
                with self.admin.begin() as conn:
                    conn.execute(text("SET LOCAL lock_timeout = '10s'"))
                    conn.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
            except Exception as exc:  # a connection left open by a test still holds a lock
                problems.append(f"schema {schema}: {str(exc).splitlines()[0]}")
        self._admin.dispose()
        return problems


def schema_of(url: str) -> tuple[str, str] | None:
    """(server URL, schema) of a PostgreSQL URL that names its schema through `search_path`, else None."""
    parsed = make_url(url)
    options = parsed.query.get("options")
    if parsed.get_backend_name() != "postgresql" or not isinstance(options, str):
        return None
    prefix = "-csearch_path="
    if not options.startswith(prefix) or " " in options:
        return None
    return parsed.set(query={}).render_as_string(hide_password=False), options.removeprefix(prefix)


def copy_rows(url: str, source: str, target: str) -> bool:
    """Copy every row of schema `source` into schema `target` on the server of `url` (same tables, built by the same
    code) and set `target`'s sequences where `source`'s stand, in one transaction. Copies nothing and returns False
    when `target` is not a schema of the same tables without rows."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            if conn.execute(text("SELECT to_regclass(:t)"), {"t": f"{target}.schema_version"}).scalar() is None:
                return False  # a schema without tables (a test's own new schema): built there, not copied
            tables = _tables(conn, source)
            fingerprints = {_fingerprint(conn, schema) for schema in (source, target)}
            if len(fingerprints) != 1:
                return False
            holds_rows = " OR ".join(f'EXISTS (SELECT 1 FROM {target}."{table}")' for table in tables)
            if conn.execute(text(f"SELECT {holds_rows}")).scalar():
                return False
            conn.execute(text("SET LOCAL session_replication_role = replica"))
            columns = conn.execute(
                text(
                    "SELECT c.relname, a.attname, t.typname, tn.nspname = :source FROM pg_attribute a"
                    " JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
                    " JOIN pg_type t ON t.oid = a.atttypid JOIN pg_namespace tn ON tn.oid = t.typnamespace"
                    " WHERE n.nspname = :source AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped"
                    " ORDER BY c.relname, a.attnum"
                ),
                {"source": source},
            ).all()
            for table in tables:
                # A column of an enum type names the type of its own schema: through text into the target's.
                names = [f'"{column}"' for name, column, _, _ in columns if name == table]
                values = [
                    f'"{column}"::text::{target}."{type_name}"' if own else f'"{column}"'
                    for name, column, type_name, own in columns
                    if name == table
                ]
                conn.execute(
                    text(
                        f'INSERT INTO {target}."{table}" ({", ".join(names)}) '
                        f'SELECT {", ".join(values)} FROM {source}."{table}"'
                    )
                )
            conn.execute(
                text(
                    "SELECT setval(format('%I.%I', CAST(:target AS text), sequencename), last_value, true) "
                    "FROM pg_sequences WHERE schemaname = :source AND last_value IS NOT NULL"
                ),
                {"source": source, "target": target},
            )
        return True
    finally:
        engine.dispose()
