"""The tables of an evaluation as rows of plain strings, and their rendering as aligned terminal text.

One builder per table gives (header, rows; the reliability, robustness and efficiency tables in
`relabel.evaluation.reliability_text`); the terminal aligns them (`columns`) and the Markdown report escapes
and pipes them (`report.md_table`), so both show the same numbers. Cells hold untrusted text (run, model and
class names) unescaped: each renderer makes it safe for its medium.
"""

from __future__ import annotations

from collections.abc import Sequence

from evaluator.scoring import Score
from relabel.evaluation.cells import NA, Table, ci, columns, num, pct, points, points_ci, rank_span, span
from relabel.evaluation.corruption_errors import ce_section, retention_and_ce_line
from relabel.evaluation.label_changes import by_construction
from relabel.evaluation.label_changes_text import parts_table
from relabel.evaluation.label_sensitivity import SENSITIVITY_NOTE, sensitivity_lines, sensitivity_table
from relabel.evaluation.reliability_text import (
    efficiency_table,
    render_reliability,
    robustness_table,
)
from relabel.evaluation.results import Evaluation, RobustnessResult, RunScore
from relabel.evaluation.robustness_summary import RobustnessSummary
from relabel.evaluation.storage import EvaluationHistoryEntry
from relabel.evaluation.tasks_text import render_tasks
from relabel.suggest.distractor_sources import distractors_line


def references_table(ev: Evaluation) -> Table:
    header = ["reference", "kind", "content hash", "images", "labelled", "multi-label", "categories"]
    rows = [
        [r.name, r.kind, r.content_hash[:12], str(r.n_images), str(r.n_labelled), "yes" if r.multi_label else "no",
         ", ".join(f"{k} {v}" for k, v in (r.categories or {}).items()) or NA]
        for r in ev.references
    ]  # fmt: skip
    return header, rows


def scores_table(ev: Evaluation) -> Table:
    """Per run and reference, on the images the run has scored under that reference: top-1 (%, failed replies
    counted as wrong, with its Wilson interval), top-1 excluding failures, top-5, mean per-class accuracy, and
    the images behind them."""
    header = ["run", "protocol", "reference", "predicted", "scored", "top-1 %", "95 % CI", "excl. failures %",
              "top-5 %", "per-class %", "failed replies", "infra errors", "excluded"]  # fmt: skip
    protocol = {r.name: r.protocol_label for r in ev.runs}
    rows = []
    for s in ev.scores:
        t = s.top1
        rows.append(
            [s.run, protocol[s.run], s.reference, str(s.n_predicted), str(t.n_scored), pct(t.accuracy), ci(t),
             pct(t.accuracy_excluding_failures), pct(s.top5.accuracy) if s.top5 else NA, pct(s.mean_per_class),
             str(t.n_failed), str(t.n_errors), str(t.n_excluded)]
        )  # fmt: skip
    return header, rows


def paired_table(ev: Evaluation) -> Table | None:
    """Each run under each later reference against the first one, on the images the run has scored under both:
    both top-1, their difference in points with its paired bootstrap interval, and the images that changed."""
    pairs = [(s, d) for s in ev.scores if (d := s.paired) is not None]
    if not pairs:
        return None
    a = ev.references[0].name
    header = ["run", "reference", "images in common", f"top-1 % {a}", "top-1 % reference", "Δ points",
              "95 % CI (paired)", f"right only under {a}", "right only under reference"]  # fmt: skip
    rows = []
    constructed = by_construction(ev.label_changes)  # a baseline of 0 or 100 % by construction: Δ is no gain
    for s, d in pairs:
        built = (s.run, s.reference) in constructed
        delta = f"{NA} ({a} {pct(d.accuracy_a)} % by construction)" if built else points(d.difference)
        rows.append(
            [s.run, s.reference, str(d.n_common), pct(d.accuracy_a), pct(d.accuracy_b), delta,
             NA if built else points_ci(d.ci_low, d.ci_high), str(d.n_only_a), str(d.n_only_b)]
        )  # fmt: skip
    return header, rows


def uncertainty_table(ev: Evaluation) -> Table | None:
    """Each run against each probabilistic snapshot: top-1 against the thresholded sets beside the expected top-1
    over label sets sampled from the posteriors, its interval with label uncertainty and image resampling, and
    the interval of the label draws alone; None when no reference has posteriors (or --boot 0)."""
    scored = [(s, u) for s in ev.scores if (u := s.uncertain) is not None]
    if not scored:
        return None
    header = ["run", "reference", "threshold", "scored", "top-1 % (labels)", "expected %",
              "95 % CI (labels + images)", "95 % CI (labels only)", "uncertain images", "draws"]  # fmt: skip
    rows = []
    for s, u in scored:
        t = u.thresholded
        rows.append(
            [s.run, s.reference, f"{u.threshold:g}", str(t.n_scored), pct(t.accuracy), pct(u.expected_accuracy),
             span(u.ci_low, u.ci_high), span(u.label_ci_low, u.label_ci_high), _uncertain_images(s), str(u.n_draws)]
        )  # fmt: skip
    return header, rows


def _uncertain_images(s: RunScore) -> str:
    """Uncertain, as the snapshot decides it (category U with votes that settle nothing), among the run's images
    (answered or failed): the count `relabel snapshot` shows, not a second definition. Category U also holds the
    images nobody rated (unrated, left out of the expected top-1), which are not counted here."""
    u = (s.per_category or {}).get("U")
    if u is None:
        return "0" if s.per_category is not None else NA
    unrated = s.uncertain.n_unrated if s.uncertain is not None else 0
    return str(u.n_scored + u.n_excluded - unrated)


UNCERTAINTY_NOTE = (
    "The labels of a probabilistic snapshot come from posteriors: top-1 takes its label sets (the classes at or "
    "above the threshold) as certain; the expected top-1 averages top-1 over label sets sampled from the "
    "posteriors (each class present with its probability; an image whose sampled set is empty is left out of "
    "that draw), after Stutz et al., "
    '"Evaluating AI systems under uncertain ground truth" (2023). Its 95 % interval resamples the images and '
    "samples their labels in every draw, so it holds both the finite test set and the label noise; the interval "
    "of the labels alone shows how much of that width the labels cause."
)


UNCERTAINTY_LINE = (
    "label uncertainty (after Stutz et al. 2023): the expected top-1 over label sets sampled from the snapshot's "
    "posteriors; its 95 % interval resamples the images and samples their labels in every draw, so it covers both "
    "the finite test set and the label noise"
)


def ranking_table(ev: Evaluation) -> Table | None:
    """Top-1 and rank of each run under the first two references on the images every run scored under both, with
    95 % intervals of the ranks and of the places gained from one joint bootstrap of those images."""
    if ev.ranking is None:
        return None
    a, b = ev.references[0].name, ev.references[1].name
    header = ["run", f"top-1 % {a}", f"rank {a}", f"top-1 % {b}", f"rank {b}", "places gained"]
    intervals = {i.name: i for i in ev.rank_intervals}
    if intervals:
        header = [*header[:3], "95 % CI", *header[3:5], "95 % CI", header[5], "95 % CI", "moved in % of resamples"]
    rows = []
    for r in ev.ranking.rows:
        shift = f"{r.shift:+d}" if r.shift else "0"
        row = [r.name, pct(r.score_a), str(r.rank_a), pct(r.score_b), str(r.rank_b), shift]
        i = intervals.get(r.name)
        if i is not None:
            row = [*row[:3], rank_span(i.rank_a), *row[3:5], rank_span(i.rank_b), row[5],
                   rank_span(i.shift, signed=True), f"{100 * i.moved_share:.0f}"]  # fmt: skip
        rows.append(row)
    return header, rows


def failures_table(ev: Evaluation) -> Table | None:
    """Failed calls per run: the model's failures (scored as wrong) apart from infrastructure and set-up errors
    (never scored; `relabel.evaluation.failure_causes`)."""
    runs = [r for r in ev.runs if r.n_errors]
    if not runs:
        return None
    header = ["run", "protocol", "predictions", "model failures (wrong)", "infrastructure/set-up errors (left out)"]
    return header, [[r.name, r.protocol_label, str(r.n_predictions), str(r.n_failed), str(r.n_infrastructure_errors)]
                    for r in runs]  # fmt: skip


def published_table(ev: Evaluation) -> Table | None:
    """Published metrics (e.g. Shankar et al.'s), each beside the ReGT-style pooled top-1 on the same source."""
    if not ev.published:
        return None
    header = ["run", "metric", "source", "images scored", "skipped", "classes", "accuracy %", "95 % CI",
              "ReGT-style top-1 %", "its images"]  # fmt: skip
    rows = [
        [p.run, p.title, p.source, str(p.n_scored), str(p.n_skipped), str(p.n_classes), pct(p.accuracy),
         f"{pct(p.ci_low)}–{pct(p.ci_high)}" if p.ci_low is not None else NA,
         pct(p.regt_style.accuracy) if p.regt_style else NA, str(p.regt_style.n_scored) if p.regt_style else NA]
        for p in ev.published
    ]  # fmt: skip
    return header, rows


def category_table(ev: Evaluation) -> Table | None:
    """Top-1 % (scored images) per snapshot category, one row per run × snapshot reference."""
    scored = [s for s in ev.scores if s.per_category]
    if not scored:
        return None
    names = sorted({c for s in scored for c in s.per_category or {}})
    rows = [[s.run, s.reference, *(_category_cell((s.per_category or {}).get(c)) for c in names)] for s in scored]
    return ["run", "reference", *names], rows


def _category_cell(score: Score | None) -> str:
    if score is None:
        return NA
    return f"{pct(score.accuracy)} ({score.n_scored})" if score.n_scored else f"{NA} (0)"


def oop_table(ev: Evaluation) -> Table | None:
    runs = [r for r in ev.runs if r.oop is not None]
    if not runs:
        return None
    rows = [[r.name, r.protocol, str(r.oop.n_answered), str(r.oop.n_oop), pct(r.oop.rate), str(r.n_errors)]
            for r in runs if r.oop is not None]  # fmt: skip
    return ["run", "protocol", "answered", "out of prompt", "OOP %", "errors"], rows


def history_table(entries: Sequence[EvaluationHistoryEntry]) -> Table:
    """Top-1 % of each run (rows) under each reference version (columns: name@hash, oldest first); a later
    evaluation against the same version overwrites an earlier one."""
    versions: list[tuple[str, str]] = []
    cells: dict[tuple[str, tuple[str, str]], float | None] = {}
    runs: list[str] = []
    for e in entries:
        for (run, ref), value in e.top1.items():
            version = (ref, e.reference_hashes.get(ref, ""))
            if version not in versions:
                versions.append(version)
            if run not in runs:
                runs.append(run)
            cells[(run, version)] = value
    header = ["run", *(f"{ref}@{digest[:8]}" if digest else ref for ref, digest in versions)]
    rows = [[run, *(pct(cells.get((run, v))) for v in versions)] for run in runs]
    return header, rows


def history_list(entries: Sequence[EvaluationHistoryEntry]) -> Table:
    header = ["#", "kind", "created (UTC)", "tool", "references"]
    rows = [
        [str(e.id), e.kind, f"{e.created_at:%Y-%m-%d %H:%M:%S}", e.tool_version,
         ", ".join(f"{k}@{v[:8]}" for k, v in e.reference_hashes.items())]
        for e in entries
    ]  # fmt: skip
    return header, rows


def render_evaluation(ev: Evaluation) -> str:
    """The whole evaluation as terminal text: references, scores, ranking shift, categories, OOP, reliability."""
    stored = f"stored as evaluation #{ev.id}" if ev.id is not None else "not stored"
    parts = [f"dataset {ev.dataset!r}: {len(ev.runs)} run(s) × {len(ev.references)} reference(s), {stored}",
             *(f"warning: {w}" for w in ev.warnings), columns(references_table(ev), "  "),
             "top-1 counts the model's failures as wrong; infrastructure and set-up errors are left out",
             columns(scores_table(ev), "  ")]  # fmt: skip
    paired = paired_table(ev)
    if paired is not None:
        parts += [f"paired with {ev.references[0].name} on the images both score", columns(paired, "  ")]
    taken_apart = parts_table(ev)
    if taken_apart is not None:
        parts += [f"each paired difference taken apart (points; leniency + {ev.references[0].name} wrong + dropped "
                  "= Δ; the classes that gain and lose most: report.md)", columns(taken_apart, "  ")]  # fmt: skip
    ranking = ranking_table(ev)
    if ranking is not None and ev.ranking is not None:
        a, b = ev.references[0].name, ev.references[1].name
        parts += [
            f"ranking {a} -> {b} on the {ev.ranking_images} images every run scored under both: Kendall's "
            f"tau-b {num(ev.ranking.kendall_tau)}",
            columns(ranking, "  "),
        ]
    uncertain = uncertainty_table(ev)
    if uncertain is not None:
        parts += [UNCERTAINTY_LINE, columns(uncertain, "  ")]
    sensitivity = sensitivity_table(ev.label_sensitivity)
    if sensitivity is not None:
        parts += [SENSITIVITY_NOTE, *sensitivity_lines(ev.label_sensitivity), columns(sensitivity, "  ")]
    for title, table in (("published metrics", published_table(ev)), ("failed calls", failures_table(ev)),
                         ("per category (top-1 %, scored images)", category_table(ev)),
                         ("out-of-prompt answers", oop_table(ev))):  # fmt: skip
        if table is not None:
            parts += [title, columns(table, "  ")]
    parts += render_tasks(ev.tasks)
    if ev.reliability is not None:
        parts += render_reliability(ev.reliability)
    if ev.robustness:
        parts += ["measured in the latest robustness runs", columns(efficiency_table(ev.robustness), "  ")]
    return "\n".join(parts)


def render_robustness(summary: RobustnessSummary) -> str:
    """A robustness run as terminal text: the grid per reference, RR, and the efficiency measurements; every
    number computed before (`robustness_summary.build_robustness_summary`)."""
    r = summary.result
    stored = f"stored as robustness run #{r.id}" if r.id is not None else "not stored"
    asked = f" asked with protocol {protocol_name(r)}" if protocol_name(r) != "topk" else ""
    asked += f" ({line})" if (line := distractors_line(r.protocol)) else ""
    parts = [f"{r.model}{asked} on {r.n_images} image(s) of {r.dataset!r} in {r.seconds:.1f} s, {stored}; "
             f"model failures {r.failed} (scored as wrong), failures left out {r.errors}",
             *(f"warning: {w}" for w in r.warnings)]  # fmt: skip
    for ref, numbers in summary.references.items():
        parts += [f"top-1 % against {ref} ({retention_and_ce_line(numbers.retention, numbers.corruption)})",
                  columns(robustness_table(summary, ref), "  ")]  # fmt: skip
        section = ce_section(numbers.corruption, r.perturbations)
        parts += [f"{section[0]} (= 100 %; lower is better)", columns(section[2], "  ")] if section else []
    parts += ["efficiency", columns(efficiency_table([r]), "  ")]
    if r.efficiency.flops_per_image is None:
        parts.append(f"  FLOPs {r.efficiency.flops_note}")
    return "\n".join(parts)


def protocol_name(r: RobustnessResult) -> str:
    """How the model was read: topk (ranked scores) or the generative protocol that asked it."""
    return str(r.protocol.get("protocol", "topk"))


def render_history(entries: Sequence[EvaluationHistoryEntry]) -> str:
    """Stored evaluations, oldest first, then each run's top-1 under each reference version."""
    if not entries:
        return "no stored evaluation yet; run `relabel evaluate`"
    parts = ["stored evaluations (oldest first)", columns(history_list(entries), "  ")]
    scores = [e for e in entries if e.kind == "scores"]
    if scores:
        parts += ["top-1 % by run and reference version (name@content hash; the latest evaluation of each)",
                  columns(history_table(scores), "  ")]  # fmt: skip
    robust = [e for e in entries if e.kind == "robustness"]
    if robust:
        rows = [[f"#{e.id}", model, ref, pct(v), num(e.retention.get(ref))] for e in robust for (model, ref), v in
                e.top1.items()]  # fmt: skip
        parts += ["robustness runs", columns((["#", "model", "reference", "clean top-1 %", "RR"], rows), "  ")]
    return "\n".join(parts)
