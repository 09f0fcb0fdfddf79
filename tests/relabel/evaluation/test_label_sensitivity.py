"""`relabel evaluate` against a Dawid-Skene snapshot of imported votes: the expected top-1 leaves out the images
nobody rated, and the aggregation-sensitivity table shows it under every aggregation method and label source, in
the console, report.md and evaluation.json, with the same numbers."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import select
from sqlmodel import Session, col

from db import create_db_engine, init_db
from db.models import LabelSource
from relabel.cli import main
from relabel.common.workspace import get_dataset
from relabel.evaluation import label_sensitivity as label_sensitivity_module
from relabel.evaluation.label_sensitivity import label_sensitivity
from relabel.evaluation.references import load_reference
from relabel.evaluation.runs import load_run, select_runs
from relabel.evaluation.scoring import score_run, score_uncertain_runs
from relabel.evaluation.service import evaluate
from relabel.snapshots import arrays as arrays_module
from relabel.votes.aggregation import METHODS, Aggregate, Method, Votes
from tests import evaluation_workspace as ws

# Three raters on a, b and d; c and e get no vote and keep ImGT (c goldfish, e tabby): unrated. m5's call on c
# failed on the server, so the one unrated image it counts is e.
VOTES = "worker,image,label,answer\n" + "".join(
    f"{w},{image},{label},{answer}\n"
    for image, label, answers in (
        ("n01440764_a.jpg", "tench", "yes yes yes"),
        ("n01440764_a.jpg", "goldfish", "yes no no"),
        ("n01440764_b.jpg", "tench", "yes yes no"),
        ("n01440764_b.jpg", "goldfish", "no maybe yes"),
        ("n02123045_d.jpg", "tabby", "yes yes yes"),
        ("n02123045_d.jpg", "tiger cat", "yes no yes"),
    )
    for w, answer in zip(("r1", "r2", "r3"), answers.split())
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The five-image workspace with the votes and the snapshot raters-ds; and its label sources."""
    tmp = tmp_path_factory.mktemp("sensitivity")
    folder = tmp / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ws.build(engine, tmp)
    with Session(engine) as s:
        sources = [f"source:{n}" for n in s.scalars(select(col(LabelSource.name)).order_by(col(LabelSource.id)))]
    engine.dispose()
    (tmp / "votes.csv").write_text(VOTES)
    base = ["--workspace", str(folder)]
    main([*base, "votes", "import", str(tmp / "votes.csv"), "--format", "long", "--name", "raters", "--quiet"])
    main([*base, "snapshot", "create", "raters-ds", "--consensus", "ds", "--no-studio-votes", "--quiet"])
    return folder, sources


@pytest.fixture(scope="module")
def evaluated(workspace: tuple[Path, list[str]]) -> tuple[str, str, dict, list[str]]:
    """Console text, report.md, evaluation.json of one evaluation against the snapshot, and the label sources."""
    folder, sources = workspace
    tmp, base = folder.parent, ["--workspace", str(folder)]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        main([*base, "evaluate", "--run", "m5", "--reference", "raters-ds", "--boot", "500", "--out", str(tmp / "r")])
    report = (tmp / "r" / "report.md").read_text()
    return buffer.getvalue(), report, json.loads((tmp / "r" / "evaluation.json").read_text()), sources


def test_one_row_per_aggregation_method_and_label_source(evaluated) -> None:
    _, _, data, sources = evaluated
    (item,) = data["label_sensitivity"]
    assert (item["run"], item["reference"], item["rule"]) == ("m5", "raters-ds", "ds")
    kinds = [(r["kind"], r["labels"]) for r in item["rows"]]
    assert [n for k, n in kinds if k == "aggregation"] == list(METHODS)
    assert [n for k, n in kinds if k == "label source"] == sources == ["source:imgt", "source:team"]
    assert [n for k, n in kinds if k == "unrated images"] == ["unrated certain", "unrated at base error"]
    assert "label_sensitivity" in data["definitions"]


def test_the_unrated_image_is_left_out_and_counted(evaluated) -> None:
    out, report, data, _ = evaluated
    (item,) = data["label_sensitivity"]
    uncertain = data["scores"][0]["uncertain"]
    assert item["n_unrated"] == uncertain["n_unrated"] == 1 and uncertain["unrated_noise"] is None
    assert item["base_source"] == "imgt" and 0 <= item["base_error_rate"] <= 1
    assert uncertain["thresholded"]["n_scored"] == 3  # a, b, d: c never scored, e left out
    line = "m5 against raters-ds: 1 image nobody rated (their labels rest on imgt alone) are left out"
    assert line in out and line in report
    rows = {r["labels"]: r for r in item["rows"]}
    for name in ("unrated certain", "unrated at base error"):  # e put back: scored in every draw
        assert rows[name]["n_images"] == pytest.approx(uncertain["expected_scored"] + 1, abs=0.05)
    assert rows["unrated at base error"]["top1"] <= rows["unrated certain"]["top1"]


def test_the_snapshots_own_rule_is_the_expected_top1(evaluated) -> None:
    _, _, data, _ = evaluated
    uncertain = data["scores"][0]["uncertain"]
    own = next(r for r in data["label_sensitivity"][0]["rows"] if r["labels"] == "ds")
    assert own["top1"] == uncertain["expected_accuracy"]
    assert (own["ci_low"], own["ci_high"]) == (uncertain["ci_low"], uncertain["ci_high"])


def test_the_console_prints_the_reports_numbers(evaluated) -> None:
    out, report, data, _ = evaluated
    expected = f"{100 * data['scores'][0]['uncertain']['expected_accuracy']:.2f}"
    printed = next(line.split() for line in out.splitlines() if line.split()[:3] == ["m5", "raters-ds", "0.9"])
    in_report = next(line.split(" | ") for line in report.splitlines() if line.startswith("| m5 | raters-ds | 0.9 |"))
    assert printed[5] == in_report[5] == expected
    assert "## Aggregation sensitivity" in report
    methods = [r["top1"] for r in data["label_sensitivity"][0]["rows"] if r["kind"] == "aggregation"]
    spread = f"the expected top-1 spans {100 * min(methods):.2f}–{100 * max(methods):.2f} %"
    assert spread in out and spread in report
    for row in data["label_sensitivity"][0]["rows"]:
        name = f"{row['labels']} (this snapshot)" if row["labels"] == "ds" else row["labels"]
        cells = f"| m5 | raters-ds | {name} | {row['kind']} | {row['n_images']:,.0f} | {100 * row['top1']:.2f} |"
        assert cells in report
        assert any(line.split()[:2] == ["m5", "raters-ds"] and f"{100 * row['top1']:.2f}" in line.split()
                   and name.split()[0] in line for line in out.splitlines())  # fmt: skip


def _everything_present(votes: Votes, _options: object) -> Aggregate:
    return Aggregate("everything-present", np.ones(votes.n_items), accepted=np.ones(votes.n_items, bool))


def test_a_method_added_to_the_registry_gets_its_row(workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(
        METHODS, "everything-present", Method("everything-present", "all yes", _everything_present, False)
    )
    folder, _ = workspace
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    ev = evaluate(engine, runs=["m5"], references=["raters-ds"], n_boot=50, store=False)
    engine.dispose()
    rows = {r.labels: r for r in ev.label_sensitivity[0].rows}
    assert list(rows)[: len(METHODS)] == list(METHODS)
    # Every voted class present: m5's top-1 on a (goldfish), b (tench) and d (tiger cat) was voted on; e left out.
    added = rows["everything-present"]
    assert (added.top1, added.label_ci_low, added.label_ci_high, added.n_images) == (1.0, 1.0, 1.0, 3)


def test_changed_votes_are_said_and_the_snapshot_row_keeps_its_posteriors(workspace, tmp_path: Path) -> None:
    folder = tmp_path / "ws"
    shutil.copytree(workspace[0], folder)
    (tmp_path / "votes.csv").write_text(VOTES + "r4,n02123045_e.jpg,tabby,yes\n")
    base = ["--workspace", str(folder)]
    main([*base, "votes", "import", str(tmp_path / "votes.csv"), "--format", "long", "--name", "raters", "--replace",
          "--quiet"])  # fmt: skip
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    ev = evaluate(engine, runs=["m5"], references=["raters-ds"], n_boot=50, store=False)
    engine.dispose()
    (item,) = ev.label_sensitivity
    assert "the votes changed since raters-ds was made (6 pairs and 18 votes then, 7 and 19 now)" in item.note
    own = next(r for r in item.rows if r.labels == "ds")
    assert ev.scores[0].uncertain is not None and own.top1 == ev.scores[0].uncertain.expected_accuracy
    assert item.n_unrated == 1  # e is still unrated in the snapshot, whatever the votes say now


def test_rows_read_from_the_scores_and_the_named_sources_are_those_drawn_and_read_again(
    workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The own rule's row taken from the run's expected top-1, and ImGT taken from the named references, give the
    numbers of a fresh draw and a fresh read; the own rule's labels are then not drawn a second time."""
    folder, _ = workspace
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    drawn: list[object] = []

    def spy(*args: object, **kwargs: object) -> object:
        drawn.append(kwargs.get("posteriors"))
        return score_uncertain_runs(*args, **kwargs)

    monkeypatch.setattr(label_sensitivity_module, "score_uncertain_runs", spy)
    with Session(engine) as s:
        ds = get_dataset(s, None)
        imgt, snap = (load_reference(s, ds, spec) for spec in ("imgt", "raters-ds"))
        runs = [load_run(s, run) for run in select_runs(s, ds, ["m5"])]
        expected = {("m5", "raters-ds"): score_run(runs[0], snap, n_boot=300, seed=3).uncertain}
        fresh = label_sensitivity(s, ds, runs, [snap], n_boot=300, seed=3)
        n_fresh = len(drawn)
        shared = label_sensitivity(s, ds, runs, [imgt, snap], n_boot=300, seed=3, expected=expected)
    engine.dispose()
    assert repr(shared) == repr(fresh)  # repr: NaN equals NaN there
    assert snap.posteriors in drawn[:n_fresh] and snap.posteriors not in drawn[n_fresh:]
    assert len(drawn) - n_fresh == n_fresh - 1


def test_the_methods_fits_are_kept_until_the_votes_change(
    workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other methods' posteriors are read from the workspace's cache folder the second time, the same rows;
    a damaged file is fitted again, and a vote import fits again under a new key."""
    folder = tmp_path / "ws"
    shutil.copytree(workspace[0], folder)
    for old in (folder / "cache").glob(f"{label_sensitivity_module.CACHE_PREFIX}-*"):
        old.unlink()
    read: list[object] = []
    collect = label_sensitivity_module.collect_votes

    def spy(*args: object, **kwargs: object) -> object:
        read.append(args)
        return collect(*args, **kwargs)  # type: ignore[arg-type]

    def rows() -> str:
        engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
        ev = evaluate(engine, runs=["m5"], references=["raters-ds"], n_boot=50, store=False)
        engine.dispose()
        return repr(ev.label_sensitivity)

    monkeypatch.setattr(label_sensitivity_module, "collect_votes", spy)
    fitted = rows()
    (kept,) = (folder / "cache").glob(f"{label_sensitivity_module.CACHE_PREFIX}-*.npz")
    assert len(read) == 1 and rows() == fitted and len(read) == 1  # read from the cache: no votes read
    kept.write_bytes(b"not an npz")
    assert rows() == fitted and len(read) == 2 and kept.stat().st_size > 10  # fitted again and rewritten
    (tmp_path / "votes.csv").write_text(VOTES + "r4,n02123045_e.jpg,tabby,yes\n")
    main(["--workspace", str(folder), "votes", "import", str(tmp_path / "votes.csv"), "--format", "long", "--name",
          "raters", "--replace", "--quiet"])  # fmt: skip
    changed = rows()
    assert len(read) == 3 and changed != fitted
    assert [p.name for p in (folder / "cache").glob(f"{label_sensitivity_module.CACHE_PREFIX}-*")] != [kept.name]


def _spied_loads(folder: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[list[object], Callable[[], tuple[str, ...]]]:
    """The queries a snapshot's arrays cost (one list entry each), and a load of the snapshot reference as text."""
    read: list[object] = []
    rows = arrays_module.all_plain_rows

    def spy(*args: object, **kwargs: object) -> object:
        read.append(args)
        return rows(*args, **kwargs)  # type: ignore[arg-type]

    def loaded() -> tuple[str, ...]:
        engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
        with Session(engine) as s:
            ref = load_reference(s, get_dataset(s, None), "raters-ds")
        engine.dispose()
        assert ref.posteriors is not None and ref.unrated is not None and ref.categories is not None
        arrays = (ref.image_ids, ref.labels.labels, ref.categories, ref.unrated, ref.posteriors.rows,
                  ref.posteriors.classes, ref.posteriors.probs)  # fmt: skip
        return (repr(ref.info), ref.base_source or "", *(f"{a.dtype}{a.tolist()}" for a in arrays))

    monkeypatch.setattr(arrays_module, "all_plain_rows", spy)
    return read, loaded


def test_a_snapshot_reference_is_read_again_from_the_cache(workspace, tmp_path: Path, monkeypatch) -> None:
    """Without kept arrays, the first load reads the snapshot's rows and keeps them; the second reads the cache
    folder, not the database: the same reference; a damaged file is read from the database again."""
    folder = tmp_path / "ws"
    shutil.copytree(workspace[0], folder)
    for old in (folder / "cache").glob(f"{arrays_module.CACHE_PREFIX}-*"):
        old.unlink()
    read, loaded = _spied_loads(folder, monkeypatch)
    first = loaded()
    (kept,) = (folder / "cache").glob(f"{arrays_module.CACHE_PREFIX}-*.npz")
    assert len(read) == 2 and loaded() == first and len(read) == 2  # labels and posteriors read once
    kept.write_bytes(b"damaged")
    assert loaded() == first and len(read) == 4 and kept.stat().st_size > 7


def test_a_snapshot_keeps_its_arrays_as_it_is_frozen(workspace, tmp_path: Path, monkeypatch) -> None:
    """`snapshot create` keeps the arrays it has just written: the first load reads no row, and they are the
    arrays the rows give, bit for bit."""
    folder = tmp_path / "ws"
    shutil.copytree(workspace[0], folder)
    (made,) = (folder / "cache").glob(f"{arrays_module.CACHE_PREFIX}-*.npz")
    at_creation = dict(np.load(made))
    read, loaded = _spied_loads(folder, monkeypatch)
    first = loaded()
    assert read == []  # nothing queried: the arrays kept by `snapshot create`
    made.unlink()
    assert loaded() == first and len(read) == 2  # read from the rows: the same reference
    (again,) = (folder / "cache").glob(f"{arrays_module.CACHE_PREFIX}-*.npz")
    from_rows = dict(np.load(again))
    assert again.name == made.name and from_rows.keys() == at_creation.keys()
    for name, array in at_creation.items():
        assert array.dtype == from_rows[name].dtype and np.array_equal(array, from_rows[name]), name
    assert at_creation["has_posteriors"] and len(at_creation["post_probs"]) > 0


def test_the_fits_are_not_kept_when_studio_decisions_are_read(workspace, tmp_path: Path) -> None:
    """Studio votes cover each card's candidate classes, which come from the runs and the original labels, outside
    the key: a snapshot reading them keeps nothing once the dataset has a decision."""
    from db.enums import Verdict
    from db.models import Annotation, Image, User

    folder = tmp_path / "ws"
    shutil.copytree(workspace[0], folder)
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    with Session(engine) as s:
        ds = get_dataset(s, None)
        ref = load_reference(s, ds, "raters-ds")
        studio = replace(ref, info=replace(ref.info, consensus={**(ref.info.consensus or {}), "studio": True}))
        before = (label_sensitivity_module._cache_path(s, ds, ref), label_sensitivity_module._cache_path(s, ds, studio))
        user = User(name="ann")
        s.add(user)
        s.flush()
        image = s.scalars(select(Image).where(col(Image.dataset_id) == ds.id)).first()
        assert image is not None and image.id is not None and user.id is not None
        s.add(Annotation(image_id=image.id, user_id=user.id, verdict=Verdict.labels, classes=[0], flags=[]))
        s.commit()
        after = (label_sensitivity_module._cache_path(s, ds, ref), label_sensitivity_module._cache_path(s, ds, studio))
    engine.dispose()
    assert None not in before and after[0] is not None and after[1] is None


def test_every_statistic_of_the_dataset_reads_one_set_of_resamples(workspace, tmp_path: Path) -> None:
    """The expected top-1 (its unrated image among the images resampled, scored in no draw), the rows put back,
    the other methods' rows and the reliability table's P all resample the dataset's five images from one seed:
    one set is drawn and kept, whatever statistic asks first."""
    folder = tmp_path / "ws"
    shutil.copytree(workspace[0], folder)
    shutil.rmtree(folder / "cache", ignore_errors=True)
    args = ["--workspace", str(folder), "evaluate", "--run", "m5", "--reference", "imgt", "--reference", "raters-ds"]
    main([*args, "--boot", "200", "--no-report", "--quiet"])
    kept = sorted(p.name.split("-")[3:] for p in (folder / "cache").glob("resamples-*"))
    assert kept == [["5", "200", "0.bin"]]  # images, resamples, seed


def test_each_dataset_draws_from_its_own_seed() -> None:
    from db.models import Dataset
    from relabel.evaluation.dataset_scores import dataset_seed

    first, second, third = (Dataset(id=i, name=f"d{i}") for i in (1, 2, 3))
    assert dataset_seed(7, first) == 7  # the first dataset: the seed itself
    assert len({dataset_seed(s, d) for s in range(50) for d in (first, second, third)}) == 150
