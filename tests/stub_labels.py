"""Class-name answers for the stub server (`tests.stub_server.StubServer(answer=LabelAnswers(...))`), with a
batch-size effect built in, so a test can see `relabel suggest --images-per-request` cost accuracy by a known
amount."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from tests.stub_server import RecordedRequest, image_digest


def digest_fraction(digest: str) -> float:
    """A fraction in [0, 1) fixed by an image's digest: which images the batch effect hits."""
    return int(hashlib.sha256(f"batch|{digest}".encode()).hexdigest()[:8], 16) / 16**8


@dataclass
class LabelAnswers:
    """Answers to the ow, cw and cwplus prompts from the class the stub knows each image shows, found by its
    digest (`tests.stub_server.image_digest` of the image_url as sent). Deterministic:

    - one image per request: its class name (`wrong` for an image the stub does not know);
    - k images: numbered lines "1: name" ... "k: name", as the multi-image prompts ask; the image at position p
      (1-based) is answered `wrong` (`wrong_too` when `wrong` is its class) when `digest_fraction` of its digest
      falls below `drop_per_position` × (p − 1): never the first image of a request, more often the further down
      it is, and the same images on every run. With `drop_per_position` = 1 every image after the first of a
      request is answered wrong.
    """

    labels: dict[str, str]  # image digest -> class name
    drop_per_position: float = 0.0
    wrong: str = "goldfish"
    wrong_too: str = "tench"

    def __call__(self, body: dict[str, Any]) -> str:
        urls = RecordedRequest("POST", "", {}, body).image_urls
        names = [self.answer(image_digest(url), p) for p, url in enumerate(urls, start=1)]
        return names[0] if len(names) == 1 else "\n".join(f"{p}: {n}" for p, n in enumerate(names, start=1))

    def answer(self, digest: str, position: int) -> str:
        """The name given for image `digest` asked at `position` (1-based) of its request."""
        truth = self.labels.get(digest)
        if truth is not None and digest_fraction(digest) >= self.drop_per_position * (position - 1):
            return truth
        return self.wrong_too if truth == self.wrong else self.wrong
