"""Import model predictions made elsewhere, as a model run of the workspace.

Formats (`PREDICTION_FORMATS`): CSV and JSONL keyed by image, and NPY arrays whose rows follow a stated image
order. A row may carry a failure (`status` error with a `reason`): it is stored as an error, never as an answer.
Scores must be finite: a NaN or an infinity (in any format) is refused with its row, since it would rank classes
arbitrarily and cannot be stored as JSON.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func
from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from db.engine import session_scope
from db.enums import PredictionStatus
from db.models import Annotation, Image, ModelRun, Prediction, stored_id
from relabel import __version__
from relabel.common.collector import cyclic_gc_paused
from relabel.common.errors import ConflictError, InputError, brief, unknown_name
from relabel.common.import_formats import ImportFormat
from relabel.common.stages import stage
from relabel.common.tables import LABEL_SEPARATORS, TableSchema, read_records
from relabel.common.textfiles import parse_decimal, read_json, read_lines
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import dataset_vocabulary, get_dataset, image_index
from relabel.sources.bulk import matched_rows, replace_existing, store_run
from relabel.sources.row_store import store_predictions
from relabel.sources.rows import PredictionRow, image_key, resolve_labels, resolve_rows

if TYPE_CHECKING:  # numpy is imported by the array formats alone: a CSV or JSONL import does without it
    from relabel.sources.score_vectors import ScoreMatrix

NPY_TOP_K = 5  # a score matrix is stored as its top-5 classes and their scores


STATUSES = {s.value: s for s in PredictionStatus}
PREDICTION_TABLE = TableSchema(
    "a prediction table",
    required=(("image",),),
    optional=(("labels", "label"), ("scores", "score"), ("status",), ("reason",), ("raw_output", "raw")),
)


def parse_scores(value: object, where: str) -> list[float] | None:
    """Scores of a row ('|' or ';' between several, or a JSON list), or None; each must be a finite number.

    A JSON number is taken as it is (the JSON reader has refused NaN, infinities and absurd lengths); text must
    be an ASCII decimal (`parse_decimal`): float() alone would take "1_0" as 10 and a fullwidth "０.５" as 0.5.
    """
    if value is None or value == "":
        return None
    if type(value) is list and all(type(x) is float and math.isfinite(x) for x in value):
        return value  # a JSON list of scores, as the loop below would copy it
    items = LABEL_SEPARATORS.split(value) if isinstance(value, str) else value if isinstance(value, list) else [value]
    scores = []
    for item in items:
        if isinstance(item, str):
            scores.append(parse_decimal(item, where, "score"))
        elif isinstance(item, int | float) and not isinstance(item, bool) and math.isfinite(item):
            scores.append(float(item))
        else:
            raise InputError(f"{where}: score {brief(item, 40)} is not a finite number (NaN and infinity are not)")
    return scores


def _prediction_row(row: dict[str, Any], vocab: Vocabulary, where: str) -> PredictionRow:
    key = image_key(row, where)
    status_text = str(row.get("status") or "ok").lower()
    status = STATUSES.get(status_text)
    if status is None:
        raise InputError(f"{where}: status {brief(status_text, 40)} is not one of ok, error")
    classes = resolve_labels(row.get("labels", row.get("label")), vocab, where)
    scores = parse_scores(row.get("scores", row.get("score")), where)
    if scores is not None and len(scores) != len(classes):
        raise InputError(f"{where}: {len(scores)} score(s) for {len(classes)} label(s)")
    if status is PredictionStatus.ok and not classes:
        raise InputError(f"{where}: no label (a failed prediction needs status 'error' and a reason)")
    raw = row.get("raw_output", row.get("raw", ""))
    return PredictionRow(
        key,
        classes,
        scores,
        where=where,
        status=status,
        reason=str(row.get("reason") or ""),
        raw_output=str(raw or ""),
    )


def _parse_records(fmt: str) -> Callable[[Path, Vocabulary, list[str] | None], Iterable[PredictionRow]]:
    def parse(path: Path, vocab: Vocabulary, order: list[str] | None) -> Iterable[PredictionRow]:
        for where, row in read_records(path, PREDICTION_TABLE, fmt=fmt):
            yield _prediction_row(row, vocab, where)

    return parse


def parse_npy(path: Path, vocab: Vocabulary, order: list[str] | None) -> Iterable[PredictionRow]:
    """(N,) ints: top-1; (N, K) ints: ranked top-K; (N, C) floats with C classes: scores, stored as top-5."""
    import numpy as np

    from relabel.common.arrays import load_array

    if order is None:
        raise InputError(f"{path}: an NPY array has no image keys; pass --order FILE or --order sorted")
    arr = load_array(path)
    if len(arr) != len(order):
        raise InputError(f"{path}: shape {arr.shape} does not match the {len(order)} images of the stated order")
    name = path.name
    integral = arr.dtype.kind in "iu" or (arr.ndim == 1 and bool(np.all(arr == np.round(arr))))
    if arr.ndim == 1 and not integral:
        raise InputError(
            f"{path}: a 1-D array must hold class indices (integers), got {arr.dtype} values like {arr[:3]}"
        )
    if integral:
        ranked = arr.reshape(len(arr), -1).astype(np.int64)
        for i, key in enumerate(order):
            yield PredictionRow(key, ranked[i].tolist(), where=f"{name} row {i}")
        return
    if arr.shape[1] != len(vocab):
        raise InputError(f"{path}: a score matrix needs {len(vocab)} columns (one per class), has {arr.shape[1]}")
    k = min(NPY_TOP_K, arr.shape[1])
    top = np.argsort(-arr, axis=1, kind="stable")[:, :k]
    top_scores = np.take_along_axis(arr, top, axis=1)
    for i, key in enumerate(order):
        yield PredictionRow(key, top[i].tolist(), [round(float(x), 6) for x in top_scores[i]], where=f"{name} row {i}")


def parse_npz(path: Path, vocab: Vocabulary, order: list[str] | None) -> Iterable[PredictionRow]:
    """An .npz of score vectors (`relabel.sources.score_vectors`): `scores` (N, C), `ids`, optional `classes`;
    top-5 kept."""
    from relabel.sources.score_vectors import read_score_matrix

    return score_rows(read_score_matrix(path, vocab, order), path.name)


def score_rows(matrix: ScoreMatrix, name: str) -> list[PredictionRow]:
    """A row per image of a score matrix: its top-5 classes and their scores."""
    import numpy as np

    from relabel.sources.score_vectors import top_k

    top, top_scores = top_k(matrix.scores, NPY_TOP_K)
    rounded = np.round(top_scores.astype(np.float64), 6).tolist()
    return [
        PredictionRow(key, classes, scores, where=f"{name} row {i}")
        for i, (key, classes, scores) in enumerate(zip(matrix.keys, top.tolist(), rounded))
    ]


PredictionReader = Callable[[Path, Vocabulary, list[str] | None], Iterable[PredictionRow]]  # (path, vocab, order)
PREDICTION_FORMATS: dict[str, ImportFormat[PredictionReader]] = {
    "csv": ImportFormat(_parse_records("csv"), "image, label or labels (ranked), scores; status, reason"),
    "jsonl": ImportFormat(_parse_records("jsonl"), "one object a line: image, labels (ranked), scores; status, reason"),
    "npy": ImportFormat(parse_npy, "rows in --order: top-1 ints, ranked top-K ints, or N x C scores (top-5 kept)"),
    "npz": ImportFormat(parse_npz, "score vectors: scores (N x C), ids (N image keys), optional classes"),
}
SCORE_FORMATS = ("npy", "npz")  # formats that can carry full score vectors (`keep_scores`)


def read_order(spec: str | None, sorted_paths: Callable[[], list[str]]) -> list[str] | None:
    """Image keys in array-row order: 'sorted' (the dataset's paths, sorted: `sorted_paths()`) or a file (JSON list
    or one per line)."""
    if spec is None:
        return None
    if spec == "sorted":
        return sorted_paths()
    p = Path(spec)
    try:
        exists = p.is_file()
    except (OSError, ValueError):  # a name too long for the file system, or holding a NUL
        exists = False
    if not exists:
        raise InputError(f"order file {brief(spec)} does not exist (use a file of image keys, or 'sorted')")
    if p.suffix.lower() != ".json":
        return [line.strip() for _, line in read_lines(p)]
    keys = read_json(p)
    if not isinstance(keys, list):
        raise InputError(f"{p}: expected a JSON list of image keys")
    bad = next((i for i, k in enumerate(keys) if not isinstance(k, str) or not k.strip()), None)
    if bad is not None:
        raise InputError(f"{p}: entry {bad} is {brief(keys[bad], 40)}; an image key is a path, file name or stem")
    return keys


def _read_matrix(path: Path, vocab: Vocabulary, keys: list[str] | None) -> ScoreMatrix:
    from relabel.sources.score_vectors import read_score_matrix

    return read_score_matrix(path, vocab, keys)


def _keep_scores(workspace: Path, matrix: ScoreMatrix, ids: list[int], image_ids: list[int]) -> tuple[str, str, bool]:
    """Store the score vectors of the rows matched to images (`ids[i]` >= 0; `image_ids` theirs, in row order)
    under the workspace (`relabel.sources.score_vectors.write_scores`): (the file, its sha256, whether it is new)."""
    import numpy as np

    from relabel.sources.score_vectors import write_scores

    kept = np.flatnonzero(np.array(ids, dtype=np.int64) >= 0)
    scores = matrix.scores if len(kept) == len(ids) else matrix.scores[kept]
    return write_scores(workspace, np.array(image_ids, dtype=np.int64), scores)


def _sorted_paths(session: Session, dataset_id: int) -> list[str]:
    return sorted(session.exec(select(col(Image.path)).where(col(Image.dataset_id) == dataset_id)).all())


def refuse_if_cited(session: Session, run: ModelRun) -> None:
    """Refuse to replace `run` once decisions cite its predictions as the suggestion their annotator was shown.

    Decisions are an append-only record: which suggestion an annotator saw and whether they took it is evidence
    (the decision log reads the run's name through it). Deleting the predictions would break that reference, and
    setting it to NULL would rewrite history; so the old run stays, and the new file goes in under another name.
    """
    cited = session.exec(
        select(func.count())
        .select_from(Annotation)
        .join(Prediction, col(Prediction.id) == col(Annotation.suggestion_id))
        .where(col(Prediction.run_id) == run.id)
    ).one()
    if cited:
        raise ConflictError(
            f"run {run.name!r} cannot be replaced: {cited} annotator decision(s) cite its predictions as the "
            f"suggestion they were shown, and decisions are never rewritten; import the file under another name "
            f"(e.g. --run {run.name}-2); nothing written"
        )


@dataclass
class RunReport:
    run: str
    ok: int
    errors: int
    skipped_unknown: int


def import_predictions(
    engine: Engine,
    path: Path,
    *,
    run: str,
    model: str | None = None,
    protocol: str = "imported",
    fmt: str | None = None,
    order: str | None = None,
    dataset: str | None = None,
    skip_unknown: bool = False,
    replace: bool = False,
    keep_scores: Path | None = None,
    show_progress: bool = False,
) -> RunReport:
    """Store a prediction file as model run `run`. Validates every row first; all or nothing.

    `replace` swaps an existing run of that name for the file, unless decisions cite its predictions
    (`refuse_if_cited`). `keep_scores` (the workspace folder) also stores an .npy/.npz file's full score vectors
    there (`relabel.sources.score_vectors`), named in the run's params. `show_progress`: each step on stderr
    (`relabel.common.stages`).
    """
    fmt = fmt or {"ndjson": "jsonl"}.get(path.suffix.lower().lstrip("."), path.suffix.lower().lstrip("."))
    if fmt not in PREDICTION_FORMATS:
        raise unknown_name("prediction format", fmt, list(PREDICTION_FORMATS))
    if not path.is_file():
        raise InputError(f"prediction file {str(path)!r} does not exist")
    if keep_scores is not None and fmt not in SCORE_FORMATS:
        raise InputError(f"{path}: full score vectors come in an .npy or .npz score matrix, not {fmt}; nothing written")
    params: dict[str, Any] = {"format": fmt, "order": order}
    created: str | None = None
    replaced: str | None = None
    try:
        # 50,000 rows make some 10^5 small objects, none in a reference cycle: full collections over the growing
        # heap found nothing and took a fifth of the import's CPU time
        with cyclic_gc_paused(), session_scope(engine) as s:
            ds = get_dataset(s, dataset)
            vocab = dataset_vocabulary(s, ds)
            with stage(f"reading {path.name}", enabled=show_progress):
                keys = read_order(order, lambda: _sorted_paths(s, stored_id(ds)))
                matrix = _read_matrix(path, vocab, keys) if keep_scores is not None else None
                rows = (
                    score_rows(matrix, path.name) if matrix else list(PREDICTION_FORMATS[fmt].read(path, vocab, keys))
                )
            with stage(f"matching {len(rows):,} rows to the images of {ds.name!r}", enabled=show_progress):
                index = image_index(s, ds)
                ids, skipped = resolve_rows(rows, index, len(vocab), skip_unknown=skip_unknown, what=str(path))
            old = s.exec(select(ModelRun).where(col(ModelRun.dataset_id) == ds.id, col(ModelRun.name) == run)).first()
            if old is not None:
                what = f"dataset {ds.name!r} already has a run {run!r}"
                if replace:
                    refuse_if_cited(s, old)
                replaced = (old.params or {}).get("scores_file")
                replace_existing(s, old, delete(Prediction).where(col(Prediction.run_id) == old.id), what, replace)
            matched = list(matched_rows(rows, ids, path.name))
            if matrix is not None and keep_scores is not None:
                with stage(f"keeping {matrix.scores.shape[1]:,} scores per image", enabled=show_progress):
                    relative, digest, fresh = _keep_scores(keep_scores, matrix, ids, [i for _, i in matched])
                    created = relative if fresh else None
                shape = [len(matched), len(vocab)]
                params |= {"scores_file": relative, "scores_sha256": digest, "scores_shape": shape}
            with stage(f"storing {len(matched):,} predictions as run {run!r}", enabled=show_progress):
                stored = store_run(
                    s,
                    dataset_id=stored_id(ds),
                    name=run,
                    model=model,
                    protocol=protocol,
                    params=params,
                    origin=str(path.resolve()),
                    tool_version=__version__,
                    predictions=(),
                )
                store_predictions(s, stored_id(stored), matched)
                s.commit()
    except BaseException:
        if created is not None and keep_scores is not None:
            from relabel.sources.score_vectors import discard_scores

            discard_scores(keep_scores, created)  # nothing of the failed import stays behind
        raise
    if keep_scores is not None and replaced and replaced != params.get("scores_file"):
        from relabel.sources.score_vectors import discard_scores

        with Session(engine) as s:
            discard_scores(keep_scores, replaced, s)
    n_err = sum(1 for r, _ in matched if r.status is PredictionStatus.error)
    return RunReport(run, len(matched) - n_err, n_err, skipped)
