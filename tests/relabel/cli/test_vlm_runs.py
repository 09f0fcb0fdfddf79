"""`relabel suggest` with a local vision-language model end to end: the tiny Qwen2-VL through the CLI, MiniLM
mapping its free answers, the run stored and resumed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlmodel import Session

from db import create_db_engine
from db.enums import PredictionStatus
from db.models import ModelRun, Prediction
from tests import images
from tests.relabel.cli.test_suggest_cli import relabel
from tests.tiny_models import save_tiny_qwen2_vl

FIVE = [("n02123045", "tabby"), ("n01440764", "tench"), ("n07920052", "espresso"), ("n02099601", "golden retriever"),
        ("n03792782", "mountain bike")]  # fmt: skip


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_qwen2_vl(tmp_path_factory.mktemp("qwen2vl"))


def test_open_world_run_with_a_local_vlm_is_stored_mapped_and_resumable(
    tmp_path: Path, tiny_qwen: Path, user_cache: Path
) -> None:
    root = tmp_path / "data"
    for i, name in enumerate(["n02123045_a.jpg", "n01440764_b.jpg", "n07920052_c.jpg"]):
        images.photo(root / name, (60 + 20 * i, 50), (40 * i, 90, 200 - 50 * i))
    # five ImageNet classes as a vocabulary of their own: MiniLM embeds their few dozen names, not the ~32,000
    # texts of the built-in vocabulary
    vocabulary = tmp_path / "five.json"
    vocabulary.write_text(json.dumps([{"name": n, "wnid": w} for w, n in FIVE]), encoding="utf-8")
    assert relabel(tmp_path, "ingest", str(root), "--vocabulary", str(vocabulary), "--quiet").returncode == 0
    args = [
        "suggest",
        "--model",
        f"hf-vlm:{tiny_qwen}",
        "--protocol",
        "ow",
        "--device",
        "cpu",
        "--batch-size",
        "2",
        "--quiet",
    ]

    first = relabel(tmp_path, *args)
    assert first.returncode == 0, first.stderr
    assert "3 image(s), 0 done before, now 3 ok, 0 error(s)" in first.stdout

    engine = create_db_engine(f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}")
    with Session(engine) as s:
        run = s.scalars(select(ModelRun)).one()
        rows = s.scalars(select(Prediction).where(Prediction.run_id == run.id)).all()
    assert run.protocol == "ow" and run.prompt_hash and run.params["adapter"]["model_class"].startswith("Qwen2VL")
    assert run.params["usage"]["completion_tokens"] > 0
    assert all(p.status is PredictionStatus.ok for p in rows)
    # every free answer, whatever the random model wrote, is mapped to one class with its similarity
    assert all(len(p.classes) == 1 and 0 <= p.classes[0] < len(FIVE) for p in rows)
    assert all(p.details["mapped"] and -1.0 <= p.details["similarity"] <= 1.0 for p in rows)

    # the class texts' embeddings are kept in the user's cache (RELABEL_CACHE), shared by every workspace
    assert list((user_cache / "text-embeddings").glob("st_sentence-transformers_all-MiniLM*/*.npz"))
    assert not (tmp_path / "ws" / "cache" / "text-embeddings").exists()

    again = relabel(tmp_path, *args)
    assert "3 done before, now 0 ok" in again.stdout, again.stderr
