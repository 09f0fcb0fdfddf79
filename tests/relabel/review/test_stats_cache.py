"""`relabel stats` keeps its Dawid-Skene fit in the workspace's cache: unchanged votes are read back, not refitted;
a new vote source or a replaced one fits again; with studio decisions it fits every time and keeps nothing; a dataset
without votes is never fitted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.enums import Role, Verdict
from db.models import Image
from relabel.decisions.annotations import add_user, record_annotation
from relabel.review.stats import workspace_stats
from relabel.votes import report as vote_report
from relabel.votes.importing import import_votes
from tests.relabel.sources.test_sources import val_dataset
from tests.relabel.votes.test_votes import synthetic_round


@pytest.fixture
def fits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the Dawid-Skene fits `relabel stats` asks for."""
    calls: list[int] = []
    real = vote_report.dataset_reliability

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(vote_report, "dataset_reliability", counted)
    return calls


def test_unchanged_votes_are_read_back(sqlite_engine, vocab, tmp_path: Path, fits: list[int]) -> None:
    val_dataset(sqlite_engine, vocab, tmp_path, list(range(1, 301)))
    cache = tmp_path / "cache"
    assert workspace_stats(sqlite_engine, cache)[0].reliability is None and fits == []  # no votes: no fit
    path, _ = synthetic_round(tmp_path, np.random.default_rng(7))
    import_votes(sqlite_engine, path, fmt="long", name="round")
    first = workspace_stats(sqlite_engine, cache)[0].reliability
    assert first is not None and first.votes == 4500 and len(fits) == 1
    again = workspace_stats(sqlite_engine, cache)[0].reliability
    assert again == first and len(fits) == 1  # the same rows, from the cache
    assert len(list(cache.glob("reliability-*.json"))) == 1

    import_votes(sqlite_engine, path, fmt="long", name="round", replace=True)  # a replaced source: fit again
    assert workspace_stats(sqlite_engine, cache)[0].reliability == first and len(fits) == 2

    add_user(sqlite_engine, "alice", Role.annotator)
    with Session(sqlite_engine) as s:
        image_id = s.scalars(select(Image.id).order_by(Image.id)).first()
    record_annotation(sqlite_engine, image_id=image_id, user="alice", verdict=Verdict.labels, classes=[1])
    after = workspace_stats(sqlite_engine, cache)[0].reliability
    assert len(fits) == 3 and after is not None and any(r.name.startswith("studio") for r in after.rows)
    # a decision votes on its card's candidates (original labels, every run's answers), outside the key: the fit
    # is made every time and nothing is kept, the older fit dropped
    assert list(cache.glob("reliability-*.json")) == []
    assert workspace_stats(sqlite_engine, cache)[0].reliability == after and len(fits) == 4


def test_a_fit_says_so_on_stderr(
    sqlite_engine, vocab, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELABEL_PROGRESS", "1")
    val_dataset(sqlite_engine, vocab, tmp_path, list(range(1, 301)))
    path, _ = synthetic_round(tmp_path, np.random.default_rng(7))
    import_votes(sqlite_engine, path, fmt="long", name="round")
    capsys.readouterr()
    workspace_stats(sqlite_engine, tmp_path / "cache")
    assert capsys.readouterr().err.startswith("fitting Dawid-Skene on the votes for worker reliability")
    workspace_stats(sqlite_engine, tmp_path / "cache")
    assert capsys.readouterr().err == ""  # read back: nothing to wait for


def test_a_damaged_cache_file_is_refitted(sqlite_engine, vocab, tmp_path: Path, fits: list[int]) -> None:
    val_dataset(sqlite_engine, vocab, tmp_path, list(range(1, 301)))
    path, _ = synthetic_round(tmp_path, np.random.default_rng(7))
    import_votes(sqlite_engine, path, fmt="long", name="round")
    cache = tmp_path / "cache"
    first = workspace_stats(sqlite_engine, cache)[0].reliability
    (stored,) = cache.glob("reliability-*.json")
    stored.write_text("{not json")
    assert workspace_stats(sqlite_engine, cache)[0].reliability == first and len(fits) == 2
