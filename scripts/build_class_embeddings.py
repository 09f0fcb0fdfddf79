"""Embed the built-in vocabulary's class texts into a cache ahead of a first OW or CW+ run.

Answer mapping (`relabel.suggest.textmap`) compares answers with every class's names, its description and its short
descriptions, embedded once per encoder and text and kept in a cache (`relabel.suggest.embedding_cache`): the
workspace's cache folder, else the user's. A first run embeds what the cache lacks (minutes of CPU for the ~32,000
texts with MiniLM: 407 CPU s measured on two busy cores). This script does it beforehand, for a machine image, a CI
cache or a shared folder (`--cache`, default the user cache folder: $RELABEL_CACHE, else ~/.cache/relabel); texts
already there are not embedded again, so running it after an edit of the names or descriptions embeds only what
changed.

Example:
    HF_HUB_OFFLINE=1 python scripts/build_class_embeddings.py
    HF_HUB_OFFLINE=1 python scripts/build_class_embeddings.py --cache ws/cache --encoder st:all-mpnet-base-v2
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from relabel.common.vocabulary import load_builtin
from relabel.suggest.class_texts import class_descriptions, class_descriptors, class_names
from relabel.suggest.embedding_cache import encode_cached, encoder_folder
from relabel.suggest.textmap import DEFAULT_ENCODER, load_encoder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, help="cache folder (a workspace's WORKSPACE/cache); default the user's")
    parser.add_argument("--encoder", default=DEFAULT_ENCODER, help=f"text encoder (default {DEFAULT_ENCODER})")
    args = parser.parse_args()
    vocab = load_builtin()
    encoder = load_encoder(args.encoder)
    kinds = (
        ("class names", class_names(vocab)[0]),
        ("class descriptions", class_descriptions(vocab)),
        ("class descriptors", class_descriptors(vocab)[0]),
    )
    for what, texts in kinds:
        t0 = time.perf_counter()
        encode_cached(encoder, texts, args.cache, what)
        print(f"{what}: {len(texts)} texts in {time.perf_counter() - t0:.1f} s")
    print(f"kept in {encoder_folder(args.cache, encoder.id)}")


if __name__ == "__main__":
    main()
