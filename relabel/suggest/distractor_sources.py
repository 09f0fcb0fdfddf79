"""The sources of hard multiple-choice distractors, one registry entry each, and the `--distractors` setting.

`--distractors` is `random`, `hard` (the default sources, `DEFAULT_HARD`) or sources joined by `+`, tried in that
order (`run:clip@topk+wordnet`: wordnet fills only the slots the run's classes leave), or by `|`, merged in turns
(`imagenet-confusions|real-proposals`: each source's most confusable class, then each one's second, ...; with three
slots that is two from the first source and one from the second, never the same class twice). `|` binds tighter
than `+`. Every source but `text` is independent of the model under test as long as it is not that model's own
run, which `run:` refuses:

- `imagenet-confusions`: the classes a cross-validated classifier (cleanlab's label-errors release, not
  EfficientNet-Lite0) predicted for the 50,000 ImageNet validation images of the reference class, and the classes
  whose images it took for the reference class, most frequent first (relabel/resources/imagenet1k_cv_confusions.json,
  built by scripts/build_confusion_table.py);
- `real-proposals`: the classes ReaL's pool of 19 models proposed for the 24,889 validation images it had rated,
  beside the reference class, and the classes beside which the reference class was proposed, most frequent first
  (relabel/resources/imagenet1k_real_proposals.json, built by scripts/build_real_proposals_table.py): the
  confusions of many strong models, both look-alikes and other objects in the photo;
- `wordnet`: the classes closest in the WordNet 3.0 noun tree, siblings (one shared parent) first, then cousins
  (relabel/resources/imagenet1k_wordnet_tree.json, built by scripts/build_wordnet_tree.py);
- `run:NAME`: a stored run of another model: the classes it ranked (top-5 for scoring models) for images labelled
  with the reference class, and both ways;
- `file:PATH`: class groups (.json, like confusion_clusters.json) or a (C, C) confusion matrix (.npy);
- `text`: the classes nearest in the text-embedding space of the mapping encoder.

Merging takes turns by rank rather than adding counts: one table counts a classifier's mistakes, the other models'
proposals, so their counts are not on one scale. On the 1,000 sample photos the merge of the two shipped tables
costs EfficientNet-Lite0 about as much as either table alone (bench/bench_distractors.py): with three distractors
per question, a per-class table offers the class that model prefers for only about half of its mistakes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from itertools import zip_longest
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from db.engine import session_scope
from db.enums import PredictionStatus
from db.models import ModelRun, Prediction
from relabel.common.errors import InputError, unknown_name
from relabel.common.vocabulary import Vocabulary
from relabel.common.workspace import get_dataset
from relabel.suggest.distractors import (
    MAX_NEIGHBOURS,
    RANDOM,
    DistractorSource,
    Neighbours,
    confusion_from_predictions,
    load_confusion,
    neighbours_from_matrix,
    text_neighbours,
)
from relabel.suggest.runner import reference_labels
from relabel.suggest.textmap import TextEncoder

HARD = "hard"
THEN, MERGE = "+", "|"  # sources tried in order; sources merged in turns
# chosen on the even-numbered sample photos (bench/bench_distractors.py)
DEFAULT_HARD = "imagenet-confusions|real-proposals+wordnet"
CONFUSIONS_RESOURCE = "imagenet1k_cv_confusions.json"
PROPOSALS_RESOURCE = "imagenet1k_real_proposals.json"
WORDNET_RESOURCE = "imagenet1k_wordnet_tree.json"
FAR = 99.0  # the tree distance of two classes without a common ancestor (or without a wnid)


@dataclass
class SourceInputs:
    """What building a source may read: the vocabulary, the model under test (a `run:` of it is refused), the
    workspace (`run:`), and the mapping encoder, loaded only when the `text` source asks for it."""

    vocab: Vocabulary
    model: str
    engine: Engine | None = None
    dataset: str | None = None
    encoder: Callable[[], TextEncoder] | None = None
    cache_dir: Path | None = None


@dataclass(frozen=True)
class SourceKind:
    """One registry entry: what it is (the CLI's help), how it is built from its argument (`run:NAME` → "NAME"),
    and the argument's placeholder ("" for a source without one)."""

    summary: str
    build: Callable[[SourceInputs, str], Neighbours]
    argument: str = ""


def _resource(name: str) -> dict[str, Any]:
    text = resources.files("relabel.resources").joinpath(name).read_text(encoding="utf-8")
    found: dict[str, Any] = json.loads(text)
    return found


@lru_cache(maxsize=1)
def wordnet_parents() -> dict[str, list[str]]:
    """{wnid: its direct WordNet hypernyms} for every ImageNet-1k class and every synset above one."""
    parents: dict[str, list[str]] = _resource(WORDNET_RESOURCE)["parents"]
    return parents


def _ancestors(wnid: str, parents: dict[str, list[str]]) -> dict[str, int]:
    """{synset: fewest steps up from `wnid`} for `wnid` (0 steps) and every synset above it."""
    steps = {wnid: 0}
    frontier, level = [wnid], 0
    while frontier:
        level += 1
        frontier = list(dict.fromkeys(p for f in frontier for p in parents.get(f, []) if p not in steps))
        steps.update((p, level) for p in frontier)
    return steps


def _depths(parents: dict[str, list[str]]) -> dict[str, int]:
    """{synset: fewest steps down from the root}, for every synset in the tree."""
    depth: dict[str, int] = {}

    def of(s: str) -> int:
        if s not in depth:
            depth[s] = 1 + min((of(p) for p in parents.get(s, [])), default=-1)
        return depth[s]

    for s in parents:
        of(s)
    return depth


def wordnet_distances(vocab: Vocabulary) -> np.ndarray:
    """(C, C) float: the fewest edges between two classes through a common WordNet ancestor (2 for siblings, 4
    for first cousins), less a thousandth of that ancestor's depth, so that of two equally far classes the one
    under the narrower group comes first (lynx before dalmatian for tabby, whose domestic cat is also a domestic
    animal); `FAR` where a class has no wnid in the tree; the diagonal is inf."""
    parents = wordnet_parents()
    depth = _depths(parents)
    n = len(vocab)
    below: dict[str, list[tuple[int, int]]] = {}
    for c in vocab.classes:
        if c.wnid and c.wnid in parents:
            for synset, steps in _ancestors(c.wnid, parents).items():
                below.setdefault(synset, []).append((c.index, steps))
    dist = np.full((n, n), FAR)
    for synset, members in below.items():
        idx = np.array([i for i, _ in members])
        up = np.array([s for _, s in members], dtype=np.float64) - depth[synset] / 2000
        block = np.ix_(idx, idx)
        dist[block] = np.minimum(dist[block], up[:, None] + up[None, :])
    np.fill_diagonal(dist, np.inf)
    return dist


def _wordnet(inputs: SourceInputs, argument: str) -> Neighbours:
    dist = wordnet_distances(inputs.vocab)
    if not np.isfinite(dist).any() or (dist < FAR).sum() == 0:
        raise InputError(
            "the wordnet distractor source needs classes with WordNet ids (wnids); this vocabulary has none"
        )
    by_class = {}
    for c in range(len(inputs.vocab)):
        order = np.argsort(dist[c], kind="stable")[:MAX_NEIGHBOURS]
        by_class[c] = [int(j) for j in order if dist[c, j] < FAR]
    return Neighbours(by_class, "WordNet 3.0 noun tree: siblings, then cousins")


def _shipped_table(resource: str, inputs: SourceInputs) -> Neighbours:
    """A shipped {wnid: {wnid: count}} confusion table (`confusions`) as neighbours, both ways, by count; equally
    frequent classes by WordNet distance."""
    doc = _resource(resource)
    index = {c.wnid: c.index for c in inputs.vocab.classes if c.wnid}
    n = len(inputs.vocab)
    matrix = np.zeros((n, n))
    for true, predicted in doc["confusions"].items():
        for other, count in predicted.items():
            if true in index and other in index:
                matrix[index[true], index[other]] = count
    if not matrix.any():
        raise InputError(f"the {resource} distractor table knows ImageNet-1k wnids; this vocabulary has none")
    tie_break = wordnet_distances(inputs.vocab)  # equally frequent confusions: the closer class in WordNet first
    found = neighbours_from_matrix(matrix, n, "", tie_break)
    return Neighbours(found.by_class, f"{resource}: {doc['source']}", {"images": doc["images"]})


def _imagenet_confusions(inputs: SourceInputs, argument: str) -> Neighbours:
    return _shipped_table(CONFUSIONS_RESOURCE, inputs)


def _real_proposals(inputs: SourceInputs, argument: str) -> Neighbours:
    return _shipped_table(PROPOSALS_RESOURCE, inputs)


def _run(inputs: SourceInputs, name: str) -> Neighbours:
    if inputs.engine is None:
        raise InputError("the run: distractor source reads a workspace; none was given")
    with session_scope(inputs.engine) as session:
        ds = get_dataset(session, inputs.dataset)
        run = session.scalars(
            select(ModelRun).where(col(ModelRun.dataset_id) == ds.id, col(ModelRun.name) == name)
        ).first()
        if run is None:
            raise InputError(f"no model run {name!r} to take distractors from")
        if same_model(run.model, inputs.model):
            raise InputError(
                f"--distractors run:{name}: that run is of {run.model!r}, the model under test; "
                "take distractors from another model's run, or from imagenet-confusions or wordnet"
            )
        ref = reference_labels(session, ds)
        rows = session.execute(
            select(col(Prediction.image_id), col(Prediction.classes), col(Prediction.scores)).where(
                col(Prediction.run_id) == run.id, col(Prediction.status) == PredictionStatus.ok
            )
        ).all()
        model = run.model
    ranked = [(ref[i][0], classes, scores) for i, classes, scores in rows if classes and ref.get(i)]
    if not ranked:
        raise InputError(f"run {name!r} has no predictions on labelled images to build distractors from")
    found = confusion_from_predictions(ranked, len(inputs.vocab), f"run:{name}")
    by_image = {i: [int(c) for c in classes] for i, classes, _ in rows if classes}
    origin = f"the ranked classes of run {name!r} ({model}): the photo's own, then the class's"
    return Neighbours(found.by_class, origin, {"run": name, "model": model}, by_image)


def same_model(a: str, b: str) -> bool:
    """Whether two model names name one model. A run stores its adapter's name ("stub-model", "efficientnet-lite0")
    and the model under test is a spec ("openai:stub-model"), so a `KIND:` prefix and case are ignored."""

    def names(spec: str) -> set[str]:
        spec = spec.strip().casefold()
        return {spec, spec.partition(":")[2] or spec}

    return bool(names(a) & names(b))


def _file(inputs: SourceInputs, path: str) -> Neighbours:
    found = load_confusion(Path(path), len(inputs.vocab))
    return Neighbours(found.by_class, found.origin, {"file": path})


def _text(inputs: SourceInputs, argument: str) -> Neighbours:
    if inputs.encoder is None:
        raise InputError("the text distractor source needs a text encoder (--encoder); none was given")
    found = text_neighbours(inputs.encoder(), inputs.vocab, inputs.cache_dir)
    return Neighbours(found.by_class, found.origin, {"encoder": found.origin.split(",")[0]})


DISTRACTOR_SOURCES: dict[str, SourceKind] = {
    "imagenet-confusions": SourceKind(
        "a shipped table of another classifier's mistakes on the 50,000 ImageNet validation images",
        _imagenet_confusions,
    ),
    "real-proposals": SourceKind(
        "a shipped table of the classes ReaL's 19 models proposed beside each label of the validation images",
        _real_proposals,
    ),
    "wordnet": SourceKind("the classes closest in the WordNet tree, siblings first", _wordnet),
    "run": SourceKind("the ranked classes of a stored run of another model", _run, "NAME"),
    "file": SourceKind("class groups (.json) or a confusion matrix (.npy)", _file, "PATH"),
    "text": SourceKind("the classes nearest in the mapping encoder's text space", _text),
}


def distractor_summaries() -> dict[str, str]:
    """`--distractors` values: random, hard and each source (the CLI's help)."""
    return {
        RANDOM: "uniform over the other classes",
        HARD: f"the default sources, {DEFAULT_HARD}",
        **{f"{name}:{k.argument}" if k.argument else name: k.summary for name, k in DISTRACTOR_SOURCES.items()},
    }


def parse_distractors(spec: str) -> list[list[tuple[str, str]]]:
    """`--distractors` as steps in order, each a list of (source name, argument) pairs merged into one (`|`);
    [] for `random`. Raises InputError naming an unknown source and listing the known ones, or a source whose
    argument is missing or not wanted."""
    spec = spec.strip()
    if spec == RANDOM:
        return []
    return [[_parse_source(part) for part in step.split(MERGE)] for step in (DEFAULT_HARD if spec == HARD else
                                                                            spec).split(THEN)]  # fmt: skip


def _parse_source(part: str) -> tuple[str, str]:
    name, _, argument = part.strip().partition(":")
    kind = DISTRACTOR_SOURCES.get(name)
    if kind is None:
        raise unknown_name("distractor source", name, list(distractor_summaries()))
    if bool(kind.argument) != bool(argument):
        form = f"{name}:{kind.argument}" if kind.argument else name
        raise InputError(f"distractor source {part.strip()!r}: write it as {form}")
    return name, argument


def interleave(found: Sequence[tuple[str, Neighbours]]) -> Neighbours:
    """(source name, neighbours) pairs merged: per class, the sources take turns by rank (each one's first class,
    then each one's second, ...), a class already taken is skipped, at most `MAX_NEIGHBOURS`. Turns rather than
    summed counts because the tables count different things (one classifier's mistakes, many models' proposals):
    each source's best guess comes before any source's second. The record lists the merged sources' records."""
    by_class: dict[int, list[int]] = {}
    for c in sorted({c for _, f in found for c in f.by_class}):
        ranks = zip_longest(*(f.by_class.get(c, []) for _, f in found))
        by_class[c] = list(dict.fromkeys(d for rank in ranks for d in rank if d is not None))[:MAX_NEIGHBOURS]
    records = [{"source": name, "origin": f.origin, **f.record} for name, f in found]
    origin = "in turns: " + "; ".join(f.origin for _, f in found)
    return Neighbours(by_class, origin, {"merged": records}, parts=tuple(f for _, f in found))


def build_distractors(spec: str, inputs: SourceInputs, spread: int = 1) -> DistractorSource | None:
    """The hard-distractor sources `spec` names, built in order, the sources of a step joined by `|` merged by
    `interleave`; None for `random`."""
    steps = parse_distractors(spec)
    if not steps:
        return None
    built = []
    for step in steps:
        found = [(name, DISTRACTOR_SOURCES[name].build(inputs, argument)) for name, argument in step]
        built.append(found[0] if len(found) == 1 else (MERGE.join(n for n, _ in found), interleave(found)))
    label = THEN.join(MERGE.join(f"{n}:{a}" if a else n for n, a in step) for step in steps)
    return DistractorSource(tuple(built), spread, label)


def distractors_line(params: dict[str, Any]) -> str | None:
    """How an MC run's distractors were chosen, in one line, from its stored params; None for other runs.
    E.g. "distractors: run:clip@topk (a run of clip:ViT-B-32), then wordnet"."""
    if "distractors" not in params:
        return None
    records = params.get("distractor_sources") or []
    if not records:
        return f"distractors: {params['distractors']}"
    spread = params.get("distractor_spread", 1)
    return "distractors: " + ", then ".join(map(_named, records)) + (f"; spread {spread}" if spread != 1 else "")


def _named(record: dict[str, Any]) -> str:
    """One recorded source in words: `run:NAME (a run of MODEL)`, `file:PATH`, merged ones `A in turns with B`."""
    if "merged" in record:
        return " in turns with ".join(map(_named, record["merged"]))
    if "run" in record:
        return f"run:{record['run']} (a run of {record['model']})"
    return f"file:{record['file']}" if "file" in record else str(record["source"])
