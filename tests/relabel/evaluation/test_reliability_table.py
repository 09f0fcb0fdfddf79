"""The reliability table (after ARGUS) on small workspaces whose every part can be computed by hand.

Dataset "five" (tests.evaluation_workspace) has ImGT and the multi-label prior `team`; dataset "two" has ImGT only.
Model R is right where ImGT is wrong (b, e of "five"), model S agrees with ImGT's mistakes:

              a      b         c         d      e          | team (P)   ImGT on a,b,d,e
  ImGT        tench  tench     goldfish  tabby  tabby      |
  team        t|gf   goldfish  (none)    ta|tc  tiger cat  |
  R           tench  goldfish  goldfish  tabby  tiger cat  | 4/4 = 1.0  2/4: label noise +0.5
  S           tench  tench     goldfish  tabby  tabby      | 2/4 = 0.5  4/4: label noise −0.5

On "two" (ImGT: f tench, g goldfish, h tabby, i tabby) both score 3/4, so CDC_R = 1 − 0.125/0.875 = 6/7 and
CDC_S = 1 − 0.125/0.625 = 0.8.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlmodel import Session

from db.engine import session_scope
from db.enums import Verdict
from evaluator.model_reliability import BUDGETS
from evaluator.scoring import Score
from relabel.common.errors import InputError
from relabel.common.vocabulary import load_builtin
from relabel.common.workspace import get_dataset, image_index
from relabel.evaluation import evaluate, write_report
from relabel.evaluation.reliability import parse_weights
from relabel.evaluation.reliability_text import reliability_basis_table, reliability_table
from relabel.evaluation.results import EfficiencyReport, Evaluation, ReliabilityRow, RobustnessResult
from relabel.evaluation.robustness_outcomes import RobustnessOutcomes
from relabel.evaluation.storage import store_robustness
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.snapshots.freeze import create_snapshot
from tests import evaluation_workspace as ws
from tests import images
from tests.evaluation_workspace import GOLDFISH, TABBY, TENCH, TIGER_CAT

R_FIVE = {"a": TENCH, "b": GOLDFISH, "c": GOLDFISH, "d": TABBY, "e": TIGER_CAT}
S_FIVE = {"a": TENCH, "b": TENCH, "c": GOLDFISH, "d": TABBY, "e": TABBY}
TWO_FILES = ("n01440764_f.jpg", "n01443537_g.jpg", "n02123045_h.jpg", "n02123045_i.jpg")
R_TWO = {"f": TENCH, "g": GOLDFISH, "h": TABBY, "i": TIGER_CAT}
S_TWO = {"f": TENCH, "g": TENCH, "h": TABBY, "i": TABBY}
NO_RR_E = parse_weights("RR=0,E=0")
TEAM = ["imgt", "team"]  # the prior is cleaner than ImGT: the table scores against it when it is named


def answers(top1: dict[str, int]) -> dict[str, tuple[list[int], str, Any]]:
    return {letter: ([cls], "ok", None) for letter, cls in top1.items()}


@pytest.fixture
def five(sqlite_engine, tmp_path: Path) -> dict[str, int]:
    """Dataset "five" with runs r (model R) and s (model S), both read by ranked scores."""
    ids = ws.build(sqlite_engine, tmp_path)
    ws.add_run(sqlite_engine, "r", "R", "topk", answers(R_FIVE), ids)
    ws.add_run(sqlite_engine, "s", "S", "topk", answers(S_FIVE), ids)
    return ids


def add_dataset_two(engine, folder: Path) -> None:
    """Dataset "two" (ImGT only) with runs of the same models and protocol as r and s."""
    vocab = load_builtin()
    root = folder / "photos-two"
    for i, name in enumerate(TWO_FILES):
        images.photo(root / name, color=(200 - 30 * i, 60, 30 * i))
    ingest_dataset(engine, plan_ingest(root, vocab), dataset="two", root=root, vocab=vocab, show_progress=False,
                   workers=1)  # fmt: skip
    with Session(engine) as s:
        index = image_index(s, get_dataset(s, "two"))
        ids = {name.split("_")[1][0]: index.lookup(name) for name in TWO_FILES}
    ws.add_run(engine, "r-two", "R", "topk", answers(R_TWO), ids, dataset="two")
    ws.add_run(engine, "s-two", "S", "topk", answers(S_TWO), ids, dataset="two")


def rows(ev: Evaluation) -> dict[str, ReliabilityRow]:
    assert ev.reliability is not None
    return {r.run: r for r in ev.reliability.rows}


def robustness(model: str, rr: float, protocol: str = "topk", **efficiency: Any) -> RobustnessResult:
    measured = {"device": "cpu", "batch_size": 8, "n_images": 100, "latency_p50_s": None, "latency_p95_s": None,
                "latency_mean_s": None, "throughput_per_s": None, "peak_rss_bytes": None, "peak_rss_scope": "this run",
                "cuda_peak_bytes": None, "n_parameters": None, "flops_per_image": None, **efficiency}  # fmt: skip
    return RobustnessResult(
        model, "five", 100, ("jpeg",), (1,), 0, (), {"imgt": Score(0.9, 100, 90, 0, 0)}, {"imgt": [[0.9 * rr]]},
        {"imgt": rr}, 0, EfficiencyReport(**measured), 1.0, datetime.now(timezone.utc), "0.1.0",
        protocol={"protocol": protocol},
    )  # fmt: skip


def store(engine, *results: RobustnessResult) -> None:
    with session_scope(engine) as s:
        for result in results:
            store_robustness(s, get_dataset(s, "five"), result)


class TestConsistencyAcrossDatasets:
    def test_unknown_with_one_dataset(self, sqlite_engine, five) -> None:
        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], n_boot=0, store=False)

        r, s = rows(ev)["r"], rows(ev)["s"]
        assert (r.capability, r.reference, r.n_images) == (1.0, "team", 4)  # the prior is cleaner than ImGT
        assert s.capability == 0.5
        assert r.consistency is None and s.consistency is None  # not 1.000
        assert r.overall is None  # CDC has a weight and is unknown
        assert any(n.startswith("CDC unknown for r, s: no run of the same model and protocol") for n in
                   ev.reliability.notes)  # type: ignore[union-attr]  # fmt: skip

    def test_computed_across_two_datasets(self, sqlite_engine, five, tmp_path: Path) -> None:
        add_dataset_two(sqlite_engine, tmp_path)

        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=NO_RR_E, n_boot=200, store=False)

        r, s = rows(ev)["r"], rows(ev)["s"]
        assert r.consistency == pytest.approx(6 / 7) and s.consistency == pytest.approx(0.8)
        assert [(d.dataset, d.run, d.reference, d.n_images, d.accuracy) for d in r.datasets] == [
            ("five", "r", "team", 4, 1.0),
            ("two", "r-two", "imgt", 4, 0.75),
        ]
        assert r.overall == pytest.approx((1.0 + 6 / 7) / 2) and s.overall == pytest.approx((0.5 + 0.8) / 2)
        assert (r.rank_by_capability, r.rank_by_overall) == (1, 1)
        low, high = r.consistency_ci or (None, None)
        assert low is not None and high is not None and 0 <= low <= high <= 1
        assert s.capability_ci is not None and s.capability_ci[0] <= 0.5 <= s.capability_ci[1]
        # P and CDC resampled jointly for both rows: the overall score and the ranks have intervals too
        assert r.overall_ci is not None and r.overall_ci[0] <= r.overall <= r.overall_ci[1]  # type: ignore[operator]
        assert r.rank_by_overall_ci is not None and r.rank_by_overall_ci[0] == 1


class TestLabelNoiseSensitivity:
    def test_signed_paired_difference_on_the_same_images(self, sqlite_engine, five) -> None:
        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], n_boot=200, store=False)

        r, s = rows(ev)["r"].noise, rows(ev)["s"].noise
        assert r is not None and s is not None
        assert (r.reference, r.n_images, r.accuracy_imgt, r.accuracy_reference) == ("team", 4, 0.5, 1.0)
        assert r.difference == pytest.approx(0.5) and s.difference == pytest.approx(-0.5)
        assert r.ci_low is not None and r.ci_high is not None and r.ci_low <= 0.5 <= r.ci_high
        # not folded into P: the model that is right where ImGT is wrong keeps the higher P
        assert rows(ev)["r"].capability > rows(ev)["s"].capability  # type: ignore[operator]

    def test_unknown_without_a_reference_cleaner_than_imgt(self, sqlite_engine, five, tmp_path: Path) -> None:
        add_dataset_two(sqlite_engine, tmp_path)

        ev = evaluate(sqlite_engine, "two", runs=["r-two"], references=["imgt"], n_boot=0, store=False)

        assert rows(ev)["r-two"].noise is None and rows(ev)["r-two"].reference == "imgt"
        assert any("label-noise sensitivity unknown" in n for n in ev.reliability.notes)  # type: ignore[union-attr]


class TestCapability:
    def test_mc_is_scored_against_imgt_only_and_ranked_apart(self, sqlite_engine, five) -> None:
        ws.add_run(sqlite_engine, "v-mc", "V", "mc", answers(S_FIVE | {"b": GOLDFISH}), five)
        ws.decide(sqlite_engine, five, {"a": (Verdict.labels, [TENCH, GOLDFISH]), "b": (Verdict.none_fit, [])})
        create_snapshot(sqlite_engine, "round-1")

        ev = evaluate(sqlite_engine, "five", runs=["r", "s", "v-mc"], n_boot=0, store=False)

        mc, r = rows(ev)["v-mc"], rows(ev)["r"]
        assert (r.task, r.reference) == ("classes", "round-1")  # the newest snapshot is the cleanest reference
        # against ImGT: a, c, d, e right, b wrong (the snapshot would exclude b and count e wrong: 3/4)
        assert (mc.task, mc.reference, mc.n_images, mc.capability) == ("mc", "imgt", 5, 0.8)
        assert [d.reference for d in mc.datasets] == ["imgt"] and mc.noise is None
        assert any(n.startswith("mc runs are scored against imgt only") for n in ev.reliability.notes)  # type: ignore[union-attr]
        assert set(ev.reliability.kendall_tau) == {"classes", "mc"}  # type: ignore[union-attr]

    def test_runs_over_different_images_keep_their_own_rows_and_are_ranked_on_the_common_ones(
        self, sqlite_engine, five
    ) -> None:
        # the same predictions as r, imported for a subset of the images
        ws.add_run(sqlite_engine, "r-part", "R-part", "topk", answers({k: R_FIVE[k] for k in "ab"}), five)

        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s", "r-part"], weights=parse_weights(
            "CDC=0,RR=0,E=0"), n_boot=0, store=False)  # fmt: skip

        got = {name: (row.capability, row.n_images, row.capability_common) for name, row in rows(ev).items()}
        # each row on its own images (team excludes c); the ranks on a, b: the images all three scored
        assert got == {"r": (1.0, 4, 1.0), "r-part": (1.0, 2, 1.0), "s": (0.5, 4, 0.5)}
        [common] = ev.reliability.common  # type: ignore[union-attr]
        assert (common.task, common.reference, common.n_images, common.same_images) == ("classes", "team", 2, False)
        [note] = [n for n in ev.reliability.notes if "cover different images" in n]  # type: ignore[union-attr]
        assert "'five' against team (r 4, s 4, r-part 2)" in note and "on the 2 image(s) all of them scored" in note


class TestEfficiency:
    def test_e_of_a_model_does_not_change_when_another_is_added(self, sqlite_engine, five) -> None:
        store(
            sqlite_engine,
            robustness("R", 0.9, latency_p50_s=0.05, peak_rss_bytes=2**30),
            robustness("S", 0.6, device="cuda:0", latency_p50_s=0.1, cuda_peak_bytes=4 * 2**30,
                       peak_rss_bytes=8 * 2**30, flops_per_image=10e9),
        )  # fmt: skip
        before = rows(evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], n_boot=0, store=False))
        ws.add_run(sqlite_engine, "t", "T", "cw", answers(R_FIVE), five)
        api = robustness("T", 0.5, "cw", latency_p50_s=1.0, peak_rss_bytes=100 * 2**20, cost_per_1k_images=2.0)
        store(sqlite_engine, replace(api, adapter={"kind": "openai", "base_url": "http://127.0.0.1:9/v1"}))

        after = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s", "t"], n_boot=0, store=False)

        # budgets: 0.1 s, 4 GiB, 10 GFLOPs, 1 per 1k images; each term B / (B + x)
        assert before["r"].efficiency == pytest.approx((2 / 3 + 0.8) / 2)  # FLOPs unknown: no term
        assert before["s"].efficiency == pytest.approx(0.5)  # the CUDA peak, not the RSS, on a GPU
        assert rows(after)["r"].efficiency == before["r"].efficiency
        assert rows(after)["s"].efficiency == before["s"].efficiency
        t = rows(after)["t"]
        assert set(t.efficiency_terms) == {"latency_s", "cost_per_1k_images"}  # the client's RSS is not the model's
        assert t.efficiency == pytest.approx((0.1 / 1.1 + 1 / 3) / 2) and t.robustness == 0.5
        assert any(n.startswith("E is over different measures") for n in after.reliability.notes)  # type: ignore[union-attr]

    def test_rr_and_e_come_from_the_robustness_run_of_the_same_protocol(self, sqlite_engine, five) -> None:
        ws.add_run(sqlite_engine, "t", "T", "cw", answers(R_FIVE), five)
        store(sqlite_engine, robustness("T", 0.7, "ow", latency_p50_s=1.0))  # read through another protocol

        t = rows(evaluate(sqlite_engine, "five", references=TEAM, runs=["t"], n_boot=0, store=False))["t"]

        assert t.robustness is None and t.efficiency is None
        store(sqlite_engine, robustness("T", 0.4, "cw", latency_p50_s=1.0))
        t = rows(evaluate(sqlite_engine, "five", references=TEAM, runs=["t"], n_boot=0, store=False))["t"]
        assert t.robustness == 0.4 and t.robustness_run is not None

    def test_rr_over_different_grids_is_noted(self, sqlite_engine, five) -> None:
        typo = replace(robustness("S", 0.6), perturbations=("jpeg", "typo"), text_perturbations=("typo",))
        store(sqlite_engine, robustness("R", 0.9), typo)

        notes = evaluate(
            sqlite_engine, "five", references=TEAM, runs=["r", "s"], n_boot=0, store=False
        ).reliability.notes  # type: ignore[union-attr]

        [note] = [n for n in notes if "different grids" in n]
        assert "r: jpeg at severities 1 on 100 images" in note and "s: jpeg, typo" in note


class TestReport:
    def test_the_table_is_named_after_argus_and_says_what_is_the_authors(
        self, sqlite_engine, five, tmp_path: Path
    ) -> None:
        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], n_boot=0)

        files = write_report(ev, tmp_path / "out")

        md = files.markdown.read_text()
        data = json.loads(files.data.read_text())
        assert "## Reliability, after ARGUS" in md and "(ARGUS)" not in md
        assert "only the formula of cross-dataset consistency (CDC) is the ARGUS authors'" in md
        assert "median latency 0.1 s per image, peak memory 4 GiB, 10 GFLOPs per image" in md
        assert "argus" not in data
        table = data["reliability"]
        assert table["title"] == "Reliability, after ARGUS" and "ARGUS authors" in table["method"]
        assert table["budgets"] == asdict(BUDGETS)
        parts = {"capability", "consistency", "noise", "robustness", "efficiency", "overall"}
        assert parts <= set(table["definitions"])
        assert table["rows"][0]["consistency"] is None  # unknown is null, not 1
        assert "reliability.png" in {p.name for p in files.figures}


def test_weights() -> None:
    assert parse_weights("P=2, cdc=1,RR=0.5") == {"P": 2.0, "CDC": 1.0, "RR": 0.5, "E": 1.0}
    for bad, message in [
        ("X=1", "NAME one of P, CDC, RR, E"),
        ("P=high", "'high' is not a number"),
        ("P=-1", "finite number ≥ 0"),
        ("P=0,CDC=0,RR=0,E=0", "all 0"),
    ]:
        with pytest.raises(InputError, match=message):
            parse_weights(bad)


IMAGES = 40  # the robustness runs' images: ids 1..40 of dataset "five"'s robustness sample


def with_outcomes(result: RobustnessResult, clean: int, perturbed: int) -> RobustnessResult:
    """`result` with per-image outcomes on IMAGES images: clean right on the first `clean`, the one perturbed
    condition (jpeg/1) on the first `perturbed` of them; its stored scores and RR match the outcomes."""
    right = np.stack([np.arange(IMAGES) < clean, np.arange(IMAGES) < perturbed])
    scored = np.ones_like(right)
    outcomes = RobustnessOutcomes(np.arange(1, IMAGES + 1), ("clean", "jpeg/1"), ~scored, {"imgt": scored},
                                  {"imgt": right})  # fmt: skip
    rr = perturbed / clean
    return replace(result, n_images=IMAGES, clean={"imgt": Score(clean / IMAGES, IMAGES, clean, 0, 0)},
                   grid={"imgt": [[perturbed / IMAGES]]}, retention={"imgt": rr}, outcomes=outcomes)  # fmt: skip


NO_CDC = parse_weights("CDC=0")


class TestIntervals:
    """R is better than S on P (every image S gets right, R gets right) and on RR (R keeps every image under the
    perturbation, S loses half), with the same E: R is ahead in every resample."""

    def store_pair(self, engine, s_latency: float = 0.1) -> None:
        store(
            engine,
            with_outcomes(robustness("R", 1.0, latency_p50_s=0.1), 36, 36),
            with_outcomes(robustness("S", 0.5, latency_p50_s=s_latency), 36, 18),
        )

    def test_rr_overall_and_rank_intervals(self, sqlite_engine, five) -> None:
        self.store_pair(sqlite_engine)

        ev = evaluate(
            sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=NO_CDC, n_boot=300, seed=0, store=False
        )

        r, s = rows(ev)["r"], rows(ev)["s"]
        assert (r.robustness, s.robustness) == (1.0, 0.5) and r.efficiency == s.efficiency == 0.5
        assert r.robustness_ci == (1.0, 1.0)  # clean and perturbed resampled with the same images: always 1
        assert s.robustness_ci is not None and s.robustness_ci[0] < 0.5 < s.robustness_ci[1]
        for row in (r, s):
            assert row.overall_ci is not None and row.overall_ci[0] <= row.overall <= row.overall_ci[1]  # type: ignore[operator]
        assert (r.rank_by_overall_ci, s.rank_by_overall_ci) == ((1, 1), (2, 2))
        assert (r.rank_by_capability_ci, r.shift_ci) == ((1, 1), (0, 0))
        assert not any("unknown" in n and "CI" in n for n in ev.reliability.notes)  # type: ignore[union-attr]
        # shown in the tables, in evaluation.json, and said in the uncertainty sentence
        header, cells = reliability_table(ev.reliability, "classes")  # type: ignore[arg-type]
        shown = dict(zip(header, cells[1]))
        assert shown["rank 95 % CI"] == "2" and shown["overall 95 % CI"].count(" to ") == 1
        header, cells = reliability_basis_table(ev.reliability, "classes")  # type: ignore[arg-type]
        assert dict(zip(header, cells[0]))["RR 95 % CI"] == "1.000 to 1.000"
        data = ev.to_dict()["reliability"]
        assert data["rows"][0]["rank_by_overall_ci"] == [1, 1] and "resampled" not in data["rows"][0]
        assert "RR the percentile interval over 300 resamples" in data["uncertainty"]
        assert "E held fixed" in data["uncertainty"] and "Not yet computed" not in data["uncertainty"]

    def test_e_is_held_fixed(self, sqlite_engine, five) -> None:
        self.store_pair(sqlite_engine)
        before = rows(
            evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=NO_CDC, n_boot=200, store=False)
        )["s"]
        self.store_pair(sqlite_engine, s_latency=0.3)  # newer runs: the same outcomes, S slower (E 0.5 -> 0.25)

        after = rows(
            evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=NO_CDC, n_boot=200, store=False)
        )["s"]

        assert after.efficiency == pytest.approx(0.25)
        # the same resamples of P and RR; E moves every resample, so both bounds, by (0.25 - 0.5) / 3
        assert before.overall_ci is not None and after.overall_ci is not None
        assert after.overall_ci == pytest.approx((before.overall_ci[0] - 0.25 / 3, before.overall_ci[1] - 0.25 / 3))
        assert after.robustness_ci == before.robustness_ci

    def test_identical_outcomes_give_identical_intervals(self, sqlite_engine, five) -> None:
        ws.add_run(sqlite_engine, "t", "T", "topk", answers(S_FIVE), five)  # S's answers under another name
        self.store_pair(sqlite_engine)
        store(sqlite_engine, with_outcomes(robustness("T", 0.5, latency_p50_s=0.1), 36, 18))

        got = rows(
            evaluate(
                sqlite_engine, "five", references=TEAM, runs=["r", "s", "t"], weights=NO_CDC, n_boot=200, store=False
            )
        )

        s, t = got["s"], got["t"]
        assert s.robustness_ci == t.robustness_ci and s.overall_ci == t.overall_ci
        assert s.rank_by_overall_ci == t.rank_by_overall_ci == (2, 2)  # tied in every resample: both second

    def test_runs_with_different_grids_on_the_same_images(self, sqlite_engine, five) -> None:
        ws.add_run(sqlite_engine, "t", "T", "topk", answers(S_FIVE), five)
        self.store_pair(sqlite_engine)
        # T: S's outcomes, and a second severity that keeps every clean hit (jpeg/1 and jpeg/2; S has jpeg/1 only)
        s = with_outcomes(robustness("T", 0.5, latency_p50_s=0.1), 36, 18)
        o = s.outcomes
        assert o is not None
        right = np.vstack([o.correct["imgt"], o.correct["imgt"][:1]])
        scored = np.vstack([o.scored["imgt"], o.scored["imgt"][:1]])
        two = RobustnessOutcomes(o.image_ids, (*o.conditions, "jpeg/2"), np.vstack([o.errors, o.errors[:1]]),
                                 {"imgt": scored}, {"imgt": right})  # fmt: skip
        store(sqlite_engine, replace(s, severities=(1, 2), grid={"imgt": [[0.5, 1.0]]}, retention={"imgt": 0.75},
                                     outcomes=two))  # fmt: skip

        got = rows(
            evaluate(
                sqlite_engine, "five", references=TEAM, runs=["r", "s", "t"], weights=NO_CDC, n_boot=200, store=False
            )
        )

        s_ci, t_ci = got["s"].robustness_ci, got["t"].robustness_ci
        assert s_ci is not None and t_ci is not None and got["t"].robustness == pytest.approx(0.75)
        # the same images, the same resamples: T's RR is S's halfway to 1 in every resample, so are its bounds
        assert t_ci == pytest.approx(((s_ci[0] + 1) / 2, (s_ci[1] + 1) / 2))

    def test_deterministic_under_a_seed(self, sqlite_engine, five) -> None:
        self.store_pair(sqlite_engine)

        def run(seed: int) -> ReliabilityRow:
            ev = evaluate(
                sqlite_engine,
                "five",
                references=TEAM,
                runs=["r", "s"],
                weights=NO_CDC,
                n_boot=100,
                seed=seed,
                store=False,
            )
            return rows(ev)["s"]

        first, again, other = run(7), run(7), run(8)
        assert (first.robustness_ci, first.overall_ci) == (again.robustness_ci, again.overall_ci)
        assert np.array_equal(first.resampled["robustness"], again.resampled["robustness"])
        assert not np.array_equal(first.resampled["robustness"], other.resampled["robustness"])

    def test_runs_stored_without_outcomes_load_and_have_no_interval(self, sqlite_engine, five, tmp_path) -> None:
        store(sqlite_engine, robustness("R", 0.9, latency_p50_s=0.1))  # as stored before outcomes were kept
        store(sqlite_engine, with_outcomes(robustness("S", 0.5, latency_p50_s=0.1), 36, 18))

        ev = evaluate(sqlite_engine, "five", references=TEAM, runs=["r", "s"], weights=NO_CDC, n_boot=200)

        r, s = rows(ev)["r"], rows(ev)["s"]
        assert r.robustness == 0.9 and r.robustness_ci is None and s.robustness_ci is not None
        assert r.overall is not None and r.overall_ci is None and r.rank_by_overall_ci is None
        assert s.overall_ci is not None and s.rank_by_overall_ci is None  # ranks need every row's resamples
        notes = ev.reliability.notes  # type: ignore[union-attr]
        assert any(n.startswith("RR interval unknown for r: robustness run #") for n in notes)
        assert any(n.startswith("overall 95 % CI unknown for r (robustness)") for n in notes)
        header, cells = reliability_basis_table(ev.reliability, "classes")  # type: ignore[arg-type]
        assert {row[0]: dict(zip(header, row))["RR 95 % CI"] for row in cells}["r"] == "—"
        md = write_report(ev, tmp_path / "out").markdown.read_text()
        assert "| RR 95 % CI |" in md and "RR interval unknown for r" in md
