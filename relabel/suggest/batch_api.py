"""Large suggestion jobs through the OpenAI Batch API: the requests go up as a JSONL file, come back within 24 hours,
at half the online price.

Every request is the one the online path sends (`OpenAIChatAdapter.request_body`: same prompts, images as data
URLs, same settings); its `custom_id` is the first image id and the request's response-cache key, so it is stable
across calls. The answers are read by the online parser (`parse_completion`), turned into answers by the protocol
(`runner.collect_answers`) and stored as the run's predictions (`run_store.store_answers`); a failed line is an
error prediction, as a failed online call is. Requests already in the response cache are not sent; answers that
come back are added to it.

Resume: the id of each batch and of its input file are written to the run's params (`batch_api.pending`) as soon as
the batch is created. A later call with the same run finds them there and waits for those batches instead of
creating new ones; images already answered are not sent again (`runner.plan_resume`).
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from sqlalchemy import update
from sqlmodel import col

from db.engine import session_scope
from db.models import ModelRun
from relabel.common.errors import InputError, RelabelError
from relabel.suggest.adapters.openai_api import OpenAIChatAdapter
from relabel.suggest.adapters.openai_replies import Failure, one_line, parse_completion
from relabel.suggest.failures import http_failure_kind
from relabel.suggest.protocols import Answer, Pending
from relabel.suggest.run_store import RunSummary, store_answers
from relabel.suggest.runner import SuggestJob, collect_answers, open_job, record_usage
from relabel.suggest.types import ImageRef, ModelOutput

PRICE_SCALE = 0.5  # the Batch API's price against the online one (OpenAI: a 50 % discount)
MAX_FILE_BYTES = 190 * 2**20  # OpenAI accepts input files up to 200 MB; the rest is margin
MAX_REQUESTS = 50_000  # and at most 50,000 requests per batch
ENDPOINT: Final = "/v1/chat/completions"
ENDED = frozenset({"completed", "failed", "expired", "cancelled"})
STATE = "batch_api"  # the key in the run's params (runner.TALLIES: not a setting)


@dataclass
class BatchProgress:
    """Where the run's batches stand after one poll; counts are requests, summed over the batches."""

    batch_ids: list[str]
    statuses: list[str]
    completed: int
    failed: int
    total: int
    elapsed_s: float

    @property
    def ended(self) -> bool:
        return all(status in ENDED for status in self.statuses)

    def line(self) -> str:
        """One line: "batch batch_abc: in_progress, 120/5000 done, 2 failed, 3m05s"."""
        minutes, seconds = divmod(int(self.elapsed_s), 60)
        ids = self.batch_ids
        names = ", ".join(ids) if len(ids) <= 2 else f"{ids[0]} and {len(ids) - 1} more"
        return (
            f"batch {names}: {'/'.join(sorted(set(self.statuses)))}, {self.completed}/{self.total} done, "
            f"{self.failed} failed, {minutes}m{seconds:02d}s"
        )


PollHook = Callable[[BatchProgress], None]


def run_batch_suggestions(
    job: SuggestJob,
    *,
    dataset: str | None,
    run_name: str,
    which: str = "all",
    limit: int | None = None,
    retry_errors: bool = False,
    poll_seconds: float = 30.0,
    show_progress: bool = True,
    on_poll: PollHook | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> RunSummary:
    """As `runner.run_suggestions`, through the Batch API: submit what the run still lacks as batches (or find the
    run's batches from an interrupted call), poll every `poll_seconds` until they end, store the answers. A batch
    that ends failed, expired or cancelled raises RelabelError naming it, after storing what it did answer."""
    adapter = _batch_adapter(job, poll_seconds)
    run_id, images, plan = open_job(
        job, dataset=dataset, run_name=run_name, which=which, limit=limit, retry_errors=retry_errors
    )
    todo = plan.fresh + plan.retry
    summary = RunSummary(run_name, len(images), plan.done_before)
    started = time.perf_counter()
    pendings = job.protocol.build(todo, job.ctx) if todo else []
    by_id = _custom_ids(adapter, [p for p in pendings if "error" not in p.state[0]])
    outputs = _from_cache(adapter, by_id)
    stored: set[int] = set()
    try:
        pending = _load_state(job, run_id).get("pending", [])
        if not pending and len(outputs) < len(by_id):
            unsent = {c: p for c, p in by_id.items() if id(p) not in outputs}
            pending = _submit(job, adapter, run_id, unsent, outputs, metadata={"relabel_run": run_name[:500]})
        _store_whole(job, run_id, (todo, pendings, outputs), plan.row_ids, summary, stored)  # cached, unreadable
        ended = _wait(adapter, pending, poll_seconds, on_poll, sleep, show_progress) if pending else []
        outputs.update(_download(adapter, ended, by_id))
        _store_whole(job, run_id, (todo, pendings, outputs), plan.row_ids, summary, stored)
        summary.not_started = len(todo) - len(stored)
        _save_state(job, run_id, [], done=[b["batch_id"] for b in pending])
        _raise_if_unfinished(ended, summary)
    finally:
        summary.seconds = time.perf_counter() - started
        record_usage(job, run_id, summary, price_scale=PRICE_SCALE)
    return summary


def _batch_adapter(job: SuggestJob, poll_seconds: float) -> OpenAIChatAdapter:
    if not isinstance(job.adapter, OpenAIChatAdapter):
        raise InputError(f"--batch-api needs an openai:MODEL model; {job.adapter.name!r} is not one")
    if not job.protocol.generative:
        raise InputError(f"--batch-api needs a generative protocol; {job.protocol.name!r} scores classes")
    if not poll_seconds > 0:
        raise InputError(f"--poll-seconds must be > 0, got {poll_seconds}")
    return job.adapter


def _custom_ids(adapter: OpenAIChatAdapter, pendings: list[Pending]) -> dict[str, Pending]:
    """Each request by its `custom_id`: the first image id and the request's cache key (so the same request gets
    the same id in every call), with a counter on the rare repeat."""
    found: dict[str, Pending] = {}
    for p in pendings:
        base = f"{p.images[0].image_id}-{adapter.cache_key(p.request)[:24]}"
        custom_id, n = base, 1
        while custom_id in found:
            custom_id, n = f"{base}-{n}", n + 1
        found[custom_id] = p
    return found


def _from_cache(adapter: OpenAIChatAdapter, by_id: dict[str, Pending]) -> dict[int, ModelOutput]:
    """Outputs of the requests the response cache already answers, by `id(pending)`: these are not sent."""
    if adapter.cache is None:
        return {}
    outputs = {}
    for p in by_id.values():
        hit = adapter.cache.get(adapter.cache_key(p.request))
        if hit is not None and isinstance(hit.get("text"), str):
            adapter.add_usage({"cached": 1})
            outputs[id(p)] = ModelOutput(text=hit["text"], usage=dict(hit.get("usage", {})), cached=True)
    return outputs


def _submit(
    job: SuggestJob,
    adapter: OpenAIChatAdapter,
    run_id: int,
    by_id: dict[str, Pending],
    outputs: dict[int, ModelOutput],
    *,
    metadata: dict[str, str],
) -> list[dict]:
    """Write the requests as JSONL files (split at the Batch API's limits), upload each and create its batch; the
    run's params record every batch as soon as it exists. A request whose image cannot be read is not sent: its
    failure goes into `outputs`, as the online path stores it."""
    client, pending = adapter.client(), []
    with tempfile.TemporaryDirectory(prefix="relabel-batch-") as folder:
        for path in _write_parts(adapter, by_id, Path(folder), outputs):
            with path.open("rb") as handle:
                uploaded = client.files.create(file=(path.name, handle), purpose="batch")
            batch = client.batches.create(
                input_file_id=uploaded.id, endpoint=ENDPOINT, completion_window="24h", metadata=metadata
            )
            pending.append({"batch_id": batch.id, "input_file_id": uploaded.id})
            _save_state(job, run_id, pending)
    return pending


def _write_parts(
    adapter: OpenAIChatAdapter, by_id: dict[str, Pending], folder: Path, unreadable: dict[int, ModelOutput]
) -> Iterator[Path]:
    """Yield JSONL input files of at most MAX_REQUESTS lines and MAX_FILE_BYTES each, one written at a time; the
    requests of one image stay in one file. `unreadable` collects the requests whose image cannot be read."""
    part: IO[str] | None = None
    lines = size = 0
    last_image = None
    for custom_id, p in by_id.items():
        try:
            body = adapter.request_body(p.request)
        except Failure as exc:
            unreadable[id(p)] = ModelOutput(error=exc.message(), retryable=exc.kind.retryable)
            continue
        line = json.dumps({"custom_id": custom_id, "method": "POST", "url": ENDPOINT, "body": body}) + "\n"
        full = lines >= MAX_REQUESTS or size + len(line) > MAX_FILE_BYTES
        if part is not None and full and p.images[0].image_id != last_image:
            part.close()
            yield Path(part.name)
            part = None
        if part is None:
            part = (folder / f"requests-{custom_id}.jsonl").open("w", encoding="utf-8")
            lines = size = 0
        part.write(line)
        lines, size, last_image = lines + 1, size + len(line), p.images[-1].image_id
    if part is not None:
        part.close()
        yield Path(part.name)


def _wait(
    adapter: OpenAIChatAdapter,
    pending: list[dict],
    poll_seconds: float,
    on_poll: PollHook | None,
    sleep: Callable[[float], None],
    show_progress: bool,
) -> list[Any]:
    """Poll the batches until each has ended; a progress line per poll on stderr (rewritten in place on a
    terminal). Returns the ended batches (openai `Batch` objects)."""
    client, started = adapter.client(), time.perf_counter()
    live = sys.stderr.isatty()
    try:
        while True:
            batches = [client.batches.retrieve(b["batch_id"]) for b in pending]
            counts = [b.request_counts for b in batches if b.request_counts is not None]
            progress = BatchProgress(
                [b.id for b in batches],
                [b.status for b in batches],
                sum(c.completed for c in counts),
                sum(c.failed for c in counts),
                sum(c.total for c in counts),
                time.perf_counter() - started,
            )
            if show_progress:
                print(("\r" if live else "") + progress.line(), end="" if live else "\n", file=sys.stderr, flush=True)
            if on_poll is not None:
                on_poll(progress)
            if progress.ended:
                return batches
            sleep(poll_seconds)
    finally:
        if show_progress and live:
            print(file=sys.stderr)


def _download(adapter: OpenAIChatAdapter, batches: list[Any], by_id: dict[str, Pending]) -> dict[int, ModelOutput]:
    """The output of every request the ended `batches` answered or failed, by `id(pending)`, read from their output
    and error files; answers are added to the response cache and to the adapter's usage."""
    outputs: dict[int, ModelOutput] = {}
    for batch in batches:
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            for raw in adapter.client().files.content(file_id).text.splitlines():
                line = json.loads(raw) if raw.strip() else {}
                p = by_id.get(str(line.get("custom_id")))
                if p is None:
                    continue  # an image answered since, or a request of another selection
                out = outputs[id(p)] = line_output(line)
                if out.ok:
                    adapter.add_usage({**out.usage, "calls": 1})
                    if adapter.cache is not None:
                        text = {"text": out.text, "usage": out.usage}
                        adapter.cache.put(adapter.cache_key(p.request), adapter.name, text)
    return outputs


def line_output(line: dict[str, Any]) -> ModelOutput:
    """One line of a batch output or error file as the online path would have it: the answer, or the failure with
    the reason and retryable mark an online call with that outcome gets."""
    response = line.get("response") or {}
    status = response.get("status_code")
    if status == 200:
        try:
            text, usage = parse_completion(response.get("body"))
        except Failure as exc:
            return ModelOutput(error=exc.message(), retryable=exc.kind.retryable)
        return ModelOutput(text=text, usage=usage)
    if isinstance(status, int):
        kind = http_failure_kind(status)
        return ModelOutput(error=f"HTTP {status}: {_detail(response.get('body'))}", retryable=kind.retryable)
    return ModelOutput(error=f"no output from the batch: {_detail(line)}", retryable=True)


def _detail(body: Any) -> str:
    error = body.get("error", body) if isinstance(body, dict) else body
    message = error.get("message") if isinstance(error, dict) else error
    return one_line(str(message or body or "no detail"))


def _answers(job: SuggestJob, pendings: list[Pending], outputs: dict[int, ModelOutput]) -> dict[int, Answer]:
    """The answers of the images all of whose requests have an output (an image with several questions, as in
    pope, is stored only whole)."""
    missing = {im.image_id for p in pendings if "error" not in p.state[0] and id(p) not in outputs for im in p.images}
    whole = [p for p in pendings if not any(im.image_id in missing for im in p.images)]
    return collect_answers(job, whole, dict(outputs))


def _store_whole(
    job: SuggestJob,
    run_id: int,
    work: tuple[list[ImageRef], list[Pending], dict[int, ModelOutput]],
    row_ids: dict[int, int],
    summary: RunSummary,
    stored: set[int],
) -> None:
    """Store the answer of every image of `work` (images, their requests, outputs so far) that is whole now and not
    yet in `stored`; adds them to `stored`."""
    images, pendings, outputs = work
    answers = _answers(job, pendings, outputs)
    chunk = [im for im in images if im.image_id in answers and im.image_id not in stored]
    store_answers(job.engine, run_id, chunk, answers, row_ids, summary)
    stored.update(im.image_id for im in chunk)


def _raise_if_unfinished(batches: list[Any], summary: RunSummary) -> None:
    for batch in batches:
        if batch.status != "completed":
            errors = getattr(batch.errors, "data", None) or []
            why = f" ({one_line(str(errors[0].message))})" if errors and errors[0].message else ""
            raise RelabelError(
                f"batch {batch.id} ended {batch.status}{why}; {summary.ok} answer(s) stored, {summary.not_started} "
                "image(s) without one: run the same command again to send them in a new batch"
            )


def _load_state(job: SuggestJob, run_id: int) -> dict[str, Any]:
    with session_scope(job.engine) as s:
        run = s.get(ModelRun, run_id)
        return dict(run.params.get(STATE, {})) if run is not None else {}


def _save_state(job: SuggestJob, run_id: int, pending: list[dict], done: list[str] | None = None) -> None:
    """Record the run's unfinished batches (and, once collected, their ids under `collected`) in its params."""
    with session_scope(job.engine) as s:
        run = s.get(ModelRun, run_id)
        if run is None:
            return
        state = dict(run.params.get(STATE, {}))
        state["pending"] = list(pending)
        state["collected"] = list(state.get("collected", [])) + list(done or [])
        s.execute(update(ModelRun).where(col(ModelRun.id) == run_id).values(params={**run.params, STATE: state}))
