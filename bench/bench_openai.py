"""OpenAI-compatible client benchmarks: throughput against a local stub server, and resume from the response cache.

The stub (tests/stub_server.py) runs in this process on 127.0.0.1 and answers every chat request after a
fixed latency, so the ideal rate is concurrency / latency. Every request carries one real photo from the sample
folder, decoded, EXIF-transposed, resized to max_side 1024 and JPEG-encoded by the client as it is sent, so the
measured rate includes that encoding (and the stub's own JSON decoding, on the same CPUs).

(a) throughput: N single-image requests, no cache; requests/s against the ideal (target ≥ 0.8 of it).
(b) resume: a DbResponseCache in a fresh SQLite workspace; the first half of the requests (the run that was
    interrupted), then all N again with a new adapter; counts requests that reached the stub for images already
    finished in the first run (target 0).

Example:
  python bench/bench_openai.py --n 1000 --concurrency 32 --latency 0.2 --write
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import os
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import openai
import PIL

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the stub server lives in tests/, which is not an installed package

from benchlib import MET, command_line, write_section  # noqa: E402

from relabel.common.settings import Settings  # noqa: E402
from relabel.suggest.adapters.openai_api import OpenAIChatAdapter, encode_image  # noqa: E402
from relabel.suggest.cache import DbResponseCache  # noqa: E402
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput  # noqa: E402
from tests.stub_server import StubServer  # noqa: E402

SHARED = REPO.parent / "shared/data"
SECTION = "## Suggestions: OpenAI-compatible client"
IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png"}
PROMPT = "What is the main object in this photo? Answer with one ImageNet class name."
MAX_SIDE = 1024
RATE_TARGET = 0.8  # of the ideal concurrency / latency


@dataclass
class Throughput:
    seconds: list[float]
    n: int
    ideal: float  # requests/s

    @property
    def rate(self) -> float:
        return self.n / statistics.median(self.seconds)


@dataclass
class Resume:
    first_s: float
    second_s: float
    first_n: int
    reached: int  # requests that reached the stub in the second run
    repeated: int  # of those, requests for images finished in the first run
    cached: int  # outputs of the second run served from the cache
    errors: int


def expect(condition: bool, message: str) -> None:
    if not condition:
        sys.exit(f"benchmark aborted: {message}")


def load_requests(sample: Path, n: int) -> list[ChatRequest]:
    """One request per photo; the files are read once here, so later reads come from the OS page cache."""
    paths = sorted(p for p in sample.iterdir() if p.suffix.lower() in IMAGE_EXTENSIONS)[:n]
    expect(len(paths) == n, f"{sample} holds {len(paths)} photo(s), fewer than --n {n}")
    refs = [ImageRef(i, p, hashlib.sha256(p.read_bytes()).hexdigest(), p.name) for i, p in enumerate(paths)]
    return [ChatRequest((ref,), PROMPT, max_tokens=16) for ref in refs]


def encode_cost(requests: list[ChatRequest]) -> tuple[float, float]:
    """(ms per image, mean KB of JPEG data URL) for encoding every image once in one thread."""
    start, size = time.perf_counter(), 0
    for request in requests:
        size += len(encode_image(request.images[0], MAX_SIDE))
    return 1000 * (time.perf_counter() - start) / len(requests), size / len(requests) / 1024


def run(stub: StubServer, requests: list[ChatRequest], concurrency: int, **options: object) -> list[ModelOutput]:
    adapter = OpenAIChatAdapter(
        "stub-model", base_url=stub.url, api_key="EMPTY", concurrency=concurrency, max_side=MAX_SIDE, **options
    )
    outputs = adapter.generate(requests)
    failed = [o.error for o in outputs if not o.ok]
    expect(not failed, f"{len(failed)} request(s) failed, e.g. {failed[:1]}")
    return outputs


def bench_throughput(stub: StubServer, requests: list[ChatRequest], args: argparse.Namespace) -> Throughput:
    seconds = []
    for _ in range(args.repeats):
        stub.reset()
        start = time.perf_counter()
        run(stub, requests, args.concurrency)
        seconds.append(time.perf_counter() - start)
        expect(len(stub.chat_requests) == len(requests), f"the stub saw {len(stub.chat_requests)} request(s)")
    return Throughput(seconds, len(requests), args.concurrency / args.latency)


def bench_resume(stub: StubServer, requests: list[ChatRequest], concurrency: int, tmp: Path) -> Resume:
    engine = Settings(workspace=tmp / "ws").engine  # schema created before the clock starts
    half = requests[: len(requests) // 2]
    stub.reset()
    start = time.perf_counter()
    run(stub, half, concurrency, cache=DbResponseCache(engine))
    first_s = time.perf_counter() - start
    finished = {d for r in stub.chat_requests for d in r.image_digests}
    stub.reset()
    start = time.perf_counter()
    outputs = run(stub, requests, concurrency, cache=DbResponseCache(engine))
    second_s = time.perf_counter() - start
    reached = stub.chat_requests
    repeated = sum(1 for r in reached if finished & set(r.image_digests))
    engine.dispose()
    errors = sum(1 for o in outputs if not o.ok)
    return Resume(first_s, second_s, len(half), len(reached), repeated, sum(o.cached for o in outputs), errors)


def machine_line() -> str:
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"nproc {nproc}, Python {platform.python_version()}, openai {openai.__version__}, Pillow {PIL.__version__}, "
        f"{platform.system()} {platform.machine()}, load average {os.getloadavg()[0]:.2f} at the start"
    )


def row(name: str, n: int, seconds: list[float], rate_n: int, ideal: float, note: str = "") -> str:
    """One table row; the rate counts `rate_n` requests (those that reached the server) over the median time."""
    med = statistics.median(seconds)
    rate = rate_n / med
    spread = f"{min(seconds):.3f} | {max(seconds):.3f}" if len(seconds) > 1 else "– | –"
    return f"| {name} | {n:,} | {med:.3f} | {spread} | {rate:,.1f}{note} | {ideal:,.0f} | {rate / ideal:.2f} |"


def table(t: Throughput, r: Resume) -> str:
    head = "| benchmark | requests | median s | min s | max s | requests/s (median) | ideal requests/s | of ideal |\n"
    rows = [
        row("throughput, no cache", t.n, t.seconds, t.n, t.ideal),
        row("resume run 1: first half, DbResponseCache (SQLite)", r.first_n, [r.first_s], r.first_n, t.ideal),
        row(f"resume run 2: all, {r.cached:,} from the cache", t.n, [r.second_s], r.reached, t.ideal, " (sent)"),
    ]
    return head + "|---|---:|---:|---:|---:|---:|---:|---:|\n" + "\n".join(rows)


def report(args: argparse.Namespace, machine: str, t: Throughput, r: Resume, encode: tuple[float, float]) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sample, fraction = os.path.relpath(args.sample, REPO), t.rate / t.ideal
    resumed = r.repeated == 0 and r.reached == t.n - r.first_n and r.errors == 0
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}, {os.getloadavg()[0]:.2f} at the end
- Stub server in the same process on 127.0.0.1, answering after {args.latency * 1000:.0f} ms, with \
{args.concurrency} requests in flight; throughput repeats: {args.repeats}

{t.n:,} single-image requests, one real photo each from `{sample}`, encoded by the client as it is sent \
(EXIF transpose, RGB, longer side ≤ {MAX_SIDE}, JPEG): encoding alone costs {encode[0]:.1f} ms/image in one thread \
and makes a {encode[1]:.0f} KB data URL per image. The ideal rate is concurrency / latency; resume run 2 counts \
only the requests sent to the stub.

{table(t, r)}

| target | measured | met |
|---|---|---|
| throughput ≥ {RATE_TARGET:.1f} of ideal | {fraction:.2f} of ideal ({t.rate:,.1f} requests/s) | \
{MET[fraction >= RATE_TARGET]} |
| resume: 0 requests repeated for images finished in run 1 | {r.repeated} repeated; {r.reached:,} reached the \
stub, {r.cached:,} cache hits, {r.errors} errors | {MET[resumed]} |
"""


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("--n", type=int, default=1000, help="requests, one photo each (default 1000)")
    parser.add_argument("--concurrency", type=int, default=32, help="requests in flight (default 32)")
    parser.add_argument("--latency", type=float, default=0.2, help="stub answer latency in seconds (default 0.2)")
    parser.add_argument("--repeats", type=int, default=3, help="throughput runs (default 3)")
    parser.add_argument("--sample", type=Path, default=SHARED / "imagenet-sample", help="folder of photos")
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    args = parser.parse_args(argv)
    expect(args.n >= 2, "--n must be at least 2")
    expect(args.concurrency >= 1 and args.repeats >= 1, "--concurrency and --repeats must be at least 1")
    expect(args.latency > 0, "--latency must be > 0 seconds")
    expect(args.sample.is_dir(), f"sample folder {args.sample} not found; pass --sample DIR")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    machine = machine_line()  # before the load that the benchmark itself adds
    requests = load_requests(args.sample, args.n)
    encode = encode_cost(requests)
    with StubServer(latency_s=args.latency, keep_bodies=False) as stub, tempfile.TemporaryDirectory() as tmp:
        throughput = bench_throughput(stub, requests, args)
        resume = bench_resume(stub, requests, args.concurrency, Path(tmp))
    section = report(args, machine, throughput, resume, encode)
    print(section)
    if args.write:
        write_section(SECTION, section)
        print(f"wrote the section {SECTION[3:]!r} of {REPO / 'BENCHMARKS.md'}", file=sys.stderr)


if __name__ == "__main__":
    main()
