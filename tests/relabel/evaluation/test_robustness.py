"""Robustness runs: hand-computed RR and latencies with a scripted model, seeded pixels, errors, and the real
offline EfficientNet-Lite0 end to end through the CLI."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from sqlalchemy import select
from sqlmodel import Session

from db.models import EvaluationRecord
from relabel.cli import main
from relabel.common.errors import InputError
from relabel.common.vocabulary import load_builtin
from relabel.evaluation import evaluate
from relabel.evaluation.robustness import BASE_SHORT_SIDE, parse_perturbations, parse_severities, run_robustness
from relabel.evaluation.robustness_outcomes import RobustnessOutcomes
from relabel.evaluation.storage import robustness_from_dict
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.suggest.types import ImageRef, ModelOutput
from tests import images
from tests.conftest import shared

FILES = ("n01440764_a.jpg", "n01443537_b.jpg", "n02123045_c.jpg", "n02123159_d.jpg")
TRUTH = {"n01440764": 0, "n01443537": 1, "n02123045": 281, "n02123159": 282}


class ScriptedModel:
    """Right on the images listed for each call (calls come clean first, then each condition in order), wrong
    (class 999) on the rest; reports latency 10 ms × (call number + 1) per image and records the pixels."""

    name = "scripted"

    def __init__(self, right_per_call: list[set[str]]) -> None:
        self.right_per_call = right_per_call
        self.pixels: list[dict[str, str]] = []

    def describe(self) -> dict[str, Any]:
        return {"kind": "scripted", "device": "cpu", "parameters": 1000, "batch_size": 4}

    def check(self) -> None:
        pass

    def score(self, refs: list[ImageRef], class_names: list[str]) -> list[ModelOutput]:
        call = len(self.pixels)
        self.pixels.append({r.key: hashlib.sha256(np.asarray(Image.open(r.path)).tobytes()).hexdigest() for r in refs})
        outputs = []
        for r in refs:
            scores = np.zeros(len(class_names), np.float32)
            right = call < len(self.right_per_call) and r.key[0] in self.right_per_call[call]
            scores[TRUTH[r.key[2:11]] if right else 999] = 1.0
            outputs.append(ModelOutput(scores=scores, latency_s=0.01 * (call + 1)))
        return outputs


@pytest.fixture
def four(sqlite_engine, tmp_path: Path) -> Path:
    """Four photos keyed "a_n01440764_a.jpg"... so the scripted model can tell them apart by their first letter."""
    root = tmp_path / "photos"
    for i, name in enumerate(FILES):
        images.photo(root / name, size=(320, 240), color=(60 * i, 100, 180 - 40 * i))
    vocab = load_builtin()
    ingest_dataset(sqlite_engine, plan_ingest(root, vocab), dataset="four", root=root, vocab=vocab,
                   show_progress=False, workers=1)  # fmt: skip
    return root


def keyed(model: ScriptedModel) -> ScriptedModel:
    """Wrap `score` so that each image's key starts with its letter (a..d) then the file name."""
    inner = model.score

    def score(refs: list[ImageRef], class_names: list[str]) -> list[ModelOutput]:
        named = [ImageRef(r.image_id, r.path, r.sha256, f"{r.key[-5]}_{r.key}") for r in refs]
        return inner(named, class_names)

    model.score = score  # type: ignore[method-assign]
    return model


def test_rr_and_latencies_by_hand(sqlite_engine, four: Path) -> None:
    # clean: 4/4; gaussian_noise s1 3/4, s2 1/4; contrast s1 4/4, s2 2/4: RR = mean(.75, .25, 1, .5) = .625
    right = [set("abcd"), set("abc"), set("a"), set("abcd"), set("ab")]
    model = keyed(ScriptedModel(right))

    result = run_robustness(sqlite_engine, adapter=model, perturbations=["gaussian_noise", "contrast"],
                            severities=[1, 2], show_progress=False)  # fmt: skip

    assert result.clean["imgt"].accuracy == 1.0
    assert result.grid["imgt"] == [[0.75, 0.25], [1.0, 0.5]]
    assert result.retention["imgt"] == pytest.approx(0.625)
    e = result.efficiency
    # 20 latencies: 4 each of 10, 20, 30, 40, 50 ms -> median 30 ms, p95 50 ms
    assert (e.n_images, e.latency_p50_s, e.latency_p95_s) == (20, pytest.approx(0.03), pytest.approx(0.05))
    assert e.throughput_per_s and e.throughput_per_s > 0 and e.peak_rss_bytes and e.peak_rss_bytes > 10 * 2**20
    assert e.n_parameters == 1000 and e.flops_per_image is None and e.flops_note.startswith("not counted")
    with Session(sqlite_engine) as s:
        row = s.scalars(select(EvaluationRecord)).one()
    assert row.kind == "robustness" and row.id == result.id and row.result["retention"]["imgt"] == 0.625
    # per-image outcomes, clean first then the grid in order, stored with the run and read back
    stored = robustness_from_dict(row.result, row.id).outcomes
    assert stored is not None and result.outcomes is not None
    assert stored.conditions == ("clean", "gaussian_noise/1", "gaussian_noise/2", "contrast/1", "contrast/2")
    assert np.array_equal(stored.image_ids, result.outcomes.image_ids) and len(stored.image_ids) == 4
    assert stored.correct["imgt"].sum(axis=1).tolist() == [4, 3, 1, 4, 2]
    assert np.array_equal(stored.correct["imgt"], result.outcomes.correct["imgt"])
    assert stored.scored["imgt"].all() and not stored.errors.any()
    # the images, not only the counts: image a (the smallest id) is right in every condition
    assert stored.correct["imgt"][:, 0].all()
    # a stored record whose outcomes were damaged is a one-line error naming the run
    damaged = {**row.result, "outcomes": {**row.result["outcomes"], "conditions": ["clean"]}}
    with pytest.raises(InputError, match=rf"^robustness run #{row.id}: robustness outcomes: conditions \['clean'\]"):
        robustness_from_dict(damaged, row.id)


def test_same_seed_same_pixels_and_base_views(sqlite_engine, four: Path) -> None:
    runs = []
    for seed in (3, 3, 4):
        model = keyed(ScriptedModel([]))
        run_robustness(sqlite_engine, adapter=model, perturbations=["gaussian_noise"], severities=[2], seed=seed,
                       show_progress=False, store=False)  # fmt: skip
        runs.append(model.pixels)
    assert runs[0] == runs[1]
    assert runs[0][0] == runs[2][0] and runs[0][1] != runs[2][1]  # clean views equal; the noise follows the seed
    assert runs[0][0] != runs[0][1]


def test_an_image_that_cannot_be_decoded_is_an_error_in_every_pass(sqlite_engine, four: Path) -> None:
    (four / FILES[3]).write_bytes(b"not a jpeg any more")
    model = keyed(ScriptedModel([set("abcd")] * 3))

    result = run_robustness(sqlite_engine, adapter=model, perturbations=["jpeg"], severities=[1, 5],
                            show_progress=False)  # fmt: skip

    assert result.errors == 3 and result.clean["imgt"].n_errors == 1 and result.clean["imgt"].n_scored == 3
    # the unreadable image is an error in every condition, apart from wrong: never scored
    outcomes = result.outcomes
    assert outcomes is not None and outcomes.errors.sum(axis=1).tolist() == [1, 1, 1]
    assert not (outcomes.errors & outcomes.scored["imgt"]).any() and outcomes.scored["imgt"].sum() == 9
    assert result.retention["imgt"] == 1.0
    passes = [p for p in model.pixels if "f_flops" not in p]  # the FLOPs probe calls once more when torch is loaded
    assert len(passes) == 3 and all(len(p) == 3 for p in passes), [sorted(p) for p in model.pixels]


def test_grid_options_are_checked() -> None:
    assert parse_severities("1-3,5") == (1, 2, 3, 5) and parse_severities("4") == (4,)
    assert parse_perturbations("jpeg, contrast") == ("jpeg", "contrast") and parse_perturbations("typo") == ("typo",)
    assert parse_perturbations("all") is None and parse_perturbations(None) is None  # all: what reaches the model
    with pytest.raises(InputError, match="must lie in 1..5"):
        parse_severities("0-6")
    with pytest.raises(InputError, match="expected a range like 1-5"):
        parse_severities("high")
    with pytest.raises(InputError, match="unknown perturbation 'spatter'; known: brightness, contrast"):
        parse_perturbations("jpeg,spatter")  # an ImageNet-C extra corruption this project does not implement


def test_efficientnet_lite0_end_to_end(tmp_path: Path, capsys) -> None:
    """20 real photos, 2 perturbations × 2 severities, through the CLI; then RR and E reach the reliability table."""
    root = tmp_path / "photos"
    root.mkdir()
    for path in sorted(shared("imagenet-sample").glob("*.JPEG"))[::50][:20]:
        (root / path.name).write_bytes(path.read_bytes())
    base = ["--workspace", str(tmp_path / "ws")]
    main([*base, "ingest", str(root), "--dataset", "photos", "--quiet"])
    main([*base, "evaluate", "robustness", "--perturbations", "gaussian_blur,jpeg", "--severities", "1,5",
          "--quiet", "--out", str(tmp_path / "report")])  # fmt: skip
    out = capsys.readouterr().out

    data = json.loads((tmp_path / "report" / "robustness.json").read_text())
    assert data["model"] == "efficientnet-lite0" and data["n_images"] == 20 and data["errors"] == 0
    assert data["clean"]["imgt"]["accuracy"] >= 0.7
    assert 0 <= data["retention"]["imgt"] <= 1
    blur, jpeg = data["grid"]["imgt"]
    assert blur[1] < data["clean"]["imgt"]["accuracy"]  # severity 5 blur hurts
    e = data["efficiency"]
    assert e["n_parameters"] == 4_652_008 and 0.7e9 < e["flops_per_image"] < 0.85e9  # ~0.39 GMACs
    assert 0 < e["latency_p50_s"] <= e["latency_p95_s"] and e["throughput_per_s"] > 0 and e["peak_rss_bytes"] > 0
    png = tmp_path / "report" / "robustness.png"
    assert png.read_bytes().startswith(b"\x89PNG") and "](robustness.png)" in (png.parent / "report.md").read_text()
    assert "efficientnet-lite0 on 20 image(s)" in out and "RR" in out
    assert BASE_SHORT_SIDE == 256

    from db import create_db_engine

    engine = create_db_engine(f"sqlite:///{tmp_path / 'ws' / 'relabel.db'}")
    main([*base, "suggest", "--quiet", "--limit", "20"])  # a stored run of the same model
    ev = evaluate(engine, n_boot=0, weights={"P": 1, "CDC": 0, "RR": 1, "E": 1})  # one dataset: CDC is unknown
    row = next(r for r in ev.reliability.rows if r.model == "efficientnet-lite0")  # type: ignore[union-attr]
    assert row.robustness == pytest.approx(data["retention"]["imgt"]) and row.consistency is None
    # E against the fixed budgets (0.1 s, 4 GiB, 10 GFLOPs), not 1.0 for being the only model measured
    terms = row.efficiency_terms
    assert set(terms) == {"latency_s", "peak_memory_bytes", "flops"}
    assert terms["flops"] == pytest.approx(10e9 / (10e9 + e["flops_per_image"]))
    assert terms["latency_s"] == pytest.approx(0.1 / (0.1 + e["latency_p50_s"]))
    assert row.efficiency == pytest.approx(sum(terms.values()) / 3) and row.efficiency < 1
    assert row.overall is not None and row.rank_by_overall == 1
    ev = evaluate(engine, n_boot=200, weights={"P": 1, "CDC": 0, "RR": 1, "E": 1}, store=False)
    row = next(r for r in ev.reliability.rows if r.model == "efficientnet-lite0")  # type: ignore[union-attr]
    assert row.robustness_ci is not None and row.robustness_ci[0] <= row.robustness <= row.robustness_ci[1]  # type: ignore[operator]
    assert row.overall_ci is not None and row.rank_by_overall_ci == (1, 1)
    # the robustness run's own summary shows the interval `relabel evaluate` shows with its default 1,000 resamples
    ev = evaluate(engine, weights={"P": 1, "CDC": 0, "RR": 1, "E": 1}, store=False)
    row = next(r for r in ev.reliability.rows if r.model == "efficientnet-lite0")  # type: ignore[union-attr]
    low, high = row.robustness_ci  # type: ignore[misc]
    shown = f"RR {data['retention']['imgt']:.3f}, 95 % CI {low:.3f} to {high:.3f}"
    assert shown in out and shown in (tmp_path / "report" / "report.md").read_text()


def test_outcomes_round_trip_as_bits_and_refuse_a_mask_of_other_images() -> None:
    rng = np.random.default_rng(0)
    right = rng.random((3, 13)) < 0.5  # 13 images: the last byte is partly padding
    scored = right | (rng.random((3, 13)) < 0.5)
    outcomes = RobustnessOutcomes(np.arange(10, 23), ("clean", "jpeg/1", "jpeg/2"), ~scored, {"imgt": scored},
                                  {"imgt": right})  # fmt: skip

    data = json.loads(json.dumps(outcomes.to_json()))
    back = RobustnessOutcomes.from_json(data)

    assert np.array_equal(back.correct["imgt"], right) and np.array_equal(back.scored["imgt"], scored)
    assert np.array_equal(back.errors, ~scored) and back.image_ids.tolist() == list(range(10, 23))
    data["image_ids"] = data["image_ids"][:5]  # a mask of 13 images read against 5 ids
    with pytest.raises(InputError, match="robustness outcomes errors, condition 0: does not hold 5 images"):
        RobustnessOutcomes.from_json(data)


def test_unreadable_stored_outcomes_are_a_one_line_error_naming_the_part() -> None:
    mask = np.ones((2, 4), bool)
    good = RobustnessOutcomes(np.arange(4), ("clean", "jpeg/1"), ~mask, {"imgt": mask}, {"imgt": mask}).to_json()
    assert RobustnessOutcomes.from_json(good, expected=("clean", "jpeg/1")).conditions == ("clean", "jpeg/1")
    broken = {
        "not base64": {**good, "errors": ["!!!!", good["errors"][1]]},
        "no image ids": {k: v for k, v in good.items() if k != "image_ids"},
        "a reference without its mask": {**good, "references": {"imgt": {"scored": good["errors"]}}},
    }
    for data in broken.values():
        with pytest.raises(InputError, match=r"^robustness outcomes unreadable \(\w+"):
            RobustnessOutcomes.from_json(data)
    with pytest.raises(InputError, match=r"conditions \['clean', 'jpeg/1'\] are not the grid's"):
        RobustnessOutcomes.from_json(good, expected=("clean", "jpeg/1", "jpeg/2"))
