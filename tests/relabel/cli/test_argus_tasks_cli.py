"""`relabel suggest --protocol pope|caption` through the OpenAI adapter and the stub server, then `relabel evaluate`'s
presence (POPE) and CHAIR tables against ImGT and the multi-label `team` prior, checked against hand counts.

The five-image workspace (tests/evaluation_workspace.py): ImGT a, b tench; c goldfish; d, e tabby. team: a {tench,
goldfish}, b {goldfish}, c {} (excluded), d {tabby, tiger cat}, e {tiger cat}. The stub sees a, b {tench, goldfish},
c {goldfish}, d, e {tabby, tiger cat}, and answers "Maybe." about a tabby (unparseable: wrong). Adversarial
negatives come from the groups {tench, goldfish} and {tabby, tiger cat}: a, b goldfish; c tench; d, e tiger cat.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlmodel import Session, col

from db import create_db_engine, init_db
from db.enums import Verdict
from db.models import ModelRun, Prediction
from relabel.cli import main
from relabel.snapshots.freeze import create_snapshot
from relabel.suggest import textmap
from relabel.suggest.adapters.openai_api import encode_image
from tests import evaluation_workspace as ws
from tests.fakes import TrigramEncoder
from tests.stub_server import SceneAnswers, StubServer, image_digest

SEEN = {"a": ["tench", "goldfish"], "b": ["tench", "goldfish"], "c": ["goldfish"], "d": ["tabby", "tiger cat"],
        "e": ["tabby", "tiger cat"]}  # fmt: skip


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "ws"
    engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
    init_db(engine)
    ws.build(engine, tmp_path)
    engine.dispose()
    groups = [{"classes": {"0": "tench", "1": "goldfish"}}, {"classes": {"281": "tabby", "282": "tiger cat"}}]
    (tmp_path / "groups.json").write_text(json.dumps(groups))
    return folder


def relabel(workspace: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        main(["--workspace", str(workspace), *args])
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def scene(tmp_path: Path) -> SceneAnswers:
    digests = {n.split("_")[1][0]: image_digest(encode_image(tmp_path / "photos" / n, 1024)) for n in ws.FILES}
    return SceneAnswers({digests[k]: v for k, v in SEEN.items()}, hallucination="goldfish", unsure=frozenset({"tabby"}))


def suggest_args(url: str, protocol: str, run: str, *extra: str) -> list[str]:
    return ["suggest", "--model", "openai:stub-model", "--quiet", "--base-url", url, "--protocol", protocol, "--run",
            run, *extra]  # fmt: skip


def row(out: str, *first: str) -> list[str]:
    found = [line.split() for line in out.splitlines() if line.split()[: len(first)] == list(first)]
    assert len(found) == 1, (first, out)
    return found[0][len(first) :]


def test_pope_and_caption_runs_score_against_imgt_and_team(
    workspace: Path, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    # every caption names its objects by their class names, which the mapper settles without scores: its text
    # encoder (MiniLM by default: minutes of CPU to embed the vocabulary's ~31,000 class texts) is a stub here
    encoders: list[TrigramEncoder] = []

    def stub_encoder(name: str) -> TrigramEncoder:
        encoders.append(TrigramEncoder())
        return encoders[-1]

    monkeypatch.setitem(textmap.ENCODERS, "minilm", stub_encoder)
    base = ["suggest", "--model", "openai:stub-model", "--quiet", "--concurrency", "2"]
    with StubServer(answer=scene(tmp_path)) as stub:
        pope = [*base, "--base-url", stub.url, "--protocol", "pope", "--run", "pope"]
        code, out, err = relabel(workspace, capsys, *pope, "--distractors", f"file:{tmp_path / 'groups.json'}")
        assert code == 0, err
        assert "run 'pope': 5 image(s), 0 done before, now 5 ok, 0 error(s)" in out
        # a positive and three negatives per image, a class drawn twice asked once: c's popular negative (tench or
        # tabby, each labelling two images) is tench, its adversarial one
        assert len(stub.chat_requests) == 19
        assert "Is there a tench in the image? Answer yes or no." in {r.prompt for r in stub.chat_requests}
        code, out, err = relabel(workspace, capsys, *base, "--base-url", stub.url, "--protocol", "caption",
                                 "--run", "cap")  # fmt: skip
        assert code == 0, err
        assert "now 5 ok" in out
        assert stub.chat_requests[-1].prompt == "Describe this image in one sentence."
        assert len(encoders) == 1  # the caption run's mapper, and only it (pope's negatives need no encoder)

    code, out, err = relabel(workspace, capsys, "evaluate", "--reference", "imgt", "--reference", "team", "--boot", "0",
                             "--no-report")  # fmt: skip
    assert code == 0, err
    # images, probes, accuracy, precision, recall, F1, yes-ratio, unparseable, [true under b, Δ accuracy]. Under
    # imgt, random: positives a, b, c yes (TP 3), d, e "Maybe" (failed positives 2), negatives no (TN 5)
    assert row(out, "pope", "random", "imgt")[:8] == ["5", "10", "80.00", "100.00", "60.00", "75.00", "30.00", "2"]
    # popular: a and b's negative is tabby (2 images, as tench), "Maybe": 2 failed negatives; c, d, e's is tench: TN 3
    assert row(out, "pope", "popular", "imgt")[:8] == ["5", "10", "60.00", "60.00", "60.00", "60.00", "30.00", "4"]
    # adversarial: goldfish on a, b and tiger cat on d, e answered yes (FP 4), tench on c no (TN 1)
    assert row(out, "pope", "adversarial", "imgt")[:8] == ["5", "10", "40.00", "42.86", "60.00", "50.00", "70.00", "2"]
    # under team, on a, b, d, e: a tench TP, b tench FP (team drops it), d tabby failed positive, e tabby failed
    # negative, random negatives TN 4; imgt on those images: 6 of 8 right, so Δ = 5/8 - 6/8
    assert row(out, "pope", "random", "team")[:10] == ["4", "8", "62.50", "33.33", "50.00", "40.00", "25.00", "2",
                                                      "0", "-12.50"]  # fmt: skip
    # adversarial: the four yes answers imgt calls hallucinations are true objects under team: TP 5, FP 1 (b tench),
    # failed 2; imgt on those images: 2 of 8 right
    assert row(out, "pope", "adversarial", "team")[:10] == ["4", "8", "62.50", "71.43", "83.33", "76.92", "75.00",
                                                           "2", "4", "+37.50"]  # fmt: skip
    # captions, mentions, CHAIR-i, CHAIR-s, coverage, unmapped, failed, true under b. Each caption names its first
    # object and a goldfish: under imgt 4 of 10 mentions hallucinated (goldfish on a, b, d, e), 4 of 5 captions, every
    # label covered; under team (a, b, d, e) b's tench, d's goldfish, e's tabby and goldfish are hallucinated, 4 of 6
    # labels covered, and the goldfish on a and b are true objects
    assert row(out, "cap", "imgt") == ["5", "10", "40.00", "80.00", "100.00", "0", "0", "—"]
    assert row(out, "cap", "team") == ["4", "8", "50.00", "75.00", "66.67", "0", "0", "2"]
    assert "an ImageNet label set is not an exhaustive object list" in out
    assert "dataset 'five': 2 run(s)" in out  # the task runs are not scored as classes


def test_probes_are_stored_one_row_per_image(workspace: Path, tmp_path: Path, capsys) -> None:
    with StubServer(answer=scene(tmp_path)) as stub:
        args = ["suggest", "--model", "openai:stub-model", "--quiet", "--base-url", stub.url, "--protocol", "pope",
                "--run", "pope", "--distractors", f"file:{tmp_path / 'groups.json'}"]  # fmt: skip
        assert relabel(workspace, capsys, *args)[0] == 0
        again = relabel(workspace, capsys, *args)
        assert "5 done before, now 0 ok" in again[1] and len(stub.chat_requests) == 19
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    with Session(engine) as s:
        run = s.scalars(select(ModelRun).where(col(ModelRun.name) == "pope")).one()
        preds = {
            p.image_id: p.details or {} for p in s.scalars(select(Prediction).where(col(Prediction.run_id) == run.id))
        }
        yes = {p.image_id: p.classes for p in s.scalars(select(Prediction).where(col(Prediction.run_id) == run.id))}
    ids = ws.letter_ids(engine)
    engine.dispose()
    a = preds[ids["a"]]
    probes = {p["class"]: p for p in a["probes"]}
    assert probes[ws.TENCH] == {"class": ws.TENCH, "in": ["positive"], "answer": "yes"}
    assert probes[ws.GOLDFISH]["in"] == ["adversarial"] and probes[ws.GOLDFISH]["answer"] == "yes"
    assert len(probes) == 4 and yes[ids["a"]] == [ws.TENCH, ws.GOLDFISH]
    assert {p["answer"] for p in preds[ids["d"]]["probes"] if p["class"] == ws.TABBY} == {"unparseable"}
    c = {p["class"]: p for p in preds[ids["c"]]["probes"]}
    assert c[ws.TENCH] == {"class": ws.TENCH, "in": ["popular", "adversarial"], "answer": "no"} and len(c) == 3
    assert run.params["reference"] == "imgt" and run.params["negatives"] == 1


def test_pope_options_are_refused_for_other_protocols(workspace: Path, capsys) -> None:
    code, _, err = relabel(workspace, capsys, "suggest", "--model", "openai:stub-model", "--protocol", "cw",
                           "--reference", "team")  # fmt: skip
    assert code != 0 and "--reference and --pope-negatives are read by the pope protocol, not 'cw'" in err


def test_probes_built_on_a_snapshot_are_scored_beside_imgt(workspace: Path, tmp_path: Path, capsys) -> None:
    """The snapshot lists a {tench, goldfish}, b {tench}, c {goldfish}, d {tabby, tiger cat}, e {tabby}; the stub
    answers every probe truly (SEEN). Adversarial negatives: b goldfish and e tiger cat (yes: false alarms under the
    snapshot too), c tench (no); a's and d's groups are all positives, so theirs are drawn among the other classes."""
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    ids = ws.letter_ids(engine)
    ws.decide(
        engine, ids, {"a": (Verdict.labels, [ws.TENCH, ws.GOLDFISH]), "d": (Verdict.labels, [ws.TABBY, ws.TIGER_CAT])}
    )
    create_snapshot(engine, "round-1")
    engine.dispose()
    answers = scene(tmp_path)
    with StubServer(answer=SceneAnswers(answers.objects)) as stub:
        args = suggest_args(stub.url, "pope", "pope", "--reference", "snapshot:round-1")
        code, out, err = relabel(workspace, capsys, *args, "--distractors", f"file:{tmp_path / 'groups.json'}")
        assert code == 0, err
        hard = suggest_args(stub.url, "pope", "pope-hard", "--limit", "1")  # adversarial from the default sources
        assert relabel(workspace, capsys, *hard)[0] == 0
    code, out, err = relabel(
        workspace, capsys, "evaluate", "--run", "pope", "--run", "pope-hard", "--boot", "0", "--no-report"
    )
    assert code == 0, err
    # under the snapshot: 7 positives all yes, false alarms on b's goldfish and e's tiger cat, 3 negatives no
    expected = ["5", "12", "83.33", "77.78", "100.00", "87.50", "75.00", "0", "2", "+16.67"]
    assert row(out, "pope", "adversarial", "round-1")[:10] == expected
    # under imgt a's goldfish and d's tiger cat are false alarms too: 8 of 12 right
    assert row(out, "pope", "adversarial", "imgt")[:3] == ["5", "12", "66.67"]
    engine = create_db_engine(f"sqlite:///{workspace / 'relabel.db'}")
    with Session(engine) as s:
        runs = {r.name: r.params for r in s.scalars(select(ModelRun))}
    engine.dispose()
    assert runs["pope"]["reference"] == "round-1"
    assert runs["pope-hard"]["adversarial"]["distractors"] == "imagenet-confusions|real-proposals+wordnet"


def test_the_stub_flips_the_same_probes_at_its_error_rate() -> None:
    def body(name: str, url: str) -> dict:
        content = [{"type": "text", "text": f"Is there a {name} in the image? Answer yes or no."},
                   {"type": "image_url", "image_url": {"url": url}}]  # fmt: skip
        return {"messages": [{"role": "user", "content": content}]}

    urls = [f"data:image/jpeg;base64,{i}" for i in range(400)]
    objects = {image_digest(u): ["tench"] for u in urls}
    truthful, noisy = SceneAnswers(objects), SceneAnswers(objects, error_rate=0.25)
    assert {truthful(body("tench", u)) for u in urls} == {"Yes."} and truthful(body("tabby", urls[0])) == "No."
    flipped = [noisy(body("tench", u)) == "No." for u in urls]
    assert 0.18 < sum(flipped) / len(urls) < 0.32 and flipped == [noisy(body("tench", u)) == "No." for u in urls]
