"""How the way a model is asked moves its score: the protocol analysis of Kisel et al., as tables.

For the stored runs of one model (runs grouped by `ModelRun.model`), scored top-1 against the evaluation's first
reference, every comparison is on the images each compared run scored (the count is stated with each table):

- `pairs`: paired top-1 differences between protocols, ow / cw / cwplus with each other and mc with random
  distractors → mc with hard ones (an mc run's `params["distractors"]` says which), with the paired bootstrap
  interval of `evaluator.paired`. A protocol is represented by its run asked one image per request (the smallest
  `images_per_request`), then the first by name.
- `oop`: the out-of-prompt rate (answers that are not a listed name, `details["oop"]`, among answered calls) of each
  run that records it, outside mc, per reference class, the classes with the highest rate first, Wilson intervals.
- `failures`: each run's share of predictions whose call failed (status error), with its Wilson interval, and how
  many of those were the model's own failures (scored as wrong; `relabel.evaluation.failure_causes`).
- `batches`: runs of one model and protocol whose settings differ only in `images_per_request`: top-1 per batch
  size and the paired difference against the smallest one.
- `orders`: mc runs whose settings differ only in `seed` (the shuffle of the options): top-1 per seed and the share
  of images whose answer changed between seeds.

`analyze_protocols` reads the runs; `build_analysis` computes from plain `RunView`s, which tests build by hand.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.engine import session_scope
from db.models import ModelRun
from evaluator.intervals import wilson_interval
from evaluator.paired import paired_difference
from relabel.common.errors import InputError
from relabel.common.workspace import dataset_vocabulary, get_dataset
from relabel.evaluation.compare import Outcomes
from relabel.evaluation.dataset_scores import dataset_seed
from relabel.evaluation.references import SNAPSHOT, SOURCE, load_reference
from relabel.evaluation.results import Evaluation
from relabel.evaluation.runs import load_run
from relabel.suggest.runner import TALLIES

OPEN_PROTOCOLS = ("ow", "cw", "cwplus")  # compared with each other
RANDOM = "random"
TOP_CLASSES = 10  # classes shown per run in the out-of-prompt table


@dataclass(frozen=True, eq=False)
class RunView:
    """One run on the analysis images (n,): `correct`/`scored` top-1 outcomes under the reference, `answer` the
    top-1 class (-1: none), `answered` a call that came back (status ok), `oop` out-of-prompt among those (None:
    the run records none); counts over all of the run's predictions."""

    name: str
    model: str
    protocol: str
    params: Mapping[str, Any]
    correct: np.ndarray
    scored: np.ndarray
    answer: np.ndarray
    answered: np.ndarray
    oop: np.ndarray | None
    n_predictions: int
    n_errors: int
    n_failed: int = 0

    @property
    def kind(self) -> str:
        """The protocol as compared: "mc (random)" or "mc (hard)" for mc runs, else the protocol."""
        if self.protocol != "mc":
            return self.protocol
        return f"mc ({RANDOM if self.params.get('distractors', RANDOM) == RANDOM else 'hard'})"

    @property
    def batch(self) -> int:
        return int(self.params.get("images_per_request", 1))


@dataclass(frozen=True)
class ProtocolPair:
    """top1_b − top1_a of one model on the `n` images every compared run of that model scored."""

    model: str
    protocol_a: str
    run_a: str
    protocol_b: str
    run_b: str
    n: int
    top1_a: float
    top1_b: float
    difference: float
    ci_low: float | None
    ci_high: float | None


@dataclass(frozen=True)
class Rate:
    """k of n, with the Wilson interval (NaN bounds when n = 0)."""

    k: int
    n: int
    low: float
    high: float

    @property
    def rate(self) -> float:
        return self.k / self.n if self.n else float("nan")

    @classmethod
    def of(cls, k: int, n: int) -> Rate:
        low, high = wilson_interval(k, n)
        return cls(int(k), int(n), float(low), float(high))


@dataclass(frozen=True)
class ClassOop:
    class_name: str
    oop: Rate  # out-of-prompt answers / answered images of this reference class


@dataclass(frozen=True)
class RunOop:
    model: str
    run: str
    protocol: str
    overall: Rate  # out-of-prompt answers / answered images in the reference
    classes: tuple[ClassOop, ...]  # the highest rates first, at most TOP_CLASSES, only classes with one or more


@dataclass(frozen=True)
class RunFailures:
    model: str
    run: str
    protocol: str
    errors: Rate  # failed calls / predictions
    n_failed: int  # of the errors: the model's own failures, scored as wrong (the rest are left out)


@dataclass(frozen=True)
class Variant:
    """One run of an ablation: its setting (batch size or seed), top-1 on the group's images and, against the
    group's first run, the paired difference (None for that run)."""

    run: str
    setting: int
    top1: Rate
    difference: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class Ablation:
    """Runs of one model and protocol differing in one setting, on the `n` images all of them scored."""

    model: str
    protocol: str
    n: int
    variants: tuple[Variant, ...]
    changed: Rate | None = None  # option order: images whose answer differs between some two runs / n


@dataclass(frozen=True)
class ProtocolAnalysis:
    reference: str
    pairs: tuple[ProtocolPair, ...]
    oop: tuple[RunOop, ...]
    failures: tuple[RunFailures, ...]
    batches: tuple[Ablation, ...]
    orders: tuple[Ablation, ...]


def analyze_protocols(engine: Engine, evaluation: Evaluation, *, n_boot: int = 1000, seed: int = 0) -> ProtocolAnalysis:
    """The analysis of `evaluation`'s class runs against its first reference (module docstring)."""
    outcomes = evaluation.outcomes
    if outcomes is None or not outcomes.references:
        raise InputError("the protocol analysis needs an evaluation with a reference and model runs")
    ref_info = evaluation.references[0]
    spec = (SNAPSHOT if ref_info.kind == "snapshot" else SOURCE) + ref_info.name
    with session_scope(engine) as s:
        ds = get_dataset(s, evaluation.dataset)
        drawn = dataset_seed(seed, ds)  # the dataset's resamples, as its evaluation draws them
        ref = load_reference(s, ds, spec)
        names = [c.name for c in dataset_vocabulary(s, ds).classes]
        views = [_view(s, outcomes, ref_info.name, run.id) for run in evaluation.runs]
    truth = _truth(outcomes.image_ids, ref.image_ids, ref.labels.labels)
    return build_analysis(views, truth, names, reference=ref_info.name, n_boot=n_boot, seed=drawn)


def _view(session: Session, outcomes: Outcomes, reference: str, run_id: int) -> RunView:
    run = session.scalars(select(ModelRun).where(col(ModelRun.id) == run_id)).one()
    pred = load_run(session, run)
    correct, scored = outcomes.cell(run.name, reference)
    ids = outcomes.image_ids
    answer, answered = np.full(len(ids), -1, dtype=np.int64), np.zeros(len(ids), bool)
    oop = np.zeros(len(ids), bool) if pred.oop is not None else None
    if len(pred.image_ids):
        pos = np.minimum(np.searchsorted(pred.image_ids, ids), len(pred.image_ids) - 1)
        answered = (pred.image_ids[pos] == ids) & pred.ok[pos]
        answer = np.where(answered, pred.classes[pos, 0], -1)
        oop = answered & pred.oop[pos] if pred.oop is not None else None
    info = pred.info
    return RunView(run.name, run.model, run.protocol, run.params or {}, correct, scored, answer, answered, oop,
                   info.n_predictions, info.n_errors, info.n_failed)  # fmt: skip


def _truth(ids: np.ndarray, ref_ids: np.ndarray, labels: np.ndarray) -> list[list[int]]:
    """Each analysis image's reference classes (empty outside the reference)."""
    pos = np.minimum(np.searchsorted(ref_ids, ids), max(len(ref_ids) - 1, 0))
    hit = ref_ids[pos] == ids if len(ref_ids) else np.zeros(len(ids), bool)
    return [[int(c) for c in labels[p] if c >= 0] if h else [] for p, h in zip(pos, hit)]


def build_analysis(
    views: Sequence[RunView],
    truth: Sequence[Sequence[int]],
    class_names: Sequence[str],
    *,
    reference: str = "imgt",
    n_boot: int = 1000,
    seed: int = 0,
) -> ProtocolAnalysis:
    """Every table of the analysis from runs on the same (n,) images; `truth` holds each image's reference classes."""
    by_model: dict[str, list[RunView]] = defaultdict(list)
    for v in views:
        by_model[v.model].append(v)
    pairs = [p for runs in by_model.values() for p in protocol_pairs(runs, n_boot=n_boot, seed=seed)]
    oop = [o for v in views if (o := class_oop(v, truth, class_names)) is not None]
    failures = [RunFailures(v.model, v.name, v.kind, Rate.of(v.n_errors, v.n_predictions), v.n_failed) for v in views]
    batches = [a for runs in by_model.values() for a in batch_ablations(runs, n_boot=n_boot, seed=seed)]
    orders = [a for runs in by_model.values() for a in order_ablations(runs, n_boot=n_boot, seed=seed)]
    return ProtocolAnalysis(reference, tuple(pairs), tuple(oop), tuple(failures), tuple(batches), tuple(orders))


def protocol_pairs(runs: Sequence[RunView], *, n_boot: int = 1000, seed: int = 0) -> list[ProtocolPair]:
    """ow, cw, cwplus against each other and mc (random) → mc (hard), for the runs of one model."""
    chosen: dict[str, RunView] = {}
    for v in sorted(runs, key=lambda v: (v.batch, v.name)):
        chosen.setdefault(v.kind, v)
    wanted = [(a, b) for a, b in combinations([k for k in OPEN_PROTOCOLS if k in chosen], 2)]
    if "mc (random)" in chosen and "mc (hard)" in chosen:
        wanted.append(("mc (random)", "mc (hard)"))
    if not wanted:
        return []
    common = np.logical_and.reduce([chosen[k].scored for k in {k for pair in wanted for k in pair}])
    out = []
    for a, b in wanted:
        va, vb = chosen[a], chosen[b]
        d = paired_difference(va.correct & common, vb.correct & common, common, n_boot=n_boot, seed=seed)
        out.append(ProtocolPair(va.model, a, va.name, b, vb.name, d.n_common, d.accuracy_a, d.accuracy_b,
                                d.difference, d.ci_low, d.ci_high))  # fmt: skip
    return out


def class_oop(view: RunView, truth: Sequence[Sequence[int]], class_names: Sequence[str]) -> RunOop | None:
    """The out-of-prompt rate of a run outside mc that records it, overall and per reference class (an image of a
    multi-label reference counts for each of its classes); None for the others."""
    if view.oop is None or view.protocol == "mc":
        return None
    asked: dict[int, int] = defaultdict(int)
    flagged: dict[int, int] = defaultdict(int)
    in_ref = np.array([bool(t) for t in truth], dtype=bool)
    for i in np.flatnonzero(view.answered & in_ref).tolist():
        for c in truth[i]:
            asked[c] += 1
            flagged[c] += bool(view.oop[i])
    rows = sorted((c for c in asked if flagged[c]), key=lambda c: (-flagged[c] / asked[c], -flagged[c], c))
    classes = tuple(ClassOop(class_names[c], Rate.of(flagged[c], asked[c])) for c in rows[:TOP_CLASSES])
    answered = view.answered & in_ref
    overall = Rate.of(int((view.oop & answered).sum()), int(answered.sum()))
    return RunOop(view.model, view.name, view.kind, overall, classes)


def _settings(params: Mapping[str, Any], varied: str) -> str:
    """A run's settings less the tallies its calls added and the `varied` one, as a comparable key."""
    kept = {k: v for k, v in params.items() if k not in TALLIES and k != varied}
    return json.dumps(kept, sort_keys=True, default=str)


def _ablations(
    runs: Sequence[RunView], varied: str, setting: Any, *, n_boot: int, seed: int, answers: bool = False
) -> list[Ablation]:
    groups: dict[tuple[str, str], dict[int, RunView]] = defaultdict(dict)
    for v in sorted(runs, key=lambda v: v.name):
        groups[(v.kind, _settings(v.params, varied))].setdefault(setting(v), v)
    out = []
    for (kind, _), members in groups.items():
        if len(members) < 2:
            continue
        ordered = [members[k] for k in sorted(members)]
        common = np.logical_and.reduce([v.scored for v in ordered])
        n, base = int(common.sum()), ordered[0]
        variants = [Variant(base.name, setting(base), Rate.of(int((base.correct & common).sum()), n))]
        for v in ordered[1:]:
            d = paired_difference(base.correct & common, v.correct & common, common, n_boot=n_boot, seed=seed)
            variants.append(Variant(v.name, setting(v), Rate.of(d.n_correct_b, n), d.difference, d.ci_low, d.ci_high))
        changed = None
        if answers:
            stack = np.stack([v.answer[common] for v in ordered])
            changed = Rate.of(int((stack != stack[0]).any(axis=0).sum()), n)
        out.append(Ablation(base.model, kind, n, tuple(variants), changed))
    return out


def batch_ablations(runs: Sequence[RunView], *, n_boot: int = 1000, seed: int = 0) -> list[Ablation]:
    """Runs of one model and protocol differing only in images per request; the smallest batch first."""
    return _ablations(runs, "images_per_request", lambda v: v.batch, n_boot=n_boot, seed=seed)


def order_ablations(runs: Sequence[RunView], *, n_boot: int = 1000, seed: int = 0) -> list[Ablation]:
    """mc runs differing only in the seed of their option shuffles; the lowest seed first."""
    mc = [v for v in runs if v.protocol == "mc"]
    return _ablations(mc, "seed", lambda v: int(v.params.get("seed", 0)), n_boot=n_boot, seed=seed, answers=True)
