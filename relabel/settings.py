"""Settings, built once at the edge (the CLI or a server) from options and the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from sqlalchemy.engine import Engine

from db.engine import create_db_engine, default_db_url
from db.migrations import init_db

DEFAULT_WORKSPACE = "workspace"


@dataclass
class Settings:
    workspace: Path = field(default_factory=lambda: Path(os.environ.get("RELABEL_WORKSPACE", DEFAULT_WORKSPACE)))
    db_url: str | None = None  # None: RELABEL_DB, else the SQLite file inside the workspace

    def __post_init__(self) -> None:
        self.db_url = self.db_url or os.environ.get("RELABEL_DB") or default_db_url(self.workspace)

    @cached_property
    def engine(self) -> Engine:
        """The workspace database, created or upgraded to the current schema on first use."""
        engine = create_db_engine(self.db_url)  # type: ignore[arg-type]
        init_db(engine)
        return engine

    def redacted_url(self) -> str:
        from sqlalchemy.engine import make_url

        return make_url(self.db_url).render_as_string(hide_password=True)  # type: ignore[arg-type]
