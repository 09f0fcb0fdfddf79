"""Label Studio's task JSON, both ways: a snapshot written as tasks to import, and a project's export read back
as annotators' decisions.

A task is {"data": {"image": ...}, "annotations": [...], "predictions": [...]}; each annotation
or prediction holds a `result` list whose `choices` items name classes. The labeling config the tasks fit:

    <View>
      <Image name="image" value="$image"/>
      <Choices name="label" toName="image" choice="multiple"> <Choice value="n01440764"/> ... </Choices>
    </View>

A class is written as its wnid (its display name in a vocabulary without wnids): unique where names may repeat.
Reading, a task's image is `data.image` (a path, or a URL read as its path) or `data.image_id`; a choice is any
token the vocabulary resolves (index, wnid, name); a `textarea` result is the note, `lead_time` the seconds on the
item, and a cancelled (skipped) annotation is no decision. `completed_by` is Label Studio's numeric user id unless
the export holds names: `relabel decisions import --user ID=NAME` maps it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from sqlalchemy import select
from sqlalchemy.engine import Connection
from sqlmodel import col

from db.enums import PredictionStatus
from db.models import Image, ModelRun, Prediction
from relabel.common.errors import InputError, NotFoundError, brief
from relabel.common.textfiles import read_json
from relabel.common.vocabulary import Vocabulary
from relabel.interop.rows import DecisionRow
from relabel.snapshots.reader import SnapshotRow
from relabel.sources.rows import is_integer

FROM_NAME, TO_NAME = "label", "image"  # the <Choices name> and <Image name> of the labeling config
UPLOAD_PREFIX = re.compile(r"^[0-9a-f]{8}-(.+)$")  # Label Studio renames an uploaded file "1a2b3c4d-NAME"
NOTE_TYPES = ("textarea",)


@dataclass(frozen=True)
class RunSuggestion:
    """What a stored run says about one image: the classes it proposes and the score of its first."""

    classes: tuple[int, ...]
    score: float | None


def choice_value(vocab: Vocabulary, index: int) -> str:
    c = vocab.classes[index]
    return c.wnid or c.name


def image_url(path: str, image_root: str) -> str:
    """`path` under `image_root`: a folder joined with "/", a URL (or a `?d=` query) with the path quoted."""
    if not image_root:
        return path
    url_like = "://" in image_root or "?" in image_root
    joiner = "" if image_root.endswith(("/", "=")) else "/"
    return image_root + joiner + (quote(path) if url_like else path)


def _choices(classes: list[int] | tuple[int, ...], vocab: Vocabulary) -> list[dict[str, Any]]:
    value = {"choices": [choice_value(vocab, c) for c in classes]}
    return [{"from_name": FROM_NAME, "to_name": TO_NAME, "type": "choices", "value": value}]


def render_label_studio(
    rows: list[SnapshotRow],
    vocab: Vocabulary,
    *,
    image_root: str = "",
    run: str | None = None,
    suggestions: Mapping[str, RunSuggestion] | None = None,
) -> str:
    """Label Studio tasks, one per image in file-name order: `data.image` (the path under `image_root`), the
    image's category and origin, the snapshot's label set as an annotation and, with `run`, the run's suggestion
    as a prediction (model_version the run's name, score its first class's score when the run stores scores)."""
    tasks = []
    for r in rows:
        task: dict[str, Any] = {
            "data": {"image": image_url(r.path, image_root), "category": r.category, "origin": r.origin},
            "annotations": [{"result": _choices(r.classes, vocab)}],
        }
        shown = (suggestions or {}).get(r.path)
        if run is not None and shown is not None and shown.classes:
            prediction: dict[str, Any] = {"model_version": run, "result": _choices(shown.classes, vocab)}
            if shown.score is not None:
                prediction["score"] = shown.score
            task["predictions"] = [prediction]
        tasks.append(task)
    return json.dumps(tasks, ensure_ascii=False, indent=1) + "\n"


def run_suggestions(conn: Connection, dataset_id: int, run: str) -> dict[str, RunSuggestion]:
    """Image path -> what stored run `run` proposes: a scoring run its top-1, a generative run its classes.
    Failed predictions propose nothing (a failure is a status, not an answer)."""
    found = conn.execute(
        select(col(ModelRun.id), col(ModelRun.protocol)).where(
            col(ModelRun.dataset_id) == dataset_id, col(ModelRun.name) == run
        )
    ).first()
    if found is None:
        names = conn.execute(select(col(ModelRun.name)).where(col(ModelRun.dataset_id) == dataset_id)).scalars()
        raise NotFoundError(f"unknown run {run!r} for --run; known runs: {', '.join(sorted(names)) or 'none'}")
    from relabel.suggest.protocols import ranked_protocols  # numpy and scipy: only when a run is asked for

    run_id, protocol = found
    ranked = protocol in ranked_protocols()
    query = (
        select(col(Image.path), col(Prediction.classes), col(Prediction.scores))
        .join(Image, col(Image.id) == col(Prediction.image_id))
        .where(col(Prediction.run_id) == run_id, col(Prediction.status) == PredictionStatus.ok)
    )
    out = {}
    for path, classes, scores in conn.execute(query):
        shown = tuple(classes[:1] if ranked else classes)
        out[path] = RunSuggestion(shown, float(scores[0]) if scores else None)
    return out


# --- reading a project's export -------------------------------------------------------------------------------


def read_label_studio(path: Path) -> Iterator[DecisionRow]:
    """Each completed annotation of a Label Studio JSON export as a DecisionRow; cancelled ones are left out."""
    tasks = read_json(path)
    if not isinstance(tasks, list):
        raise InputError(
            f"{path}: expected the JSON export of a Label Studio project (a list of tasks), got {brief(tasks, 40)}"
        )
    for t, task in enumerate(tasks, 1):
        where = f"{path.name}: task {t}"
        if not isinstance(task, dict) or not isinstance(task.get("data"), dict):
            raise InputError(f"{where}: expected a task object with 'data' and 'annotations', got {brief(task, 60)}")
        if task.get("id") is not None:
            where += f" (id {brief(task['id'], 24)})"
        image = _task_image(task["data"], where)
        annotations = task.get("annotations") or []
        if not isinstance(annotations, list):
            raise InputError(f"{where}: 'annotations' is {brief(annotations, 40)}; expected a list")
        for a, annotation in enumerate(annotations, 1):
            if not isinstance(annotation, dict):
                raise InputError(f"{where}, annotation {a}: expected an object, got {brief(annotation, 40)}")
            if annotation.get("was_cancelled") is True:
                continue
            classes, note = _result(annotation.get("result"), f"{where}, annotation {a}")
            yield DecisionRow(
                f"{where}, annotation {a}",
                image,
                _completed_by(annotation.get("completed_by")),
                classes,
                note,
                _seconds(annotation.get("lead_time")),
            )


def _task_image(data: dict[str, Any], where: str) -> str | int:
    """The image a task's data names: its `image` (a path or URL), else its `image_id`."""
    image, image_id = data.get("image"), data.get("image_id")
    if image is None and image_id is None:
        raise InputError(f"{where}: data has neither 'image' nor 'image_id'; found keys {brief(sorted(data), 60)}")
    if image is None:
        if not is_integer(image_id):
            raise InputError(f"{where}: data.image_id is {brief(image_id, 40)}; expected an image id (an integer)")
        return image_id
    if not isinstance(image, str) or not image.strip():
        raise InputError(f"{where}: data.image is {brief(image, 40)}; expected an image path or URL")
    return image.strip()


def _result(result: object, where: str) -> tuple[list[str], str]:
    """The class tokens of an annotation's `choices` results and the text of its `textarea` results."""
    if result is None:
        result = []
    if not isinstance(result, list):
        raise InputError(f"{where}: 'result' is {brief(result, 40)}; expected a list")
    tokens: list[str] = []
    notes: list[str] = []
    for item in result:
        kind = item.get("type") if isinstance(item, dict) else None
        value = item.get("value") if isinstance(item, dict) else None
        if kind == "choices" and isinstance(value, dict) and isinstance(value.get("choices"), list):
            tokens.extend(value["choices"])
        elif kind in NOTE_TYPES and isinstance(value, dict) and isinstance(value.get("text"), list):
            notes.extend(str(v) for v in value["text"])
        else:
            raise InputError(
                f"{where}: result {brief(item, 60)} is not a class choice; only 'choices' results (and "
                "'textarea', read as the note) are decisions"
            )
    return tokens, "\n".join(notes).strip()


def _completed_by(value: object) -> str | None:
    """Label Studio's user: its id as text ("12"), or the name the export holds; None when it names nobody."""
    if isinstance(value, dict):
        value = value.get("id")
    if value is None or value == "":
        return None
    return str(value)


def _seconds(value: object) -> float | None:
    """An annotation's `lead_time` as seconds on the item, when it is a finite non-negative number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return None
    return round(float(value), 3)


def image_key(value: str, image_root: str = "") -> str:
    """The workspace path a task's `data.image` stands for: `image_root` stripped, a `?d=` query or a URL's path
    read (unquoted)."""
    if image_root and value.startswith(image_root):
        rest = value[len(image_root) :].lstrip("/")
        return unquote(rest) if ("://" in image_root or "?" in image_root) else rest
    parts = urlsplit(value)
    if "d" in parse_qs(parts.query):
        return parse_qs(parts.query)["d"][0]
    if parts.scheme in ("http", "https", "s3", "gs", "azure-blob") or value.startswith("/data/"):
        return unquote(parts.path)
    return value


def without_upload_prefix(key: str) -> str | None:
    """The file name Label Studio gave an upload, without the 8-hex prefix it adds ("1a2b3c4d-x.jpg" -> "x.jpg");
    None when the name has no such prefix."""
    pure = PurePosixPath(key)
    m = UPLOAD_PREFIX.match(pure.name)
    return m.group(1) if m else None
