"""The presence (POPE), caption (CHAIR) and retrieval tables of `relabel.evaluation.tasks` as terminal text."""

from __future__ import annotations

from relabel.evaluation.cells import NA, Table, columns, pct, points, points_ci
from relabel.evaluation.tasks import Comparison, TaskTables
from relabel.evaluation.tasks_retrieval import MapDifference

PRESENCE_TITLE = (
    "presence probes, after POPE (Li et al. 2023; %): per sampling, the image's reference classes and that sampling's "
    "negatives; an unparseable reply counts as wrong; a row under another reference is on the images both label"
)
CHAIR_TITLE = (
    "caption hallucination, after CHAIR (Rohrbach et al. 2018; %): CHAIR-i hallucinated / mapped mentions, CHAIR-s "
    "captions with one / captions, coverage of the reference classes; unmapped mentions counted apart"
)
RETRIEVAL_TITLE = (
    "retrieval (%): text → image, one query per class 'a photo of a {class}.', an image relevant when its set holds "
    "the class: R@K (a relevant image in the top K) and mAP over the queries with one; image → text R@K over the "
    "class queries; a row under another reference is on the images both label, with the first one's mAP there "
    "and Δ mAP, its interval a bootstrap of the classes"
)
EXHAUSTIVE_NOTE = (
    "an ImageNet label set is not an exhaustive object list: a true object it does not list counts as a "
    "hallucination, so these rates are upper bounds; 'true under b' counts the yes answers / mentions "
    "hallucinated under the first reference that the other one lists"
)


def render_tasks(tables: TaskTables | None) -> list[str]:
    """The task sections of `relabel evaluate`'s output (none without task runs)."""
    if tables is None:
        return []
    parts: list[str] = []
    if tables.presence:
        parts += [PRESENCE_TITLE, columns(presence_table(tables), "  ")]
    if tables.chair:
        parts += [CHAIR_TITLE, columns(chair_table(tables), "  ")]
    if tables.retrieval:
        parts += [RETRIEVAL_TITLE, columns(retrieval_table(tables), "  ")]
    if tables.presence or tables.chair:
        parts.append(EXHAUSTIVE_NOTE)
    parts += [
        f"run {run!r}: {n:,} image(s) got no answer (infrastructure or set-up) and are left out of its task scores"
        for run, n in tables.n_left_out.items()
        if n
    ]
    return parts


def presence_table(tables: TaskTables) -> Table:
    header = ["run", "sampling", "reference", "images", "probes", "accuracy", "precision", "recall", "F1", "yes-ratio",
              "unparseable", "true under b", "Δ accuracy", "95 % interval"]  # fmt: skip
    rows = []
    for r in tables.presence:
        s = r.score
        rows.append([r.run, r.sampling, r.reference, str(r.n_images), str(s.n_scored), pct(s.accuracy),
                     pct(s.precision), pct(s.recall), pct(s.f1), pct(s.yes_ratio),
                     str(s.n_failed_positive + s.n_failed_negative), *_versus(r.versus)])  # fmt: skip
    return header, rows


def chair_table(tables: TaskTables) -> Table:
    header = ["run", "reference", "captions", "mentions", "CHAIR-i", "CHAIR-s", "coverage", "unmapped", "failed",
              "true under b"]  # fmt: skip
    rows = []
    for r in tables.chair:
        s = r.score
        rows.append([r.run, r.reference, str(s.n_captions), str(s.n_mentions), pct(s.chair_i), pct(s.chair_s),
                     pct(s.coverage), str(s.n_unmapped), str(s.n_failed),
                     str(r.versus.hallucinated_a_true_b) if r.versus else NA])  # fmt: skip
    return header, rows


def retrieval_table(tables: TaskTables) -> Table:
    header = ["run", "reference", "images", "queries", "T→I R@1", "R@5", "R@10", "mAP", "I→T R@1", "R@5", "R@10",
              "unreadable", "mAP of a", "Δ mAP", "95 % interval"]  # fmt: skip
    rows = []
    for r in tables.retrieval:
        t, i = r.t2i_recall, r.i2t_recall
        rows.append([r.run, r.reference, str(r.n_images), str(r.n_queries), pct(t.get(1)), pct(t.get(5)),
                     pct(t.get(10)), pct(r.t2i_map), pct(i.get(1)), pct(i.get(5)), pct(i.get(10)),
                     str(r.n_unreadable), *_map_versus(r.versus)])  # fmt: skip
    return header, rows


def _map_versus(c: MapDifference | None) -> list[str]:
    if c is None:
        return [NA, NA, NA]
    return [pct(c.map_a), points(c.difference), points_ci(c.ci_low, c.ci_high)]


def _versus(c: Comparison | None) -> list[str]:
    if c is None:
        return [NA, NA, NA]
    return [str(c.hallucinated_a_true_b), points(c.difference), points_ci(c.ci_low, c.ci_high)]
