"""Failed calls are scored by their cause, the same way in `evaluate` and `evaluate robustness`: the model's
failures (unusable replies, refusals, final HTTP 4xx) are wrong everywhere, RR included; infrastructure and set-up
failures are left out, with a warning that gives their count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from relabel.common.vocabulary import load_builtin
from relabel.evaluation import evaluate
from relabel.evaluation.failure_causes import FailureCause, failure_cause
from relabel.evaluation.report import write_robustness_report
from relabel.evaluation.robustness import run_robustness
from relabel.evaluation.robustness_summary import build_robustness_summary
from relabel.evaluation.runs import RunInfo, failure_warnings
from relabel.evaluation.storage import robustness_from_dict
from relabel.evaluation.text import render_evaluation, render_robustness
from relabel.suggest.types import ChatRequest, ModelOutput
from tests import evaluation_workspace as ws

MODEL, INFRA, SETUP = FailureCause.model, FailureCause.infrastructure, FailureCause.setup
NAMES = [c.name for c in load_builtin().classes]
TRUTH = {"a": ws.TENCH, "b": ws.TENCH, "c": ws.GOLDFISH, "d": ws.TABBY, "e": ws.TABBY}


@pytest.mark.parametrize(
    ("reason", "raw", "retryable", "cause"),
    [
        ("HTTP 400: context too long", "", False, MODEL),  # the server refused the request itself: final
        ("HTTP 413: image too large", "", False, MODEL),
        ("HTTP 422: unprocessable entity", "", False, MODEL),
        ("HTTP 400: bad request", "", None, MODEL),  # stored before the retryable mark existed
        ("HTTP 429 after 5 retries: rate limited", "", True, INFRA),
        ("HTTP 503 after 5 retries: overloaded", "", True, INFRA),
        ("HTTP 500", "", None, INFRA),
        ("HTTP 408: request timeout", "", True, INFRA),
        ("HTTP 401: invalid API key", "", True, SETUP),  # the user's set-up, not the model: left out, warned
        ("HTTP 403: forbidden", "", True, SETUP),
        ("HTTP 404: model not found", "", True, SETUP),
        ("no reference label for mc", "", False, SETUP),
        ("timeout: no response in time", "", None, INFRA),
        ("connection error: ConnectError: [Errno 111] refused", "", True, INFRA),
        ("malformed response: no choices in the response", "", True, INFRA),
        ("cannot read image: n01440764_a.jpg: truncated", "", False, INFRA),  # final, but not the model's
        ("cannot decode image 'x.jpg': broken", "", False, INFRA),
        ("CUDA out of memory", "", True, INFRA),
        ("RuntimeError in a batch of 4: shape mismatch", "", True, INFRA),
        ("APIResponseValidationError: odd body", "", True, INFRA),  # marked retryable by the adapter
        ("refused: I can't help with that", "", False, MODEL),
        ("expected 2 numbered answers, got '1: HTTP 500 timeout'", "1: HTTP 500", False, MODEL),
        ("expected 2 numbered answers, got '1: a timeout'", "", None, MODEL),  # quoted words are the model's
        ("expected 1 numbered answers, got ''", "", False, MODEL),  # an empty reply
        ("failed", "", None, MODEL),  # an imported error without a known cause: the model's failure
    ],
)
def test_one_rule_for_the_cause_of_a_failed_call(reason: str, raw: str, retryable: bool | None, cause) -> None:
    assert failure_cause(reason, raw_output=raw, retryable=retryable) is cause
    assert cause.scored is (cause is MODEL)


@pytest.fixture
def five(sqlite_engine, tmp_path: Path) -> dict[str, int]:
    """The five-image evaluation workspace (a, b tench; c goldfish; d, e tabby); image ids by letter."""
    return ws.build(sqlite_engine, tmp_path)


def error(reason: str, retryable: bool) -> tuple[list[int], str, dict[str, Any]]:
    return [], "error", {"retryable": retryable, "reason": reason}


class TestEvaluate:
    def test_final_4xx_are_wrong_transient_ones_left_out_with_a_counted_warning(self, sqlite_engine, five) -> None:
        ws.add_run(sqlite_engine, "api", "chat", "cw", {
            "a": ([ws.TENCH], "ok", {"oop": False}),
            "b": error("HTTP 400: context too long", False),
            "c": error("HTTP 429 after 5 retries: rate limited", True),
            "d": error("timeout after 5 retries: no response in time", True),
            "e": error("HTTP 413: image too large", False),
        }, five)  # fmt: skip

        ev = evaluate(sqlite_engine, runs=["api"], references=["imgt"], n_boot=0)

        top1 = ev.score("api", "imgt").top1
        # a right; b and e (final 4xx) scored as wrong; c and d (429, timeout) left out
        assert (top1.n_scored, top1.n_correct, top1.n_failed, top1.n_errors) == (3, 1, 2, 2)
        assert top1.accuracy == pytest.approx(1 / 3)
        warning = (
            "run 'api': 2 call(s) got no answer for reasons of the infrastructure (timeouts, connection errors, "
            "HTTP 429/5xx after retries, unreadable images, out of memory); they are left out of every score"
        )
        (line,) = [w for w in ev.warnings if w.startswith("run 'api'")]
        assert line.startswith(warning) and "whose n is without them" in line
        assert "it was imported" in line  # a run not written by `relabel suggest`: no re-run to offer
        assert f"warning: {warning}" in render_evaluation(ev)

    def test_set_up_errors_are_left_out_and_named(self, sqlite_engine, five) -> None:
        ws.add_run(sqlite_engine, "keyless", "chat", "cw", {
            "a": ([ws.TENCH], "ok", {"oop": False}),
            "b": error("HTTP 401: invalid API key", True),
            "c": ([ws.GOLDFISH], "ok", {"oop": False}),
        }, five)  # fmt: skip

        ev = evaluate(sqlite_engine, runs=["keyless"], references=["imgt"], n_boot=0)

        top1 = ev.score("keyless", "imgt").top1
        assert (top1.n_scored, top1.accuracy, top1.n_errors) == (2, 1.0, 1)
        assert [w for w in ev.warnings if w.startswith("run 'keyless'")] == [
            "run 'keyless': 1 call(s) were refused by the set-up, not the model (HTTP 401/403: the API key; 404: the "
            "model or URL; or a missing reference label); they are left out of every score, whose n is without "
            "them; fix the set-up, then it was imported (origin unknown): import it again once they are answered"
        ]

    @pytest.mark.parametrize(
        ("asked_again", "says"),
        [
            (3, "running `relabel suggest --run gpt` again asks them again"),
            (0, "running `relabel suggest --run gpt` again with --retry-errors asks them again (final: a "
             "plain re-run skips them)"),
            (2, "running `relabel suggest --run gpt` again asks 2 of them again; the other 1 are final and only "
             "--retry-errors asks them again"),
        ],
    )  # fmt: skip
    def test_the_warning_says_what_a_re_run_asks_again(self, asked_again: int, says: str) -> None:
        info = RunInfo(1, "gpt", "gpt", "cw", 10, 4, 1, None, 1, n_asked_again=asked_again, origin="relabel suggest")

        (line,) = failure_warnings(info)

        assert line.startswith("run 'gpt': 3 call(s) got no answer") and line.endswith(says)

    def test_a_run_without_left_out_errors_has_no_warning(self) -> None:
        assert failure_warnings(RunInfo(1, "m", "m", "cw", 10, 2, 1, None, 2)) == []


class PerPassChat:
    """A generative model scripted per call (clean first, then each condition) and image letter: an answer text,
    or a failed output (reason, retryable); the true class's name otherwise."""

    name = "per-pass"

    def __init__(self, script: list[dict[str, tuple[str, bool]]]) -> None:
        self.script, self.calls = script, 0

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted"}

    def check(self) -> None:
        pass

    def generate(self, requests: list[ChatRequest]) -> list[ModelOutput]:
        failures = self.script[self.calls] if self.calls < len(self.script) else {}
        self.calls += 1
        out = []
        for r in requests:
            letter = r.images[0].key.split("_")[1][0]
            if letter in failures:
                reason, retryable = failures[letter]
                out.append(ModelOutput(error=reason, retryable=retryable))
            else:
                out.append(ModelOutput(text=NAMES[TRUTH[letter]]))
        return out


class TestRobustness:
    SCRIPT = [
        {"e": ("refused: I can't help with that", False)},  # clean: a-d right, e refused (the model's failure)
        {  # gaussian_noise/1: a right; c, e final 4xx (the model's); b rate-limited, d keyless (left out)
            "b": ("HTTP 429 after 5 retries: rate limited", True),
            "c": ("HTTP 400: image too large", False),
            "d": ("HTTP 401: invalid API key", True),
            "e": ("HTTP 422: unprocessable entity", False),
        },
    ]

    def test_failed_replies_are_wrong_in_every_pass_and_in_rr(self, sqlite_engine, five, tmp_path: Path) -> None:
        result = run_robustness(sqlite_engine, adapter=PerPassChat(self.SCRIPT), perturbations=["gaussian_noise"],
                                severities=[1], show_progress=False)  # fmt: skip

        clean = result.clean["imgt"]
        # clean: 4 of 5 (e scored wrong; 4/4 = 1.0 if it were left out); noise: a of a, c, e = 1/3 (b, d left out;
        # 1/1 = 1.0 if the failures were left out too); RR = (1/3) / 0.8 = 0.4167 (1.0 with failures left out)
        assert (clean.accuracy, clean.n_scored, clean.n_failed, clean.n_errors) == (0.8, 5, 1, 0)
        assert result.grid["imgt"] == [[pytest.approx(1 / 3)]]
        assert result.retention["imgt"] == pytest.approx((1 / 3) / 0.8)
        assert (result.failed, result.errors) == (3, 2)
        outcomes = result.outcomes
        assert outcomes is not None and outcomes.scored["imgt"].sum(axis=1).tolist() == [5, 3]
        assert outcomes.correct["imgt"].sum(axis=1).tolist() == [4, 1]
        assert outcomes.errors.sum(axis=1).tolist() == [0, 2]  # left out: b and d under noise
        assert result.warnings == (
            "robustness run of 'per-pass': 1 call(s) got no answer for reasons of the infrastructure (timeouts, "
            "connection errors, HTTP 429/5xx after retries, unreadable images, out of memory); they are left out of "
            "every score, whose n is without them; running the command again tries every image again",
            "robustness run of 'per-pass': 1 call(s) were refused by the set-up, not the model (HTTP 401/403: the API "
            "key; 404: the model or URL; or a missing reference label); they are left out of every score, whose n is "
            "without them; fix the set-up, then running the command again tries every image again",
        )
        summary = build_robustness_summary(result)
        text = render_robustness(summary)
        assert "model failures 3 (scored as wrong), failures left out 2" in text
        assert all(f"warning: {w}" in text for w in result.warnings)
        assert result.id is not None
        stored = robustness_from_dict(result.to_dict(), result.id)
        assert (stored.failed, stored.errors, stored.warnings) == (3, 2, result.warnings)
        report = write_robustness_report(summary, tmp_path / "report").markdown.read_text()
        assert "## Warnings" in report and "1 call(s) were refused by the set-up" in report

    def test_a_run_without_failures_has_no_warning(self, sqlite_engine, five) -> None:
        result = run_robustness(sqlite_engine, adapter=PerPassChat([]), perturbations=["gaussian_noise"],
                                severities=[1], show_progress=False, store=False)  # fmt: skip
        assert result.clean["imgt"].accuracy == 1.0 and (result.failed, result.errors, result.warnings) == (0, 0, ())


class TestThroughTheOpenAIAdapter:
    """The reasons the OpenAI adapter stores are the ones the rule reads: a final HTTP 400 is the model's failure,
    an HTTP 503 that outlasts the retries is left out, and running `relabel suggest` again asks it again."""

    def test_stored_failures_scored_by_cause_and_the_rerun_asks_again(self, sqlite_engine, vocab, tmp_path: Path):
        from relabel.ingest import ingest_dataset, plan_ingest
        from relabel.suggest.adapters.openai_api import OpenAIChatAdapter
        from relabel.suggest.protocols import ProtocolContext, get_protocol
        from relabel.suggest.runner import SuggestJob, run_suggestions
        from tests import images
        from tests.stub_server import Fault, StubServer

        root = tmp_path / "r"
        for i in range(6):
            images.photo(root / f"n02123045_{i}.jpg", color=(30 * i, 90, 90))
        ingest_dataset(sqlite_engine, plan_ingest(root, vocab), dataset="d", root=root, vocab=vocab,
                       show_progress=False, workers=1)  # fmt: skip
        with StubServer(answer="tabby", models=["stub-model"]) as stub:

            def suggest() -> None:
                adapter = OpenAIChatAdapter("stub-model", base_url=stub.url, api_key="EMPTY", concurrency=1,
                                            max_retries=1, sleep=lambda _: None)  # fmt: skip
                job = SuggestJob(sqlite_engine, adapter, get_protocol("cw"), ProtocolContext(vocab), chunk_size=8)
                run_suggestions(job, dataset="d", run_name="api", show_progress=False)

            # the first request is refused as too large (final); the second gets 503 on both attempts
            stub.inject(Fault(400, b'{"error": {"message": "Image too large"}}'), Fault.server_error(503),
                        Fault.server_error(503))  # fmt: skip
            suggest()
            first = evaluate(sqlite_engine, dataset="d", references=["imgt"], n_boot=0)
            suggest()  # asks the 503 again (answered now), not the final 400
            second = evaluate(sqlite_engine, dataset="d", references=["imgt"], n_boot=0)

        top1 = first.score("api", "imgt").top1
        assert (top1.n_scored, top1.n_correct, top1.n_failed, top1.n_errors) == (5, 4, 1, 1)  # the 400 is wrong
        assert [w for w in first.warnings if w.startswith("run 'api'")] == [
            "run 'api': 1 call(s) got no answer for reasons of the infrastructure (timeouts, connection errors, "
            "HTTP 429/5xx after retries, unreadable images, out of memory); they are left out of every score, whose "
            "n is without them; running `relabel suggest --run api` again asks them again"
        ]
        top1 = second.score("api", "imgt").top1
        assert (top1.n_scored, top1.n_correct, top1.n_failed, top1.n_errors) == (6, 5, 1, 0)
        assert not [w for w in second.warnings if w.startswith("run 'api'")]
        assert len(stub.chat_requests) == 6 + 1 + 1  # 6 images, one retry of the 503 in the run, one in the rerun
