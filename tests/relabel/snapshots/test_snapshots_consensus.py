"""Snapshots whose consensus reads votes: posteriors stored, uncertain images as U, exports, diff, review queue."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from click.testing import CliRunner, Result
from sqlalchemy import select, text
from sqlalchemy.exc import DatabaseError
from sqlmodel import Session

from db.enums import Answer, Role, Verdict
from db.models import Image, Snapshot, SnapshotPosterior, VoteSource, stored_id
from relabel.common.errors import InputError, NotFoundError
from relabel.decisions.annotations import add_user, record_annotation
from relabel.decisions.rules import RULES, ConsensusRule, DecisionKey, Outcome
from relabel.decisions.rules import Vote as Ballot
from relabel.exports.formats import export_snapshot, format_posteriors
from relabel.ingest import ingest_dataset, plan_ingest
from relabel.ingest.layouts import LayoutOptions
from relabel.review.cards import RunChoice
from relabel.review.evidence import load_evidence, uncertain_images
from relabel.review.queue import Evidence, QueueFilter, ReviewQueue, priority
from relabel.review.ranking import UNCERTAIN_WEIGHT, WEIGHTS
from relabel.snapshots.diff import diff_snapshots
from relabel.snapshots.freeze import create_snapshot, list_snapshots, vote_snapshot_lines
from relabel.sources.bulk import store_run
from relabel.sources.labels import import_source
from relabel.votes.aggregation import METHODS, YES, Aggregate, FitOptions, Method, Votes
from relabel.votes.fit import shared_caution
from relabel.votes.importing import import_votes as import_votes_file
from relabel.votes.posteriors import VotedImage, consensus_choices, voted_images
from tests import images
from tests.conftest import shared
from tests.relabel.votes.test_vote_scan import store_votes

NAMES = ["a_cup.jpg", "b_cat.jpg", "c_fish.jpg", "d_rocket.jpg", "e_blur.jpg", "f_dog.jpg", "g_new.jpg"]
RATERS = ("r1", "r2", "r3", "r4", "r5")
Y, N = Answer.yes, Answer.no
# ImGT: espresso 967, tabby 281, tench 0, missile 657, tench 0, Labrador 208. Each rater misses one present class
# and gives one absent class (PRESENT[k], ABSENT[k] for rater k): reliable, not perfect.
PRESENT = [
    ("a_cup.jpg", 968),  # cup and espresso: M
    ("a_cup.jpg", 967),
    ("b_cat.jpg", 281),  # tabby confirmed: A
    ("c_fish.jpg", 1),  # goldfish, not tench: B
    ("f_dog.jpg", 208),  # the votes say Labrador; a lead's adjudication says golden retriever
]
ABSENT = [
    ("a_cup.jpg", 504),
    ("b_cat.jpg", 285),
    ("b_cat.jpg", 282),
    ("c_fish.jpg", 0),
    ("c_fish.jpg", 2),
    ("d_rocket.jpg", 657),  # neither missile, projectile nor warplane: Z
    ("d_rocket.jpg", 744),
    ("d_rocket.jpg", 403),
    ("e_blur.jpg", 0),  # not tench
    ("e_blur.jpg", 391),
    ("f_dog.jpg", 207),
    ("f_dog.jpg", 209),
]
SPLIT = ("e_blur.jpg", 1)  # goldfish? two raters say yes, two no, one not asked: about 0.79, uncertain at 0.9
SPLIT_ANSWERS = [Y, Y, N, N, None]


def rater_answers() -> dict[tuple[str, int], list[Answer | None]]:
    """(image, class) -> the five raters' answers, None where a rater was not asked."""
    votes: dict[tuple[str, int], list[Answer | None]] = {}
    for k, pair in enumerate(PRESENT):
        votes[pair] = [N if w == k else Y for w in range(5)]
    for k, pair in enumerate(ABSENT):
        votes[pair] = [Y if w == k else N for w in range(5)]
    votes[SPLIT] = list(SPLIT_ANSWERS)
    return votes


EXPECTED = {  # image -> (labels, category, origin) of the ds snapshot with studio votes off
    "a_cup.jpg": ([967, 968], "M", "consensus"),
    "b_cat.jpg": ([281], "A", "consensus"),
    "c_fish.jpg": ([1], "B", "consensus"),
    "d_rocket.jpg": ([], "Z", "consensus"),
    "e_blur.jpg": ([1], "U", "uncertain"),  # its best estimate: goldfish at about 0.79, tench confidently absent
    "f_dog.jpg": ([207], "B", "adjudication"),
    "g_new.jpg": ([], "U", "base"),
}


@pytest.fixture
def ws(engine, vocab, tmp_path: Path):
    """Seven images with ImGT espresso, tabby, tench, missile, tench, Labrador, and one unlabeled; five raters'
    votes imported as the source "raters"; f_dog adjudicated by a lead."""
    root = tmp_path / "r"
    labels = ["espresso", "tabby", "tench", "missile", "tench", "Labrador retriever", ""]
    for i, name in enumerate(NAMES):
        images.photo(root / name, color=(i * 30, 10, 10))
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,label\n" + "".join(f"{n},{lab}\n" for n, lab in zip(NAMES, labels)))
    plan = plan_ingest(root, vocab, "manifest", LayoutOptions(manifest=manifest))
    ingest_dataset(engine, plan, dataset="d", root=root, vocab=vocab, show_progress=False, workers=1)
    for user, role in (("ann", Role.annotator), ("bob", Role.annotator), ("lead", Role.lead)):
        add_user(engine, user, role)
    with Session(engine) as s:
        ids = {p: i for p, i in s.execute(select(Image.path, Image.id))}
    import_votes(engine, "raters", {(ids[path], c): answers for (path, c), answers in rater_answers().items()})
    decide(engine, ids["f_dog.jpg"], "lead", Verdict.labels, [207], adjudicate=True)
    return engine, ids


def import_votes(engine, name: str, votes: dict[tuple[int, int], list[Answer | None]]) -> None:
    """Store a vote source as an importer would (`tests.relabel.votes.test_vote_scan.store_votes`)."""
    with Session(engine) as s:
        source = VoteSource(dataset_id=1, name=name, format="test", n_workers=len(RATERS))
        s.add(source)
        s.flush()
        given = [
            (image_id, c, worker, answer.value)
            for (image_id, c), answers in votes.items()
            for worker, answer in zip(RATERS, answers)
            if answer is not None
        ]
        store_votes(s, stored_id(source), given)
        s.commit()


def decide(engine, image_id: int, user: str, verdict: Verdict, classes=(), adjudicate: bool = False) -> None:
    record_annotation(engine, image_id=image_id, user=user, verdict=verdict, classes=classes, adjudicate=adjudicate)


def stored_posteriors(engine, name: str) -> dict[tuple[int, int], float]:
    with Session(engine) as s:
        snap = s.scalars(select(Snapshot).where(Snapshot.name == name)).one()
        rows = s.execute(
            select(SnapshotPosterior.image_id, SnapshotPosterior.class_index, SnapshotPosterior.posterior).where(
                SnapshotPosterior.snapshot_id == snap.id
            )
        )
        return {(i, c): p for i, c, p in rows}


def jsonl_rows(path: Path) -> dict[str, dict]:
    return {r["image"]: r for r in map(json.loads, path.read_text().splitlines())}


class TestVotedImages:
    """The pure rule of `relabel.votes.posteriors`, on posteriors given outright."""

    PAIRS = np.array([[1, 5], [1, 6], [2, 5], [2, 7], [3, 5], [3, 8], [4, 9]])  # (image id, class); 5 is original
    POSTERIOR = np.array([0.97, 0.02, 0.7, 0.05, 0.3, 0.04, 0.05])

    def settle(self, keep_original: float | None) -> dict[int, VotedImage]:
        table = SimpleNamespace(pairs=self.PAIRS)
        result = Aggregate("ds", self.POSTERIOR)
        original = {1: [5], 2: [5], 3: [5], 4: [5]}
        return voted_images(table, result, 0.9, original=original, keep_original=keep_original)

    def test_a_new_class_needs_the_threshold_and_the_middle_is_uncertain(self) -> None:
        got = {i: (v.classes, v.uncertain, v.none_fit) for i, v in self.settle(None).items()}
        assert got == {1: ((5,), False, False), 2: ((), True, False), 3: ((), True, False), 4: ((), False, True)}

    def test_an_original_class_stays_at_keep_original_and_is_uncertain_only_below_it(self) -> None:
        got = {i: (v.classes, v.uncertain) for i, v in self.settle(0.5).items()}
        assert got == {1: ((5,), False), 2: ((5,), False), 3: ((), True), 4: ((), False)}
        assert self.settle(0.5)[2].posteriors == {5: 0.7, 7: 0.05}

    def test_a_counting_method_decides_by_its_own_rule(self) -> None:
        table = SimpleNamespace(pairs=self.PAIRS[:2])
        result = Aggregate(
            "set-majority", np.array([0.6, 0.2]), accepted=np.array([False, False]), undecided=np.array([True, True])
        )
        assert voted_images(table, result, 0.9)[1].uncertain

    def test_posteriors_format_for_a_csv_cell(self) -> None:
        assert format_posteriors({208: 0.04123, 207: 0.97314}) == "207:0.9731|208:0.0412"


class TestDawidSkeneSnapshot:
    def test_labels_categories_and_origins_follow_the_posteriors(self, ws, tmp_path: Path) -> None:
        engine, ids = ws
        s = create_snapshot(engine, "ds", consensus="ds", threshold=0.9, studio_votes=False)
        export_snapshot(engine, "ds", fmt="jsonl", out=tmp_path / "ds.jsonl")
        got = {path: (r["labels"], r["category"], r["origin"]) for path, r in jsonl_rows(tmp_path / "ds.jsonl").items()}
        assert got == EXPECTED
        assert s.counts == {"A": 1, "B": 2, "M": 1, "U": 2, "Z": 1} and s.uncertain == 1
        assert s.origins == {"adjudication": 1, "base": 1, "consensus": 4, "uncertain": 1}

    def test_posteriors_are_stored_for_every_voted_pair_but_adjudicated_ones(self, ws) -> None:
        engine, ids = ws
        s = create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        stored = stored_posteriors(engine, "ds")
        voted = {(ids[p], c) for p, c in [*PRESENT, *ABSENT, SPLIT] if p != "f_dog.jpg"}
        assert set(stored) == voted and s.n_posteriors == len(voted) == 15
        assert min(stored[ids[p], c] for p, c in PRESENT if p != "f_dog.jpg") > 0.99
        assert max(stored[ids[p], c] for p, c in ABSENT if p != "f_dog.jpg") < 0.05
        assert 0.7 < stored[ids[SPLIT[0]], SPLIT[1]] < 0.85

    def test_the_settings_are_recorded(self, ws) -> None:
        engine, _ = ws
        create_snapshot(engine, "ds", consensus="ds", threshold=0.8, studio_votes=False)
        [snap] = list_snapshots(engine)
        c = snap.consensus
        assert (c["rule"], c["threshold"], c["min_votes"], c["vote_sources"]) == ("ds", 0.8, 1, ["raters"])
        assert (c["studio"], c["with_model"], c["converged"]) == (False, None, True) and c["iterations"] > 1
        assert c["keep_original"] == 0.5 and (c["n_pairs"], c["n_votes"], c["n_workers"]) == (18, 89, 5)
        # every voted pair has several answers, so each rater's 17 or 18 answers are all shared
        assert c["shared_answers"] == 18

    def test_a_fit_on_few_shared_answers_carries_a_caution_and_one_on_enough_does_not(self, ws) -> None:
        engine, ids = ws
        sparse = create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        assert (caution := shared_caution(sparse.consensus)) is not None and "answered 18 pair(s)" in caution
        assert f"caution: {caution}" in vote_snapshot_lines(engine)  # the dashboard shows it
        # 7 images x 20 classes, every rater answers every pair: 140 shared answers each
        dense = {(i, c): [Y if c == 0 else N] * len(RATERS) for i in ids.values() for c in range(20)}
        import_votes(engine, "dense", dense)
        enough = create_snapshot(engine, "dense-ds", consensus="ds", vote_sources=["dense"], studio_votes=False)
        assert enough.consensus["shared_answers"] == 140 and shared_caution(enough.consensus) is None
        assert not any(line.startswith("caution") for line in vote_snapshot_lines(engine))  # the newest is dense

    def test_a_lower_threshold_settles_the_split_image(self, ws) -> None:
        engine, _ = ws
        s = create_snapshot(engine, "loose", consensus="ds", threshold=0.75, studio_votes=False)
        assert s.uncertain == 0 and s.counts["B"] == 3  # goldfish on the blurred image too

    def test_exclude_gives_uncertain_images_no_labels(self, ws, tmp_path: Path) -> None:
        engine, _ = ws
        create_snapshot(engine, "ds", consensus="ds", undecided="exclude", studio_votes=False)
        export_snapshot(engine, "ds", fmt="jsonl", out=tmp_path / "ds.jsonl")
        row = jsonl_rows(tmp_path / "ds.jsonl")["e_blur.jpg"]
        assert (row["labels"], row["category"], row["origin"]) == ([], "U", "uncertain")

    def test_images_without_votes_follow_the_unanimous_rule(self, ws) -> None:
        engine, ids = ws
        decide(engine, ids["g_new.jpg"], "ann", Verdict.labels, [1])
        decide(engine, ids["g_new.jpg"], "bob", Verdict.labels, [1])
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        with Session(engine) as s:
            origin, category = s.execute(
                text("select origin, category from snapshot_labels where image_id = :i"), {"i": ids["g_new.jpg"]}
            ).one()
        assert (origin, category) == ("consensus", "B")


class TestRequests:
    def test_unanimous_is_unchanged_and_stores_no_posteriors(self, ws, tmp_path: Path) -> None:
        engine, _ = ws
        s = create_snapshot(engine, "plain")
        assert s.consensus == {"rule": "unanimous", "min_votes": 1} and s.n_posteriors == 0
        assert s.origins == {"adjudication": 1, "base": 6} and not stored_posteriors(engine, "plain")
        export_snapshot(engine, "plain", fmt="jsonl", out=tmp_path / "plain.jsonl")
        assert all("posteriors" not in r for r in jsonl_rows(tmp_path / "plain.jsonl").values())
        export_snapshot(engine, "plain", fmt="csv", out=tmp_path / "plain.csv")
        assert next(csv.reader((tmp_path / "plain.csv").open()))[-1] == "origin"

    def test_bad_requests_are_refused_and_store_nothing(self, ws) -> None:
        engine, _ = ws
        with pytest.raises(
            NotFoundError, match=f"unknown consensus rule 'bayes'; known: {', '.join(sorted(consensus_choices()))}$"
        ):
            create_snapshot(engine, "x", consensus="bayes")
        with pytest.raises(InputError, match=r"--threshold 0.3 is below 0.5"):
            create_snapshot(engine, "x", consensus="ds", threshold=0.3)
        with pytest.raises(InputError, match=r"--threshold 1.5 is outside \(0, 1\]"):
            create_snapshot(engine, "x", consensus="ds", threshold=1.5)
        with pytest.raises(InputError, match="need a consensus that reads votes"):
            create_snapshot(engine, "x", vote_sources=["raters"])
        with pytest.raises(NotFoundError, match="unknown vote source 'mturk'; known: raters"):
            create_snapshot(engine, "x", consensus="ds", vote_sources=["mturk"])
        assert list_snapshots(engine) == []

    def test_no_votes_to_aggregate_is_one_line(self, ws) -> None:
        engine, _ = ws
        with Session(engine) as s:  # a dataset whose only votes would be the studio's, and nobody decided
            s.execute(text("delete from vote_pairs"))
            s.commit()
        with pytest.raises(InputError, match="the dataset has no votes to aggregate"):
            create_snapshot(engine, "x", consensus="ds")

    def test_posteriors_are_immutable(self, ws) -> None:
        engine, _ = ws
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        for statement in ("update snapshot_posteriors set posterior = 0.5", "delete from snapshot_posteriors"):
            with pytest.raises(DatabaseError, match="immutable"), engine.begin() as conn:
                conn.execute(text(statement))
        assert len(stored_posteriors(engine, "ds")) == 15

    def test_equal_labels_with_other_posteriors_hash_differently(self, ws) -> None:
        engine, _ = ws
        strict = create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        again = create_snapshot(engine, "ds-again", consensus="ds", studio_votes=False)
        one_coin = create_snapshot(engine, "one-coin", consensus="one-coin", studio_votes=False)
        assert strict.content_hash == again.content_hash
        assert one_coin.counts == strict.counts and one_coin.content_hash != strict.content_hash

    def test_studio_decisions_vote_on_the_classes_a_card_showed(self, ws) -> None:
        engine, ids = ws
        decide(engine, ids["g_new.jpg"], "ann", Verdict.labels, [1])  # no original label: the one candidate is 1
        s = create_snapshot(engine, "ds", consensus="ds")
        assert s.consensus["studio"] is True and s.consensus["vote_sources"] == ["raters"]
        assert (ids["g_new.jpg"], 1) in stored_posteriors(engine, "ds")

    def test_a_model_run_votes_when_asked_and_the_summary_says_so(self, ws) -> None:
        from relabel.cli.snapshot import consensus_line

        engine, ids = ws
        with Session(engine) as s:
            ranks = (("e_blur.jpg", [1, 0]), ("c_fish.jpg", [1, 2]))
            predictions = [{"image_id": ids[path], "classes": ranked, "scores": [0.9, 0.1]} for path, ranked in ranks]
            store_run(s, dataset_id=1, name="clf", model="tiny", protocol="supervised", predictions=predictions)
            s.commit()
        s = create_snapshot(engine, "ds", consensus="ds", studio_votes=False, with_model="clf")
        assert s.consensus["with_model"] == "clf" and s.consensus["n_workers"] == 6
        assert ", votes raters, model clf voted, " in consensus_line(s.consensus)
        with pytest.raises(NotFoundError, match="unknown run 'nope' for --with-model; known runs: clf"):
            create_snapshot(engine, "x", consensus="ds", with_model="nope")


class TestExports:
    def test_jsonl_and_csv_carry_the_posteriors_and_real_stays_sets(self, ws, tmp_path: Path) -> None:
        engine, ids = ws
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        stored = stored_posteriors(engine, "ds")
        export_snapshot(engine, "ds", fmt="jsonl", out=tmp_path / "ds.jsonl")
        rows = jsonl_rows(tmp_path / "ds.jsonl")
        blur = {int(c): p for c, p in rows["e_blur.jpg"]["posteriors"].items()}
        assert set(blur) == {0, 1, 391} and blur[1] == pytest.approx(stored[ids["e_blur.jpg"], 1], abs=1e-6)
        assert rows["f_dog.jpg"]["posteriors"] == {} and rows["g_new.jpg"]["posteriors"] == {}
        export_snapshot(engine, "ds", fmt="csv", out=tmp_path / "ds.csv")
        table = {r["image"]: r for r in csv.DictReader((tmp_path / "ds.csv").open())}
        cell = table["e_blur.jpg"]["posteriors"]
        assert cell == "|".join(f"{c}:{stored[ids['e_blur.jpg'], c]:.4f}" for c in (0, 1, 391))
        assert table["f_dog.jpg"]["posteriors"] == ""
        export_snapshot(engine, "ds", fmt="real", out=tmp_path / "ds.json", allow_partial=True, warn=print)
        real = json.loads((tmp_path / "ds.json").read_text())
        assert real == [EXPECTED[n][0] for n in sorted(NAMES)]  # plain label sets in file-name order


class TestDiff:
    def test_unanimous_against_ds_counts_category_transitions(self, ws) -> None:
        engine, ids = ws
        create_snapshot(engine, "plain")
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        d = diff_snapshots(engine, "plain", "ds")
        assert d.transitions == {"U->A": 1, "U->B": 1, "U->M": 1, "U->U": 1, "U->Z": 1}  # U->U: e_blur's labels
        assert d.matrix == {"B": {"B": 1}, "U": {"A": 1, "B": 1, "M": 1, "Z": 1, "U": 2}}
        assert d.unchanged == 2  # f_dog adjudicated in both, g_new without votes
        changed = {path: (ca, cb) for path, ca, cb, *_ in d.changed}
        assert changed["c_fish.jpg"] == ([0], [1])
        tench, goldfish = d.posteriors["c_fish.jpg"][0], d.posteriors["c_fish.jpg"][1]
        assert tench[0] is None and tench[1] < 0.05 and goldfish[0] is None and goldfish[1] > 0.99
        assert changed["e_blur.jpg"] == ([0], [1])  # U in both: the base labels, then the votes' best estimate

    def test_a_category_change_alone_shows_every_posterior_of_the_image(self, ws) -> None:
        engine, ids = ws
        create_snapshot(engine, "plain")
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        shown = diff_snapshots(engine, "plain", "ds").posteriors["b_cat.jpg"]  # U [281] -> A [281]
        assert set(shown) == {281, 282, 285} and all(before is None for before, _ in shown.values())
        assert shown[281][1] > 0.99 and shown[285][1] < 0.05

    def test_the_posteriors_of_the_classes_that_changed_come_from_both_snapshots(self, ws) -> None:
        engine, _ = ws
        create_snapshot(engine, "strict", consensus="ds", studio_votes=False)
        create_snapshot(engine, "loose", consensus="ds", threshold=0.75, studio_votes=False)
        d = diff_snapshots(engine, "strict", "loose")
        assert d.transitions == {"U->B": 1} and d.changed == [("e_blur.jpg", [1], [1], "U", "B")]
        (tench_a, tench_b), (goldfish_a, goldfish_b) = d.posteriors["e_blur.jpg"][0], d.posteriors["e_blur.jpg"][1]
        assert tench_a == tench_b < 0.05 and 0.75 < goldfish_a == goldfish_b < 0.9


class TestQueue:
    def test_uncertain_outranks_every_other_signal(self) -> None:
        loud = Evidence(1, original=5, suggestion=6, original_confidence=0.0, priors=[[6]])
        loud.voters = {1: (Verdict.labels, frozenset({5})), 2: (Verdict.labels, frozenset({6}))}
        quiet = Evidence(2, original=5, uncertain=True)
        assert priority(loud) == sum(WEIGHTS.values()) < priority(quiet) == UNCERTAIN_WEIGHT
        assert priority(Evidence(3, original=None, uncertain=True)) > priority(Evidence(4, original=None))

    def test_the_queue_serves_the_uncertain_images_of_the_newest_ds_snapshot_first(self, ws) -> None:
        engine, ids = ws
        with engine.connect() as conn:
            assert uncertain_images(conn, 1) == set()
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        create_snapshot(engine, "plain")  # newer, but not vote-based: the ds snapshot still says what is uncertain
        with engine.connect() as conn:
            assert uncertain_images(conn, 1) == {ids["e_blur.jpg"]}
            rows = load_evidence(conn, 1, RunChoice(None, None))
        queue = ReviewQueue(rows, seed=3)
        assert queue.order[0] == ids["e_blur.jpg"]
        ann = 1
        assert queue.next_image(ann) == ids["e_blur.jpg"]
        assert queue.next_image(ann, QueueFilter(category="U")) == ids["e_blur.jpg"]
        create_snapshot(engine, "loose", consensus="ds", threshold=0.75, studio_votes=False)
        with engine.connect() as conn:
            assert uncertain_images(conn, 1) == set()  # the newest vote-based snapshot settles it


class TestCommandLine:
    def test_create_list_and_diff(self, ws, tmp_path: Path) -> None:
        from relabel.cli import cli

        engine, _ = ws
        if engine.url.get_backend_name() != "sqlite":
            pytest.skip("the command line opens the workspace's SQLite file")
        workspace = ["--workspace", str(tmp_path / "ws")]
        runner = CliRunner()
        done = runner.invoke(cli, [*workspace, "snapshot", "create", "plain"])
        assert done.exit_code == 0, done.output
        args = ["snapshot", "create", "ds", "--consensus", "ds", "--threshold", "0.9", "--no-studio-votes", "--quiet"]
        done = runner.invoke(cli, [*workspace, *args])
        assert done.exit_code == 0, done.output
        assert "consensus: ds, threshold 0.9, original kept at 0.5, votes raters, " in done.output
        assert "uncertain images (U, review first): 1; posteriors stored: 15" in done.output
        assert "\n  caution: the workers share few pairs (the median worker answered 18 pair(s) " in done.output
        listed = runner.invoke(cli, [*workspace, "snapshot", "list"])
        assert "unanimous, min votes 1" in listed.output and "ds, threshold 0.9" in listed.output
        diff = runner.invoke(cli, [*workspace, "snapshot", "diff", "plain", "ds"])
        assert diff.exit_code == 0 and "categories (plain down, ds across):" in diff.output
        assert "\n    U      1     1     1     1     2\n" in diff.output  # A B M Z U from U
        assert "c_fish.jpg\tU [0] -> B [1]\tposteriors 0: none -> 0.0" in diff.output
        assert "d_rocket.jpg\tU [657] -> Z []\tposteriors 1 class(es), all under 0.01\n" in diff.output

    def test_help_shows_the_consensus_choices_from_the_rules_and_the_aggregation_methods(self) -> None:
        from relabel.cli import cli

        shown = CliRunner().invoke(cli, ["snapshot", "create", "--help"]).output
        assert f"[{'|'.join(consensus_choices())}]" in shown.replace("\n", "").replace(" ", "")
        assert list(consensus_choices()) == [*RULES, *METHODS]  # one name, one rule: none is both
        assert "relabel snapshot create round-1-ds --consensus ds --threshold 0.9" in shown


def fit_any_yes(votes: Votes, options: FitOptions) -> Aggregate:
    """A counting method the tool does not have: a class is in the image when any answer on it is yes."""
    yes = np.bincount(votes.item[votes.answer == YES], minlength=votes.n_items)
    return Aggregate("any-yes", yes / np.bincount(votes.item, minlength=votes.n_items), accepted=yes > 0)


class FirstSays(ConsensusRule):
    """A consensus rule the tool does not have: the oldest annotator decision stands, whatever the others say."""

    name, description = "first-says", "the oldest annotator decision stands"

    def agree(self, votes: Sequence[Ballot], min_votes: int) -> tuple[Outcome, DecisionKey | None]:
        return (Outcome.consensus, votes[0][1]) if votes else (Outcome.undecided, None)


class TestRegisteredConsensus:
    """A vote aggregation method or a consensus rule added to its registry alone is listed with its summary by
    `votes aggregate --help` and `snapshot create --help`, accepted as a choice, and used."""

    @pytest.fixture
    def run(self, ws, tmp_path: Path):
        from relabel.cli import cli

        engine, _ = ws
        if engine.url.get_backend_name() != "sqlite":
            pytest.skip("the command line opens the workspace's SQLite file")

        def run(*args: str, ok: bool = True) -> Result:
            result = CliRunner().invoke(cli, ["--workspace", str(tmp_path / "ws"), *args], terminal_width=200)
            assert (result.exit_code == 0) == ok, result.output
            return result

        return run

    def help_of(self, run, *command: str) -> str:
        return " ".join(run(*command, "--help").output.split())

    def test_an_aggregation_method(self, ws, run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(METHODS, "any-yes", Method("any-yes", "some answer is yes", fit_any_yes, False))
        for command in (("votes", "aggregate"), ("snapshot", "create")):
            shown = self.help_of(run, *command)
            assert "any-yes: some answer is yes" in shown and "|one-coin|any-yes]" in shown

        aggregated = run("votes", "aggregate", "--method", "any-yes", "--no-studio").output
        assert "method any-yes (its own rule) on sources raters" in aggregated
        # 11 pairs got a yes: the 5 present ones, the 5 absent ones that one rater took, the split one
        assert "labels: 11 pairs accepted" in aggregated
        majority = run("votes", "aggregate", "--method", "majority", "--no-studio").output
        assert "labels: 5 pairs accepted" in majority and "caution" not in majority  # a count learns no reliability
        ds = run("votes", "aggregate", "--no-studio").output  # Dawid-Skene on 18 shared answers per rater
        assert "\n  caution: the workers share few pairs (the median worker answered 18 pair(s) " in ds

        created = run("snapshot", "create", "any", "--consensus", "any-yes", "--no-studio-votes", "--quiet").output
        assert "consensus: any-yes, votes raters" in created and "posteriors stored: 15" in created  # f_dog adjudicated
        run("snapshot", "export", "any", "--format", "jsonl", "--out", str(tmp_path / "any.jsonl"))
        labels = {k: r["labels"] for k, r in jsonl_rows(tmp_path / "any.jsonl").items()}
        assert labels["a_cup.jpg"] == [504, 967, 968]  # 504 took one rater's yes: any-yes, not the majority
        assert run("votes", "aggregate", "--method", "all-yes-or-no", ok=False).exit_code == 2

    def test_the_old_name_of_all_yes_is_read_with_a_note(self, run) -> None:
        result = run("votes", "aggregate", "--method", "unanimous", "--no-studio")
        assert "note: --method unanimous is now called all-yes" in result.stderr
        assert "method all-yes (its own rule) on sources raters" in result.stdout
        assert "labels: 0 pairs accepted" in result.stdout  # each rater said no to one present class

    def test_a_consensus_rule(self, ws, run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setitem(RULES, FirstSays.name, FirstSays())
        assert "first-says: the oldest annotator decision stands" in self.help_of(run, "snapshot", "create")
        engine, ids = ws
        decide(engine, ids["g_new.jpg"], "ann", Verdict.labels, [1])
        decide(engine, ids["g_new.jpg"], "bob", Verdict.labels, [2])  # disputed under unanimous

        created = run("snapshot", "create", "first", "--consensus", "first-says").output
        assert "consensus: first-says, min votes 1" in created and "posteriors stored" not in created
        run("snapshot", "create", "plain")
        for name, expected in (("first", ([1], "B", "consensus")), ("plain", ([], "U", "disputed"))):
            run("snapshot", "export", name, "--format", "jsonl", "--out", str(tmp_path / f"{name}.jsonl"))
            row = jsonl_rows(tmp_path / f"{name}.jsonl")["g_new.jpg"]
            assert (row["labels"], row["category"], row["origin"]) == expected


class TestSnapshotsTab:
    def test_the_tab_shows_the_transition_table_and_the_changed_posteriors_as_text(self, ws, vocab) -> None:
        from ui import snapshots_tab

        engine, _ = ws
        create_snapshot(engine, "plain")
        create_snapshot(engine, "ds", consensus="ds", studio_votes=False)
        studio = SimpleNamespace(engine=engine, dataset_name="d", vocab=vocab, require_lead=lambda user: None)
        view = snapshots_tab.diff_view(studio, "lena", "plain", "ds")  # type: ignore[arg-type]
        assert view.matrix_headers == ["before \\ after", "A", "B", "M", "Z", "U"]
        assert view.matrix == [["B ->", "0", "1", "0", "0", "0"], ["U ->", "1", "1", "1", "1", "2"]]
        [goldfish] = [row for row in view.posteriors if row[:2] == ["c_fish.jpg", "goldfish"]]
        assert goldfish[2] == "" and float(goldfish[3]) > 0.99  # no posterior before: the unanimous rule stores none
        assert all(isinstance(cell, str) for row in view.posteriors for cell in row)
        matrix, posteriors = snapshots_tab.detail_values(studio, "lena", "plain", "ds")  # type: ignore[arg-type]
        assert matrix.headers == view.matrix_headers and len(posteriors.value["data"]) == len(view.posteriors)


@pytest.fixture
def val(sqlite_engine, vocab, tmp_path: Path):
    """The 50,000 ImageNet val images (no pixels) with their ImGT labels and ReaL's label sets."""
    plan = plan_ingest(tmp_path / "none", vocab, "imagenet-val")
    ingest_dataset(sqlite_engine, plan, dataset="val", root=tmp_path / "none", vocab=vocab, show_progress=False)
    import_source(sqlite_engine, shared("imagenet-val", "real.json"), fmt="real")
    return sqlite_engine


@pytest.mark.slow
class TestRealVotes:
    def test_mturk_set_majority_gives_the_published_counts(self, val) -> None:
        import_votes_file(val, shared("imagenet-val", "mturk_label_errors.json"), fmt="mturk")
        s = create_snapshot(val, "mturk", consensus="set-majority", studio_votes=False)
        decided = {k: s.counts[k] for k in "ABMZ"}  # given, guessed, both, neither; no majority: uncertain
        assert decided == {"A": 2524, "B": 1428, "M": 597, "Z": 293} and s.uncertain == 598

    def test_real_raters_by_dawid_skene_decide_most_images_as_real_does(self, val, tmp_path: Path) -> None:
        import_votes_file(val, shared("imagenet-val", "real_raters.npz"), fmt="real-raters", name="raters")
        s = create_snapshot(val, "ds", consensus="ds", threshold=0.9, studio_votes=False)
        assert s.n_posteriors == 184_962 and s.consensus["converged"]
        export_snapshot(val, "ds", fmt="jsonl", out=tmp_path / "ds.jsonl")
        real = json.loads(shared("imagenet-val", "real.json").read_text())
        rows = [json.loads(line) for line in (tmp_path / "ds.jsonl").read_text().splitlines()]
        rated = [(r, real[k]) for k, r in enumerate(rows) if r["posteriors"]]  # file-name order is real.json's
        decided = [(r, truth) for r, truth in rated if r["origin"] == "consensus"]
        uncertain = [r for r, _ in rated if r["origin"] == "uncertain"]
        assert len(rated) == 24_889 and len(decided) + len(uncertain) == len(rated)
        assert sum(set(r["labels"]) == set(truth) for r, truth in decided) / len(decided) > 0.94
        assert 0.3 < len(uncertain) / len(rated) < 0.4  # left to review: U, at the front of the queue
