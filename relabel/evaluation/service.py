"""`evaluate`: score stored model runs against references, fold in robustness runs, and store the result.

Rescoring never runs a model: it reads the stored predictions, so scoring every run again after a labeling round
costs seconds. Every input is checked before anything is written; a bad request stores nothing.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from sqlalchemy.engine import Engine

from db.engine import session_scope
from db.models import utcnow
from evaluator.ranking import RankingShift, ranking_shift
from relabel import __version__
from relabel.errors import InputError
from relabel.evaluation.argus import build_argus
from relabel.evaluation.references import Reference, default_reference_specs, load_reference
from relabel.evaluation.results import Evaluation, RunScore
from relabel.evaluation.runs import load_run, select_runs
from relabel.evaluation.scoring import score_run
from relabel.evaluation.storage import latest_robustness, store_evaluation
from relabel.workspace import get_dataset


def evaluate(
    engine: Engine,
    dataset: str | None = None,
    *,
    runs: Sequence[str] | None = None,
    references: Sequence[str] | None = None,
    weights: Mapping[str, float] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
    store: bool = True,
) -> Evaluation:
    """Score `runs` (default: every run of the dataset) against `references` (specs as in
    `relabel.evaluation.references`; default: ImGT and the newest snapshot), and store the evaluation.

    `weights` maps P, CDC, RR, E to the weights of the ARGUS overall score (default equal). `n_boot` bootstrap
    resamples give the 95 % interval of each top-1 (0: none). Raises InputError, nothing stored, for an empty
    reference or a run without a prediction on a reference's labelled images.
    """
    if n_boot < 0:
        raise InputError(f"--boot must be ≥ 0, got {n_boot}")
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        specs = list(dict.fromkeys(references or default_reference_specs(s, ds)))
        refs = _unique_names([load_reference(s, ds, spec) for spec in specs])
        loaded = [load_run(s, r) for r in select_runs(s, ds, runs)]
        scores = [score_run(run, ref, n_boot=n_boot, seed=seed) for run in loaded for ref in refs]
        run_infos = [r.info for r in loaded]
        robustness = latest_robustness(s, {r.model for r in run_infos})
        evaluation = Evaluation(
            dataset=ds.name,
            created_at=utcnow(),
            tool_version=__version__,
            references=[r.info for r in refs],
            runs=run_infos,
            scores=scores,
            ranking=_ranking(scores, [r.name for r in refs], [r.name for r in run_infos]),
            argus=build_argus(run_infos, scores, robustness, weights),
            robustness=list(robustness.values()),
            n_boot=n_boot,
            seed=seed,
        )
        if store:
            store_evaluation(s, ds, evaluation)
    return evaluation


def _unique_names(refs: list[Reference]) -> list[Reference]:
    """Two specs may name one reference (`latest` and `snapshot:x`): keep it once; refuse a clash of names."""
    out: dict[str, Reference] = {}
    for ref in refs:
        other = out.get(ref.name)
        if other is not None and other.info != ref.info:
            raise InputError(f"two references are called {ref.name!r}; write source:{ref.name} or snapshot:{ref.name}")
        out.setdefault(ref.name, ref)
    return list(out.values())


def _ranking(scores: list[RunScore], refs: list[str], runs: list[str]) -> RankingShift | None:
    """How the runs' ranking by top-1 moves from the first reference to the second, over runs scored under both."""
    if len(refs) < 2:
        return None
    top1 = {(s.run, s.reference): s.top1.accuracy for s in scores}
    names = [r for r in runs if math.isfinite(top1[(r, refs[0])]) and math.isfinite(top1[(r, refs[1])])]
    if len(names) < 2:
        return None
    return ranking_shift([top1[(r, refs[0])] for r in names], [top1[(r, refs[1])] for r in names], names)
