"""`relabel suggest --protocol retrieval`: embed a dataset's images and one query per class with a dual encoder
(`clip:MODEL`), and keep the embeddings as the run's files (`relabel.suggest.retrieval_store`).

The run is a model run like any other (name, model, protocol `retrieval`, settings, resumed under the same name
with the same settings), but it stores no predictions: its params name the folder of its embeddings, which
`relabel evaluate` reads to score retrieval against each reference (`relabel.evaluation.tasks_retrieval`).
Images go in chunks of CHUNK; each chunk's part file is written whole before the next starts, so an interrupted
run loses at most one chunk, and running the same command again embeds only the images no part holds. An image
that cannot be decoded is recorded as failed in its part (not asked again) and stays out of the gallery.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from sqlalchemy.engine import Engine

from db.engine import session_scope
from relabel.common.errors import InputError, RelabelError
from relabel.common.progress import progress_bar
from relabel.common.settings import Settings
from relabel.common.workspace import dataset_vocabulary, get_dataset
from relabel.suggest.adapters import load_adapter
from relabel.suggest.retrieval_protocol import Retrieval
from relabel.suggest.retrieval_store import done_ids, run_folder, write_part, write_texts
from relabel.suggest.runner import open_run, select_images
from relabel.suggest.setup import SuggestSettings, default_threads, quiet_model_loading
from relabel.suggest.types import ImageRef

CHUNK = 256  # images per part file
READ = ("model", "protocol", "dataset", "batch_size", "threads", "seed", "device")  # the settings a run reads
FLAGS = {"use_cache": "--no-cache", "pope_negatives": "--pope-negatives"}  # flags not spelled as their field


@runtime_checkable
class ImageTextEmbedder(Protocol):
    """What a retrieval run asks of its adapter (`relabel.suggest.adapters.clip.ZeroShotAdapter` has it)."""

    name: str

    def encode_texts(self, texts: list[str]) -> np.ndarray: ...

    def embed_images(self, images: list[ImageRef]) -> tuple[list[int], np.ndarray, dict[int, str]]: ...

    def describe(self) -> dict[str, object]: ...


@dataclass
class RetrievalSummary:
    """What one call did; `embedded + failed + done_before` is the number of images selected."""

    run: str
    total: int
    done_before: int
    folder: Path
    embedded: int = 0
    failed: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        rate = f", {self.embedded / self.seconds:.1f} img/s" if self.embedded and self.seconds > 0 else ""
        return (
            f"run {self.run!r}: {self.total} image(s), {self.done_before} done before, now {self.embedded} embedded"
            + (f", {self.failed} unreadable (left out of the gallery)" if self.failed else "")
            + f"{rate}; embeddings in {self.folder}"
        )


def check_settings(s: SuggestSettings) -> None:
    """InputError naming the first option a retrieval run does not read that was set to other than its default."""
    defaults = SuggestSettings(model=s.model)
    for f in dataclasses.fields(s):
        if f.name not in READ and getattr(s, f.name) != getattr(defaults, f.name):
            flag = FLAGS.get(f.name, "--" + f.name.replace("_", "-"))
            raise InputError(f"{flag} is not read by the retrieval protocol (it embeds images and class names)")
    for flag, value in (("--batch-size", s.batch_size), ("--threads", s.threads)):
        if value is not None and value < 1:
            raise InputError(f"{flag} must be at least 1, got {value}")


def load_embedder(s: SuggestSettings) -> ImageTextEmbedder:
    """The adapter of `s.model`, which must embed both images and text (a `clip:` model)."""
    import torch

    torch.set_num_threads(s.threads or default_threads())
    quiet_model_loading()
    options: dict[str, object] = {"device": s.device}
    if s.batch_size is not None:
        options["batch_size"] = s.batch_size
    adapter = load_adapter(s.model, **options)
    if not isinstance(adapter, ImageTextEmbedder):
        raise InputError(
            f"the retrieval protocol needs a dual encoder that embeds images and text (clip:MODEL); {s.model!r} "
            "does not"
        )
    return adapter


def run_retrieval(
    engine: Engine,
    s: SuggestSettings,
    *,
    workspace: Path,
    run_name: str,
    which: str = "all",
    limit: int | None = None,
    show_progress: bool = True,
) -> RetrievalSummary:
    """Embed the selected images of the dataset (skipping those embedded before) and the class queries into the
    run's folder under `workspace`; every setting is checked, and the model loaded, before anything is written."""
    check_settings(s)
    adapter = load_embedder(s)
    protocol = Retrieval()
    with session_scope(engine) as session:
        ds = get_dataset(session, s.dataset)
        names = [c.name for c in dataset_vocabulary(session, ds).classes]
        folder = run_folder(workspace, ds.name, run_name)
        params = {**protocol.describe(), "adapter": adapter.describe(), "embeddings": str(folder.resolve())}
        images = select_images(session, ds, which, limit, s.seed)
        open_run(session, ds, run_name, adapter.name, protocol.name, params)
    started = time.perf_counter()
    texts = adapter.encode_texts([protocol.template.replace("{}", name) for name in names])
    write_texts(folder, texts, {"model": adapter.name, "template": protocol.template, "classes": len(names),
                                "dimensions": int(texts.shape[1])})  # fmt: skip
    done = done_ids(folder)
    todo = [im for im in images if im.image_id not in done]
    summary = RetrievalSummary(run_name, len(images), len(images) - len(todo), folder)
    bar = progress_bar(len(todo), f"embedding {run_name}", enabled=show_progress)
    try:
        for start in range(0, len(todo), CHUNK):
            chunk = todo[start : start + CHUNK]
            try:
                ids, embeddings, failed = adapter.embed_images(chunk)
            except (RuntimeError, ValueError) as exc:  # e.g. out of memory: what is stored stays, a re-run resumes
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise RelabelError(
                    f"retrieval run {run_name!r}: the model failed on {chunk[0].key} and the next {len(chunk) - 1} "
                    f"image(s) ({reason}); the {summary.done_before + summary.embedded + summary.failed} image(s) "
                    "done are kept, run the same command again to resume (a smaller --batch-size may help)"
                ) from exc
            write_part(folder, ids, embeddings, failed)
            summary.embedded += len(ids)
            summary.failed += len(failed)
            bar.update(len(chunk))
    finally:
        bar.close()
    summary.seconds = time.perf_counter() - started
    return summary


def run_retrieval_command(
    settings: Settings,
    s: SuggestSettings,
    run_name: str | None,
    which: str,
    limit: int | None,
    answer_flags: bool,
    quiet: bool,
) -> str:
    """`relabel suggest --protocol retrieval`: the run (default name MODEL@retrieval) and its summary line;
    `answer_flags`: --retry-errors or --batch-api was given, which a run without answers cannot read."""
    if answer_flags:
        raise InputError("--retry-errors and --batch-api are not read by the retrieval protocol (it asks no questions)")
    name = run_name or f"{s.model}@{Retrieval.name}"
    summary = run_retrieval(
        settings.engine, s, workspace=settings.workspace, run_name=name, which=which, limit=limit,
        show_progress=not quiet,
    )  # fmt: skip
    return summary.line()
