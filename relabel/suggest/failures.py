"""Which failed model calls a re-run asks again, and when an outage stops a run.

A failed call is stored as a prediction with `status=error`, its one-line reason, and `details["retryable"]`.
Re-running the same `relabel suggest` command asks again for every *retryable* error; a *final* error stays until
`--retry-errors` asks for it explicitly. Answers already received are never paid for twice: they come from the
response cache (keyed by request hash), and only requests that never got an answer are sent again.

Retryable: nothing was answered, for a reason that can pass without changing the request.

- `transient`: the connection dropped or was reset, no response in time, HTTP 408, 409, 429 or any 5xx, or a
  response body that is not a chat completion (invalid JSON, no choices, no message). The adapter backs off and
  retries these within the run too.
- `unreachable`: no connection could be opened (connection refused, unknown host, connect timeout): the server
  is down or the URL is wrong. Retried within the run like `transient`; still failing after those retries, it
  stops the run at once (see below).
- `service`: the server refused for a reason of its own state, not the request's: HTTP 401 or 403 (a key that is
  wrong or revoked can be fixed before the next run), 404 (the model or route is not served at that URL: a vLLM
  server started with another model). Retrying within the run would get the same answer, so it is not retried
  there; the next run asks again. Unknown client errors of the openai library count here too.
- A local model that fails on a whole batch (out of memory, a CUDA error) is retryable: another run may fit.

Final: a re-run would send the same request and get the same outcome.

- The server refused the request itself: HTTP 400, 413, 422 and every other 4xx not named above (an image too
  large, a context too long, a content policy).
- The model answered, but the answer cannot be used: a refusal, or a multi-image reply without one numbered answer
  per image. The answer is in the response cache, so `--retry-errors` reads it again for free (a parser fix
  applies) instead of paying for it again; to ask the model afresh, start another run (`--run NEW_NAME`).
  Answers that name no class of the prompt are not errors at all: they are stored as out-of-prompt answers.
- Nothing could be sent: an image that cannot be read, an MC question without a reference label.

An error stored before this distinction existed has no `retryable` mark and is retried once by the next run; that
costs nothing for answers in the cache and for failures the server never answered.

Outage: `OutageGuard` counts requests in a row that ended, after the adapter's own retries, with no answer for a
retryable reason. At `stop_after` of them, or at the first request whose server could not be reached at all, the
adapter stops starting requests and raises `OutageError` with the outputs of those that finished. The runner
stores those, leaves the rest unstarted (no rows), and reports how many images were done, failed and not started.
"""

from __future__ import annotations

import email.utils
import threading
import time
from collections.abc import Mapping
from enum import Enum
from typing import TYPE_CHECKING, Any

from relabel.common.errors import RelabelError

if TYPE_CHECKING:
    from relabel.suggest.types import ModelOutput

RETRYABLE_MARK = "retryable"  # the key in a stored error's details
EX_TEMPFAIL = 75  # sysexits.h: a temporary failure; the user is invited to retry
STOP_AFTER_FAILURES = 10  # requests in a row without an answer that make an outage, by default


class FailureKind(str, Enum):
    """Why a model call ended without an answer; see the module docstring for what each kind covers."""

    transient = "transient"
    unreachable = "unreachable"
    service = "service"
    final = "final"

    @property
    def retryable(self) -> bool:
        """A later run asks again (every kind but `final`)."""
        return self is not FailureKind.final

    @property
    def retry_now(self) -> bool:
        """Worth a backoff and another attempt within the same request."""
        return self in (FailureKind.transient, FailureKind.unreachable)


RETRY_NOW_STATUS = frozenset({408, 409, 429})  # and every 5xx
SERVICE_STATUS = frozenset({401, 403, 404})


def http_failure_kind(status: int) -> FailureKind:
    """The kind of failure an HTTP error status is."""
    if status in RETRY_NOW_STATUS or status >= 500:
        return FailureKind.transient
    if status in SERVICE_STATUS:
        return FailureKind.service
    return FailureKind.final


def retry_after_s(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asked to wait: `retry-after-ms`, else `Retry-After` (seconds or an HTTP date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lowered:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        if "retry-after" in lowered:
            return max(0.0, float(lowered["retry-after"]))
    except ValueError:
        pass
    try:
        date = email.utils.parsedate_to_datetime(lowered.get("retry-after", ""))
    except (TypeError, ValueError):
        return None
    return max(0.0, date.timestamp() - (time.time() if now is None else now))


def needs_retry(details: Mapping[str, Any] | None, *, retry_errors: bool) -> bool:
    """Whether a stored error is asked again: every error with `retry_errors`, else the retryable ones (and those
    stored without a mark, by versions that did not record it)."""
    return retry_errors or bool((details or {}).get(RETRYABLE_MARK, True))


class OutageError(RelabelError):
    """The adapter stopped starting requests: the server is down or failing every request.

    `outputs` has one entry per request of the interrupted call, in order: the output of a request that finished
    (answered or failed), None for one that was never started."""

    exit_code = EX_TEMPFAIL

    def __init__(self, reason: str, outputs: list[ModelOutput | None] | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.outputs = outputs or []


class OutageGuard:
    """Trips after `stop_after` requests in a row fail for a retryable reason, or at once when the server at
    `where` cannot be reached. Thread-safe: requests finish on worker threads."""

    def __init__(self, stop_after: int, where: str) -> None:
        self.stop_after = stop_after
        self.where = where
        self.in_a_row = 0
        self.reason: str | None = None  # set when tripped
        self._lock = threading.Lock()

    def record(self, kind: FailureKind | None, message: str = "") -> None:
        """One request's outcome: None when the model answered, else the kind of failure and its reason."""
        with self._lock:
            if kind is None or not kind.retryable:  # the server answered (even "bad request"): it is up
                self.in_a_row = 0
                return
            self.in_a_row += 1
            if self.reason is not None:
                return
            if kind is FailureKind.unreachable:
                self.reason = f"the server at {self.where} cannot be reached ({message})"
            elif self.in_a_row >= self.stop_after:
                self.reason = f"{self.in_a_row} requests in a row to {self.where} failed (last: {message})"

    @property
    def tripped(self) -> bool:
        return self.reason is not None

    def rearm(self) -> None:
        """After an outage, start counting afresh: a new call gives the server another chance. Before one, the
        count goes on: failures in a row count across calls."""
        with self._lock:
            if self.reason is not None:
                self.in_a_row, self.reason = 0, None
