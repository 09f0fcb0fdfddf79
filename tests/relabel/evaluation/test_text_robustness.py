"""Text perturbations in robustness runs: typos in the class names of scoring models whose kind reads text and in
the prompts of generative models, refused for image-only classifiers; stored, reported and run through the CLI.
What a model reads is its adapter kind's registry entry (`AdapterKind.reads_text`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select
from sqlmodel import Session

from db.models import EvaluationRecord
from evaluator.errors import EvaluationError
from evaluator.perturbations import PERTURBATIONS, TEXT_PERTURBATIONS, get_text_perturbation, perturb_text
from relabel.cli import main
from relabel.common.errors import InputError
from relabel.common.vocabulary import load_builtin
from relabel.evaluation.passes import perturb_instructions
from relabel.evaluation.report import write_robustness_report
from relabel.evaluation.robustness import run_robustness
from relabel.evaluation.robustness_summary import build_robustness_summary
from relabel.evaluation.storage import robustness_from_dict
from relabel.suggest.adapters import REGISTRY, AdapterKind, load_adapter, reads_text
from relabel.suggest.types import ChatRequest, ImageRef, ModelOutput
from tests import evaluation_workspace as ws
from tests.fakes import ScriptedChatModel, TrigramEncoder

VOCAB = load_builtin()
NAMES = [c.name for c in VOCAB.classes]
TRUTH = {"a": ws.TENCH, "b": ws.TENCH, "c": ws.GOLDFISH, "d": ws.TABBY, "e": ws.TABBY}


@pytest.fixture
def five(sqlite_engine, tmp_path: Path) -> dict[str, int]:
    """The five-image evaluation workspace (a, b tench; c goldfish; d, e tabby); image ids by letter."""
    return ws.build(sqlite_engine, tmp_path)


def letter(ref: ImageRef) -> str:
    return ref.key.split("_")[1][0]


class NameReader:
    """A scorer of a kind that reads text: right on an image when its true class's name reaches it as the
    vocabulary spells it (or, with `right_per_call`, on the letters listed for that call); records the class names
    of every call."""

    name = "name-reader"
    kind = "name-reader"  # registered by `kinds` below

    def __init__(self, right_per_call: list[str] | None = None) -> None:
        self.right_per_call = right_per_call
        self.names: list[list[str]] = []

    def describe(self) -> dict[str, Any]:
        return {"kind": "fake", "device": "cpu"}

    def check(self) -> None:
        pass

    def score(self, refs: list[ImageRef], class_names: list[str]) -> list[ModelOutput]:
        call = len(self.names)
        self.names.append(list(class_names))
        outputs = []
        for r in refs:
            truth = TRUTH[letter(r)]
            if self.right_per_call is not None:
                right = call < len(self.right_per_call) and letter(r) in self.right_per_call[call]
            else:
                right = class_names[truth] == NAMES[truth]
            scores = np.zeros(len(class_names), np.float32)
            scores[truth if right else 999] = 1.0
            outputs.append(ModelOutput(scores=scores, latency_s=0.01))
        return outputs


class ImageOnly(NameReader):
    name = "pixels-only"
    kind = "pixels-only"


@pytest.fixture(autouse=True)
def kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kinds of the two scorers above, registered as a new adapter kind is: one reads text, one does not."""
    here = "tests.relabel.evaluation.test_text_robustness"
    monkeypatch.setitem(REGISTRY, NameReader.kind, AdapterKind(f"{here}:NameReader", "name-reader", True, True))
    monkeypatch.setitem(REGISTRY, ImageOnly.kind, AdapterKind(f"{here}:ImageOnly", "pixels-only", True, False))


def intact(name: str, severity: int, seed: int, item: int) -> bool:
    """Whether the documented seeding (seed · 2³² + class index or image id) leaves `name` as it is."""
    return perturb_text(name, severity, (seed << 32) + item) == name


def stored(engine) -> int:
    with Session(engine) as s:
        return len(s.scalars(select(EvaluationRecord).where(EvaluationRecord.kind == "robustness")).all())


class TestRegistry:
    def test_typo_is_a_text_perturbation_apart_from_the_image_ones(self) -> None:
        assert tuple(TEXT_PERTURBATIONS) == ("typo",) and not set(TEXT_PERTURBATIONS) & set(PERTURBATIONS)
        assert perturb_text("golden retriever", 5, 7) == perturb_text("golden retriever", 5, 7, "typo")
        with pytest.raises(EvaluationError, match="unknown text perturbation 'blur'; known: typo"):
            get_text_perturbation("blur")


class TestClassNameTypos:
    def test_clean_gets_the_vocabulary_and_typo_passes_seeded_names(self, sqlite_engine, five) -> None:
        runs = []
        for seed in (3, 3, 4):
            model = NameReader()
            run_robustness(sqlite_engine, adapter=model, perturbations=["typo"], severities=[1, 3, 5], seed=seed,
                           show_progress=False, store=False)  # fmt: skip
            runs.append(model.names)
        clean, *typos = runs[0]
        assert clean == NAMES  # the clean pass reads the original names
        assert runs[0] == runs[1] and runs[0][1:] != runs[2][1:]  # same seed, same typos
        assert typos[0] == [perturb_text(n, 1, (3 << 32) + i) for i, n in enumerate(NAMES)]
        changed = [sum(a != b for a, b in zip(names, NAMES)) for names in typos]
        assert 0 < changed[0] < changed[1] < changed[2] < len(NAMES)  # severity 1 < 3 < 5
        letters_hit = [sum(a != b for n, t in zip(NAMES, names) for a, b in zip(n, t)) for names in typos]
        assert letters_hit[0] < letters_hit[1] < letters_hit[2]

    def test_accuracy_follows_the_misspelt_true_names(self, sqlite_engine, five) -> None:
        result = run_robustness(sqlite_engine, adapter=NameReader(), perturbations=["typo"], severities=[1, 2, 3, 4, 5],
                                seed=2, show_progress=False)  # fmt: skip

        expected = [np.mean([intact(NAMES[t], s, 2, t) for t in TRUTH.values()]) for s in range(1, 6)]
        assert result.clean["imgt"].accuracy == 1.0
        assert result.grid["imgt"] == [pytest.approx(expected)]
        assert result.retention["imgt"] == pytest.approx(np.mean(expected))
        assert result.text_perturbations == ("typo",) and result.protocol["protocol"] == "topk"

    def test_rr_by_hand(self, sqlite_engine, five) -> None:
        # calls: clean 5/5, typo s1 4/5, typo s2 2/5: RR = mean(0.8, 0.4) = 0.6
        model = NameReader(right_per_call=["abcde", "abcd", "ab"])

        result = run_robustness(sqlite_engine, adapter=model, perturbations=["typo"], severities=[1, 2],
                                show_progress=False)  # fmt: skip

        assert result.grid["imgt"] == [[0.8, 0.4]] and result.retention["imgt"] == pytest.approx(0.6)
        assert result.errors == 0 and result.efficiency.n_images == 15 and result.efficiency.latency_p50_s == 0.01
        with Session(sqlite_engine) as s:
            row = s.scalars(select(EvaluationRecord)).one()
        assert row.result["perturbations"] == ["typo"] and row.result["text_perturbations"] == ["typo"]
        assert robustness_from_dict(row.result, row.id) == result  # the stored form reads back equal

    def test_all_means_image_and_text_perturbations_for_a_model_that_reads_text(self, sqlite_engine, five) -> None:
        result = run_robustness(sqlite_engine, adapter=NameReader(), severities=[1], show_progress=False, store=False)
        assert result.perturbations == (*PERTURBATIONS, "typo")


class TestImageOnlyClassifiers:
    def test_typo_is_refused_and_nothing_is_stored(self, sqlite_engine, five) -> None:
        model = ImageOnly()
        with pytest.raises(InputError, match="'pixels-only' is an image-only classifier: it reads no text"):
            run_robustness(sqlite_engine, adapter=model, perturbations=["jpeg", "typo"], show_progress=False)
        assert model.names == [] and stored(sqlite_engine) == 0

    def test_efficientnet_lite0_refuses_typo_before_loading(self, sqlite_engine, five) -> None:
        adapter = load_adapter("efficientnet-lite0")
        with pytest.raises(InputError, match="'efficientnet-lite0' is an image-only classifier"):
            run_robustness(sqlite_engine, adapter=adapter, perturbations=["typo"], show_progress=False)
        assert adapter.model is None and stored(sqlite_engine) == 0

    def test_all_means_the_image_perturbations(self, sqlite_engine, five) -> None:
        result = run_robustness(sqlite_engine, adapter=ImageOnly(), severities=[1], show_progress=False, store=False)
        assert result.perturbations == tuple(PERTURBATIONS) and result.text_perturbations == ()

    def test_a_scoring_model_takes_no_generative_protocol(self, sqlite_engine, five) -> None:
        with pytest.raises(InputError, match="--protocol cw is for generative models; 'pixels-only' is a scoring"):
            run_robustness(sqlite_engine, adapter=ImageOnly(), protocol="cw", show_progress=False)


class TestCapabilitiesFromTheRegistry:
    """Whether a model reads text is its kind's entry, and only that: a kind registered with reads_text takes typo."""

    def register(self, monkeypatch: pytest.MonkeyPatch, reads: bool) -> None:
        kind = AdapterKind("tests.fakes:SpecScorer", "spec-scorer:ID", ranks_topk=True, reads_text=reads)
        monkeypatch.setitem(REGISTRY, "spec-scorer", kind)

    def test_a_kind_registered_as_reading_text_takes_typo(self, sqlite_engine, five, monkeypatch) -> None:
        self.register(monkeypatch, reads=True)
        result = run_robustness(sqlite_engine, model="spec-scorer:m", perturbations=["typo"], severities=[1],
                                show_progress=False, store=False)  # fmt: skip
        assert result.perturbations == ("typo",) and result.text_perturbations == ("typo",)
        assert result.efficiency.n_images == 10  # 5 images clean, 5 with misspelt class names
        assert result.grid["imgt"] == [[result.clean["imgt"].accuracy]]  # class 0 always: names change nothing here

    def test_the_same_class_registered_as_image_only_is_refused(self, sqlite_engine, five, monkeypatch) -> None:
        self.register(monkeypatch, reads=False)
        with pytest.raises(InputError, match="'spec-scorer:m' is an image-only classifier: it reads no text"):
            run_robustness(sqlite_engine, model="spec-scorer:m", perturbations=["typo"], show_progress=False)
        assert stored(sqlite_engine) == 0

    def test_the_entry_it_was_loaded_as_wins_over_its_class(self, monkeypatch: pytest.MonkeyPatch) -> None:
        target = "tests.relabel.evaluation.test_text_robustness:NameReader"
        monkeypatch.setitem(REGISTRY, "blind", AdapterKind(target, "blind", True, False))
        adapter = load_adapter("blind")
        assert adapter.kind == "blind" and not reads_text(adapter) and reads_text(NameReader())  # type: ignore[union-attr]

    def test_a_kind_not_registered_is_named(self, sqlite_engine, five) -> None:
        model = NameReader()
        model.kind = "siglip"
        with pytest.raises(InputError, match="model 'name-reader' is of kind 'siglip', which is not registered; known"):
            run_robustness(sqlite_engine, adapter=model, perturbations=["typo"], show_progress=False)
        assert model.names == []


INSTRUCTION = "Classify the main object in this image into exactly one of the following categories:"


def cw_reader(request: ChatRequest) -> str:
    """Answers the image's true class as listed when the prompt's first instruction reads right, else a name
    that is no class (a model confused by a misspelt question)."""
    name = NAMES[TRUTH[letter(request.images[0])]]
    listed = f"\n{name}\n" in request.prompt
    return name if listed and request.prompt.startswith(INSTRUCTION + "\n") else "no idea"


def timed(model: ScriptedChatModel, seconds: float) -> ScriptedChatModel:
    inner = model.generate

    def generate(requests: list[ChatRequest]) -> list[ModelOutput]:
        outputs = inner(requests)
        for out in outputs:
            out.latency_s = seconds
        return outputs

    model.generate = generate  # type: ignore[method-assign]
    return model


class TestGenerativeModels:
    def test_closed_world_with_prompt_typos(self, sqlite_engine, five, tmp_path: Path) -> None:
        model = timed(ScriptedChatModel(cw_reader, fail={"n02123045_e.jpg": "HTTP 500"}, name="chat"), 0.25)

        result = run_robustness(sqlite_engine, adapter=model, perturbations=["typo"], severities=[2, 5], seed=1,
                                show_progress=False)  # fmt: skip

        clean = {letter(r.images[0]): r.prompt for r in model.requests[:5]}  # e's request was sent, then failed
        assert all(p == clean["a"] and p.startswith("Classify the main object") for p in clean.values())
        typo = {(letter(r.images[0]), i // 5): r.prompt for i, r in enumerate(model.requests[5:])}
        assert all(p != clean["a"] for p in typo.values()) and typo[("a", 0)] != typo[("b", 0)]  # seeded per request
        names = frozenset(NAMES)
        assert typo[("a", 0)] == perturb_instructions(clean["a"], 2, (1 << 32) + five["a"], "typo", names)
        # only the instructions were misspelt: the class list, the answer key, reads as it was shown
        for prompt in typo.values():
            assert [ln for ln in prompt.splitlines() if ln in names] == [ln for ln in clean["a"].splitlines()
                                                                        if ln in names]  # fmt: skip
        # e failed in every pass: an error, never wrong; a, b, c, d are right when the question survived the typos
        intact = [[perturb_instructions(clean[k], s, (1 << 32) + five[k], "typo", names).startswith(INSTRUCTION + "\n")
                   for k in "abcd"] for s in (2, 5)]  # fmt: skip
        expected = [np.mean(row) for row in intact]
        assert result.clean["imgt"].accuracy == 1.0 and result.clean["imgt"].n_errors == 1
        assert result.grid["imgt"] == [pytest.approx(expected)] and expected[1] < 1
        assert result.errors == 3 and result.efficiency.latency_p50_s == 0.25 and result.efficiency.n_images == 15
        assert result.protocol["protocol"] == "cw" and result.efficiency.flops_per_image is None

        files = write_robustness_report(build_robustness_summary(result), tmp_path / "report")
        markdown = files.markdown.read_text()
        assert "| typo (prompts) | 100.00 |" in markdown and "protocol cw, prompt version" in markdown
        data = json.loads(files.data.read_text())
        assert data["text_perturbations"] == ["typo"] and data["protocol"]["protocol"] == "cw" and data["id"]
        assert (tmp_path / "report" / "robustness.png").read_bytes().startswith(b"\x89PNG")

    def test_image_perturbations_reach_a_generative_model(self, sqlite_engine, five) -> None:
        model = ScriptedChatModel(cw_reader, name="chat")
        result = run_robustness(sqlite_engine, adapter=model, perturbations=["jpeg"], severities=[5],
                                show_progress=False, store=False)  # fmt: skip
        assert result.grid["imgt"] == [[1.0]]  # same prompt, other pixels: this reader only reads the prompt
        hashes = [r.images[0].sha256 for r in model.requests]
        assert len(set(hashes)) == 10 and len({r.prompt for r in model.requests}) == 1

    def test_open_world_maps_answers_with_the_text_encoder(self, sqlite_engine, five) -> None:
        model = ScriptedChatModel(lambda r: NAMES[TRUTH[letter(r.images[0])]].upper(), name="chat")
        result = run_robustness(sqlite_engine, adapter=model, protocol="ow", encoder=TrigramEncoder(),
                                perturbations=["typo"], severities=[5], show_progress=False, store=False)  # fmt: skip
        assert result.clean["imgt"].accuracy == 1.0 and result.grid["imgt"] == [[1.0]]
        assert result.protocol["mapper"]["encoder"] == "test:trigram"
        assert model.requests[5].prompt != model.requests[0].prompt  # the question was misspelt, not the answer

    def test_multiple_choice_options_stay_as_written(self, sqlite_engine, five) -> None:
        def choose(request: ChatRequest) -> str:
            name = NAMES[TRUTH[letter(request.images[0])]]
            hits = [ln[0] for ln in request.prompt.splitlines() if ln[3:] == name and ln[1:3] == ". "]
            return hits[0] if hits else "?"

        model = ScriptedChatModel(choose, name="chat")
        result = run_robustness(sqlite_engine, adapter=model, protocol="mc", perturbations=["typo"], severities=[5],
                                show_progress=False, store=False)  # fmt: skip
        assert result.clean["imgt"].accuracy == 1.0 and result.grid["imgt"] == [[1.0]]  # every option still read
        clean, misspelt = model.requests[0].prompt, model.requests[5].prompt
        assert misspelt.splitlines()[0] != clean.splitlines()[0]  # the question was misspelt
        assert [ln for ln in misspelt.splitlines() if ln[1:3] == ". "] == [ln for ln in clean.splitlines()
                                                                             if ln[1:3] == ". "]  # fmt: skip

    def test_a_scoring_protocol_is_refused(self, sqlite_engine, five) -> None:
        with pytest.raises(InputError, match="protocol 'topk' reads scores; 'chat' is a generative model"):
            run_robustness(sqlite_engine, adapter=ScriptedChatModel(cw_reader, name="chat"), protocol="topk",
                           show_progress=False)  # fmt: skip
        assert stored(sqlite_engine) == 0


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import save_tiny_clip

    return save_tiny_clip(tmp_path_factory.mktemp("clip"))


class TestTinyClip:
    def test_the_zero_shot_adapter_reads_typos_and_keeps_a_bounded_cache(
        self, sqlite_engine, five, tiny_clip: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from relabel.suggest.adapters import clip

        adapter = clip.ZeroShotAdapter(str(tiny_clip), templates=["a photo of a {}."], device="cpu")
        assert reads_text(adapter)  # built directly, not loaded: its class names its kind, clip
        seen: list[list[str]] = []
        score = adapter.score
        monkeypatch.setattr(adapter, "score", lambda refs, names: seen.append(names) or score(refs, names))
        monkeypatch.setattr(clip, "CLASS_CACHE_SIZE", 2)

        result = run_robustness(sqlite_engine, adapter=adapter, perturbations=["typo"], severities=[1, 5],
                                show_progress=False, store=False)  # fmt: skip

        assert seen[0] == NAMES and seen[1] != NAMES and seen[2] != seen[1]
        assert len(adapter._class_cache) == 2  # three lists seen, the two most recent kept
        clean = adapter.class_embeddings(NAMES)  # evicted, computed again: the same numbers, no stale entry
        np.testing.assert_allclose(clean, adapter.class_embeddings(list(NAMES)), atol=1e-6)
        changed = [i for i, (a, b) in enumerate(zip(seen[2], NAMES)) if a != b]
        assert not np.allclose(adapter.class_embeddings(seen[2])[changed], clean[changed])
        assert np.isfinite(result.grid["imgt"]).all() and result.efficiency.n_images == 15

    def test_cli_typo_run_and_one_line_refusal(self, tmp_path: Path, tiny_clip: Path, capsys) -> None:
        from db import create_db_engine, init_db

        folder = tmp_path / "ws"
        engine = create_db_engine(f"sqlite:///{folder / 'relabel.db'}")
        init_db(engine)
        ws.build(engine, tmp_path)
        engine.dispose()
        base = ["--workspace", str(folder), "evaluate", "robustness", "--quiet", "--severities", "1"]

        main([*base, "--model", f"clip:{tiny_clip}", "--perturbations", "typo", "--device", "cpu",
              "--out", str(tmp_path / "report")])  # fmt: skip
        out = capsys.readouterr().out

        data = json.loads((tmp_path / "report" / "robustness.json").read_text())
        assert data["perturbations"] == ["typo"] and data["n_images"] == 5 and len(data["grid"]["imgt"][0]) == 1
        markdown = (tmp_path / "report" / "report.md").read_text()
        assert "typo (class names)" in out and "| typo (class names) |" in markdown
        with pytest.raises(SystemExit) as exit_info:
            main([*base, "--perturbations", "typo"])  # efficientnet-lite0
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and len(err.strip().splitlines()) == 1
        assert "'efficientnet-lite0' is an image-only classifier: it reads no text" in err


def test_a_local_vlm_answers_typo_prompts(sqlite_engine, five, tmp_path: Path, monkeypatch) -> None:
    """The tiny Qwen2-VL through the real adapter, open world: the prompt misspelt, latency from its outputs."""
    from relabel.suggest.adapters.hf_vlm import HFVisionLanguageAdapter
    from tests.tiny_models import save_tiny_qwen2_vl

    adapter = HFVisionLanguageAdapter(str(save_tiny_qwen2_vl(tmp_path / "qwen")), device="cpu", max_new_tokens=4)
    prompts: list[str] = []
    generate = adapter.generate
    monkeypatch.setattr(adapter, "generate", lambda rs: prompts.extend(r.prompt for r in rs) or generate(rs))

    result = run_robustness(sqlite_engine, adapter=adapter, protocol="ow", encoder=TrigramEncoder(), limit=2,
                            perturbations=["typo"], severities=[5], show_progress=False)  # fmt: skip

    assert len(prompts) == 4 and prompts[0] == prompts[1] and prompts[2] != prompts[0] != prompts[3]
    assert result.errors == 0 and result.model.startswith("hf-vlm:") and result.protocol["protocol"] == "ow"
    e = result.efficiency
    assert e.latency_p50_s is not None and e.latency_p50_s > 0 and e.n_parameters and e.n_parameters > 0
