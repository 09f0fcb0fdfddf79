"""`relabel suggest --protocol mc --distractors ...` end to end, with an OpenAI-compatible stub server."""

from __future__ import annotations

from pathlib import Path

from tests.relabel.cli.test_suggest_cli import KEY, dataset, relabel  # noqa: F401  (dataset is a fixture)
from tests.stub_server import StubServer


def test_mc_run_prints_its_distractor_sources(tmp_path: Path, dataset: Path) -> None:  # noqa: F811
    with StubServer(answer="A") as stub:
        base = ["suggest", "--model", "openai:stub-model", "--base-url", stub.url, "--quiet", "--protocol"]
        r = relabel(tmp_path, *base, "mc", "--distractors", "hard", env=KEY)
        assert r.returncode == 0, r.stderr
        assert "distractors: imagenet-confusions in turns with real-proposals, then wordnet" in r.stdout
        assert "hard distractors 100.0%" in r.stdout
        prompts = [q.prompt for q in stub.chat_requests]
        r = relabel(tmp_path, *base, "mc", "--distractors", "random", "--run", "mc-random", env=KEY)
        assert r.returncode == 0, r.stderr
        assert "every distractor random" in r.stdout and "hard distractors" not in r.stdout
    tabby = next(p for p in prompts if "tabby" in p)
    assert "tiger cat" in tabby and "Egyptian cat" in tabby  # offered by both tables


def test_a_run_of_the_model_under_test_is_refused_in_one_line(tmp_path: Path, dataset: Path) -> None:  # noqa: F811
    with StubServer(answer="tabby") as stub:
        base = ["suggest", "--model", "openai:stub-model", "--base-url", stub.url, "--quiet", "--protocol"]
        assert relabel(tmp_path, *base, "cw", "--run", "stub-cw", env=KEY).returncode == 0
        r = relabel(tmp_path, *base, "mc", "--distractors", "run:stub-cw+wordnet", env=KEY)
        asked = len(stub.chat_requests)
    assert r.returncode != 0 and r.stderr.count("\n") == 1
    assert "run:stub-cw: that run is of 'stub-model', the model under test" in r.stderr
    assert asked == 2  # the cw run's two photos; the refused mc run asked nothing


def test_unknown_distractor_source_lists_the_known_ones(tmp_path: Path, dataset: Path) -> None:  # noqa: F811
    r = relabel(tmp_path, "suggest", "--model", "openai:x", "--protocol", "mc", "--distractors", "nearby", env=KEY)
    assert r.returncode != 0 and "unknown distractor source 'nearby'; known: " in r.stderr
    assert "wordnet" in r.stderr and "run:NAME" in r.stderr
