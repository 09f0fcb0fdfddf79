"""Regenerate relabel/resources/embeddings/: the class-side embeddings of the built-in vocabulary with MiniLM.

Answer mapping (`relabel.suggest.textmap`) embeds every class's names, its description and its short descriptions
once per encoder and vocabulary, and caches them in the workspace. Encoding them takes about 100 s on two CPU
cores; shipping them for the default encoder (all-MiniLM-L6-v2) and the built-in ImageNet-1k vocabulary makes a
user's first OW or CW+ run start at once. The files are named like the cache (KIND-DIGEST.npy, the digest of the
encoder id and the texts) and stored as float16; a change of names, descriptions or encoder changes the digest, so
a stale file is never read (a test checks that the shipped files match the current texts). Run this after
scripts/build_hyponym_names.py, build_alternative_names.py, build_imagenet_vocabulary.py or an edit of
relabel/resources/imagenet1k_descriptors.json.

Example:
    HF_HUB_OFFLINE=1 python scripts/build_class_embeddings.py
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from relabel.suggest.class_texts import class_descriptions, class_descriptors, class_names
from relabel.suggest.textmap import DEFAULT_ENCODER, embedding_digest, load_encoder
from relabel.vocabulary import load_builtin

OUT = Path(__file__).resolve().parent.parent / "relabel" / "resources" / "embeddings"


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    vocab = load_builtin()
    encoder = load_encoder(DEFAULT_ENCODER)
    OUT.mkdir(parents=True, exist_ok=True)
    for stale in OUT.glob("*.npy"):
        stale.unlink()
    kinds = (
        ("class-embeddings", class_names(vocab)[0]),
        ("class-descriptions", class_descriptions(vocab)),
        ("class-descriptors", class_descriptors(vocab)[0]),
    )
    for kind, texts in kinds:
        path = OUT / f"{kind}-{embedding_digest(encoder.id, texts)}.npy"
        np.save(path, encoder.encode(texts).astype(np.float16), allow_pickle=False)
        print(f"{len(texts)} texts -> {path} ({path.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
