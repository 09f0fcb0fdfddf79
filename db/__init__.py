"""Workspace database: SQLModel tables, the engine factory and the schema migrations.

Everything the tool knows lives here: datasets and their class vocabularies, images, label sources (ImGT and
imported priors such as ReaL), model predictions, annotators' append-only decisions and frozen ReGT snapshots.
`relabel` is the only package that imports this one; `evaluator` never does.
"""

from db.engine import create_db_engine, default_db_url, session_scope
from db.migrations import SCHEMA_VERSION, init_db

__all__ = ["SCHEMA_VERSION", "create_db_engine", "default_db_url", "init_db", "session_scope"]
