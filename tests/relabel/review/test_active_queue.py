"""The active review queue on a toy workspace: the newest vote-based snapshot's posteriors and the stored runs'
top-1 rank the images by the expected benefit of one more review; the card and `relabel queue` say why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy.engine import Engine
from sqlmodel import Session

from db.enums import Category, PredictionStatus
from db.models import Snapshot, SnapshotLabel, SnapshotPosterior
from relabel.common.workspace import get_dataset, image_index
from relabel.review.active import active_order
from relabel.review.benefit import load_benefit
from relabel.review.cards import pick_runs
from relabel.review.evidence import load_evidence
from relabel.review.queue import Evidence, QueueFilter, ReviewQueue
from relabel.review.ranking import MIN_BENEFIT
from relabel.review.studio import Studio
from relabel.review.upcoming import list_queue
from relabel.sources.bulk import store_run
from tests.studio_workspace import build_workspace
from ui import card_api

TABBY, TIGER, EGYPTIAN, TENCH, GOLDFISH = 281, 282, 285, 0, 1
# The three images the snapshot holds posteriors of. EGYPTIAN_IMG: egyptian or tabby, a coin, and the runs split on
# it (the classifier says egyptian, two more runs say tabby; the reason names tabby, the lower class index of the
# tie): 3 runs' top-1 at stake. TENCH_IMG: tench for sure,
# goldfish too perhaps; every run says tench, which is settled: as uncertain a label, no run at stake. TABBY_IMG:
# settled tabby. The other three images have no votes.
EGYPTIAN_IMG, TENCH_IMG, TABBY_IMG = "n02124075_egyptian.jpg", "n01440764_tench.jpg", "n02123045_tabby.jpg"
POSTERIORS = {
    EGYPTIAN_IMG: {EGYPTIAN: 0.5, TABBY: 0.5},
    TENCH_IMG: {TENCH: 0.999, GOLDFISH: 0.5},
    TABBY_IMG: {TABBY: 0.995},
}
UNCERTAIN = (EGYPTIAN_IMG, TENCH_IMG)
CLASSIFIER = "efficientnet-lite0@topk"  # the card's classifier; the newer runs would be picked by default


def add_vote_snapshot(engine: Engine, ids: dict[str, int], name: str = "ds") -> None:
    """A snapshot as `snapshot create --consensus ds` stores one: its settings, labels and posteriors."""
    with Session(engine) as s:
        snap = Snapshot(
            dataset_id=1, name=name, content_hash=name, base_source="imgt", undecided_policy="keep",
            n_images=len(POSTERIORS), counts={}, consensus={"rule": "ds", "threshold": 0.9},
        )  # fmt: skip
        s.add(snap)
        s.flush()
        for path, posteriors in POSTERIORS.items():
            origin, category = ("uncertain", Category.U) if path in UNCERTAIN else ("consensus", Category.A)
            s.add(SnapshotLabel(snapshot_id=snap.id, image_id=ids[path], classes=[], category=category, origin=origin))
            for c, p in posteriors.items():
                s.add(SnapshotPosterior(snapshot_id=snap.id, image_id=ids[path], class_index=c, posterior=p))
        s.commit()


@pytest.fixture
def ws(db_url: str, tmp_path: Path) -> tuple[Engine, dict[str, int]]:
    """The studio workspace (six photos, a top-3 classifier) plus two runs that say tabby on the egyptian cat and
    tench on the tench, and a run that failed there (SQLite in tmp_path/ws, or PostgreSQL)."""
    engine = build_workspace(tmp_path, db_url)
    with Session(engine) as s:
        ds = get_dataset(s, "photos")
        ids = image_index(s, ds).ids_by_path
        says = {EGYPTIAN_IMG: TABBY, TENCH_IMG: TENCH, TABBY_IMG: TABBY}
        for run in ("vit@topk", "convnext@topk"):
            answers = [{"image_id": ids[p], "classes": [c]} for p, c in says.items()]
            store_run(s, dataset_id=1, name=run, predictions=answers)
        failed = {"image_id": ids[EGYPTIAN_IMG], "classes": [], "status": PredictionStatus.error, "reason": "timeout"}
        broken = [failed, {"image_id": ids[TABBY_IMG], "classes": [TABBY]}]
        store_run(s, dataset_id=1, name="broken@topk", predictions=broken)
        s.commit()
    return engine, ids


def queue_of(engine: Engine, seed: int = 0) -> tuple[ReviewQueue, object]:
    with engine.connect() as conn:
        benefit = load_benefit(conn, 1)
        return ReviewQueue(load_evidence(conn, 1, pick_runs(conn, 1, None, CLASSIFIER), benefit), seed=seed), benefit


class TestOrder:
    def test_without_a_vote_snapshot_the_queue_keeps_its_evidence_order(self, ws) -> None:
        engine, ids = ws
        queue, benefit = queue_of(engine)
        assert benefit is None
        assert queue.order[0] == ids["n03773504_missile.jpg"]  # classifier, suggestion and ReaL all disagree
        assert all(e.benefit is None for e in queue.evidence.values())

    def test_uncertain_where_runs_disagree_then_uncertain_alone_then_the_rest_by_evidence(self, ws) -> None:
        engine, ids = ws
        before, _ = queue_of(engine)
        add_vote_snapshot(engine, ids)
        queue, benefit = queue_of(engine)
        assert benefit is not None and benefit.runs == ("broken@topk", "convnext@topk", "efficientnet-lite0@topk",
                                                        "vit@topk")  # fmt: skip
        egyptian, tench, tabby = (benefit.score(ids[p]) for p in (EGYPTIAN_IMG, TENCH_IMG, TABBY_IMG))
        # egyptian: 0.5 + 0.5 label errors, three runs (the failed one does not count) at 0.5 each
        assert egyptian == pytest.approx(2.5) and tench == pytest.approx(0.501 + 3 * 0.001)
        assert tabby == pytest.approx(0.005 * 5) and tabby < MIN_BENEFIT  # settled: nothing worth a review
        assert queue.order[:2] == [ids[EGYPTIAN_IMG], ids[TENCH_IMG]]
        # then today's evidence order over the rest: the settled tabby keeps its place among the unvoted images
        rest = [i for i in before.order if i not in (ids[EGYPTIAN_IMG], ids[TENCH_IMG])]
        assert queue.order[2:] == rest
        assert benefit.score(ids["n03773504_missile.jpg"]) is None

    def test_the_benefit_tier_is_the_active_order(self, ws) -> None:
        engine, ids = ws
        add_vote_snapshot(engine, ids)
        for seed in (0, 1, 2):
            queue, benefit = queue_of(engine, seed)
            ranked = [int(benefit.image_ids[i]) for i in active_order(benefit.benefit, seed=seed)]
            worth = [i for i in ranked if (benefit.score(i) or 0.0) >= MIN_BENEFIT]
            assert queue.order[: len(worth)] == worth

    def test_the_newest_vote_snapshot_decides(self, ws) -> None:
        engine, ids = ws
        add_vote_snapshot(engine, ids, "old")
        POSTERIORS_SWAPPED = {EGYPTIAN_IMG: {EGYPTIAN: 0.999}, TENCH_IMG: {TENCH: 0.999, GOLDFISH: 0.5}}
        with Session(engine) as s:
            snap = Snapshot(dataset_id=1, name="new", content_hash="new", base_source="imgt", undecided_policy="keep",
                            n_images=2, counts={}, consensus={"rule": "ds"})  # fmt: skip
            s.add(snap)
            s.flush()
            for path, posteriors in POSTERIORS_SWAPPED.items():
                for c, p in posteriors.items():
                    s.add(SnapshotPosterior(snapshot_id=snap.id, image_id=ids[path], class_index=c, posterior=p))
            s.commit()
        queue, benefit = queue_of(engine)
        assert benefit.snapshot == "new" and queue.order[0] == ids[TENCH_IMG]
        assert benefit.score(ids[TABBY_IMG]) is None  # the old snapshot's posteriors are superseded


class TestServing:
    def test_filters_overlap_and_leases_work_on_the_new_order(self, ws) -> None:
        engine, ids = ws
        add_vote_snapshot(engine, ids)
        with engine.connect() as conn:
            rows = load_evidence(conn, 1, pick_runs(conn, 1, None, CLASSIFIER), load_benefit(conn, 1))
        queue = ReviewQueue(rows, overlap=2)
        assert [queue.next_image(u) for u in (1, 2, 3)] == [ids[EGYPTIAN_IMG]] * 2 + [ids[TENCH_IMG]]
        assert queue.upcoming(2) == [ids[TENCH_IMG], queue.order[2]]  # the egyptian cat is held by two
        tench_class = QueueFilter(class_index=TENCH)
        assert queue.next_image(4, tench_class) == ids[TENCH_IMG]

    def test_a_queue_of_evidence_with_benefits_ranks_the_benefit_tier_first(self) -> None:
        loud = Evidence(1, original=5, suggestion=6, original_confidence=0.0, priors=[[6]])
        rows = [loud, Evidence(2, original=5, benefit=0.3), Evidence(3, original=5, benefit=2.0),
                Evidence(4, original=5, benefit=0.01), Evidence(5, original=5, suggestion=6)]  # fmt: skip
        assert ReviewQueue(rows).order == [3, 2, 1, 5, 4]


class TestCard:
    def test_the_card_says_why_it_is_next_and_only_when_ranked_by_benefit(self, ws, tmp_path: Path) -> None:
        engine, ids = ws
        studio = Studio(engine, cache_dir=tmp_path / "cache", classifier_run=CLASSIFIER)
        card = card_api.next_card(studio, "alice", {})["card"]
        assert card["reason"] is None  # no vote-based snapshot: no benefit, no line
        add_vote_snapshot(engine, ids)
        studio.refresh()
        card = card_api.next_card(studio, "bob", {})["card"]
        assert card["image_id"] == ids[EGYPTIAN_IMG]
        assert card["reason"] == "P(tabby) = 0.50; changes 3 runs' top-1"
        assert studio.review_reason(ids[TENCH_IMG]) == "P(goldfish) = 0.50; 0.50 expected label errors"
        assert studio.review_reason(ids[TABBY_IMG]) is None  # settled: served by evidence, no line
        assert studio.review_reason(ids["n03773504_missile.jpg"]) is None  # no votes

    def test_the_page_shows_the_reason_as_text(self) -> None:
        from ui.card_component import asset

        script = asset("card.js")
        assert 'box.textContent = card && card.reason ? `Next because: ${card.reason}` : "";' in script
        assert '<div class="rg-reason" hidden></div>' in asset("card.html")


class TestCommandLine:
    def run(self, folder: Path, *args: str) -> tuple[int, str]:
        """`relabel queue ARGS` on the SQLite workspace of `ws` (in folder/ws)."""
        from relabel.cli import cli

        folder = folder / "ws"
        if not (folder / "relabel.db").exists():
            pytest.skip("the command line opens the workspace's SQLite file")
        done = CliRunner().invoke(cli, ["--workspace", str(folder), "queue", "--classifier-run", CLASSIFIER, *args])
        return done.exit_code, done.output

    def test_lists_the_next_images_with_benefit_and_reason(self, ws, tmp_path: Path) -> None:
        engine, ids = ws
        add_vote_snapshot(engine, ids)
        code, out = self.run(tmp_path, "--limit", "3")
        assert code == 0, out
        lines = out.splitlines()
        assert lines[0] == "dataset 'photos': next 3 of 6 open image(s), by benefit from snapshot 'ds' and 4 run(s), " \
                           "then by evidence"  # fmt: skip
        assert lines[1] == "rank\timage\tfile\toriginal\tbenefit\treason"
        assert lines[2] == f"1\t{ids[EGYPTIAN_IMG]}\t{EGYPTIAN_IMG}\tEgyptian cat\t2.500\tP(tabby) = 0.50; " \
                           "changes 3 runs' top-1"  # fmt: skip
        assert lines[3].startswith(f"2\t{ids[TENCH_IMG]}\t{TENCH_IMG}\ttench\t0.504\tP(goldfish) = 0.50")
        assert lines[4].split("\t")[4:] == ["-", "suggestion differs; classifier P(original) = 0.10; "
                                            "1 of 1 prior relabels leave it out"]  # fmt: skip
        assert len(lines) == 5

    def test_json_and_a_decided_image_leaves_the_listing(self, ws, tmp_path: Path) -> None:
        engine, ids = ws
        add_vote_snapshot(engine, ids)
        studio = Studio(engine, cache_dir=tmp_path / "cache", classifier_run=CLASSIFIER)
        card = card_api.next_card(studio, "alice", {})["card"]
        card_api.decide(studio, "alice", {"key": card["key"], "action": "original"})
        code, out = self.run(tmp_path, "--json", "--limit", "2")
        assert code == 0, out
        listing = json.loads(out)
        assert listing["snapshot"] == "ds" and listing["open_images"] == 5 and len(listing["images"]) == 2
        first = listing["images"][0]
        assert first["image_id"] == ids[TENCH_IMG] and first["rank"] == 1 and first["benefit"] == 0.504
        assert first["original"] == [{"index": TENCH, "name": "tench"}]
        code, out = self.run(tmp_path, "--json", "--limit", "2", "--overlap", "2")  # one more opinion wanted
        assert json.loads(out)["images"][0]["image_id"] == ids[EGYPTIAN_IMG]

    def test_matches_the_studio_order_without_a_snapshot(self, ws, tmp_path: Path) -> None:
        engine, _ = ws
        listing = list_queue(engine, limit=6, classifier_run=CLASSIFIER)
        queue, _ = queue_of(engine)
        assert [e.image_id for e in listing.entries] == queue.order and listing.snapshot is None
        assert all(e.benefit is None for e in listing.entries)

    def test_help_and_one_line_errors(self, ws, tmp_path: Path) -> None:
        code, out = self.run(tmp_path, "--help")
        assert code == 0 and "relabel queue --limit 50 --overlap 3" in out and "P(tabby cat) = 0.55" in out
        code, out = self.run(tmp_path, "--limit", "0")
        assert code != 0 and out == "error: --limit must be at least 1, got 0\n"
        code, out = self.run(tmp_path, "--dataset", "nope")
        assert code != 0 and len(out.strip().splitlines()) == 1 and "nope" in out
