"""The tables of an evaluation as rows of plain strings, and their rendering as aligned terminal text.

One builder per table gives (header, rows); the terminal aligns them (`columns`) and the Markdown report escapes
and pipes them (`report.md_table`), so both show the same numbers. Cells hold untrusted text (run, model and
class names) unescaped: each renderer makes it safe for its medium.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from evaluator.reliability import robustness_retention
from evaluator.scoring import Score
from relabel.evaluation.results import ArgusTable, Evaluation, RobustnessResult
from relabel.evaluation.storage import HistoryEntry

Table = tuple[list[str], list[list[str]]]
NA = "—"


def pct(value: float | None, digits: int = 2) -> str:
    """A share in [0, 1] as a percentage; NA for None or NaN."""
    return NA if value is None or not math.isfinite(value) else f"{100 * value:.{digits}f}"


def num(value: float | None, digits: int = 3) -> str:
    return NA if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def ci(score: Score) -> str:
    if score.ci_low is None or score.ci_high is None or not math.isfinite(score.ci_low):
        return NA
    return f"{pct(score.ci_low)}–{pct(score.ci_high)}"


def columns(table: Table, indent: str = "") -> str:
    """Aligned plain-text columns; numbers (cells starting with a digit or NA) are right-aligned."""
    header, rows = table
    widths = [max(len(c) for c in col) for col in zip(header, *rows)]
    numeric = [
        any(r[i][:1].isdigit() for r in rows) and all(r[i][:1].isdigit() or r[i] in (NA, "") for r in rows)
        for i in range(len(header))
    ]

    def line(cells: Sequence[str]) -> str:
        parts = [c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))]
        return (indent + "  ".join(parts)).rstrip()

    return "\n".join([line(header), *(line(r) for r in rows)])


def references_table(ev: Evaluation) -> Table:
    header = ["reference", "kind", "content hash", "images", "labelled", "multi-label", "categories"]
    rows = [
        [r.name, r.kind, r.content_hash[:12], str(r.n_images), str(r.n_labelled), "yes" if r.multi_label else "no",
         ", ".join(f"{k} {v}" for k, v in (r.categories or {}).items()) or NA]
        for r in ev.references
    ]  # fmt: skip
    return header, rows


def scores_table(ev: Evaluation) -> Table:
    """Top-1 (%, with its 95 % CI), top-5 and mean per-class accuracy of each run against each reference."""
    header = ["run", "protocol", "reference", "predicted", "scored", "top-1 %", "95 % CI", "top-5 %", "per-class %",
              "errors", "excluded"]  # fmt: skip
    protocol = {r.name: r.protocol for r in ev.runs}
    rows = []
    for s in ev.scores:
        rows.append(
            [s.run, protocol[s.run], s.reference, str(s.n_predicted), str(s.top1.n_scored), pct(s.top1.accuracy),
             ci(s.top1), pct(s.top5.accuracy) if s.top5 else NA, pct(s.mean_per_class), str(s.top1.n_errors),
             str(s.top1.n_excluded)]
        )  # fmt: skip
    return header, rows


def ranking_table(ev: Evaluation) -> Table | None:
    if ev.ranking is None:
        return None
    a, b = ev.references[0].name, ev.references[1].name
    header = ["run", f"top-1 % {a}", f"rank {a}", f"top-1 % {b}", f"rank {b}", "places gained"]
    rows = [
        [r.name, pct(r.score_a), str(r.rank_a), pct(r.score_b), str(r.rank_b), f"{r.shift:+d}" if r.shift else "0"]
        for r in ev.ranking.rows
    ]
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


def argus_table(table: ArgusTable) -> Table:
    header = ["model", "P", "CDC", "RR", "E", "overall", "rank by P", "rank by overall", "places gained"]
    rows = []
    for r in table.rows:
        shift = NA if r.rank_by_capability is None else f"{r.rank_by_capability - (r.rank_by_overall or 0):+d}"
        rows.append(
            [r.model, num(r.capability), num(r.consistency), num(r.robustness), num(r.efficiency), num(r.overall),
             str(r.rank_by_capability or NA), str(r.rank_by_overall or NA), shift.replace("+0", "0")]
        )  # fmt: skip
    return header, rows


def weights_line(table: ArgusTable) -> str:
    return ", ".join(f"{k}={v:g}" for k, v in table.weights.items())


def robustness_table(result: RobustnessResult, reference: str) -> Table:
    """Top-1 % per perturbation (rows) and severity (columns), the clean score first; a text perturbation's row
    says what it changed, e.g. "typo (class names)"."""
    header = ["perturbation", "clean", *(f"s{s}" for s in result.severities), "RR"]
    base = result.clean[reference].accuracy
    clean = pct(base)
    rows = []
    for name, values in zip(result.perturbations, result.grid[reference]):
        label = f"{name} ({result.text_target})" if name in result.text_perturbations else name
        rows.append([label, clean, *(pct(v) for v in values), num(_retention(base, values))])
    rows.append(["(all)", clean, *([""] * len(result.severities)), num(result.retention[reference])])
    return header, rows


def _retention(clean: float, values: Sequence[float]) -> float | None:
    """RR over one perturbation's severities (the table's last column); None when a score is missing."""
    if not math.isfinite(clean) or not all(math.isfinite(v) for v in values):
        return None
    return robustness_retention(clean, list(values))


def efficiency_table(results: Sequence[RobustnessResult]) -> Table:
    header = ["model", "device", "batch", "p50 ms", "p95 ms", "images/s", "peak RSS MiB", "CUDA peak MiB",
              "parameters M", "GFLOPs/image"]  # fmt: skip
    rows = []
    for r in results:
        e = r.efficiency
        rows.append(
            [r.model, e.device, str(e.batch_size or NA), _scaled(e.latency_p50_s, 1e3), _scaled(e.latency_p95_s, 1e3),
             num(e.throughput_per_s, 1), _scaled(e.peak_rss_bytes, 2**-20, 0), _scaled(e.cuda_peak_bytes, 2**-20, 0),
             _scaled(e.n_parameters, 1e-6), _scaled(e.flops_per_image, 1e-9, 3)]
        )  # fmt: skip
    return header, rows


def _scaled(value: float | None, factor: float, digits: int = 2) -> str:
    return NA if value is None else f"{value * factor:.{digits}f}"


def history_table(entries: Sequence[HistoryEntry]) -> Table:
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


def history_list(entries: Sequence[HistoryEntry]) -> Table:
    header = ["#", "kind", "created (UTC)", "tool", "references"]
    rows = [
        [str(e.id), e.kind, f"{e.created_at:%Y-%m-%d %H:%M:%S}", e.tool_version,
         ", ".join(f"{k}@{v[:8]}" for k, v in e.reference_hashes.items())]
        for e in entries
    ]  # fmt: skip
    return header, rows


def render_evaluation(ev: Evaluation) -> str:
    """The whole evaluation as terminal text: references, scores, ranking shift, categories, OOP, ARGUS."""
    stored = f"stored as evaluation #{ev.id}" if ev.id is not None else "not stored"
    parts = [f"dataset {ev.dataset!r}: {len(ev.runs)} run(s) × {len(ev.references)} reference(s), {stored}",
             columns(references_table(ev), "  "), columns(scores_table(ev), "  ")]  # fmt: skip
    ranking = ranking_table(ev)
    if ranking is not None and ev.ranking is not None:
        a, b = ev.references[0].name, ev.references[1].name
        parts += [f"ranking {a} -> {b}: Kendall's tau-b {num(ev.ranking.kendall_tau)}", columns(ranking, "  ")]
    for title, table in (("per category (top-1 %, scored images)", category_table(ev)),
                         ("out-of-prompt answers", oop_table(ev))):  # fmt: skip
        if table is not None:
            parts += [title, columns(table, "  ")]
    if ev.argus is not None:
        parts += [f"reliability (ARGUS), weights {weights_line(ev.argus)}", columns(argus_table(ev.argus), "  ")]
        parts += [f"  note: {n}" for n in ev.argus.notes]
    if ev.robustness:
        parts += ["measured in the latest robustness runs", columns(efficiency_table(ev.robustness), "  ")]
    return "\n".join(parts)


def render_robustness(r: RobustnessResult) -> str:
    """A robustness run as terminal text: the grid per reference, RR, and the efficiency measurements."""
    stored = f"stored as robustness run #{r.id}" if r.id is not None else "not stored"
    asked = f" asked with protocol {protocol_name(r)}" if protocol_name(r) != "topk" else ""
    parts = [f"{r.model}{asked} on {r.n_images} image(s) of {r.dataset!r} in {r.seconds:.1f} s, {stored}; "
             f"failed outputs {r.errors}"]  # fmt: skip
    for ref in r.grid:
        parts += [f"top-1 % against {ref} (RR {num(r.retention[ref])})", columns(robustness_table(r, ref), "  ")]
    parts += ["efficiency", columns(efficiency_table([r]), "  ")]
    if r.efficiency.flops_per_image is None:
        parts.append(f"  FLOPs {r.efficiency.flops_note}")
    return "\n".join(parts)


def protocol_name(r: RobustnessResult) -> str:
    """How the model was read: topk (ranked scores) or the generative protocol that asked it."""
    return str(r.protocol.get("protocol", "topk"))


def render_history(entries: Sequence[HistoryEntry]) -> str:
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
