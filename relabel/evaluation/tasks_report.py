"""The report's sections for the tasks beyond classification (presence probes, captions, retrieval): what each
table measures, the table, and its figure. `relabel.evaluation.report` renders the tables as Markdown and writes
the figures; the text here is fixed (no user-chosen name), the tables are escaped where they are rendered."""

from __future__ import annotations

from collections.abc import Callable

from relabel.evaluation import task_plots
from relabel.evaluation.cells import Table
from relabel.evaluation.tasks import TaskTables
from relabel.evaluation.tasks_text import chair_table, presence_table, retrieval_table

FIGURES = {"presence": "presence.png", "chair": "chair.png", "retrieval": "retrieval.png"}

TASKS_NOTE = (
    "Runs of the presence (pope), caption and retrieval protocols are scored here, not as classes. Each run is "
    "scored against the first reference alone, and against every other reference side by side with it on the "
    "images both label. Reliability (P, CDC, RR, E) is computed for runs that choose classes only: RR needs the "
    "run's task asked again under perturbation, which `relabel evaluate robustness` does for classification "
    "protocols alone, so a per-task reliability table would hold P and nothing else."
)
PRESENCE_NOTE = (
    "After POPE (Li et al. 2023). Per sampling (random, popular, adversarial): the probes of the image's reference "
    "classes and of that sampling's negatives. Accuracy = right answers / probes; precision = yes on a present "
    "class / yes answers; recall = yes on a present class / present-class probes; F1 their harmonic mean; "
    "yes-ratio = yes answers / probes. A reply neither yes nor no counts as wrong. *true under b*: yes answers "
    "that are hallucinations under the first reference and objects under this row's; Δ accuracy = this row's "
    "accuracy − the first reference's on the same images, with a 95 % paired bootstrap interval over images."
)
CHAIR_NOTE = (
    "After CHAIR (Rohrbach et al. 2018). CHAIR-i = mentions of a class outside the image's set / mapped mentions; "
    "CHAIR-s = captions with at least one such mention / captions; coverage = the set's classes mentioned / the "
    "set's classes. Mentions the mapper cannot place confidently are counted apart (*unmapped*). An ImageNet label "
    "set is not an exhaustive object list: a true object it does not list counts as a hallucination, so these "
    "rates are upper bounds, and a richer set (a ReGT snapshot) can only lower them. *true under b*: mentions "
    "hallucinated under the first reference whose class this row's reference lists."
)
RETRIEVAL_NOTE = (
    "Text → image: one query per class, 'a photo of a {class}.', ranked by cosine similarity over the run's "
    "embedded images that the reference labels; an image is relevant when its set holds the class. R@K = queries "
    "with a relevant image in the top K / queries with one (as CLIP_benchmark counts it); mAP = the mean over those "
    "queries of average precision, (1/R) Σ over the R relevant images of the precision at that image. Image → text: "
    "R@K = images with one of their classes among the top K queries / images. A later reference's row is on the "
    "images both references label, with the first reference's mAP there and Δ mAP = this row's mAP − that one; "
    "its 95 % interval resamples the classes with a relevant image under either reference, a class's average "
    "precision under both together."
)


def task_figures(tables: TaskTables | None) -> dict[str, Callable[[], bytes | None]]:
    """The task figures to write beside a report, by file name (each drawn only when asked)."""
    return {
        FIGURES["presence"]: lambda: task_plots.presence_plot(tables),
        FIGURES["chair"]: lambda: task_plots.chair_plot(tables),
        FIGURES["retrieval"]: lambda: task_plots.retrieval_plot(tables),
    }


def task_sections(tables: TaskTables | None, figures: set[str]) -> list[str | Table]:
    """The report's task sections, in order: Markdown text (fixed, safe) and tables (to be escaped when rendered);
    `figures` are the PNG names written beside the report."""
    if tables is None:
        return []
    parts: list[str | Table] = ["## Tasks beyond classification\n\n" + TASKS_NOTE]
    sections = (
        ("Presence probes", PRESENCE_NOTE, tables.presence, presence_table, "presence"),
        ("Caption hallucination", CHAIR_NOTE, tables.chair, chair_table, "chair"),
        ("Retrieval", RETRIEVAL_NOTE, tables.retrieval, retrieval_table, "retrieval"),
    )
    for title, note, rows, table, figure in sections:
        if not rows:
            continue
        parts += [f"### {title}\n\n{note}", table(tables)]
        if FIGURES[figure] in figures:
            parts.append(f"![{title}]({FIGURES[figure]})")
    left_out = [[run, f"{n:,}"] for run, n in tables.n_left_out.items() if n]
    if left_out:
        parts += ["Images left out of a task run's scores (no answer, for reasons of the infrastructure or set-up):",
                  (["run", "images left out"], left_out)]  # fmt: skip
    return parts
