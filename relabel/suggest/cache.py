"""The response cache: finished model responses stored in the workspace, keyed by a request hash."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import col

from db.models import ResponseCacheEntry


def request_key(model: str, prompt_version: str, image_hashes: list[str], params: dict[str, Any]) -> str:
    """sha256 of everything that determines a response; the same key is never paid for twice."""
    payload = {"model": model, "prompt": prompt_version, "images": image_hashes, "params": params}
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
