"""The response cache: finished model responses stored in the workspace, keyed by a request hash.

The key covers everything that determines a response and the run it was asked for: the run name, the model, the
server (its normalised base URL), the prompt version, the images' content hashes and the generation settings
(prompt text, system message, max tokens, temperature, image size, extra body). Resuming a run or
`--retry-errors` therefore reads its own answers again for free, while a new `--run` name or another server asks
afresh. Rows stored under an older key layout (before the run and the server were part of it) no longer match
any request; they stay in the table, unused.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from db.models import ResponseCacheEntry

DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_base_url(url: str) -> str:
    """`url` as one server is named once: scheme and host lower-cased, the scheme's default port, any credentials
    and trailing slashes dropped (`HTTP://Host:80/v1/` -> `http://host/v1`); path and query kept as given."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # not a number: keep the URL as given, it still names one server
        return url.strip().rstrip("/")
    netloc = host if port is None or port == DEFAULT_PORTS.get(scheme) else f"{host}:{port}"  # no user:password
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), parts.query, ""))


def request_key(
    *,
    run: str,
    model: str,
    base_url: str,
    prompt_version: str,
    image_hashes: list[str],
    params: dict[str, Any],
) -> str:
    """sha256 (hex) of everything that determines a response, and of the run that asked for it: within one run the
    same request is never paid for twice; another run or another server asks again."""
    payload = {
        "run": run,
        "model": model,
        "server": normalise_base_url(base_url),
        "prompt": prompt_version,
        "images": image_hashes,
        "params": params,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


class DbResponseCache:
    """`ResponseCache` on the workspace database; safe to share between threads."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, key: str) -> dict[str, Any] | None:
        with self.engine.connect() as conn:
            return conn.execute(
                select(col(ResponseCacheEntry.response)).where(col(ResponseCacheEntry.key) == key)
            ).scalar()

    def put(self, key: str, model: str, response: dict[str, Any]) -> None:
        try:
            with self.engine.begin() as conn:
                conn.execute(ResponseCacheEntry.__table__.insert().values(key=key, model=model, response=response))  # type: ignore[attr-defined]
        except IntegrityError:
            pass  # another worker stored the same response first


class MemoryResponseCache:
    """A dict-backed cache for tests and one-off runs."""

    def __init__(self) -> None:
        self.entries: dict[str, dict[str, Any]] = {}

    def get(self, key: str) -> dict[str, Any] | None:
        return self.entries.get(key)

    def put(self, key: str, model: str, response: dict[str, Any]) -> None:
        self.entries.setdefault(key, response)
