"""A command's start-up: the cyclic collector paused until the workspace is open, then the objects built so far
frozen; and the workspace's engine closed when the command ends, so that SQLite leaves no write-ahead log behind."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from relabel.common import collector
from relabel.common.settings import Settings


@pytest.fixture
def collector_state() -> Iterator[None]:
    """The collector as the test found it afterwards: enabled or not, frozen again if it was, no pause pending."""
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    gc.unfreeze()  # what tests/conftest.py froze: freed objects would lower the count these tests compare
    yield
    collector.start_up_done(freeze=False)
    gc.unfreeze()
    if frozen:
        gc.freeze()
    if enabled:
        gc.enable()
    else:
        gc.disable()


@pytest.mark.usefixtures("collector_state")
class TestStartUpPause:
    def test_paused_until_start_up_is_done_then_what_was_built_is_frozen(self) -> None:
        before = gc.get_freeze_count()
        collector.pause_for_start_up()
        assert not gc.isenabled()
        built = [[i] for i in range(1_000)]  # lists: objects the collector tracks
        collector.start_up_done()
        assert gc.isenabled()
        assert gc.get_freeze_count() >= before + len(built)
        frozen = gc.get_freeze_count()
        collector.start_up_done()  # a second call changes nothing
        assert gc.get_freeze_count() == frozen

    def test_without_freeze_the_collector_only_runs_again(self) -> None:
        before = gc.get_freeze_count()
        collector.pause_for_start_up()
        collector.start_up_done(freeze=False)
        assert gc.isenabled()
        assert gc.get_freeze_count() == before

    def test_without_a_pause_nothing_is_frozen(self) -> None:
        before = gc.get_freeze_count()
        collector.start_up_done()
        assert gc.isenabled()
        assert gc.get_freeze_count() == before

    def test_a_collector_the_caller_disabled_stays_disabled(self) -> None:
        gc.disable()
        before = gc.get_freeze_count()
        collector.pause_for_start_up()
        collector.start_up_done()
        assert not gc.isenabled()
        assert gc.get_freeze_count() == before


def test_closing_the_settings_folds_the_write_ahead_log_back(tmp_path: Path) -> None:
    settings = Settings(workspace=tmp_path)
    with settings.engine.begin() as conn:
        conn.execute(text("SELECT 1"))
    assert (tmp_path / "relabel.db-wal").exists()  # the new schema, written through a connection still open
    settings.close()
    assert (tmp_path / "relabel.db").exists()
    assert not (tmp_path / "relabel.db-wal").exists()
    with settings.engine.connect() as conn:  # still usable: it opens a new connection
        assert conn.execute(text("SELECT 1")).scalar() == 1
    settings.close()


def test_closing_settings_that_opened_nothing_creates_no_database(tmp_path: Path) -> None:
    Settings(workspace=tmp_path / "ws").close()
    assert not (tmp_path / "ws").exists()


def test_a_command_leaves_no_write_ahead_log(tmp_path: Path) -> None:
    """In a process of its own, as a user runs it: the start-up's objects are frozen there, so only the explicit
    close (not the interpreter's exit) can fold the log back."""
    done = subprocess.run(
        [sys.executable, "-m", "relabel", "--workspace", str(tmp_path), "init"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "schema version" in done.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["relabel.db"]
