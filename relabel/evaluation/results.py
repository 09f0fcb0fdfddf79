"""What an evaluation produces: plain dataclasses, and their self-describing JSON form.

Every number in [0, 1] is a share (accuracy, rate, reliability part); reports print percentages. NaN (nothing was
scored) becomes null in JSON, which is strict (no NaN tokens), so PostgreSQL's JSON type and every JSON reader
accept it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from evaluator.label_uncertainty import UncertainScore
from evaluator.paired import PairedDifference
from evaluator.ranking import RankingShift, RankInterval
from evaluator.scoring import Score
from relabel.evaluation.references import ReferenceInfo
from relabel.evaluation.result_parts import LabelChange, LabelSensitivity, Outcomes, RobustnessOutcomes
from relabel.evaluation.runs import RunInfo

if TYPE_CHECKING:
    import numpy as np

    from relabel.evaluation.tasks import TaskTables

DEFINITIONS = {
    "top1": "share of scored images whose first prediction is in the image's reference set (ReaL rule; for a "
    "single-label reference this is ordinary top-1 accuracy); a failed reply counts as wrong",
    "top5": "share of scored images with any of the first 5 predictions in the set; only for runs that rank 5",
    "scored": "images of the reference that the run predicted, whose set is non-empty and whose call was answered "
    "or ended in a failed reply",
    "failed": "n_failed: the model's failures (a reply that could not be used: a broken numbered format, a "
    "refusal; or a final HTTP 4xx about the request: 400, 413, 422): scored as wrong, and counted here",
    "excluding_failures": "top-1 over the answered scored images only: n_correct / (n_scored - n_failed)",
    "errors": "n_errors: infrastructure and set-up errors (no answer: timeouts, connection failures, HTTP 429/5xx, "
    "unreadable images; HTTP 401/403/404): counted apart, never scored, each run's count in a warning; which of them "
    "running `relabel suggest` again asks again: the retryable ones (--retry-errors: all)",
    "excluded": "images whose reference set is empty (ReaL's excluded images, snapshot categories Z and X)",
    "ci": "95 % Wilson score interval of top-1 (ci_low, ci_high): never degenerate, also at 0 and 100 %",
    "paired": "top-1 under the first reference (a, imgt by default) and under this one (b) on the images the run "
    "has scored under both (n_common); difference = b - a; ci_low/ci_high: 95 % paired bootstrap interval "
    "(images resampled with replacement, the same images under both references, seeded)",
    "ranking": "ranks by top-1 under the first two references over ranking_images, the images every run scored "
    "under both; rank_intervals: 95 % percentile intervals of each run's ranks and places gained over joint "
    "resamples of those images (one resample for all runs)",
    "warnings": "runs that cover different images, or part of a reference, with the images in common; and per "
    "run, the failed calls its scores leave out (infrastructure, set-up), with their count",
    "published": "metrics as their authors define them (--metric), e.g. Shankar et al. (2020): problematic images "
    "skipped, correct or unclear labels count, per-class accuracy by original label averaged over classes",
    "uncertain": "against a probabilistic snapshot (posteriors per image and class, e.g. Dawid-Skene): "
    "thresholded = top-1 against the snapshot's label sets (classes with posterior >= threshold, as its "
    "consensus decided them); expected_accuracy = mean top-1 "
    "over n_draws label sets sampled from the posteriors (each class present with its posterior, independently; "
    "an image whose sampled set is empty is left out of that draw), after Stutz et al. (2023); ci_low/ci_high: "
    "95 % percentile interval over draws that each resample the images (the bootstrap) and sample their label "
    "sets, so it holds both the finite test set and the label uncertainty (with every posterior 0 or 1 it is the "
    "ordinary bootstrap interval); label_ci_low/label_ci_high: the same over label draws alone, images fixed; "
    "n_uncertain (JSON only): images answered (or failed) with a class posterior strictly between 1 - threshold "
    "and threshold, also beside an accepted label; the report's uncertain images are category U with a vote only; "
    "expected_scored: mean images scored per draw; classes of the snapshot's labels without a stored posterior "
    "count as certain; n_unrated: images nobody rated (category U without a vote: the labels of the snapshot's "
    "base source alone), left out of every number here when unrated_noise is null, else drawn at that rate",
    "mean_per_class": "unweighted mean over classes of top-1 on the scored images whose set holds the class",
    "per_category": "top-1 on the images of each snapshot category (A confirmed, B changed, M several labels, "
    "Z none fits, X unclear, U undecided: the votes settle nothing, the review queue's first images, or nobody "
    "rated the image and it keeps the base source's labels)",
    "oop": "out-of-prompt answers among answered calls (generative protocols that record it)",
    "kendall_tau": "Kendall's tau-b between the runs' top-1 under the first two references, on the ranking's images",
    "label_changes": "each paired difference against the first reference (one original label per image) taken "
    "apart on the same n_common images: n_leniency right only under the reference whose set holds the original "
    "label too (multi-label leniency), n_a_wrong right only under the reference whose set lacks the original label "
    "(the original label wrong), n_dropped right only under the first reference (the prediction is the original "
    "label, the reference's set lacks it); difference = (n_leniency + n_a_wrong - n_dropped) / n_common exactly; "
    "*_ci: 95 % paired bootstrap intervals of each signed share; baseline_by_construction: the first reference's "
    "top-1 is 0 or 100 % on these images but not on all the run's images (images picked by the run's own "
    "agreement with the original labels): the difference is no gain; gains/losses: top-1 per class of the original "
    "label under both references on the same images, the classes with the largest differences, each with a 95 % "
    "paired bootstrap interval (the class's images resampled)",
    "label_sensitivity": "per run and probabilistic snapshot, on the images of its expected top-1: the expected "
    "top-1 (top1, ci_low/ci_high labels + images, label_ci_low/label_ci_high labels only) with the snapshot's votes "
    "aggregated by every method of the tool (kind aggregation), top-1 against every label source taken as certain "
    "(kind label source, Wilson interval), and with the n_unrated images (no vote, labels of base_source) taken "
    "as certain or drawn at base_error_rate, the base source's error rate on the rated images (kind unrated images)",
}


JSON = "json"  # field metadata: False keeps a field (per-image arrays) out of the JSON form


def jsonable(value: Any) -> Any:
    """`value` with dataclasses as dicts, datetimes as ISO text, tuples as lists and NaN/inf as None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = [f for f in dataclasses.fields(value) if f.metadata.get(JSON, True)]
        return {f.name: jsonable(getattr(value, f.name)) for f in fields}
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and not isinstance(value, str):  # numpy scalars
        return jsonable(value.item())
    return value


@dataclass(frozen=True)
class RunScore:
    """One run scored against one reference; `n_predicted` of the reference's images have a prediction."""

    run: str
    reference: str
    n_images: int
    n_predicted: int
    top1: Score
    top5: Score | None
    mean_per_class: float
    per_category: dict[str, Score] | None
    paired: PairedDifference | None = None  # against the evaluation's first reference, on common images
    uncertain: UncertainScore | None = None  # against a probabilistic snapshot's posteriors (label uncertainty)


@dataclass(frozen=True)
class PublishedScore:
    """A run scored with a metric as its authors define it (e.g. Shankar et al. 2020) on an imported source;
    `regt_style` is the same run's pooled top-1 on the source's proposed labels over every image the source
    labels (problematic ones included, unclear labels not counted), for comparison."""

    metric: str
    title: str
    run: str
    source: str
    n_predicted: int  # of the source's images
    n_scored: int  # predicted, not skipped, not an infrastructure error
    n_skipped: int  # skipped by the metric (Shankar: problematic images)
    n_errors: int
    n_classes: int  # classes averaged over
    accuracy: float
    ci_low: float | None
    ci_high: float | None
    regt_style: Score | None = None


@dataclass(frozen=True)
class DatasetScore:
    """A run's top-1 on one dataset against the reference its row is scored against there (`reliability`), on
    the `n_images` images that run scored there; `ci_*` its Wilson interval (None: not computed)."""

    dataset: str
    run: str  # the run of that dataset (the same model and protocol as the row)
    reference: str
    n_images: int
    accuracy: float
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class NoiseSensitivity:
    """Top-1 against a cleaner reference minus top-1 against ImGT on the same images, with its paired interval."""

    reference: str
    n_images: int
    accuracy_imgt: float
    accuracy_reference: float
    difference: float  # in [-1, 1]: positive, higher against the reference (nets leniency, ImGT wrong, dropped)
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass(frozen=True)
class ReliabilityRow:
    """One run of the evaluated dataset (a model read through one protocol): its reliability parts (None:
    unknown), overall score and ranks among the rows of its task, and what each part was computed from."""

    run: str
    model: str
    protocol: str
    task: str  # rows are compared with the rows of the same task only ("classes", or e.g. "mc")
    capability: float | None
    consistency: float | None
    robustness: float | None
    efficiency: float | None
    overall: float | None = None
    rank_by_capability: int | None = None
    rank_by_overall: int | None = None
    reference: str | None = None  # what P is scored against
    n_images: int = 0  # the images P is on
    capability_ci: tuple[float, float] | None = None
    consistency_ci: tuple[float, float] | None = None
    datasets: tuple[DatasetScore, ...] = ()  # the scores CDC is over, the evaluated dataset first
    noise: NoiseSensitivity | None = None
    efficiency_terms: dict[str, float] = field(default_factory=dict)  # measure -> budget / (budget + value)
    robustness_run: int | None = None  # the stored robustness run RR and E come from
    robustness_ci: tuple[float, float] | None = None  # over resamples of the robustness run's images
    overall_ci: tuple[float, float] | None = None  # over joint resamples of every part's images; E held fixed
    rank_by_capability_ci: tuple[int, int] | None = None  # both ranks over the same resamples
    rank_by_overall_ci: tuple[int, int] | None = None
    shift_ci: tuple[int, int] | None = None  # places gained, rank by P - rank by overall
    capability_common: float | None = None  # P on the task's common images: what the ranks are on, never P itself
    resampled: dict[str, np.ndarray] = field(
        default_factory=dict, compare=False, repr=False, metadata={JSON: False}
    )  # part -> (n_boot,) values over the joint resamples; not stored


@dataclass(frozen=True)
class CommonImages:
    """The images the rows of one task are ranked on: those every ranked row scored against `reference`."""

    task: str
    dataset: str
    reference: str
    n_images: int
    runs: tuple[str, ...]  # the ranked rows (those with an overall score)
    same_images: bool  # every ranked row scored exactly these images (its own numbers are on them too)


@dataclass(frozen=True)
class ReliabilityTable:
    """The reliability table (after ARGUS) with what it is: which parts follow the authors, the budgets of E,
    the uncertainty computed, and the definitions."""

    rows: tuple[ReliabilityRow, ...]
    weights: dict[str, float]  # as given, keyed P, CDC, RR, E
    kendall_tau: dict[str, float | None]  # per task: between the capability and overall rankings
    notes: tuple[str, ...] = ()
    title: str = ""
    method: str = ""
    budgets: dict[str, float] = field(default_factory=dict)
    uncertainty: str = ""
    definitions: dict[str, str] = field(default_factory=dict)
    common: tuple[CommonImages, ...] = ()  # per task: the images its ranks are on


@dataclass(frozen=True)
class EfficiencyReport:
    """Measured while the model ran. Seconds, bytes, images per second; None where not measurable."""

    device: str
    batch_size: int | None
    n_images: int  # model inputs timed (clean and perturbed)
    latency_p50_s: float | None
    latency_p95_s: float | None
    latency_mean_s: float | None
    throughput_per_s: float | None
    peak_rss_bytes: int | None
    peak_rss_scope: str  # "this run" (the peak was reset first) or "process" (peak since the process started)
    cuda_peak_bytes: int | None
    n_parameters: int | None
    flops_per_image: float | None
    flops_note: str = ""
    cost_per_1k_images: float | None = None  # from the adapter's token prices; None: not priced or not paid for


@dataclass(frozen=True)
class RobustnessResult:
    """Top-1 of one model on clean and perturbed images; `grid[reference]` is (perturbations × severities)."""

    model: str
    dataset: str
    n_images: int
    perturbations: tuple[str, ...]
    severities: tuple[int, ...]
    seed: int
    references: tuple[ReferenceInfo, ...]
    clean: dict[str, Score]
    grid: dict[str, list[list[float]]]
    retention: dict[str, float]  # RR per reference
    errors: int  # failures left out of every score over all passes: infrastructure and set-up (failure_causes)
    efficiency: EfficiencyReport
    seconds: float
    created_at: datetime
    tool_version: str
    adapter: dict[str, Any] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)  # how the model was read: topk, or a generative protocol
    text_perturbations: tuple[str, ...] = ()  # those of `perturbations` that change text (class names, prompts)
    id: int | None = None
    failed: int = 0  # the model's failures over all passes (unparseable, refused, final HTTP 4xx): scored as wrong
    warnings: tuple[str, ...] = ()  # one line per cause of the failures left out, with its count
    # per image and condition; None for results stored before they were kept. Stored with the run (to_dict), not
    # repeated in an evaluation's JSON
    outcomes: RobustnessOutcomes | None = field(default=None, compare=False, repr=False, metadata={JSON: False})

    @property
    def text_target(self) -> str:
        """What the text perturbations (typo) changed: the class names a scoring model reads, or each prompt."""
        return "class names" if self.protocol.get("protocol", "topk") == "topk" else "prompts"

    def to_dict(self) -> dict[str, Any]:
        outcomes = {"outcomes": self.outcomes.to_json()} if self.outcomes is not None else {}
        return {"kind": "robustness", **jsonable(self), **outcomes, "definitions": ROBUSTNESS_DEFINITIONS}


ROBUSTNESS_DEFINITIONS = {
    "clean": "top-1 on the unperturbed images (each resized to 256 px on the shorter side, as perturbed ones)",
    "grid": "top-1 per perturbation (rows, in `perturbations` order) and severity (columns, in `severities`)",
    "typo": "text perturbation: seeded keyboard typos (swap, drop, insert or replace by a QWERTY neighbour) hitting "
    "2, 5, 10, 15, 20 % of letters at severities 1-5, in the class names a text-conditioned scoring model reads "
    "(seeded per class) or in the instructions of each prompt of a generative model (seeded per request; the "
    "lines listing the classes or options stay as written); the images stay clean",
    "protocol": "how the model was read: topk (ranked scores) or a generative protocol (cw, cwplus, ow, mc) whose "
    "parsed answer is the top-1; an out-of-prompt answer is wrong, and so is the model's failure (failed: an "
    "unparseable reply, a refusal, a final HTTP 4xx); errors: failures left out (infrastructure, set-up), warned",
    "retention": "RR: mean over the grid of min(perturbed / clean, 1)",
    "outcomes": "per image (image_ids) and condition (conditions: clean, then perturbation/severity in the grid's "
    "order): errors (infrastructure errors, never scored) and, per reference, scored and correct; each mask a "
    "base64 bit string (encoding); what the interval of RR resamples",
    "latency": "model time per image: each batch's forward pass divided by its images (decoding not included)",
    "throughput": "images per second through the adapter's score() (decode, preprocess, forward)",
    "peak_rss": "peak resident memory of the process (VmHWM, reset before the run where Linux allows); for a model "
    "behind an API (its adapter names a base_url) this is the client's memory, not the model's",
    "cost_per_1k_images": "money per 1,000 images at the adapter's token prices (price_per_1k_input/output), over "
    "the requests it paid for (cached answers are free and not counted); null without prices",
    "flops_per_image": "floating-point operations of one image's forward pass (torch FlopCounterMode: 2 per "
    "multiply-add of convolutions and matrix products; element-wise operations not counted)",
}


@dataclass
class Evaluation:
    """Runs × references scored at one moment, with the ranking shift and the reliability table."""

    dataset: str
    created_at: datetime
    tool_version: str
    references: list[ReferenceInfo]
    runs: list[RunInfo]
    scores: list[RunScore]
    ranking: RankingShift | None
    reliability: ReliabilityTable | None
    robustness: list[RobustnessResult]
    n_boot: int
    seed: int
    id: int | None = None
    ranking_images: int = 0  # the images the ranking is over: scored by every run under both references
    rank_intervals: tuple[RankInterval, ...] = ()
    warnings: list[str] = field(default_factory=list)
    published: list[PublishedScore] = field(default_factory=list)
    label_changes: list[LabelChange] = field(default_factory=list)  # each paired difference taken apart
    label_sensitivity: list[LabelSensitivity] = field(default_factory=list)  # relabel.evaluation.label_sensitivity
    outcomes: Outcomes | None = field(default=None, repr=False, metadata={JSON: False})  # per image, not stored
    tasks: TaskTables | None = None  # presence probes and captions (relabel.evaluation.tasks)

    def score(self, run: str, reference: str) -> RunScore:
        """The score of `run` against `reference`; KeyError naming both when there is none."""
        for s in self.scores:
            if s.run == run and s.reference == reference:
                return s
        raise KeyError(f"no score of run {run!r} against reference {reference!r}")

    def to_dict(self) -> dict[str, Any]:
        """The self-describing JSON form: what was scored against what, the numbers, and their definitions."""
        body = jsonable(self)
        images, intervals = body.pop("ranking_images"), body.pop("rank_intervals")
        if self.ranking is not None:
            body["ranking"] = {
                "reference_a": self.references[0].name,
                "reference_b": self.references[1].name,
                "images": images,
                **jsonable(self.ranking),
                "rank_intervals": intervals,
            }
        return {"kind": "scores", "tool": "relabel", **body, "definitions": DEFINITIONS}
