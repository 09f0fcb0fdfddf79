"""Two `relabel serve` processes on one PostgreSQL database with annotators deciding over HTTP, one process killed
with SIGKILL mid-run and its annotators moving to the other: no image is held by more annotators than the overlap
at once or decided by more, and every acknowledged decision is stored exactly once (`tests.team_load`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.team_load import build_team_workspace, check_database, drive, pg_schema, servers

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

IMAGES, ANNOTATORS, OVERLAP = 40, 4, 1


@pytest.fixture
def pg(postgres_reason: str | None) -> None:
    if postgres_reason:
        if os.environ.get("RELABEL_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL required but unreachable: {postgres_reason}")
        pytest.skip(f"PostgreSQL unreachable: {postgres_reason}")


def test_two_processes_one_killed_serve_within_the_overlap_and_store_each_acknowledged_decision_once(
    tmp_path: Path, pg: None
) -> None:
    with pg_schema("tload") as url:
        build_team_workspace(tmp_path, url, IMAGES, ANNOTATORS)
        with servers(tmp_path, url, OVERLAP, 2) as team:
            run = drive(team, ANNOTATORS, kill_after=IMAGES // 3)
            assert team[1].proc.returncode == -9
        found = check_database(url, run, OVERLAP)
    assert run.errors == []
    assert run.killed_at is not None and run.moved == ANNOTATORS // 2  # the killed process's annotators moved on
    assert any(t > run.killed_at for _, _, _, t in run.acked)  # and went on deciding on the other process
    assert found["held_at_once_max"] == OVERLAP
    assert found["stored_beyond_overlap"] == 0
    assert found["lost"] == 0 and found["duplicated"] == 0
    assert found["images_decided"] == IMAGES  # every image decided, each once
    assert found["stored"] == IMAGES and len(run.acked) + run.unanswered + run.refused >= IMAGES
