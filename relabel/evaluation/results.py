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
from typing import Any

from evaluator.ranking import RankingShift
from evaluator.scoring import Score
from relabel.evaluation.references import ReferenceInfo
from relabel.evaluation.runs import RunInfo

DEFINITIONS = {
    "top1": "share of scored images whose first prediction is in the image's reference set (ReaL rule; for a "
    "single-label reference this is ordinary top-1 accuracy)",
    "top5": "share of scored images with any of the first 5 predictions in the set; only for runs that rank 5",
    "scored": "images of the reference that the run predicted, whose call did not fail and whose set is non-empty",
    "errors": "failed model calls: counted apart, never scored as wrong",
    "excluded": "images whose reference set is empty (ReaL's excluded images, snapshot categories Z and X)",
    "ci": "95 % percentile bootstrap interval of top-1 (binomial resampling of the scored images, seeded)",
    "mean_per_class": "unweighted mean over classes of top-1 on the scored images whose set holds the class",
    "per_category": "top-1 on the images of each snapshot category (A confirmed, B changed, M several labels, "
    "Z none fits, X unclear, U undecided)",
    "oop": "out-of-prompt answers among answered calls (generative protocols that record it)",
    "kendall_tau": "Kendall's tau-b between the runs' top-1 under the first two references",
    "capability": "P: mean top-1 over the references x protocols (runs) of the model",
    "consistency": "CDC: 1 - mean_i |a_i - mean(a)| / mean(a) over the model's per-reference top-1 a_i "
    "(each the mean over its protocols), clipped to [0, 1]",
    "robustness": "RR: mean over perturbations x severities of min(perturbed top-1 / clean top-1, 1), from the "
    "model's latest robustness run, against ImGT",
    "efficiency": "E: mean over measures known for every compared model of min/value (latency p50, p95, peak "
    "memory, parameters, FLOPs) or value/max (throughput): 1 for the best model on each measure",
    "overall": "weighted mean of P, CDC, RR and E (weights shown, normalised to sum 1); only for models whose "
    "weighted parts are all known",
}


def jsonable(value: Any) -> Any:
    """`value` with dataclasses as dicts, datetimes as ISO text, tuples as lists and NaN/inf as None."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
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


@dataclass(frozen=True)
class ArgusRow:
    """The four reliability parts of one model (None: unknown), its overall score and its two ranks."""

    model: str
    capability: float | None
    consistency: float | None
    robustness: float | None
    efficiency: float | None
    overall: float | None = None
    rank_by_capability: int | None = None
    rank_by_overall: int | None = None
    cells: int = 0  # reference x run cells averaged into P


@dataclass(frozen=True)
class ArgusTable:
    rows: tuple[ArgusRow, ...]
    weights: dict[str, float]  # as given, keyed P, CDC, RR, E
    kendall_tau: float | None  # between the capability and overall rankings, over the ranked models
    notes: tuple[str, ...] = ()


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
    errors: int  # failed model outputs over all passes (unreadable images count once per pass)
    efficiency: EfficiencyReport
    seconds: float
    created_at: datetime
    tool_version: str
    adapter: dict[str, Any] = field(default_factory=dict)
    protocol: dict[str, Any] = field(default_factory=dict)  # how the model was read: topk, or a generative protocol
    text_perturbations: tuple[str, ...] = ()  # those of `perturbations` that change text (class names, prompts)
    id: int | None = None

    @property
    def text_target(self) -> str:
        """What the text perturbations (typo) changed: the class names a scoring model reads, or each prompt."""
        return "class names" if self.protocol.get("protocol", "topk") == "topk" else "prompts"

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "robustness", **jsonable(self), "definitions": ROBUSTNESS_DEFINITIONS}


ROBUSTNESS_DEFINITIONS = {
    "clean": "top-1 on the unperturbed images (each resized to 256 px on the shorter side, as perturbed ones)",
    "grid": "top-1 per perturbation (rows, in `perturbations` order) and severity (columns, in `severities`)",
    "typo": "text perturbation: seeded keyboard typos (swap, drop, insert or replace by a QWERTY neighbour) hitting "
    "2, 5, 10, 15, 20 % of letters at severities 1-5, in the class names a text-conditioned scoring model reads "
    "(seeded per class) or in the instructions of each prompt of a generative model (seeded per request; the "
    "lines listing the classes or options stay as written); the images stay clean",
    "protocol": "how the model was read: topk (ranked scores) or a generative protocol (cw, cwplus, ow, mc) whose "
    "parsed answer is the top-1; an out-of-prompt answer is wrong, a failed or unparseable reply an error",
    "retention": "RR: mean over the grid of min(perturbed / clean, 1)",
    "latency": "model time per image: each batch's forward pass divided by its images (decoding not included)",
    "throughput": "images per second through the adapter's score() (decode, preprocess, forward)",
    "peak_rss": "peak resident memory of the process (VmHWM, reset before the run where Linux allows)",
    "flops_per_image": "floating-point operations of one image's forward pass (torch FlopCounterMode: 2 per "
    "multiply-add of convolutions and matrix products; element-wise operations not counted)",
}


@dataclass
class Evaluation:
    """Runs × references scored at one moment, with the ranking shift and the ARGUS table."""

    dataset: str
    created_at: datetime
    tool_version: str
    references: list[ReferenceInfo]
    runs: list[RunInfo]
    scores: list[RunScore]
    ranking: RankingShift | None
    argus: ArgusTable | None
    robustness: list[RobustnessResult]
    n_boot: int
    seed: int
    id: int | None = None

    def score(self, run: str, reference: str) -> RunScore:
        """The score of `run` against `reference`; KeyError naming both when there is none."""
        for s in self.scores:
            if s.run == run and s.reference == reference:
                return s
        raise KeyError(f"no score of run {run!r} against reference {reference!r}")

    def to_dict(self) -> dict[str, Any]:
        """The self-describing JSON form: what was scored against what, the numbers, and their definitions."""
        body = jsonable(self)
        if self.ranking is not None:
            body["ranking"] = {
                "reference_a": self.references[0].name,
                "reference_b": self.references[1].name,
                **jsonable(self.ranking),
            }
        return {"kind": "scores", "tool": "relabel", **body, "definitions": DEFINITIONS}
