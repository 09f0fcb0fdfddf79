"""Aggregation sensitivity of the expected top-1: how much the score moves with the way the labels were made.

The interval of the expected top-1 (`evaluator.label_uncertainty`) holds the label noise *given* one consensus:
the posteriors of the snapshot's rule. Another reasonable rule gives other posteriors, and the score can move by more
than that interval. So beside it, for each run against each probabilistic snapshot, on the same images:

| row                   | labels                                                                                |
|-----------------------|---------------------------------------------------------------------------------------|
| every method          | the snapshot's votes aggregated by each method of `relabel.votes.aggregation.METHODS`; the  |
|                       | expected top-1 over label draws from its posteriors (a counting method: its decisions |
|                       | as certain, the items it leaves undecided at their share of yes answers)              |
| every label source    | top-1 against ImGT and each imported prior (ReaL, Shankar, ...): label sets as        |
|                       | certain, Wilson interval; images the source does not label drop out                   |
| unrated certain       | the snapshot's posteriors, its unrated images taken as certain (the former reading)   |
| unrated at base error | its unrated images drawn at the base source's error rate on the rated images, a lower |
|                       | bound (`evaluator.label_uncertainty.base_error_rate`)                                 |

Every row but the two "unrated" ones leaves out the snapshot's unrated images (category U, no vote, labels of its
base source), as the expected top-1 does. Votes of images a snapshot's adjudication settled are aggregated like
any other; the images no vote reached keep the snapshot's labels, certain.

The label draws of a row depend on the posteriors and the seed, never on a run (`evaluator.label_draws`): each
method's draws (and image resamples) are made once per snapshot and every run is scored against them, with the
numbers it would get alone.

The other methods' posteriors (reading the 925,000 ReaL rater votes and fitting four methods: about 0.7 s) are
kept in the workspace's cache folder, keyed like `relabel stats`'s reliability fit by what the votes are
made of (`relabel.review.stats.votes_key`: the vote sources as imported and the studio's decision events), by
the snapshot's vote settings and by its images. A vote import or a new decision changes the key: the next
evaluate reads and fits the votes again. Never kept: a snapshot that reads a model run as a voter, or the studio's
decisions when the dataset has some (their votes cover each card's candidate classes, which come from the runs
and the original labels, outside the key).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlmodel import Session, col

from db.models import Dataset, LabelSource, stored_id
from evaluator import LabelSets
from evaluator.label_uncertainty import UncertainScore, base_error_rate
from evaluator.posteriors import Posteriors
from evaluator.scoring import multilabel_accuracy
from relabel import __version__
from relabel.common.errors import InputError, NotFoundError
from relabel.common.kept_arrays import kept_or_derived, kept_path
from relabel.evaluation.cells import NA, Table, pct, span
from relabel.evaluation.references import SOURCE, Reference, read_source_labels, workspace_cache_dir
from relabel.evaluation.result_parts import LabelSensitivity, SensitivityRow
from relabel.evaluation.runs import Aligned, RunPredictions, align
from relabel.evaluation.scoring import score_uncertain_runs
from relabel.votes.aggregation import METHODS, Aggregate, aggregate, decide
from relabel.votes.table import collect_votes

AGGREGATION, SOURCE_KIND, UNRATED = "aggregation", "label source", "unrated images"
CACHE_PREFIX = "method-posteriors"


def label_sensitivity(
    session: Session, dataset: Dataset, runs: Sequence[RunPredictions], references: Sequence[Reference], *,
    n_boot: int, seed: int, expected: Mapping[tuple[str, str], UncertainScore | None] | None = None,
) -> list[LabelSensitivity]:  # fmt: skip
    """The sensitivity rows (module docstring) of every run against every reference with posteriors; none with
    `n_boot` = 0 (no label draws).

    `expected`: (run, reference) -> the run's expected top-1 against the reference's own posteriors, already
    drawn with the same `n_boot` and `seed` (`RunScore.uncertain`); the snapshot's own rule's row reads it
    instead of drawing the labels again. A label source among `references` is read from there, not again."""
    out: list[LabelSensitivity] = []
    for ref in references:
        if ref.posteriors is None or ref.unrated is None or not n_boot:
            continue
        methods, note = method_posteriors(session, dataset, ref)
        sources = source_labels(session, dataset, ref, loaded=references)
        base = sources.get(f"{SOURCE}{ref.base_source}")
        rate = float("nan") if base is None else base_error_rate(ref.posteriors, base, ~ref.unrated)
        aligned = [align(run, ref.image_ids) for run in runs]
        own = [(expected or {}).get((run.info.name, ref.name)) for run in runs]
        drawn = _method_rows(aligned, ref, methods, n_boot, seed, own)  # each method's draws made once for all runs
        unrated = _unrated_rows(aligned, ref, rate, n_boot, seed)
        for run, aligned_run, method_rows, unrated_rows in zip(runs, aligned, drawn, unrated):
            rows = method_rows + _source_rows(aligned_run, ref, sources) + unrated_rows
            rule = str((ref.info.consensus or {}).get("rule", ""))
            counted = aligned_run.ok | aligned_run.failed
            n_unrated = int((ref.unrated[aligned_run.rows] & counted).sum())  # as scored
            item = LabelSensitivity(run.info.name, ref.name, rule, n_unrated, ref.base_source, rate, tuple(rows), note)
            out.append(item)
    return out


def method_posteriors(session: Session, dataset: Dataset, ref: Reference) -> tuple[dict[str, Posteriors], str]:
    """Method name -> posteriors over the images of `ref`: its votes (the vote sources, studio and model its
    consensus read, as they stand now) aggregated by that method on the voted images, its own certain labels
    elsewhere; the snapshot's own rule: its stored posteriors. And a note when those votes are gone or are not the
    ones the snapshot aggregated, or when its posteriors were calibrated."""
    if ref.posteriors is None:
        raise InputError(f"reference {ref.name!r} has no posteriors: it is not a probabilistic snapshot")
    settings = ref.info.consensus or {}
    post, rule = ref.posteriors, settings.get("rule")
    try:
        fitted = kept_or_derived(_cache_path(session, dataset, ref), lambda: _fit_methods(session, dataset, ref))
    except NotFoundError as exc:
        return {str(rule): post}, f"no other aggregation rows: the votes of {ref.name} are gone ({exc})"
    at, classes = fitted["at"], fitted["classes"]
    voted = np.zeros(len(ref.image_ids), bool)
    voted[at] = True
    keep = ~voted[post.rows]
    out = {}
    for name in METHODS:
        if name == rule:  # the snapshot's own posteriors, as stored (calibrated, when it was)
            out[name] = post
            continue
        out[name] = Posteriors(
            np.r_[post.rows[keep], at], np.r_[post.classes[keep], classes],
            np.r_[post.probs[keep], fitted[f"p:{name}"]], post.n_images, post.n_classes,
        )  # fmt: skip
    return out, _votes_note(ref.name, settings, int(fitted["n_pairs"]), int(fitted["n_votes"]))


def _fit_methods(session: Session, dataset: Dataset, ref: Reference) -> dict[str, np.ndarray]:
    """The votes of `ref`'s consensus settings on its images, fitted by every method but its rule: "at" (the
    positions of the voted pairs in `ref.image_ids`), "classes", "p:METHOD" (the posteriors of those pairs), and
    the pairs and votes read ("n_pairs", "n_votes"). Raises NotFoundError when a vote source or run is gone."""
    settings = ref.info.consensus or {}
    table = collect_votes(
        session.connection(), stored_id(dataset), sources=settings.get("vote_sources"),
        studio=bool(settings.get("studio", True)), with_model=settings.get("with_model"),
    )  # fmt: skip
    at = np.searchsorted(ref.image_ids, table.pairs[:, 0])
    inside = at < len(ref.image_ids)
    inside[inside] = ref.image_ids[at[inside]] == table.pairs[inside, 0]
    out = {
        "at": at[inside], "classes": table.pairs[inside, 1],
        "n_pairs": np.int64(len(table.pairs)), "n_votes": np.int64(len(table.votes.item)),
    }  # fmt: skip
    for name, method in METHODS.items():
        if name != settings.get("rule"):
            fit = aggregate(table.votes, name)
            out[f"p:{name}"] = (fit.posterior if method.probabilistic else _counted(fit))[inside]
    return out


def _cache_path(session: Session, dataset: Dataset, ref: Reference) -> Path | None:
    """Where the fits of `ref`'s votes are kept (module docstring); None without a cache folder (a database
    other than a SQLite file), votes, with a model run among the voters or studio decisions read."""
    from relabel.review.stats import has_decisions, votes_key

    folder = workspace_cache_dir(session)
    settings = ref.info.consensus or {}
    if folder is None or settings.get("with_model"):
        return None
    conn = session.connection()
    if settings.get("studio", True) and has_decisions(conn, stored_id(dataset)):
        return None
    votes = votes_key(conn, stored_id(dataset))
    if votes is None:
        return None
    read = [settings.get(k) for k in ("rule", "vote_sources", "studio")]
    images = hashlib.sha256(np.ascontiguousarray(ref.image_ids, dtype=np.int64).tobytes()).hexdigest()
    text = json.dumps([__version__, votes, read, list(METHODS), images], default=str)
    return kept_path(folder, CACHE_PREFIX, stored_id(dataset), text)


def _votes_note(name: str, settings: dict, n_pairs: int, n_votes: int) -> str:
    """Why the other aggregation rows may not read what the snapshot read; "" when they do."""
    then = (settings.get("n_pairs"), settings.get("n_votes"))
    now = (n_pairs, n_votes)
    notes = [] if then == now or then[0] is None else [
        f"the votes changed since {name} was made ({then[0]} pairs and {then[1]} votes then, {now[0]} and "
        f"{now[1]} now): the other aggregation rows read them as they stand"
    ]  # fmt: skip
    if settings.get("calibration"):
        notes.append(f"{name}'s posteriors are calibrated, the other methods' as fitted")
    return "; ".join(notes)


def _counted(fit: Aggregate) -> np.ndarray:
    """A counting method's decisions as posteriors 0 or 1; its undecided items at their share of yes answers."""
    decided = decide(fit).astype(np.float64)
    return decided if fit.undecided is None else np.where(fit.undecided, fit.posterior, decided)


def source_labels(
    session: Session, dataset: Dataset, ref: Reference, loaded: Sequence[Reference] = ()
) -> dict[str, LabelSets]:
    """`source:NAME` -> the label sets of every label source of the dataset (ImGT and the imported priors) over
    the images of `ref` (an image the source does not cover: an empty set). A source among the `loaded`
    references is taken from there."""
    sources = session.scalars(
        select(LabelSource).where(col(LabelSource.dataset_id) == dataset.id).order_by(col(LabelSource.id))
    ).all()
    known = {r.name: r for r in loaded if r.info.kind != "snapshot"}
    out = {}
    for source in sources:
        found = known.get(source.name)
        ids, sets = (found.image_ids, found.labels) if found else read_source_labels(session, dataset, source)
        labels = np.full((len(ref.image_ids), sets.labels.shape[1]), -1, dtype=np.int64)
        at = np.searchsorted(ids, ref.image_ids)
        at = np.minimum(at, max(len(ids) - 1, 0))
        hit = ids[at] == ref.image_ids
        labels[hit] = sets.labels[at[hit]]
        out[f"{SOURCE}{source.name}"] = LabelSets(labels, sets.n_classes)
    return out


def _method_rows(
    aligned: Sequence[Aligned], ref: Reference, methods: dict[str, Posteriors], n_boot: int, seed: int,
    own: Sequence[UncertainScore | None],
) -> list[list[SensitivityRow]]:  # fmt: skip
    """Per run, one row per method; each method's label draws are made once and read by every run. Against the
    reference's own posteriors, the runs' scores `own` when every run has one: the same draws, so the same
    numbers (the thresholded top-1 aside, which no row shows)."""
    rows: list[list[SensitivityRow]] = [[] for _ in aligned]
    for name, post in methods.items():
        reuse = post is ref.posteriors and all(score is not None for score in own)
        scores = list(own) if reuse else score_uncertain_runs(aligned, ref, n_boot=n_boot, seed=seed, posteriors=post)
        for run_rows, score in zip(rows, scores):
            if score is not None:
                run_rows.append(_uncertain_row(name, AGGREGATION, score))
    return rows


def _unrated_rows(
    aligned: Sequence[Aligned], ref: Reference, rate: float, n_boot: int, seed: int
) -> list[list[SensitivityRow]]:
    """Per run, the two "unrated" rows (the second only with a finite base error rate)."""
    rows: list[list[SensitivityRow]] = [[] for _ in aligned]
    for name, noise in (("unrated certain", 0.0), ("unrated at base error", rate)):
        if np.isfinite(noise):
            scores = score_uncertain_runs(aligned, ref, n_boot=n_boot, seed=seed, unrated_noise=noise)
            for run_rows, score in zip(rows, scores):
                if score is not None:
                    run_rows.append(_uncertain_row(name, UNRATED, score))
    return rows


def _uncertain_row(name: str, kind: str, s: UncertainScore) -> SensitivityRow:
    return SensitivityRow(
        name, kind, s.expected_accuracy, s.ci_low, s.ci_high, s.label_ci_low, s.label_ci_high, s.expected_scored
    )


def _source_rows(aligned: Aligned, ref: Reference, sources: dict[str, LabelSets]) -> list[SensitivityRow]:
    """Top-1 against each source on the run's images of `ref` less its unrated ones (left out, as unscored)."""
    keep = np.ones(len(aligned.rows), bool) if ref.unrated is None else ~ref.unrated[aligned.rows]
    rows = []
    for name, labels in sources.items():
        sets = LabelSets(labels.labels[aligned.rows], labels.n_classes)
        if not np.any(sets.counts[keep]):
            continue
        s = multilabel_accuracy(aligned.classes, sets, 1, aligned.ok & keep, failed=aligned.failed & keep)
        rows.append(SensitivityRow(name, SOURCE_KIND, s.accuracy, s.ci_low, s.ci_high, None, None, s.n_scored))
    return rows


def sensitivity_table(items: Sequence[LabelSensitivity]) -> Table | None:
    """One row per run, snapshot and way of making the labels; None when there is nothing to show."""
    if not items:
        return None
    header = ["run", "reference", "labels", "kind", "images scored", "top-1 % (expected)", "95 % CI (labels + images)",
              "95 % CI (labels only)"]  # fmt: skip
    rows = []
    for item in items:
        for r in item.rows:
            name = f"{r.labels} (this snapshot)" if r.labels == item.rule else r.labels
            labels_only = NA if r.label_ci_low is None else span(r.label_ci_low, r.label_ci_high)
            rows.append([item.run, item.reference, name, r.kind, f"{r.n_images:,.0f}", pct(r.top1),
                         span(r.ci_low, r.ci_high), labels_only])  # fmt: skip
    return header, rows


SENSITIVITY_NOTE = (
    "The interval of the expected top-1 holds the label noise under one consensus. Each row here makes the labels "
    "another way, on the images of the expected top-1 (the rated ones): the snapshot's votes aggregated by every "
    "method the tool has, and each label source of the dataset taken as certain (Wilson interval); the two "
    "'unrated' rows add the images nobody rated back. An image whose labels come out empty is left out (ReaL's "
    "rule), so the images scored differ from row to row."
)


def sensitivity_lines(items: Sequence[LabelSensitivity]) -> list[str]:
    """One line per run and snapshot: how many unrated images were left out, and why; and the notes."""
    lines = [f"{item.run} against {item.reference}: {item.note}" for item in items if item.note]
    lines += [line for item in items if (line := _spread_line(item))]
    for item in items:
        if item.n_unrated:
            rate = "unknown" if not np.isfinite(item.base_error_rate) else f"{100 * item.base_error_rate:.1f} %"
            lines.append(
                f"{item.run} against {item.reference}: {item.n_unrated:,} image{'s' * (item.n_unrated != 1)} nobody "
                f"rated (their labels rest on "
                f"{item.base_source} alone) are left out of the expected top-1; {item.base_source}'s labels are "
                f"wrong on {rate} of the rated images, but raters are usually sent where a label is doubted, so "
                "that rate is no estimate for the others (row 'unrated at base error': a lower bound)"
            )
    return lines


def _spread_line(item: LabelSensitivity) -> str:
    """How far the aggregation methods move the expected top-1, beside the width of the labels-only interval."""
    methods = [r for r in item.rows if r.kind == AGGREGATION and np.isfinite(r.top1)]
    own = next((r for r in methods if r.labels == item.rule), None)
    if len(methods) < 2 or own is None or own.label_ci_low is None or own.label_ci_high is None:
        return ""
    low, high = min(r.top1 for r in methods), max(r.top1 for r in methods)
    return (
        f"{item.run} against {item.reference}: over the {len(methods)} aggregation methods the expected top-1 spans "
        f"{pct(low)}–{pct(high)} % ({100 * (high - low):.2f} points); the labels-only interval under {item.rule} "
        f"is {100 * (own.label_ci_high - own.label_ci_low):.2f} points wide"
    )


def sensitivity_note(items: Sequence[LabelSensitivity]) -> str:
    """The note above the table, with the unrated images' lines."""
    return " ".join([SENSITIVITY_NOTE, *(f"{line}." for line in sensitivity_lines(items))])
