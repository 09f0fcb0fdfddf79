"""A small OpenAI-compatible HTTP server for tests and benchmarks, with scripted faults.

It serves `POST /v1/chat/completions` and `GET /v1/models` from a background thread on 127.0.0.1 (a free port),
answers every chat request with a deterministic text after a configurable latency, and records every request it
receives, so a test can count calls and read the prompt and images that were sent. Faults are queued: each chat
request takes the next fault from the queue (if any) instead of the normal answer.

The server can also die as a crashed one does, and come back on the same port (the base URL is recorded with a
model run, so a resumed run needs the same one): `go_down()`, or `die_after = n` to go down while answering the
n-th chat request; from then on new connections are refused and requests on open connections get no response.
`come_back()` listens again.

It also serves the Batch API (`/v1/files`, `/v1/batches`): `stub.batch`, a `tests.stub_batches.BatchDesk`, holds the
uploaded files and the batches, which end after `stub.batch.complete_after` polls with each line answered as a
chat request would be.

Example:
    with StubServer(latency_s=0.01) as stub:
        stub.inject(Fault.rate_limit(retry_after="2"), Fault.server_error())
        adapter = OpenAIChatAdapter("stub-model", base_url=stub.url, api_key="EMPTY")
        ...
        assert len(stub.chat_requests) == 3
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.stub_batches import BatchDesk

Answer = str | Callable[[dict[str, Any]], str]  # the reply text, or a function of the request body


@dataclass(frozen=True)
class Fault:
    """What the server does instead of answering one chat request."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0  # wait this long before replying (longer than the client timeout: a timeout)
    drop: bool = False  # close the connection without any response

    @classmethod
    def rate_limit(cls, retry_after: str | None = None, retry_after_ms: str | None = None) -> Fault:
        headers = [("Retry-After", retry_after)] if retry_after is not None else []
        headers += [("retry-after-ms", retry_after_ms)] if retry_after_ms is not None else []
        return cls(429, _error_body("Rate limit reached", "rate_limit_exceeded"), tuple(headers))

    @classmethod
    def server_error(cls, status: int = 500) -> Fault:
        return cls(status, _error_body("The server had an error while processing your request", "server_error"))

    @classmethod
    def slow(cls, delay_s: float) -> Fault:
        return cls(delay_s=delay_s)  # then a normal answer, if the client is still waiting

    @classmethod
    def drop_connection(cls) -> Fault:
        return cls(drop=True)

    @classmethod
    def malformed(cls) -> Fault:
        return cls(200, b'{"id": "chatcmpl-stub", "choices": [{"message": ')

    @classmethod
    def no_choices(cls) -> Fault:
        return cls(200, b'{"id": "chatcmpl-stub", "object": "chat.completion", "choices": []}')

    @classmethod
    def unauthorized(cls) -> Fault:
        return cls(*_UNAUTHORIZED)


@dataclass
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None  # the decoded JSON body; None for GET or when `keep_bodies` is off
    image_digests: list[str] = field(default_factory=list)  # sha256 of each image_url, in message order

    @property
    def prompt(self) -> str:
        """The text parts of the last (user) message, joined."""
        content = (self.body or {}).get("messages", [{}])[-1].get("content", "")
        return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)

    @property
    def image_urls(self) -> list[str]:
        content = (self.body or {}).get("messages", [{}])[-1].get("content", [])
        return [] if isinstance(content, str) else [p["image_url"]["url"] for p in content if "image_url" in p]


def _error_body(message: str, code: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": "stub_error", "code": code}}).encode()


_UNAUTHORIZED = (401, _error_body("Incorrect API key provided", "invalid_api_key"))


def _image_digests(body: dict[str, Any]) -> list[str]:
    digests = []
    for message in body.get("messages", []):
        content = message.get("content")
        for part in content if isinstance(content, list) else []:
            if part.get("type") == "image_url":
                digests.append(hashlib.sha256(part["image_url"]["url"].encode()).hexdigest())
    return digests


_PROBE = re.compile(r"Is there an? (.+?) in the image\?")
CAPTION_PROMPT = "Describe this image in one sentence."


@dataclass
class SceneAnswers:
    """Answers to relabel's presence probes (pope) and caption prompts from the objects the stub knows are in each
    image, found by the sha256 of the image_url as sent (`tests.stub_server.image_digest`). Deterministic:

    - "Is there a {class} in the image?": "Yes." when the class is one of the image's objects, else "No."; a class
      in `unsure` gets "Maybe." (unparseable); with `error_rate` r, the probes whose hash of (image, class) falls
      below r get the wrong answer, the same ones on every run;
    - "Describe this image in one sentence.": "A photo of a {first object} next to a {hallucination}.";
    - any other prompt: `other`.
    """

    objects: dict[str, list[str]]  # image digest -> class names in the image, the one captions name first
    hallucination: str = "goldfish"
    unsure: frozenset[str] = frozenset()
    error_rate: float = 0.0
    other: str = "tabby"

    def __call__(self, body: dict[str, Any]) -> str:
        digests = _image_digests(body)
        known = self.objects.get(digests[0], []) if digests else []
        prompt = RecordedRequest("POST", "", {}, body).prompt
        probe = _PROBE.search(prompt)
        if probe is not None:
            name = probe.group(1)
            if name in self.unsure:
                return "Maybe."
            flip = _fraction(f"{digests[0] if digests else ''}|{name}") < self.error_rate
            return "Yes." if (name in known) != flip else "No."
        if CAPTION_PROMPT in prompt:
            return f"A photo of a {known[0] if known else 'thing'} next to a {self.hallucination}."
        return self.other


def _fraction(text: str) -> float:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) / 16**8


def image_digest(data_url: str) -> str:
    """The digest `SceneAnswers` and `RecordedRequest.image_digests` know an image by: sha256 of its image_url."""
    return hashlib.sha256(data_url.encode()).hexdigest()


class StubServer:
    """The server and its script; a context manager that starts and stops it."""

    def __init__(
        self,
        *,
        latency_s: float = 0.0,
        answer: Answer = "tabby",
        usage: tuple[int, int] = (100, 5),
        models: list[str] | None = None,
        keep_bodies: bool = True,
        require_key: str | None = None,
    ) -> None:
        self.latency_s = latency_s  # seconds before every normal answer
        self.answer = answer
        self.usage = usage  # (prompt_tokens, completion_tokens) reported for every answer
        self.models = models  # ids for GET /v1/models; None: answer 404, as some compatible servers do
        self.keep_bodies = keep_bodies  # off in benchmarks: 1000 base64 images take memory
        self.require_key = require_key  # when set, any other bearer token gets a 401 on every route
        self.die_after: int | None = None  # go down while answering the n-th chat request since start or reset
        self.down = False
        self.faults: deque[Fault | None] = deque()
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._chats_seen = 0
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.batch = BatchDesk(self)  # the Batch API: files and batches
        self._httpd = self._listen(0)
        self._port = int(self._httpd.server_address[1])
        self._thread = threading.Thread(target=self._serve, name="stub-openai", daemon=True)

    @property
    def url(self) -> str:
        """The base URL to give the client, e.g. http://127.0.0.1:40123/v1."""
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def inject(self, *faults: Fault | None) -> None:
        """Queue faults; each chat request consumes one, in order, until the queue is empty. None: a normal answer."""
        with self._lock:
            self.faults.extend(faults)

    def reset(self) -> None:
        with self._lock:
            self.faults.clear()
            self.requests.clear()
            self._chats_seen = 0
            self.max_in_flight = self.in_flight

    def start(self) -> StubServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a slow fault
        self.go_down()
        self._thread.join()

    def go_down(self) -> None:
        """Die: stop listening (new connections are refused); open connections get no more responses."""
        with self._lock:
            was_down, self.down = self.down, True
        if not was_down:
            self._httpd.shutdown()  # waits for the serving thread's loop, so never call this from that thread
            self._httpd.server_close()

    def come_back(self) -> None:
        """Listen again on the same port, as a restarted server does; `die_after` is cleared."""
        with self._lock:
            if not self.down:
                return
            self.die_after, self.down = None, False
        self._thread.join()
        self._httpd = self._listen(self._port)
        self._thread = threading.Thread(target=self._serve, name="stub-openai", daemon=True)
        self._thread.start()

    def _listen(self, port: int) -> ThreadingHTTPServer:
        httpd = ThreadingHTTPServer(("127.0.0.1", port), _make_handler(self))  # reuses the address of a closed one
        httpd.daemon_threads = True
        return httpd

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        self._httpd.serve_forever(poll_interval=0.02)  # the default 0.5 s would be added to every stop()

    def _record(self, request: RecordedRequest) -> tuple[Fault | None, bool]:
        """The fault to play for a chat request (a drop once the server is down), and whether to go down first."""
        with self._lock:
            self.requests.append(request)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self._chats_seen += request.path.endswith("/chat/completions")
            if self.down or (self.die_after is not None and self._chats_seen > self.die_after):
                return Fault.drop_connection(), False
            fault = self.faults.popleft() if self.faults else None
            return fault, self._chats_seen == self.die_after

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _completion(self, body: dict[str, Any]) -> bytes:
        text = self.answer(body) if callable(self.answer) else self.answer
        prompt_tokens, completion_tokens = self.usage
        return json.dumps(
            {
                "id": "chatcmpl-stub",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", ""),
                "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        ).encode()


def _make_handler(stub: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        disable_nagle_algorithm = True  # headers and body go out as separate writes: no 40 ms delayed-ACK stall

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            pass

        def do_GET(self) -> None:
            with stub._lock:
                stub.requests.append(
                    RecordedRequest("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, None)
                )
            if stub.down:
                self.close_connection = True
            elif not self._authorized():
                self._reply(*_UNAUTHORIZED)
            elif self.path.rstrip("/").endswith("/models") and stub.models is not None:
                data = [{"id": m, "object": "model", "created": 0, "owned_by": "stub"} for m in stub.models]
                self._reply(200, json.dumps({"object": "list", "data": data}).encode())
            elif stub.batch.handles(self.path):
                self._reply(*stub.batch.get(self.path))
            else:
                self._reply(404, _error_body(f"no route for GET {self.path}", "not_found"))

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            if stub.batch.handles(self.path):
                self._batch_post(raw)
                return
            body = json.loads(raw)
            recorded = RecordedRequest(
                "POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body if stub.keep_bodies else None
            )
            recorded.image_digests = _image_digests(body)
            fault, last = stub._record(recorded)
            try:
                if last:  # refuse new connections before the answer: the client's next attempt finds nobody
                    stub.go_down()
                self._answer(body, fault)
            finally:
                stub._done()

        def _batch_post(self, raw: bytes) -> None:
            with stub._lock:
                stub.requests.append(
                    RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, None)
                )
            if stub.down:
                self.close_connection = True
            elif not self._authorized():
                self._reply(*_UNAUTHORIZED)
            else:
                self._reply(*stub.batch.post(self.path, self.headers.get("Content-Type", ""), raw))

        def _answer(self, body: dict[str, Any], fault: Fault | None) -> None:
            if not self._authorized():
                self._reply(*_UNAUTHORIZED)
            elif not self.path.rstrip("/").endswith("/chat/completions"):
                self._reply(404, _error_body(f"no route for POST {self.path}", "not_found"))
            elif fault is None:
                stub._stopping.wait(stub.latency_s)
                self._reply(200, stub._completion(body))
            elif fault.drop:
                self.close_connection = True  # the handler returns without a byte: the socket is closed
            elif fault.delay_s:
                stub._stopping.wait(fault.delay_s)
                self._reply(200, stub._completion(body))
            else:
                self._reply(fault.status, fault.body, fault.headers)

        def _authorized(self) -> bool:
            return stub.require_key is None or self.headers.get("Authorization") == f"Bearer {stub.require_key}"

        def _reply(self, status: int, payload: bytes, headers: tuple[tuple[str, str], ...] = ()) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(payload)
            except OSError:  # the client gave up (a timeout fault): nobody is listening
                self.close_connection = True

    return Handler
