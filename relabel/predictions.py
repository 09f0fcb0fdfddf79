"""Import model predictions made elsewhere, as a model run of the workspace.

Formats (`PREDICTION_FORMATS`): CSV and JSONL keyed by image, and NPY arrays whose rows follow a stated image
order. A row may carry a failure (`status` error with a `reason`): it is stored as an error, never as an answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from sqlalchemy import delete, insert
from sqlalchemy.engine import Engine
from sqlmodel import select

from db.engine import session_scope
from db.enums import PredictionStatus
from db.models import Image, ModelRun, Prediction
from relabel import __version__
from relabel.errors import InputError, unknown_name
from relabel.sources import LabelRow, drop_for_reimport, resolve_rows, split_labels
from relabel.tables import read_records
from relabel.vocabulary import Vocabulary
from relabel.workspace import dataset_vocabulary, get_dataset, image_index

NPY_TOP_K = 5  # a score matrix is stored as its top-5 classes and their scores


@dataclass
class PredictionRow(LabelRow):
    status: PredictionStatus = PredictionStatus.ok
    reason: str = ""
    raw_output: str = ""


def _floats(value: object, where: str) -> list[float] | None:
    tokens = split_labels(value)
    try:
        return [float(t) for t in tokens] if tokens else None
    except ValueError:
        raise InputError(f"{where}: scores must be numbers, got {value!r}") from None


def _prediction_row(row: dict, vocab: Vocabulary, where: str) -> PredictionRow:
    if not isinstance(row, dict) or not row.get("image"):
        raise InputError(f"{where}: expected 'image' and 'label' or 'labels' (ranked, best first)")
    status_text = str(row.get("status") or "ok").lower()
    if status_text not in {s.value for s in PredictionStatus}:
        raise InputError(f"{where}: status {status_text!r} is not one of ok, error")
    status = PredictionStatus(status_text)
    try:
        classes = [vocab.resolve(t) for t in split_labels(row.get("labels", row.get("label")))]
    except InputError as exc:
        raise InputError(f"{where}: {exc}") from None
    scores = _floats(row.get("scores", row.get("score")), where)
    if scores is not None and len(scores) != len(classes):
        raise InputError(f"{where}: {len(scores)} score(s) for {len(classes)} label(s)")
    if status is PredictionStatus.ok and not classes:
        raise InputError(f"{where}: no label (a failed prediction needs status 'error' and a reason)")
    raw = row.get("raw_output", row.get("raw", ""))
    return PredictionRow(
        str(row["image"]),
        classes,
        scores,
        where=where,
        status=status,
        reason=str(row.get("reason") or ""),
        raw_output=str(raw or ""),
    )


def _parse_records(fmt: str) -> Callable[[Path, Vocabulary, list[str] | None], Iterable[PredictionRow]]:
    def parse(path: Path, vocab: Vocabulary, order: list[str] | None) -> Iterable[PredictionRow]:
        hint = "and 'label' or 'labels' (ranked, best first)"
        for where, row in read_records(path, required="image", hint=hint, fmt=fmt):
            yield _prediction_row(row, vocab, where)

    return parse


def parse_npy(path: Path, vocab: Vocabulary, order: list[str] | None) -> Iterable[PredictionRow]:
    """(N,) ints: top-1; (N, K) ints: ranked top-K; (N, C) floats with C classes: scores, stored as top-5."""
    if order is None:
        raise InputError(f"{path}: an NPY array has no image keys; pass --order FILE or --order sorted")
    try:
        arr = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable .npy array ({exc})") from exc
    if arr.ndim not in (1, 2) or len(arr) != len(order):
        raise InputError(f"{path}: shape {arr.shape} does not match the {len(order)} images of the stated order")
    name = path.name
    integral = np.issubdtype(arr.dtype, np.integer) or (
        np.issubdtype(arr.dtype, np.floating) and arr.ndim == 1 and bool(np.all(arr == np.round(arr)))
    )
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


PREDICTION_FORMATS: dict[str, Callable[[Path, Vocabulary, list[str] | None], Iterable[PredictionRow]]] = {
    "csv": _parse_records("csv"),
    "jsonl": _parse_records("jsonl"),
    "npy": parse_npy,
}


def read_order(spec: str | None, sorted_paths: list[str]) -> list[str] | None:
    """Image keys in array-row order: 'sorted' (the dataset's paths, sorted) or a file (JSON list or one per line)."""
    if spec is None:
        return None
    if spec == "sorted":
        return sorted_paths
    p = Path(spec)
    if not p.is_file():
        raise InputError(f"order file {spec!r} does not exist (use a file of image keys, or 'sorted')")
    text = p.read_text(encoding="utf-8")
    if p.suffix.lower() == ".json":
        try:
            keys = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{p}: invalid JSON at line {exc.lineno}: {exc.msg}") from exc
        if not isinstance(keys, list):
            raise InputError(f"{p}: expected a JSON list of image keys")
        return [str(k) for k in keys]
    return [ln.strip() for ln in text.splitlines() if ln.strip()]


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
) -> RunReport:
    """Store a prediction file as model run `run`. Validates every row first; all or nothing."""
    fmt = fmt or {"ndjson": "jsonl"}.get(path.suffix.lower().lstrip("."), path.suffix.lower().lstrip("."))
    if fmt not in PREDICTION_FORMATS:
        raise unknown_name("prediction format", fmt, list(PREDICTION_FORMATS))
    if not path.is_file():
        raise InputError(f"prediction file {str(path)!r} does not exist")
    with session_scope(engine) as s:
        ds = get_dataset(s, dataset)
        vocab = dataset_vocabulary(s, ds)
        paths = sorted(s.exec(select(Image.path).where(Image.dataset_id == ds.id)).all())
        rows = list(PREDICTION_FORMATS[fmt](path, vocab, read_order(order, paths)))
        ids, skipped = resolve_rows(rows, image_index(s, ds), len(vocab), skip_unknown=skip_unknown, what=str(path))
        old = s.exec(select(ModelRun).where(ModelRun.dataset_id == ds.id, ModelRun.name == run)).first()
        if old is not None:
            what = f"dataset {ds.name!r} already has a run {run!r}"
            drop_for_reimport(s, old, delete(Prediction).where(Prediction.run_id == old.id), what, replace)
        mr = ModelRun(
            dataset_id=ds.id,
            name=run,
            model=model or run,
            protocol=protocol,  # type: ignore[arg-type]
            params={"format": fmt, "order": order},
            origin=str(path.resolve()),
            tool_version=__version__,
        )
        s.add(mr)
        s.flush()
        values, seen = [], set()
        for r, image_id in zip(rows, ids):
            if image_id < 0:
                continue
            if image_id in seen:
                raise InputError(f"{r.where}: image {r.key!r} appears twice in {path.name}; nothing written")
            seen.add(image_id)
            values.append(
                {
                    "run_id": mr.id,
                    "image_id": image_id,
                    "status": r.status,
                    "reason": r.reason,
                    "raw_output": r.raw_output,
                    "classes": r.classes,
                    "scores": r.certainty,
                }
            )
        for start in range(0, len(values), 5000):
            s.execute(insert(Prediction), values[start : start + 5000])
    n_err = sum(1 for v in values if v["status"] is PredictionStatus.error)
    return RunReport(run, len(values) - n_err, n_err, skipped)
