from __future__ import annotations

import numpy as np
import pytest

from relabel.common.progress import NullProgress, finish, progress_bar
from relabel.votes.aggregation import make_votes
from relabel.votes.fit import _fit
from relabel.votes.table import VoteTable


def test_a_finished_bar_reads_full_at_the_steps_taken(capsys: pytest.CaptureFixture[str]) -> None:
    bar = progress_bar(500, "ds EM", unit="step")
    bar.update(54)
    finish(bar, "converged after 54 steps")
    bar.close()
    err = capsys.readouterr().err
    assert "54/54" in err and "100%" in err and "converged after 54 steps" in err and "/500" not in err.splitlines()[-1]
    finish(NullProgress(), "nothing to show")  # a disabled bar stays silent


def test_a_converged_dawid_skene_fit_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    items, workers = np.repeat(np.arange(40), 3), np.tile(np.arange(3), 40)
    truth = rng.random(40) < 0.5
    answers = np.where(truth[items] ^ (rng.random(items.size) < 0.1), 2, 0)
    votes = make_votes(items, workers, answers, np.arange(40))
    pairs = np.stack([np.arange(40), np.zeros(40, dtype=np.int64)], axis=1)
    result = _fit(VoteTable(votes, pairs, ("a", "b", "c"), ("rater",) * 3, ("votes",)), "ds", show_progress=True)
    err = capsys.readouterr().err
    assert result.converged and f"converged after {result.iterations} steps" in err
    assert f"{result.iterations}/{result.iterations}" in err
