"""Hard MC distractors on the 1,000 sample photos: the recorded share of hard distractors, and how hard they are.

Builds a workspace from ../shared/data/imagenet-sample (one photo per class), runs EfficientNet-Lite0 over it
(`relabel suggest`'s default top-5 run), then runs the mc protocol once per distractor setting through
`run_suggestions`, with a scripted chooser in place of a VLM. The hard share is read back from the run's
`params["measured"]` (relabel.suggest.distractors defines "hard"). To show that hard distractors are harder, the
chooser answers as EfficientNet-Lite0 would: the option it ranks highest in its top-5 for that photo, a seeded guess
when none is. Its top-5 also built the `run:` confusions, so on that row it is the model the distractors were
chosen against; the text-only row is independent of it.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_distractors.py --write
  HF_HUB_OFFLINE=1 python bench/bench_distractors.py --workspace /tmp/ws --run efficientnet-lite0@topk
"""

from __future__ import annotations

import argparse
import datetime
import re
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import MET, command_line, machine_line, write_section
from sqlalchemy import select
from sqlmodel import Session

from db import create_db_engine, init_db
from db.models import ModelRun, Prediction
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.suggest.distractors import DistractorSource, Neighbours, confusion_from_predictions, text_neighbours
from relabel.suggest.protocols import LETTERS, ProtocolContext, get_protocol
from relabel.suggest.runner import SuggestJob, reference_labels, run_suggestions
from relabel.suggest.setup import SuggestSettings, _confusion
from relabel.suggest.textmap import load_encoder
from relabel.suggest.types import ChatRequest, ModelOutput
from relabel.vocabulary import Vocabulary, load_builtin
from relabel.workspace import get_dataset

SECTION = "## Suggestions: hard distractors for multiple choice"
REPO = Path(__file__).resolve().parent.parent
PHOTOS = REPO.parent / "shared" / "data" / "imagenet-sample"
CLUSTERS = REPO.parent / "shared" / "data" / "imagenet-val" / "confusion_clusters.json"
TARGET_SHARE = 0.90


class TopFiveChooser:
    """Answers an MC question with the option a scoring run ranked highest for the photo (a guess otherwise)."""

    name = "efficientnet-lite0-chooser"

    def __init__(self, ranked: dict[int, list[int]], vocab: Vocabulary) -> None:
        self.ranked, self.vocab = ranked, vocab
        self.rng = np.random.default_rng(0)

    def describe(self) -> dict[str, Any]:
        return {"kind": "top-5 chooser"}

    def check(self) -> None:
        pass

    def generate(self, requests: list[ChatRequest]) -> list[ModelOutput]:
        return [ModelOutput(text=self._choose(r)) for r in requests]

    def _choose(self, request: ChatRequest) -> str:
        options = [self.vocab.resolve(m.group(1)) for m in re.finditer(r"^[A-Z]\. (.+)$", request.prompt, re.M)]
        top = self.ranked.get(request.images[0].image_id, [])
        ranks = [top.index(c) if c in top else len(top) + 1 for c in options]
        best = int(np.argmin(ranks)) if min(ranks) <= len(top) else int(self.rng.integers(len(options)))
        return LETTERS[best]


def scoring_run(engine: Any, root: Path | None, run: str) -> None:
    """Ingest the photos and run EfficientNet-Lite0 over them (skipped when `run` exists)."""
    from relabel.suggest.setup import build_job

    if root is not None:
        vocab = load_builtin()
        ingest_dataset(
            engine, plan_ingest(root, vocab), dataset="sample", root=root, vocab=vocab, show_progress=False, workers=1
        )
    with Session(engine) as s:
        if s.scalars(select(ModelRun).where(ModelRun.name == run)).first() is not None:
            return
    job = build_job(SuggestSettings(model="efficientnet-lite0", device="cpu", batch_size=32), engine, None)
    run_suggestions(job, dataset=None, run_name=run, show_progress=False)


def top_five(engine: Any, run: str) -> dict[int, list[int]]:
    with Session(engine) as s:
        run_id = s.scalars(select(ModelRun.id).where(ModelRun.name == run)).one()
        return dict(s.execute(select(Prediction.image_id, Prediction.classes).where(Prediction.run_id == run_id)).all())


def settings(engine: Any, run: str, vocab: Vocabulary, cache: Path) -> list[tuple[str, str, DistractorSource | None]]:
    text = text_neighbours(load_encoder("minilm"), vocab, cache)
    clusters = _confusion(SuggestSettings(model="x", distractors="hard", confusion=str(CLUSTERS)), engine, len(vocab))
    confusions = _confusion(SuggestSettings(model="x", distractors="hard", confusion=f"run:{run}"), engine, len(vocab))
    with Session(engine) as s:
        reference = reference_labels(s, get_dataset(s, None))
    ranked = top_five(engine, run)
    top1 = confusion_from_predictions(
        [(reference[i][0], c[:1], None) for i, c in ranked.items() if reference.get(i)], len(vocab), f"run:{run}"
    )
    return [
        ("random", "—", None),
        ("hard, before: groups only", CLUSTERS.name, DistractorSource(clusters)),
        ("hard, before: top-1 only", f"run:{run} (top-1)", DistractorSource(Neighbours(top1.by_class, top1.origin))),
        ("hard", f"{CLUSTERS.name} + text", DistractorSource(clusters, text)),
        ("hard", "none (text neighbours only)", DistractorSource(None, text)),
        ("hard (default sources)", f"run:{run} (top-5) + text", DistractorSource(confusions, text)),
    ]


def measure(engine: Any, run: str, options: int) -> list[dict[str, Any]]:
    vocab = load_builtin()
    ranked = top_five(engine, run)
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        for i, (kind, origin, source) in enumerate(settings(engine, run, vocab, Path(cache))):
            ctx = ProtocolContext(vocab, mc_options=options, distractors=source)
            job = SuggestJob(engine, TopFiveChooser(ranked, vocab), get_protocol("mc"), ctx)
            name = f"mc-bench-{i}-{time.time_ns()}"
            summary = run_suggestions(job, dataset=None, run_name=name, show_progress=False)
            with Session(engine) as s:
                ref = reference_labels(s, get_dataset(s, None))
                run_id = s.scalars(select(ModelRun.id).where(ModelRun.name == name)).one()
                preds = s.execute(
                    select(Prediction.image_id, Prediction.classes).where(Prediction.run_id == run_id)
                ).all()
            right = np.mean([bool(c) and c[0] in ref[i] for i, c in preds])
            rows.append({"kind": kind, "origin": origin, "measured": summary.measured, "chooser": right})
    return rows


def report(rows: list[dict[str, Any]], images: int, options: int, seconds: float) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        "| distractors | confusion source | hard share (recorded) | confusion / text / random | "
        "EfficientNet-Lite0 picks the reference |",
        "|---|---|---:|---:|---:|",
    ]
    for r in rows:
        m = r["measured"]
        by = m["distractors_by_source"]
        lines.append(
            f"| {r['kind']} | {r['origin']} | {m['hard_distractor_share']:.1%} | "
            f"{by['confusion']:,} / {by['text']:,} / {by['random']:,} | {r['chooser']:.1%} |"
        )
    share = rows[-1]["measured"]["hard_distractor_share"]
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine_line()}
- Input: {images:,} photos of `../shared/data/imagenet-sample` (one per class), {options} options per question
  (the reference and {options - 1} distractors), seed 0; {seconds:.0f} s in all

A distractor is *hard* when the confusion source links it to the reference class (the run put one in its top-5
for a photo of the other; same class group; non-zero confusion count) or it is one of the reference class's 10
nearest classes by MiniLM embedding of "name: gloss"; the rest are random (relabel/suggest/distractors.py). The
share is read back from each run's `params["measured"]["hard_distractor_share"]`. The last column answers each
question with the option EfficientNet-Lite0 ranked highest in its top-5 (a seeded guess when none is): lower
means harder. "Before" rows rebuild the earlier behaviour (no text top-up; confusions from top-1 only).

{chr(10).join(lines)}

| target | measured | met |
|---|---|---|
| hard share with the default sources (run top-5, then text neighbours) ≥ {TARGET_SHARE:.0%} | {share:.1%} | \
{MET[share >= TARGET_SHARE]} |
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workspace", type=Path, help="reuse this workspace (its relabel.db) instead of a new one")
    parser.add_argument("--run", default="efficientnet-lite0@topk", help="the scoring run to take confusions from")
    parser.add_argument("--options", type=int, default=4)
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.workspace or Path(tmp)
        engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
        init_db(engine)
        scoring_run(engine, None if args.workspace else PHOTOS, args.run)
        rows = measure(engine, args.run, args.options)
        images = len(top_five(engine, args.run))
        if args.workspace:  # leave the reused workspace as it was
            with Session(engine) as s:
                for run in s.scalars(select(ModelRun).where(ModelRun.name.like("mc-bench-%"))):  # type: ignore[attr-defined]
                    s.execute(Prediction.__table__.delete().where(Prediction.run_id == run.id))  # type: ignore[attr-defined]
                    s.delete(run)
                s.commit()
        engine.dispose()
    section = report(rows, images, args.options, time.perf_counter() - started)
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
