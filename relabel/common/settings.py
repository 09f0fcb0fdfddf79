"""Settings, built once at the edge (the CLI or a server) from options and the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

DEFAULT_WORKSPACE = "workspace"


@dataclass
class Settings:
    workspace: Path = field(default_factory=lambda: Path(os.environ.get("RELABEL_WORKSPACE", DEFAULT_WORKSPACE)))
    db_url: str | None = None  # None: RELABEL_DB, else the SQLite file inside the workspace
    # The workspace as found when the settings were built; the database layer is imported only when first used,
    # so that `relabel --help` stays quick.
    _workspace_path: Path = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.db_url = self.db_url or os.environ.get("RELABEL_DB")
        self._workspace_path = Path(self.workspace).resolve()

    @property
    def url(self) -> str:
        """The database URL: `db_url`, else RELABEL_DB, else the SQLite file inside the workspace."""
        from db.engine import default_db_url

        return self.db_url or default_db_url(self._workspace_path)

    @cached_property
    def engine(self) -> Engine:
        """The workspace database, created or upgraded to the current schema on first use."""
        from db.engine import create_db_engine
        from db.migrations import init_db
        from relabel.common.collector import start_up_done

        engine = create_db_engine(self.url)
        init_db(engine)
        start_up_done()  # the command's work begins: the collector runs again (see `relabel.cli.main`)
        return engine

    def close(self) -> None:
        """Close the database connections the settings opened, if they opened any (the engine stays usable: it
        opens new ones when used again). SQLite folds its write-ahead log back into the database file when the
        last connection closes; at the end of a command this happens here, not by chance at interpreter exit."""
        engine = self.__dict__.get("engine")  # only an engine already built: closing must not open one
        if engine is not None:
            engine.dispose()

    def redacted_url(self) -> str:
        from sqlalchemy.engine import make_url

        return make_url(self.url).render_as_string(hide_password=True)
