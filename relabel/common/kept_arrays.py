"""Arrays a command derives from the database, kept in the workspace's cache folder (`cache/` beside a SQLite
file's relabel.db) under a digest of what they were derived from, so that the next command reads one file instead
of the rows: a snapshot's labels and posteriors (`relabel.snapshots.arrays`), the other aggregation methods'
fits (`relabel.evaluation.label_sensitivity`), a vote source's answers (`relabel.votes.scan`). A file is replaced
whole (`relabel.common.atomic`); a damaged one is read as missing and derived again; a folder that cannot be
written keeps nothing. A workspace on a database server (PostgreSQL) keeps them in the user's cache folder, one
folder per database (`cache_dir_of`): every key says what the arrays were derived from, so a folder is never read
for other content, whoever changed the database meanwhile.
"""

from __future__ import annotations

import hashlib
import io
import os
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
from sqlalchemy.engine import URL

from relabel.common.atomic import write_atomic
from relabel.common.errors import OutputError

CACHE_ENV = "RELABEL_CACHE"  # the user cache folder, where no workspace folder is at hand
DATABASES = "databases"  # the user cache folder's subfolder of the database workspaces' caches


def user_cache_dir() -> Path:
    """The cache folder used where there is no workspace folder: `$RELABEL_CACHE`, else `$XDG_CACHE_HOME/relabel`,
    else `~/.cache/relabel`."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "relabel"


def cache_dir_of(url: URL) -> Path | None:
    """The cache folder of the workspace at `url`: `cache/` beside a SQLite file's relabel.db; for a database
    server (PostgreSQL), a folder of the user's cache (`user_cache_dir`) named by the database's address without
    its password, so every command a user runs against that database shares it; None for an in-memory database."""
    if url.get_backend_name() == "sqlite":
        return None if url.database in (None, "", ":memory:") else Path(str(url.database)).parent / "cache"
    address = url.render_as_string(hide_password=True)
    return user_cache_dir() / DATABASES / f"{url.get_backend_name()}-{key_digest(address)[:16]}"


def key_digest(text: str) -> str:
    """The digest a kept file's name carries for the key `text` (what its arrays were derived from)."""
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def kept_path(folder: Path | None, prefix: str, item: int, key: str) -> Path | None:
    """Where the arrays of `item` (a snapshot, dataset or vote source id) derived under `key` are kept:
    PREFIX-ITEM-DIGEST.npz in `folder`; None without a folder."""
    return None if folder is None else folder / f"{prefix}-{item}-{key_digest(key)}.npz"


def kept_or_derived(
    path: Path | None, derive: Callable[[], dict[str, np.ndarray]], *, need: Iterable[str] = ()
) -> dict[str, np.ndarray]:
    """The arrays kept at `path` (a file without the arrays `need` names is read as damaged), or `derive()`d now
    and kept there; with no `path`, derived and kept nowhere."""
    held = read_kept_arrays(path) if path is not None else None
    if held is None or not set(need) <= set(held):
        held = derive()
        if path is not None:
            keep_arrays(path, held)
    return held


def read_kept_arrays(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays kept at `path`; None when there are none or the file is damaged (read again and rewritten)."""
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as held:
            return {name: held[name] for name in held.files}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # BadZipFile: a cut-off file
        return None


def keep_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Keep `arrays` at `path` (PREFIX-ID-DIGEST.npz), the older files of the same prefix and id removed; a
    read-only workspace keeps nothing."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]  # names, not the allow_pickle flag
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for old in path.parent.glob(f"{path.name.rsplit('-', 1)[0]}-*.npz"):
            old.unlink(missing_ok=True)
        write_atomic(path, buffer.getvalue())
    except (OSError, OutputError):
        pass
