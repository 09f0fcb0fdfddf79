"""Who caused a failed model call: the model (scored as wrong) or what surrounds it (left out, with a warning).

One rule for every score: `evaluate` reads it from stored predictions (`relabel.evaluation.runs`), `evaluate
robustness` from the replies of its passes (`relabel.evaluation.passes`). A failure is one of three causes:

- `model`: the model, or the service that serves it, answered and the answer cannot be used: a reply that breaks
  the numbered format or is empty, a refusal, or a final HTTP 4xx about the request itself (400, 413, 422, and
  every other 4xx not named below: a context too long, an image too large, a content policy). Scored as wrong in
  every score: top-1, top-5, per-class, P, CDC, RR clean and perturbed. (An answer outside the prompt's classes
  or options is no failure at all: it is an answer, scored as wrong.)
- `infrastructure`: no answer was obtained for a reason that is not the model's: timeouts, connection errors,
  HTTP 408, 409, 429 and 5xx (the OpenAI adapter retries these with backoff first), a malformed response body, an
  image that cannot be read, a local model out of memory, anything an adapter marked retryable.
- `setup`: the user's set-up refused the call before the model saw it: HTTP 401 or 403 (the API key), 404 (the
  model is not served at that URL), an MC question without a reference label. Not the model's either.

Infrastructure and set-up failures are left out of every score, and every report says how many with a warning
line (`exclusion_warnings`): a score never drops images silently. Which of them a later run asks again is
`relabel.suggest.failures`'s policy, not this rule's.

Only the reason's text before its first quote is read: a reason may quote the model's words, which say anything.
"""

from __future__ import annotations

import re
from enum import Enum

from relabel.suggest.failures import SERVICE_STATUS, FailureKind, http_failure_kind


class FailureCause(str, Enum):
    model = "model"  # scored as wrong
    infrastructure = "infrastructure"  # left out, with a warning
    setup = "setup"  # left out, with a warning that names the set-up

    @property
    def scored(self) -> bool:
        """Whether the failure counts (as wrong) in the scores; the others are left out with a warning."""
        return self is FailureCause.model


_HTTP = re.compile(r"^\s*HTTP (\d{3})\b")
_SETUP = re.compile(r"\bno reference label\b", re.IGNORECASE)
_MODEL = re.compile(r"^\s*refused\b", re.IGNORECASE)
# what the adapters write first in the reason of a call that got no answer (openai_api, hf_vlm, imaging, protocols)
_NO_ANSWER = re.compile(
    r"\b(time(d)? ?out|connect|unreachable|cannot be reached|malformed response|cannot (read|decode) image|"
    r"no output|no scores returned|out of memory|CUDA|in a batch of|failed on a batch)",
    re.IGNORECASE,
)


def failure_cause(reason: str, *, raw_output: str = "", retryable: bool | None = None) -> FailureCause:
    """The cause of one failed call (module docstring), from its one-line `reason`, the model's reply text
    (`raw_output`, empty when there was none) and the adapter's retryable mark (None: stored without one)."""
    head = re.split(r"['\"]", reason or "", maxsplit=1)[0]
    status = _HTTP.match(head)
    if status is not None:
        return http_cause(int(status.group(1)))
    if raw_output.strip() or _MODEL.search(head):
        return FailureCause.model  # the model's words are there, or its refusal: it answered
    if _SETUP.search(head):
        return FailureCause.setup
    if _NO_ANSWER.search(head) or retryable is True:
        return FailureCause.infrastructure
    return FailureCause.model  # an unusable reply, or an imported failure of no known cause


def http_cause(status: int) -> FailureCause:
    """The cause of a call whose final outcome (after the adapter's retries) was HTTP `status`."""
    if status in SERVICE_STATUS:
        return FailureCause.setup
    if 400 <= status < 500 and http_failure_kind(status) is FailureKind.final:
        return FailureCause.model  # the server refused the request itself: 400, 413, 422, ...
    return FailureCause.infrastructure  # 408, 409, 429, 5xx (and anything that is no client error)


def exclusion_warnings(what: str, counts: dict[FailureCause, int], again: str) -> list[str]:
    """One line per cause that left images out of `what`'s scores ("run 'x'", "robustness run of m"), with its
    count; `again` says what asks them again, e.g. "run the same `relabel suggest` command again". Model
    failures are scored, so they need no warning."""
    lines = []
    n = counts.get(FailureCause.infrastructure, 0)
    if n:
        lines.append(
            f"{what}: {n:,} call(s) got no answer for reasons of the infrastructure (timeouts, connection errors, "
            f"HTTP 429/5xx after retries, unreadable images, out of memory); they are left out of every score, "
            f"whose n is without them; {again}"
        )
    n = counts.get(FailureCause.setup, 0)
    if n:
        lines.append(
            f"{what}: {n:,} call(s) were refused by the set-up, not the model (HTTP 401/403: the API key; 404: the "
            f"model or URL; or a missing reference label); they are left out of every score, whose n is without "
            f"them; fix the set-up, then {again}"
        )
    return lines
