"""Chat models behind an OpenAI-compatible API: OpenAI itself, or a local vLLM / Ollama / LM Studio server.

`_call` makes one HTTP request and nothing else; `_generate_one` owns the policy around it: the response cache,
retries with exponential backoff and full jitter, and turning every failure into `ModelOutput(error=...)`, never an
empty answer, marked retryable or final as `relabel.suggest.failures` describes. The openai client's own retries
are off, so the policy here is the only one: HTTP 408, 409, 429 and 5xx, timeouts and dropped connections are
retried up to `max_retries` times; what a response or an error means is read in `openai_replies`. An
`OutageGuard` watches the requests' outcomes: when the server is down, `generate` stops starting requests and
raises `OutageError` with the outputs of those that finished.

For a local server pass its `base_url` (e.g. http://localhost:8000/v1 for vLLM, http://localhost:11434/v1 for
Ollama); such servers accept any API key, and "EMPTY" is used when none is set.
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import openai
from PIL import Image, ImageOps

from relabel.common.errors import InputError, RelabelError
from relabel.suggest.adapters.openai_replies import Failure, classify, one_line, parse_completion
from relabel.suggest.cache import request_key
from relabel.suggest.failures import STOP_AFTER_FAILURES, FailureKind, OutageError, OutageGuard
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput, ResponseCache

DEFAULT_BASE_URL = "https://api.openai.com/v1"
DUMMY_API_KEY = "EMPTY"  # what vLLM's and Ollama's docs use; any non-empty string works there
BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 30.0
RETRY_AFTER_CAP_S = 120.0  # a server asking for longer is waited on for this long, then retried
CHECK_TIMEOUT_S = 5.0
JPEG_QUALITY = 90
ENCODE_AHEAD = 4  # workers beyond `concurrency` that prepare payloads while the slots are busy


class OpenAIChatAdapter:
    """`GenerativeAdapter` for any server that speaks the OpenAI chat-completions API."""

    kind = "openai"  # its registry entry: answers prompts, reads text, remote

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        timeout_s: float = 60.0,
        max_retries: int = 5,
        stop_after_failures: int = STOP_AFTER_FAILURES,
        max_side: int = 1024,
        cache: ResponseCache | None = None,
        run: str = "",
        prompt_version: str = "",
        price_per_1k_input: float | None = None,
        price_per_1k_output: float | None = None,
        extra_body: dict[str, Any] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """`timeout_s`: seconds per HTTP request; `max_retries`: attempts after the first when a failure may pass;
        `stop_after_failures`: requests in a row without an answer (each after its retries) that stop `generate`
        with an `OutageError`; `max_side`: pixels of the longer image side sent; prices in currency units (e.g. USD)
        per 1000 tokens. `base_url` and `api_key` default to OPENAI_BASE_URL and OPENAI_API_KEY. `run`: the model run
        the answers are for; part of every cache key, so another run asks afresh (None `cache`: no cache at all)."""
        _require(bool(model), "model", model, "a model name, e.g. openai:gpt-4o-mini")
        _require(concurrency >= 1, "concurrency", concurrency, "an integer ≥ 1")
        _require(timeout_s > 0, "timeout_s", timeout_s, "seconds > 0")
        _require(max_retries >= 0, "max_retries", max_retries, "an integer ≥ 0")
        _require(stop_after_failures >= 1, "stop_after_failures", stop_after_failures, "an integer ≥ 1")
        _require(max_side >= 16, "max_side", max_side, "pixels ≥ 16")
        self.name = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or ""
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.max_side = max_side
        self.cache = cache
        self.run = run  # not in describe(): the run records its own name
        self.prompt_version = prompt_version
        self.extra_body = dict(extra_body or {})
        self.price_per_1k_input = price_per_1k_input
        self.price_per_1k_output = price_per_1k_output
        self.sleep = sleep
        self.usage_totals: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0, "cached": 0}
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(concurrency)  # HTTP requests in flight, across generate() calls
        self._client: openai.OpenAI | None = None
        self._rng = random.Random()
        self.outage = OutageGuard(stop_after_failures, self.base_url)  # not in describe(): it changes no answer

    @property
    def is_openai(self) -> bool:
        """True when the requests go to OpenAI itself, where a real API key is required."""
        return urlparse(self.base_url).hostname == "api.openai.com"

    def describe(self) -> dict[str, Any]:
        """Settings recorded with a run; the API key is never included, only whether one is set."""
        return {
            "kind": self.kind,
            "model": self.name,
            "base_url": self.base_url,
            "api_key_set": bool(self._api_key),
            "concurrency": self.concurrency,
            "timeout_s": self.timeout_s,
            "max_retries": self.max_retries,
            "max_side": self.max_side,
            "prompt_version": self.prompt_version,
            "price_per_1k_input": self.price_per_1k_input,
            "price_per_1k_output": self.price_per_1k_output,
            "extra_body": self.extra_body,
        }

    def check(self) -> None:
        """Fail before any work: no API key for OpenAI, or a server that cannot be reached (RelabelError)."""
        self._require_key()
        try:
            self.client().models.list(timeout=min(CHECK_TIMEOUT_S, self.timeout_s))
        except openai.NotFoundError:
            pass  # some compatible servers have no /models route; the chat route may still be there
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise RelabelError(
                f"the server at {self.base_url} rejected the API key (HTTP {exc.status_code}); "
                "set OPENAI_API_KEY or pass api_key"
            ) from None
        except openai.APIConnectionError as exc:
            raise RelabelError(
                f"cannot reach the OpenAI-compatible server at {self.base_url} ({one_line(str(exc))}); "
                "is it running? Set OPENAI_BASE_URL or pass base_url"
            ) from None

    def generate(self, requests: list[ChatRequest]) -> list[ModelOutput]:
        """One output per request, in request order; at most `concurrency` HTTP requests in flight. An output's
        `latency_s` is the wall time of the whole request in seconds: image encoding, retries and backoff included.

        A few more workers than `concurrency` encode the next images while every slot waits on the server. When
        the caller is interrupted (Ctrl-C), requests not yet started are dropped; finished ones are in the cache.
        When the outage guard trips, requests not yet started are not sent (cached answers are still served) and
        `OutageError` is raised with every finished output, None for each request not started.
        """
        if not requests:
            return []
        self._require_key()
        self.outage.rearm()
        pool = ThreadPoolExecutor(
            max_workers=min(self.concurrency + min(self.concurrency, ENCODE_AHEAD), len(requests))
        )
        try:
            outputs = list(pool.map(self._generate_one, requests))
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # a plain `with` would run every queued request first
        if self.outage.reason is not None:
            raise OutageError(self.outage.reason, outputs)
        return [out for out in outputs if out is not None]  # all of them: nothing is skipped without an outage

    def estimated_cost(self) -> float | None:
        """Cost of the tokens paid for so far (cache hits are free), in the prices' currency; None without prices."""
        if self.price_per_1k_input is None or self.price_per_1k_output is None:
            return None
        with self._lock:
            tokens_in, tokens_out = self.usage_totals["prompt_tokens"], self.usage_totals["completion_tokens"]
        return (tokens_in * self.price_per_1k_input + tokens_out * self.price_per_1k_output) / 1000

    def cache_key(self, request: ChatRequest) -> str:
        """The response-cache key: the run, the server and everything that determines the answer, images by
        content hash (`relabel.suggest.cache.request_key`)."""
        params = {
            "prompt": request.prompt,
            "system": request.system,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "max_side": self.max_side,
            **self.extra_body,
        }
        return request_key(
            run=self.run,
            model=self.name,
            base_url=self.base_url,
            prompt_version=self.prompt_version,
            image_hashes=[ref.sha256 for ref in request.images],
            params=params,
        )

    # -- policy ---------------------------------------------------------------------------------------------------

    def _generate_one(self, request: ChatRequest) -> ModelOutput | None:
        """Cache, then the request with retries; a failure comes back as an error status with a one-line reason.
        None: not started, because the outage guard has tripped."""
        key = self.cache_key(request) if self.cache is not None else ""
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None and isinstance(hit.get("text"), str):
            self.add_usage({"cached": 1})
            return ModelOutput(text=hit["text"], usage=dict(hit.get("usage", {})), cached=True)
        if self.outage.tripped:
            return None
        start = time.perf_counter()
        try:
            payload = self.request_body(request)
        except Failure as exc:
            return ModelOutput(error=exc.message(), retryable=exc.kind.retryable)
        with self._slots:  # held through the backoff too: waiting out a 429 must not free a slot for more load
            if self.outage.tripped:  # tripped while this request waited for a slot
                return None
            result = self._call_with_retries(payload)
        latency_s = time.perf_counter() - start
        if isinstance(result, Failure):
            return ModelOutput(error=result.message(), retryable=result.kind.retryable, latency_s=latency_s)
        text, usage = result
        self.add_usage({**usage, "calls": 1})
        if self.cache is not None:
            self.cache.put(key, self.name, {"text": text, "usage": usage})
        return ModelOutput(text=text, usage=usage, latency_s=latency_s)

    def _call_with_retries(self, payload: dict[str, Any]) -> tuple[str, dict[str, int]] | Failure:
        """(text, usage), or the last failure, its `retries` set. Sleeps between attempts, never after the last;
        gives up early once the outage guard has tripped. Every outcome is reported to the guard."""
        result = self._attempt(payload)
        retries = 0
        while isinstance(result, Failure) and result.kind.retry_now and retries < self.max_retries:
            if self.outage.tripped:
                break
            self.sleep(self._backoff_s(retries + 1, result.retry_after_s))
            if self.outage.tripped:  # tripped by another request during the wait: the run is stopping
                break
            retries += 1
            result = self._attempt(payload)
        if isinstance(result, Failure):
            result.retries = retries
            self.outage.record(result.kind, result.message())
        else:
            self.outage.record(None)
        return result

    def _attempt(self, payload: dict[str, Any]) -> tuple[str, dict[str, int]] | Failure:
        """One call, parsed: (text, usage), or the failure it ended in."""
        try:
            return parse_completion(self._call(payload))
        except Failure as failure:
            return failure
        except openai.APIError as exc:
            return classify(exc)

    def _backoff_s(self, retry: int, retry_after_s: float | None) -> float:
        """Seconds to wait before retry number `retry` (1-based): full jitter, uniform in [0, min(30, 0.5 * 2 **
        (retry - 1))], or at least what the server asked for (capped at RETRY_AFTER_CAP_S)."""
        jitter = self._rng.uniform(0.0, min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (retry - 1)))
        return jitter if retry_after_s is None else max(jitter, min(retry_after_s, RETRY_AFTER_CAP_S))

    def add_usage(self, counts: Mapping[str, int]) -> None:
        """Add token and call counts to `usage_totals` (what `estimated_cost` and the run's usage read)."""
        with self._lock:
            for name, value in counts.items():
                self.usage_totals[name] = self.usage_totals.get(name, 0) + value

    # -- transport ------------------------------------------------------------------------------------------------

    def _call(self, payload: dict[str, Any]) -> Any:
        """One chat-completions request, no retries; the decoded JSON body. Raises openai.APIError or Failure.

        `client.post` is the openai client's documented way to send a body as it is: `chat.completions.create`
        would first walk the whole payload (base64 images included) against its TypedDicts, ~1.5 ms per request
        under the GIL, which costs throughput at 32 requests in flight on 2 cores (bench/bench_openai.py).
        """
        options: Any = {"timeout": self.timeout_s}
        content = self.client().post("/chat/completions", body=payload, cast_to=bytes, options=options)
        try:
            return json.loads(content)
        except ValueError as exc:
            raise Failure("malformed response", f"invalid JSON ({exc})", FailureKind.transient) from None

    def request_body(self, request: ChatRequest) -> dict[str, Any]:
        """The chat-completions body sent for `request`: optional system message, then the images (JPEG data URLs)
        and the prompt. The Batch API sends the same body (`relabel.suggest.batch_api`). Raises `Failure` when an
        image cannot be read."""
        content = [_image_part(ref, self.max_side) for ref in request.images]
        content.append({"type": "text", "text": request.prompt})
        messages: list[dict[str, Any]] = [{"role": "system", "content": request.system}] if request.system else []
        messages.append({"role": "user", "content": content})
        settings = {"model": self.name, "max_tokens": request.max_tokens, "temperature": request.temperature}
        return {**settings, "messages": messages, **self.extra_body}  # as the openai client merges extra_body

    def _require_key(self) -> None:
        if self.is_openai and not self._api_key:
            raise RelabelError(
                f"no API key for {self.base_url}: set OPENAI_API_KEY or pass api_key; for a local "
                "OpenAI-compatible server (vLLM, Ollama) set its base_url, where any key such as EMPTY is accepted"
            )

    def client(self) -> openai.OpenAI:
        """The openai client of this server (created once; its own retries off)."""
        with self._lock:
            if self._client is None:
                self._client = openai.OpenAI(
                    api_key=self._api_key or DUMMY_API_KEY,
                    base_url=self.base_url,
                    timeout=self.timeout_s,
                    max_retries=0,  # the retry policy is ours (_call_with_retries)
                )
            return self._client


def encode_image(ref: ImageRef | Path, max_side: int) -> str:
    """A JPEG data URL of the image: EXIF orientation applied, RGB, longer side at most `max_side` pixels."""
    path = ref.path if isinstance(ref, ImageRef) else ref
    with Image.open(path) as img:
        img.draft("RGB", (max_side, max_side))  # JPEG: decode at a reduced scale that is still ≥ max_side
        img.load()
        ImageOps.exif_transpose(img, in_place=True)  # in place: no copy of the pixels when nothing turns
        image = img if img.mode == "RGB" else img.convert("RGB")
        image.thumbnail((max_side, max_side), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _image_part(ref: ImageRef, max_side: int) -> dict[str, Any]:
    """An `image_url` content part; an unreadable image is a failure that names the image."""
    try:
        return {"type": "image_url", "image_url": {"url": encode_image(ref, max_side)}}
    except (OSError, ValueError, Image.DecompressionBombError) as exc:  # UnidentifiedImageError is an OSError
        raise Failure("cannot read image", f"{ref.key}: {one_line(str(exc))}", FailureKind.final) from None


def _require(ok: bool, name: str, value: object, accepted: str) -> None:
    if not ok:
        raise InputError(f"invalid {name} {value!r} for the openai adapter; accepted: {accepted}")
