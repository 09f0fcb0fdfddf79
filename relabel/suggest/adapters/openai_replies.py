"""What an OpenAI-compatible server answered, read: the answer text and token usage of a chat completion, or the
failure it ended in, with its kind (`relabel.suggest.failures`: retried now, asked again by a later run, or final).

The failure's `message()` is the one-line reason stored with an error prediction; it starts with what failed
("HTTP 400", "timeout", "connection error", "malformed response", "refused", "cannot read image"), which is what
`relabel.evaluation.failure_causes` reads to score the failure as the model's or to leave it out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import openai

from relabel.suggest.failures import FailureKind, http_failure_kind, retry_after_s

_CONNECT_FAILURES = {"ConnectError", "ConnectTimeout"}  # httpx's and httpx2's names for "no connection opened"


@dataclass(eq=False)
class Failure(Exception):
    """Why one attempt failed: `what` is short ("HTTP 500", "timeout"), `detail` one line from the server."""

    what: str
    detail: str
    kind: FailureKind
    retry_after_s: float | None = None  # what the server asked us to wait, in seconds
    retries: int = 0  # attempts made after the first, when it is the final outcome of a request

    def message(self) -> str:
        after = f" after {self.retries} retries" if self.retries else ""
        return f"{self.what}{after}: {self.detail}" if self.detail else f"{self.what}{after}"


def parse_completion(body: Any) -> tuple[str, dict[str, int]]:
    """The answer text and token usage of a chat-completions body; raises a transient Failure when malformed, a
    final one when the model refused (the same request would be refused again)."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not choices or not isinstance(choices, list):
        raise Failure("malformed response", "no choices in the response", FailureKind.transient)
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    refusal = message.get("refusal") if isinstance(message, dict) else None
    if not isinstance(text, str) and isinstance(refusal, str) and refusal:
        raise Failure("refused", one_line(refusal), FailureKind.final)
    if not isinstance(text, str):
        raise Failure("malformed response", "the first choice has no message content", FailureKind.transient)
    usage = body.get("usage") or {}
    return text, {k: int(usage[k]) for k in ("prompt_tokens", "completion_tokens") if isinstance(usage.get(k), int)}


def classify(exc: openai.APIError) -> Failure:
    """Map an openai error to a failure (relabel.suggest.failures): HTTP 429/5xx, timeouts and dropped connections
    are transient; no connection at all is `unreachable`; 401/403/404 are the service's; other 4xx are final."""
    unreachable = _no_connection(exc)
    if isinstance(exc, openai.APITimeoutError):
        kind = FailureKind.unreachable if unreachable else FailureKind.transient
        return Failure("timeout", "no connection in time" if unreachable else "no response in time", kind)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        kind = FailureKind.unreachable if unreachable else FailureKind.transient
        return Failure("connection error", one_line(f"{type(cause).__name__}: {cause}"), kind)
    if isinstance(exc, openai.APIStatusError):
        kind = http_failure_kind(exc.status_code)
        retry_after = retry_after_s(exc.response.headers) if kind.retry_now else None
        return Failure(f"HTTP {exc.status_code}", _error_detail(exc.body), kind, retry_after)
    return Failure(type(exc).__name__, one_line(str(exc)), FailureKind.service)


def _no_connection(exc: BaseException) -> bool:
    """Whether no connection could be opened at all (refused, unknown host, connect timeout), as opposed to one
    that broke or went quiet: the transport's connect error is somewhere in the chain of causes."""
    seen: BaseException | None = exc
    for _ in range(8):  # the chain is openai -> httpx -> httpcore -> OSError; a bound guards against cycles
        if seen is None:
            return False
        if type(seen).__name__ in _CONNECT_FAILURES or isinstance(seen, ConnectionRefusedError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _error_detail(body: object) -> str:
    """The server's error message, on one line."""
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else error
        return one_line(str(message or body))
    return one_line(str(body or ""))


def one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
