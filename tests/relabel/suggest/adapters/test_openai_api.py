"""OpenAIChatAdapter against a local OpenAI-compatible stub server with scripted faults. Offline; no real sleeping:
the adapter's `sleep` records the backoff delays instead of waiting."""

from __future__ import annotations

import base64
import email.utils
import hashlib
import io
import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from relabel.common.errors import InputError, RelabelError
from relabel.suggest.adapters import load_adapter
from relabel.suggest.adapters.openai_api import OpenAIChatAdapter
from relabel.suggest.cache import DbResponseCache, MemoryResponseCache
from relabel.suggest.failures import OutageError, retry_after_s
from relabel.suggest.types import ChatRequest, GenerativeAdapter, ImageRef
from tests.stub_server import Fault, StubServer

MakeAdapter = Callable[..., OpenAIChatAdapter]
EXIF_ORIENTATION = 0x0112
ROTATE_90_CW = 6  # the stored pixels must be turned 90° clockwise for display


def write_image(path: Path, size: tuple[int, int], orientation: int | None = None) -> ImageRef:
    """A JPEG whose left half is red and right half blue, optionally with an EXIF orientation tag."""
    image = Image.new("RGB", size, (255, 0, 0))
    image.paste((0, 0, 255), (size[0] // 2, 0, size[0], size[1]))
    exif = Image.Exif()
    if orientation is not None:
        exif[EXIF_ORIENTATION] = orientation
    image.save(path, format="JPEG", quality=95, exif=exif)
    return ImageRef(1, path, hashlib.sha256(path.read_bytes()).hexdigest(), path.name)  # the id is not sent


def decode_data_url(url: str) -> Image.Image:
    header, _, data = url.partition(",")
    assert header == "data:image/jpeg;base64"
    return Image.open(io.BytesIO(base64.b64decode(data)))


def is_red(pixel: Any) -> bool:
    return pixel[0] > 200 and pixel[2] < 60


@pytest.fixture(autouse=True)
def no_openai_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ADMIN_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def stub() -> Iterator[StubServer]:
    with StubServer(models=["stub-model"]) as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def make_adapter(stub: StubServer, sleeps: list[float]) -> MakeAdapter:
    def make(**options: Any) -> OpenAIChatAdapter:
        defaults: dict[str, Any] = {"base_url": stub.url, "api_key": "EMPTY", "sleep": sleeps.append, "timeout_s": 5}
        return OpenAIChatAdapter("stub-model", **{**defaults, **options})

    return make


@pytest.fixture
def cat(tmp_path: Path) -> ImageRef:
    return write_image(tmp_path / "cat.jpg", (64, 48))


@pytest.fixture
def request_(cat: ImageRef) -> ChatRequest:
    return ChatRequest(images=(cat,), prompt="What animal is this? One word.")


class TestRequestShape:
    def test_user_message_has_image_then_prompt(self, make_adapter: MakeAdapter, stub: StubServer, cat: ImageRef):
        request = ChatRequest((cat,), "Name the object.", system="You label images.", max_tokens=12, temperature=0.5)
        [out] = make_adapter(extra_body={"top_k": 1}).generate([request])
        assert (out.text, out.error, out.cached) == ("tabby", None, False)
        assert out.latency_s > 0
        [sent] = stub.chat_requests
        body = sent.body or {}
        assert body["model"] == "stub-model"
        assert (body["max_tokens"], body["temperature"], body["top_k"]) == (12, 0.5, 1)
        system, user = body["messages"]
        assert system == {"role": "system", "content": "You label images."}
        assert [part["type"] for part in user["content"]] == ["image_url", "text"]
        assert user["content"][1]["text"] == "Name the object."
        assert decode_data_url(sent.image_urls[0]).size == (64, 48)

    def test_no_system_message_when_none(self, make_adapter: MakeAdapter, stub: StubServer, request_: ChatRequest):
        make_adapter().generate([request_])
        assert [m["role"] for m in (stub.chat_requests[0].body or {})["messages"]] == ["user"]

    def test_image_downscaled_to_max_side(self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path):
        big = write_image(tmp_path / "big.jpg", (2000, 1000))
        make_adapter(max_side=256).generate([ChatRequest((big,), "?")])
        assert decode_data_url(stub.chat_requests[0].image_urls[0]).size == (256, 128)

    def test_image_exif_rotated(self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path):
        turned = write_image(tmp_path / "turned.jpg", (300, 100), orientation=ROTATE_90_CW)
        make_adapter().generate([ChatRequest((turned,), "?")])
        sent = decode_data_url(stub.chat_requests[0].image_urls[0]).convert("RGB")
        assert sent.size == (100, 300)
        assert is_red(sent.getpixel((50, 20))) and not is_red(sent.getpixel((50, 280)))  # the left half is on top

    def test_several_images_in_one_request(self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path):
        refs = tuple(write_image(tmp_path / f"{i}.jpg", (32 + i, 32)) for i in range(3))
        make_adapter().generate([ChatRequest(refs, "Which differ?")])
        assert [decode_data_url(u).size for u in stub.chat_requests[0].image_urls] == [(32, 32), (33, 32), (34, 32)]

    def test_unreadable_image_is_an_error_without_a_request(
        self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path
    ):
        bad = tmp_path / "bad.jpg"
        bad.write_text("<html>403</html>")
        ref = ImageRef(7, bad, "0" * 64, "train/bad.jpg")
        [out] = make_adapter().generate([ChatRequest((ref,), "?")])
        assert out.text is None and out.error is not None
        assert out.error.startswith("cannot read image: train/bad.jpg")
        assert stub.chat_requests == []


RECOVERABLE = {
    "429": Fault.rate_limit(),
    "500": Fault.server_error(),
    "503": Fault.server_error(503),
    "timeout": Fault.slow(5.0),
    "dropped connection": Fault.drop_connection(),
    "malformed JSON": Fault.malformed(),
    "no choices": Fault.no_choices(),
}


class TestRetries:
    @pytest.mark.parametrize("fault", RECOVERABLE.values(), ids=RECOVERABLE.keys())
    def test_fault_retried_then_succeeds(
        self, make_adapter: MakeAdapter, stub: StubServer, sleeps: list[float], request_: ChatRequest, fault: Fault
    ):
        stub.inject(fault, fault)
        [out] = make_adapter(timeout_s=0.3).generate([request_])
        assert (out.text, out.error) == ("tabby", None)
        assert len(stub.chat_requests) == 3
        assert len(sleeps) == 2
        assert 0 <= sleeps[0] <= 0.5 and 0 <= sleeps[1] <= 1.0  # full jitter: uniform in [0, 0.5 * 2**k]

    @pytest.mark.parametrize(
        "fault, at_least",
        [(Fault.rate_limit(retry_after="7"), 7.0), (Fault.rate_limit(retry_after_ms="2500"), 2.5)],
        ids=["Retry-After seconds", "retry-after-ms"],
    )
    def test_retry_after_honoured(
        self,
        make_adapter: MakeAdapter,
        stub: StubServer,
        sleeps: list[float],
        request_: ChatRequest,
        fault: Fault,
        at_least: float,
    ):
        stub.inject(fault)
        [out] = make_adapter().generate([request_])
        assert out.text == "tabby"
        assert len(sleeps) == 1 and sleeps[0] >= at_least

    def test_retry_after_http_date(self, make_adapter: MakeAdapter, stub: StubServer, sleeps: list[float], request_):
        stub.inject(Fault.rate_limit(retry_after=email.utils.formatdate(time.time() + 30, usegmt=True)))
        make_adapter().generate([request_])
        assert 28 <= sleeps[0] <= 31

    def test_retry_after_parsing(self):
        now = 1_700_000_000.0
        assert retry_after_s({"Retry-After": "3"}) == 3.0
        assert retry_after_s({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
        assert retry_after_s({"Retry-After": email.utils.formatdate(now + 12, usegmt=True)}, now=now) == 12.0
        assert retry_after_s({"Retry-After": "soon"}) is None
        assert retry_after_s({}) is None

    def test_retries_exhausted_is_an_error_not_an_answer(
        self, make_adapter: MakeAdapter, stub: StubServer, sleeps: list[float], request_: ChatRequest
    ):
        stub.inject(*[Fault.server_error()] * 4)
        cache = MemoryResponseCache()
        [out] = make_adapter(max_retries=3, cache=cache).generate([request_])
        assert not out.ok and out.text is None
        assert out.error == "HTTP 500 after 3 retries: The server had an error while processing your request"
        assert len(stub.chat_requests) == 4
        assert len(sleeps) == 3 and all(0 <= s <= 0.5 * 2**k for k, s in enumerate(sleeps))
        assert cache.entries == {}  # a failure is never cached

    def test_timeouts_exhausted(self, make_adapter: MakeAdapter, stub: StubServer, request_: ChatRequest):
        stub.inject(Fault.slow(5.0), Fault.slow(5.0))
        [out] = make_adapter(max_retries=1, timeout_s=0.2).generate([request_])
        assert out.text is None and out.error == "timeout after 1 retries: no response in time"

    def test_401_fails_at_once(
        self, make_adapter: MakeAdapter, stub: StubServer, sleeps: list[float], request_: ChatRequest
    ):
        stub.inject(Fault.unauthorized())
        [out] = make_adapter().generate([request_])
        assert out.text is None and out.error == "HTTP 401: Incorrect API key provided"
        assert len(stub.chat_requests) == 1 and sleeps == []


class TestCache:
    def test_hit_makes_no_request(self, make_adapter: MakeAdapter, stub: StubServer, request_: ChatRequest):
        cache = MemoryResponseCache()
        [first] = make_adapter(cache=cache).generate([request_])
        stub.answer = "changed"  # a new request would see this
        [again] = make_adapter(cache=cache).generate([request_])
        assert len(stub.chat_requests) == 1
        assert (again.text, again.usage, again.cached) == ("tabby", first.usage, True)

    @pytest.mark.parametrize(
        "change",
        [{"prompt_version": "v2"}, {"max_side": 512}, {"extra_body": {"top_p": 0.9}}],
        ids=["prompt version", "max side", "extra body"],
    )
    def test_different_settings_miss(
        self, make_adapter: MakeAdapter, stub: StubServer, request_: ChatRequest, change: dict[str, Any]
    ):
        cache = MemoryResponseCache()
        make_adapter(cache=cache).generate([request_])
        [out] = make_adapter(cache=cache, **change).generate([request_])
        assert not out.cached and len(stub.chat_requests) == 2

    def test_resume_repeats_no_finished_request(
        self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path, sqlite_engine
    ):
        refs = [write_image(tmp_path / f"{i}.jpg", (40, 30 + i)) for i in range(8)]
        requests = [ChatRequest((ref,), "What is it?") for ref in refs]
        make_adapter(cache=DbResponseCache(sqlite_engine)).generate(requests[:5])  # the run that was interrupted
        stub.reset()
        outputs = make_adapter(cache=DbResponseCache(sqlite_engine)).generate(requests)
        assert [o.cached for o in outputs] == [True] * 5 + [False] * 3
        assert len(stub.chat_requests) == 3


class TestConcurrency:
    def test_in_flight_bounded_and_order_kept(self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path):
        stub.latency_s = 0.05
        stub.answer = lambda body: body["messages"][-1]["content"][-1]["text"].upper()
        ref = write_image(tmp_path / "a.jpg", (16, 16))
        requests = [ChatRequest((ref,), f"item {i}") for i in range(12)]
        outputs = make_adapter(concurrency=3).generate(requests)
        assert [o.text for o in outputs] == [f"ITEM {i}" for i in range(12)]
        assert stub.max_in_flight == 3

    def test_stops_early_when_interrupted(self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path):
        class BrokenCache(MemoryResponseCache):  # stands in for Ctrl-C: the first finished request raises
            def put(self, key: str, model: str, response: dict[str, Any]) -> None:
                raise KeyboardInterrupt

        stub.latency_s = 0.02
        ref = write_image(tmp_path / "a.jpg", (16, 16))
        with pytest.raises(KeyboardInterrupt):
            make_adapter(concurrency=2, cache=BrokenCache()).generate([ChatRequest((ref,), f"{i}") for i in range(40)])
        assert len(stub.chat_requests) < 20  # the queued requests were dropped, not run

    def test_empty_batch(self, make_adapter: MakeAdapter):
        assert make_adapter().generate([]) == []


class TestCheck:
    def test_passes_against_a_running_server(self, make_adapter: MakeAdapter, stub: StubServer):
        make_adapter().check()
        assert [r.path for r in stub.requests] == ["/v1/models"] and stub.chat_requests == []

    def test_404_on_models_is_fine(self, make_adapter: MakeAdapter, stub: StubServer):
        stub.models = None
        make_adapter().check()

    def test_missing_key_for_openai(self, sleeps: list[float]):
        adapter = OpenAIChatAdapter("gpt-4o-mini", sleep=sleeps.append)
        with pytest.raises(RelabelError, match="no API key for https://api.openai.com/v1: set OPENAI_API_KEY"):
            adapter.check()
        with pytest.raises(RelabelError, match="OPENAI_API_KEY"):
            adapter.generate([ChatRequest((), "?")])

    def test_key_and_url_from_environment(self, monkeypatch: pytest.MonkeyPatch, stub: StubServer):
        monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        OpenAIChatAdapter("stub-model").check()
        assert stub.requests[0].headers["authorization"] == "Bearer sk-from-env"

    def test_unreachable_server(self):
        with socket.socket() as sock:  # a port that was free a moment ago and has nobody listening now
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        adapter = OpenAIChatAdapter("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="EMPTY")
        with pytest.raises(RelabelError, match=f"cannot reach the OpenAI-compatible server at http://127.0.0.1:{port}"):
            adapter.check()

    def test_rejected_key(self, make_adapter: MakeAdapter, stub: StubServer, request_: ChatRequest):
        stub.require_key = "sk-right"
        adapter = make_adapter(api_key="sk-wrong")
        with pytest.raises(RelabelError, match=r"rejected the API key \(HTTP 401\)"):
            adapter.check()
        [out] = adapter.generate([request_])
        assert out.error == "HTTP 401: Incorrect API key provided" and len(stub.chat_requests) == 1


class TestUsage:
    def test_totals_and_cost(self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path):
        stub.usage = (1000, 10)
        refs = [write_image(tmp_path / f"{i}.jpg", (20, 20 + i)) for i in range(3)]
        cache = MemoryResponseCache()
        adapter = make_adapter(cache=cache, price_per_1k_input=0.15, price_per_1k_output=0.6)
        outputs = adapter.generate([ChatRequest((ref,), "?") for ref in refs])
        assert [o.usage for o in outputs] == [{"prompt_tokens": 1000, "completion_tokens": 10}] * 3
        adapter.generate([ChatRequest((refs[0],), "?")])  # a cache hit: nothing more to pay
        assert adapter.usage_totals == {"prompt_tokens": 3000, "completion_tokens": 30, "calls": 3, "cached": 1}
        assert adapter.estimated_cost() == pytest.approx(3 * 0.15 + 0.03 * 0.6)

    def test_cost_unknown_without_prices(self, make_adapter: MakeAdapter, request_: ChatRequest):
        adapter = make_adapter(price_per_1k_input=0.15)
        adapter.generate([request_])
        assert adapter.usage_totals["prompt_tokens"] == 100
        assert adapter.estimated_cost() is None


class TestConstruction:
    def test_registry_builds_a_generative_adapter(self, stub: StubServer):
        adapter = load_adapter("openai:gpt-4o-mini", base_url=stub.url, api_key="sk-secret", concurrency=4)
        assert isinstance(adapter, OpenAIChatAdapter) and isinstance(adapter, GenerativeAdapter)
        assert adapter.name == "gpt-4o-mini"
        described = adapter.describe()
        assert described["concurrency"] == 4 and described["api_key_set"] is True
        assert "sk-secret" not in repr(described)

    @pytest.mark.parametrize(
        "option", [{"concurrency": 0}, {"timeout_s": 0}, {"max_retries": -1}, {"max_side": 0}], ids=str
    )
    def test_bad_option_names_the_value(self, option: dict[str, Any]):
        [(name, value)] = option.items()
        with pytest.raises(InputError, match=f"invalid {name} {value!r} for the openai adapter; accepted: "):
            OpenAIChatAdapter("m", base_url="http://127.0.0.1:9/v1", **option)


def free_port_url() -> str:
    """The base URL of a port that was free a moment ago and has nobody listening now: connections are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def bad_request() -> Fault:
    return Fault(400, b'{"error": {"message": "Image too large", "type": "invalid_request_error"}}')


def refusal() -> Fault:
    message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    return Fault(200, json.dumps({"choices": [{"index": 0, "message": message}]}).encode())


class TestFailureKinds:
    """Which failures a later run asks again (retryable) and which stay (final): relabel.suggest.failures."""

    @pytest.mark.parametrize(
        "fault, error",
        [
            (
                Fault.server_error(503),
                "HTTP 503 after 1 retries: The server had an error while processing your request",
            ),
            (Fault.rate_limit(), "HTTP 429 after 1 retries: Rate limit reached"),
            (Fault.drop_connection(), "connection error after 1 retries"),
            (Fault.malformed(), "malformed response after 1 retries: invalid JSON"),
        ],
        ids=["503", "429", "dropped", "malformed"],
    )
    def test_passing_failures_are_retryable(
        self, make_adapter: MakeAdapter, stub: StubServer, request_: ChatRequest, fault: Fault, error: str
    ):
        stub.inject(fault, fault)
        [out] = make_adapter(max_retries=1).generate([request_])
        assert out.error is not None and out.error.startswith(error) and out.retryable

    @pytest.mark.parametrize("status", [401, 403, 404])
    def test_service_refusals_are_not_retried_now_but_by_the_next_run(
        self, make_adapter: MakeAdapter, stub: StubServer, sleeps: list[float], request_: ChatRequest, status: int
    ):
        stub.inject(Fault(status, b'{"error": {"message": "no"}}'))
        [out] = make_adapter().generate([request_])
        assert (out.error, out.retryable) == (f"HTTP {status}: no", True)
        assert len(stub.chat_requests) == 1 and sleeps == []

    @pytest.mark.parametrize("fault, error", [(bad_request(), "HTTP 400: Image too large"), (refusal(), "refused: I")])
    def test_refused_requests_and_answers_are_final(
        self,
        make_adapter: MakeAdapter,
        stub: StubServer,
        sleeps: list[float],
        request_: ChatRequest,
        fault: Fault,
        error: str,
    ):
        stub.inject(fault)
        cache = MemoryResponseCache()
        [out] = make_adapter(cache=cache).generate([request_])
        assert out.error is not None and out.error.startswith(error) and not out.retryable
        assert len(stub.chat_requests) == 1 and sleeps == [] and cache.entries == {}

    def test_unreadable_image_is_final(self, make_adapter: MakeAdapter, tmp_path: Path):
        bad = tmp_path / "bad.jpg"
        bad.write_text("not a JPEG")
        [out] = make_adapter().generate([ChatRequest((ImageRef(1, bad, "0" * 64, "bad.jpg"),), "?")])
        assert out.error is not None and out.error.startswith("cannot read image") and not out.retryable


class TestOutage:
    def test_failures_in_a_row_stop_the_call_and_leave_the_rest_unstarted(
        self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path
    ):
        refs = [write_image(tmp_path / f"{i}.jpg", (20, 20 + i)) for i in range(6)]
        stub.inject(*[Fault.server_error(503)] * 6)  # three requests, each tried twice
        adapter = make_adapter(concurrency=1, max_retries=1, stop_after_failures=3)
        with pytest.raises(
            OutageError, match=r"^3 requests in a row to http://127\.0\.0\.1:\d+/v1 failed \(last: HTTP 503"
        ):
            adapter.generate([ChatRequest((ref,), "?") for ref in refs])
        assert len(stub.chat_requests) == 6  # nothing was sent after the third failure

    def test_the_error_carries_finished_outputs_and_marks_unstarted_ones(
        self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path
    ):
        refs = [write_image(tmp_path / f"{i}.jpg", (20, 20 + i)) for i in range(5)]
        stub.inject(Fault.server_error(), Fault.server_error())  # the first request, tried twice
        stub.die_after = 3  # the second request is answered, then the server dies
        adapter = make_adapter(concurrency=1, max_retries=1, stop_after_failures=10)
        with pytest.raises(OutageError) as raised:
            adapter.generate([ChatRequest((ref,), "?") for ref in refs])
        outputs = raised.value.outputs
        assert len(outputs) == 5
        answered = [o for o in outputs if o is not None and o.ok]
        failed = [o for o in outputs if o is not None and not o.ok]
        assert len(answered) == 1 and len(failed) == 2 and outputs.count(None) == 2
        assert all(o.retryable for o in failed)
        assert raised.value.reason.startswith(f"the server at {stub.url} cannot be reached (connection error")
        assert raised.value.exit_code == 75

    def test_answers_reset_the_count(self, make_adapter: MakeAdapter, stub: StubServer, tmp_path: Path):
        refs = [write_image(tmp_path / f"{i}.jpg", (20, 20 + i)) for i in range(6)]
        stub.inject(Fault.server_error(), None, Fault.server_error(), bad_request(), Fault.server_error())
        outputs = make_adapter(concurrency=1, max_retries=0, stop_after_failures=2).generate(
            [ChatRequest((ref,), "?") for ref in refs]
        )
        # the server saw 500, answer, 500, 400, 500, answer: never two passing failures in a row, so no outage
        assert sorted(o.ok for o in outputs) == [False] * 4 + [True] * 2

    def test_count_goes_on_across_calls_and_starts_afresh_after_an_outage(
        self, make_adapter: MakeAdapter, stub: StubServer, request_: ChatRequest
    ):
        adapter = make_adapter(max_retries=0, stop_after_failures=2)
        stub.inject(Fault.server_error(), Fault.server_error())
        [first] = adapter.generate([request_])
        assert not first.ok
        with pytest.raises(OutageError):
            adapter.generate([request_])
        [again] = adapter.generate([request_])  # the server is back
        assert again.ok

    def test_unreachable_server_stops_at_the_first_request(self, sleeps: list[float], tmp_path: Path):
        refs = [write_image(tmp_path / f"{i}.jpg", (20, 20 + i)) for i in range(4)]
        cache = MemoryResponseCache()
        url = free_port_url()
        adapter = OpenAIChatAdapter(
            "m", base_url=url, api_key="EMPTY", concurrency=1, max_retries=2, sleep=sleeps.append, cache=cache
        )
        cached = ChatRequest((refs[3],), "?")
        cache.put(adapter.cache_key(cached), "m", {"text": "tabby", "usage": {}})
        with pytest.raises(OutageError, match=f"the server at {url} cannot be reached .*Connection refused") as raised:
            adapter.generate([ChatRequest((ref,), "?") for ref in refs[:3]] + [cached])
        *sent, last = raised.value.outputs
        [failed] = [o for o in sent if o is not None]  # the one request started; the others never were
        assert failed.retryable and "after 2 retries" in (failed.error or "") and sent.count(None) == 2
        assert last is not None and last.cached and last.text == "tabby"  # the cache needs no server
        assert len(sleeps) == 2
