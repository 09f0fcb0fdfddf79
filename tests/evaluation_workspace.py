"""A five-image workspace whose every score can be computed by hand (see the comments), for evaluation tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.enums import PredictionStatus, Role, Verdict
from db.models import EvaluationRecord
from relabel.common.vocabulary import load_builtin
from relabel.common.workspace import get_dataset, image_index
from relabel.decisions.annotations import add_user, record_annotation
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.sources.bulk import store_run
from relabel.sources.labels import import_source
from tests import images

TENCH, GOLDFISH, TABBY, TIGER_CAT = 0, 1, 281, 282
# ImGT from the wnid prefix: a, b tench; c goldfish; d, e tabby.
FILES = ("n01440764_a.jpg", "n01440764_b.jpg", "n01443537_c.jpg", "n02123045_d.jpg", "n02123045_e.jpg")
# A multi-label prior: c has an empty set (excluded).
TEAM = (
    "image,labels\nn01440764_a.jpg,tench|goldfish\nn01440764_b.jpg,goldfish\nn01443537_c.jpg,\n"
    "n02123045_d.jpg,tabby|tiger cat\nn02123045_e.jpg,tiger cat\n"
)
# An error row's details may carry "reason" and "raw" (the reply), stored in their own columns (see add_run).
HTTP_503 = {"retryable": True, "reason": "HTTP 503: the server is overloaded"}  # infrastructure: never scored
BROKEN_REPLY = {"retryable": False, "reason": "expected 2 numbered answers, got 'a tabby cat'", "raw": "a tabby cat"}
# "m5" ranks five classes; c's call failed on the server (HTTP 503, left out). imgt top-1: b, e right (2/4);
# top-5: 4/4. team top-1: a, d right (2/4); top-5: a, d, e (3/4).
M5: dict[str, tuple[list[int], str, dict | None]] = {
    "a": ([GOLDFISH, TENCH, 2, 3, 4], "ok", None),
    "b": ([TENCH, 2, 3, 4, 5], "ok", None),
    "c": ([], "error", HTTP_503),
    "d": ([TIGER_CAT, TABBY, 2, 3, 4], "ok", None),
    "e": ([TABBY, TIGER_CAT, 2, 3, 4], "ok", None),
}
# "m1", closed world: b's answer was out of prompt (no class, scored wrong); d's reply broke the format (a
# failed reply: scored wrong). imgt: a, c right of a..e (2/5; 2/4 excluding the failure). team: a, e right of
# a, b, d, e (2/4; 2/3 excluding the failure). OOP: 1 of 4 answered.
M1: dict[str, tuple[list[int], str, dict | None]] = {
    "a": ([TENCH], "ok", {"oop": False}),
    "b": ([], "ok", {"oop": True}),
    "c": ([GOLDFISH], "ok", {"oop": False}),
    "d": ([], "error", BROKEN_REPLY),
    "e": ([TIGER_CAT], "ok", {"oop": False}),
}


def build(engine: Engine, folder: Path) -> dict[str, int]:
    """Photos, ImGT, the `team` prior and the runs m5 (model "ranker") and m1 (model "vlm", protocol cw).
    Returns image ids by letter."""
    vocab = load_builtin()
    root = folder / "photos"
    for i, name in enumerate(FILES):
        images.photo(root / name, color=(40 * i, 90, 200 - 40 * i))
    plan = plan_ingest(root, vocab)
    ingest_dataset(engine, plan, dataset="five", root=root, vocab=vocab, show_progress=False, workers=1)
    (folder / "team.csv").write_text(TEAM)
    import_source(engine, folder / "team.csv", fmt="csv", name="team")
    ids = letter_ids(engine)
    add_run(engine, "m5", "ranker", "topk", M5, ids)
    add_run(engine, "m1", "vlm", "cw", M1, ids)
    return ids


def letter_ids(engine: Engine) -> dict[str, int]:
    with Session(engine) as s:
        index = image_index(s, get_dataset(s, "five"))
    return {name.split("_")[1][0]: index.lookup(name) for name in FILES}  # type: ignore[misc]


def add_run(
    engine: Engine,
    name: str,
    model: str,
    protocol: str,
    rows: dict[str, tuple[list[int], str, Any]],
    ids: dict,
    dataset: str = "five",
) -> None:
    """A model run with predictions as the suggestion runner stores them (status, classes, details); an error's
    reason is its details' "reason" (default "failed": a failed reply) and its reply text their "raw"."""
    with Session(engine) as s:
        values = [
            {"image_id": ids[k], "classes": c, "status": PredictionStatus(st),
             "details": {key: v for key, v in d.items() if key not in ("reason", "raw")} if d else d,
             "reason": (d or {}).get("reason", "failed") if st == "error" else "",
             "raw_output": (d or {}).get("raw", "")}
            for k, (c, st, d) in rows.items()
        ]  # fmt: skip
        store_run(
            s, dataset_id=get_dataset(s, dataset).id, name=name, model=model, protocol=protocol, predictions=values
        )
        s.commit()


def decide(engine: Engine, ids: dict[str, int], decisions: dict[str, tuple[Verdict, list[int]]]) -> None:
    """A lead's adjudications (the consensus, whatever annotators said)."""
    with Session(engine) as s:
        from db.models import User

        known = s.scalars(select(User.name)).all()
    if "lead" not in known:
        add_user(engine, "lead", Role.lead, "pw")
    for letter, (verdict, classes) in decisions.items():
        record_annotation(engine, image_id=ids[letter], user="lead", verdict=verdict, classes=classes, adjudicate=True)


def stored_evaluations(engine: Engine) -> int:
    with Session(engine) as s:
        return s.execute(select(func.count()).select_from(EvaluationRecord)).scalar_one()
