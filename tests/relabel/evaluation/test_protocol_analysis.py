"""The protocol analysis on hand-built runs of six images; every number below is counted by hand.

Reference classes: images 0, 1 class 0; 2, 3 class 1; 4, 5 class 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from relabel.common.errors import InputError
from relabel.evaluation.protocol_analysis import (
    RunView,
    batch_ablations,
    build_analysis,
    class_oop,
    order_ablations,
    protocol_pairs,
)
from relabel.evaluation.protocol_analysis_text import add_protocol_section, render_protocol_analysis

TRUTH = [[0], [0], [1], [1], [2], [2]]
NAMES = ["tench", "goldfish", "great white shark", "tiger shark", "hammerhead"]
ALL = [1, 1, 1, 1, 1, 1]


def view(name: str, protocol: str, *, correct: list[int] | None = None, scored: list[int] = ALL,
         answer: list[int] | None = None, oop: list[int] | None = None, answered: list[int] = ALL,
         model: str = "m", n_errors: int = 0, **params: Any) -> RunView:  # fmt: skip
    if correct is None:
        correct = [int(a == t[0]) for a, t in zip(answer or [], TRUTH)]
    settings = {"protocol": protocol, "prompt_version": "v1", "images_per_request": 1, "usage": {"calls": 6}}
    return RunView(name, model, protocol, {**settings, **params}, np.array(correct, bool) & np.array(scored, bool),
                   np.array(scored, bool), np.array(answer if answer else [-1] * 6), np.array(answered, bool),
                   None if oop is None else np.array(oop, bool), 6, n_errors, n_errors)  # fmt: skip


def protocol_runs() -> list[RunView]:
    """Image 5 is not scored by cw, so every comparison is on images 0-4: ow 2/5, cw 4/5, cwplus 5/5, mc with
    random distractors 5/5, with hard ones 3/5."""
    return [
        view("ow", "ow", correct=[1, 1, 0, 0, 0, 0]),
        view("cw", "cw", correct=[1, 1, 1, 1, 0, 0], scored=[1, 1, 1, 1, 1, 0]),
        view("cw-b4", "cw", correct=[0, 0, 0, 0, 0, 0], images_per_request=4),  # not the one compared
        view("cwplus", "cwplus", correct=[1, 1, 1, 1, 1, 0]),
        view("mc-random", "mc", correct=[1, 1, 1, 1, 1, 1], distractors="random", seed=0),
        view("mc-hard", "mc", correct=[1, 0, 1, 0, 1, 1], distractors="wordnet", seed=0),
    ]


def test_protocols_are_compared_on_the_images_every_compared_run_scored() -> None:
    pairs = protocol_pairs(protocol_runs(), n_boot=0)
    found = {(p.protocol_a, p.protocol_b): (p.run_a, p.run_b, p.n, p.top1_a, p.top1_b, p.difference) for p in pairs}
    assert found == {
        ("ow", "cw"): ("ow", "cw", 5, 0.4, 0.8, pytest.approx(0.4)),
        ("ow", "cwplus"): ("ow", "cwplus", 5, 0.4, 1.0, pytest.approx(0.6)),
        ("cw", "cwplus"): ("cw", "cwplus", 5, 0.8, 1.0, pytest.approx(0.2)),
        ("mc (random)", "mc (hard)"): ("mc-random", "mc-hard", 5, 1.0, 0.6, pytest.approx(-0.4)),
    }
    assert all(p.ci_low is None for p in pairs)
    with_boot = {(p.protocol_a, p.protocol_b): p for p in protocol_pairs(protocol_runs(), n_boot=200, seed=0)}
    hard = with_boot[("mc (random)", "mc (hard)")]
    assert hard.ci_low is not None and hard.ci_high is not None
    assert -1 <= hard.ci_low <= -0.4 <= hard.ci_high <= 0


def test_out_of_prompt_rate_per_class_highest_first_with_wilson_intervals() -> None:
    # answered 0-4 (5's call failed); out of prompt: 0 (class 0), 2 and 3 (class 1): class 1 2/2, class 0 1/2,
    # class 2 0/1 (not listed: no out-of-prompt answer); overall 3/5
    cw = view("cw", "cw", answer=[0, 0, 1, 1, 2, -1], oop=[1, 0, 1, 1, 0, 0], answered=[1, 1, 1, 1, 1, 0])
    found = class_oop(cw, TRUTH, NAMES)
    assert found is not None
    assert [(c.class_name, c.oop.k, c.oop.n) for c in found.classes] == [("goldfish", 2, 2), ("tench", 1, 2)]
    assert (found.overall.k, found.overall.n) == (3, 5)
    # Wilson at 2 of 2: high 1, low n / (n + z²) = 2 / (2 + 1.96²)
    assert found.classes[0].oop.high == 1.0
    assert found.classes[0].oop.low == pytest.approx(2 / (2 + 1.959964**2), abs=1e-5)
    assert class_oop(view("mc", "mc", answer=[0] * 6, oop=[1] * 6), TRUTH, NAMES) is None
    assert class_oop(view("ow", "ow", answer=[0] * 6), TRUTH, NAMES) is None  # ow records no out-of-prompt flag


def test_failure_rate_per_run_with_its_wilson_interval() -> None:
    analysis = build_analysis([view("cw", "cw", answer=[0] * 6, n_errors=1)], TRUTH, NAMES, n_boot=0)
    (f,) = analysis.failures
    # 1 of 6: p = 1/6, centre (p + z²/12) / (1 + z²/6) = 0.2968, half-width 0.2667
    assert (f.run, f.protocol, f.errors.k, f.errors.n, f.n_failed) == ("cw", "cw", 1, 6, 1)
    assert f.errors.low == pytest.approx(0.0301, abs=1e-3) and f.errors.high == pytest.approx(0.5635, abs=1e-3)


def test_batch_sizes_are_compared_against_the_smallest_on_common_images() -> None:
    runs = [
        view("b1", "cw", answer=[0, 0, 1, 1, 2, 2]),
        view("b4", "cw", answer=[0, 3, 3, 3, 2, 3], images_per_request=4),
        view("b2", "cw", answer=[0, 0, 3, 1, 2, 2], images_per_request=2, scored=[1, 1, 1, 1, 1, 0]),
        view("synonyms", "cw", answer=[3] * 6, images_per_request=4, accept_synonyms=True),  # another setting
    ]
    (ablation,) = batch_ablations(runs, n_boot=0)
    assert ablation.n == 5
    assert [(v.run, v.setting, v.top1.k, v.difference) for v in ablation.variants] == [
        ("b1", 1, 5, None),
        ("b2", 2, 4, pytest.approx(-0.2)),
        ("b4", 4, 2, pytest.approx(-0.6)),
    ]


def test_option_order_accuracy_per_seed_and_the_share_of_answers_that_changed() -> None:
    runs = [
        view("s0", "mc", answer=[0, 0, 1, 1, 2, 2], distractors="random", seed=0),
        view("s1", "mc", answer=[0, 3, 1, 1, 2, 2], distractors="random", seed=1),
        view("s2", "mc", answer=[0, 0, 1, 4, 2, -1], distractors="random", seed=2, scored=[1, 1, 1, 1, 1, 0]),
        view("hard", "mc", answer=[3] * 6, distractors="wordnet", seed=1),  # other distractors: its own group
        view("six", "mc", answer=[3] * 6, distractors="random", seed=3, options=6),  # other options
    ]
    (ablation,) = order_ablations(runs, n_boot=0)
    # on images 0-4: s1 changed image 1, s2 image 3
    assert ablation.protocol == "mc (random)" and ablation.n == 5
    assert [(v.run, v.setting, v.top1.k, v.difference) for v in ablation.variants] == [
        ("s0", 0, 5, None),
        ("s1", 1, 4, pytest.approx(-0.2)),
        ("s2", 2, 4, pytest.approx(-0.2)),
    ]
    assert ablation.changed is not None and (ablation.changed.k, ablation.changed.n) == (2, 5)
    text = render_protocol_analysis(build_analysis(runs, TRUTH, NAMES, n_boot=0))
    assert "option-order ablation" in text and "40.00" in text  # the changed share
    assert "(no runs differ only in --images-per-request)" in text


def test_the_report_section_has_every_table_and_its_figure(tmp_path: Path) -> None:
    runs = [*protocol_runs(), view("mc-s1", "mc", correct=[1, 1, 1, 1, 0, 1], distractors="random", seed=1)]
    runs.append(view("cw-oop", "cw", answer=[0] * 6, oop=[1, 0, 0, 0, 0, 0], model="other"))
    analysis = build_analysis(runs, TRUTH, NAMES, n_boot=50)
    report = tmp_path / "report.md"
    with pytest.raises(InputError, match="report.md not found"):
        add_protocol_section(analysis, report)
    report.write_text("# Evaluation\n")
    written = add_protocol_section(analysis, report)
    names = ["protocol_pairs.png", "protocol_oop.png", "protocol_failures.png", "protocol_batches.png",
             "protocol_orders.png"]  # fmt: skip
    assert [p.name for p in written] == names
    assert all(p.read_bytes()[:4] == b"\x89PNG" for p in written)
    text = report.read_text()
    assert text.startswith("# Evaluation\n\n## Protocol analysis")
    assert all(f"]({name})" in text for name in names)
    assert "| m | mc (random) | mc (hard) | mc-random | mc-hard | 5 | 100.00 | 60.00 | -40.00 |" in text
