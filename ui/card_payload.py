"""A review card as one small JSON payload, rendered in the page by `ui/static/card.js`.

Everything here is plain data: class names, model output, notes and paths are untrusted, and the page only ever
puts them into the DOM as text (`textContent`), never as markup. Image addresses point into the display cache,
the one folder the studio serves (`ui.app.launch_app`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from relabel.common.vocabulary import Vocabulary
from relabel.review.cards import Card, HistoryEntry, Suggestion
from relabel.review.display import StoredImage
from relabel.review.examples import pick_example
from relabel.review.studio import Studio
from ui import views

EXAMPLE_SIDE = 256  # longer side of a reference photo, in pixels


def file_url(path: Path | str) -> str:
    """The address of a served file, relative to the page (so a proxy's sub-path keeps working)."""
    return "gradio_api/file=" + quote(str(path), safe="/")


def class_ref(vocab: Vocabulary, index: int) -> dict[str, Any]:
    """One class as the page shows it: index, display name, wnid and "name (wnid)"."""
    if not 0 <= index < len(vocab):
        return {"index": index, "name": f"class {index}", "wnid": "", "label": f"class {index} (not in vocabulary)"}
    c = vocab.classes[index]
    return {"index": index, "name": c.name, "wnid": c.wnid or "", "label": views.class_text(vocab, index)}


def class_detail(vocab: Vocabulary, index: int) -> dict[str, Any]:
    """`class_ref` with the synonyms and the description, for the original label."""
    ref = class_ref(vocab, index)
    if 0 <= index < len(vocab):
        c = vocab.classes[index]
        ref |= {"synonyms": [s for s in c.synonyms if s != c.name], "gloss": c.gloss}
    return ref


def suggestion_payload(vocab: Vocabulary, s: Suggestion | None) -> dict[str, Any] | None:
    """The MLLM suggestion: model, protocol, run, its class and its raw answer (or why it failed)."""
    if s is None:
        return None
    out: dict[str, Any] = {"model": s.model, "protocol": s.protocol, "run": s.run, "ok": s.ok}
    if not s.ok:
        return out | {"error": s.error or "the model failed on this image"}
    notes = []
    if s.details.get("oop"):
        notes.append("out of prompt" + (" (mapped by similarity)" if s.details.get("mapped") else ""))
    if isinstance(s.details.get("similarity"), (int, float)):
        notes.append(f"mapping similarity {s.details['similarity']:.2f}")
    top = s.top1
    return out | {"class": None if top is None else class_ref(vocab, top), "answer": s.raw, "notes": notes}


def classifier_payload(vocab: Vocabulary, s: Suggestion | None, k: int = 5) -> dict[str, Any] | None:
    """The classifier's top-k with scores (ranks stand in for missing scores)."""
    if s is None:
        return None
    if not s.ok:
        return {"model": s.model, "run": s.run, "error": s.error or "the classifier failed on this image", "top": []}
    scores = s.scores or tuple(1.0 / (rank + 1) for rank in range(len(s.classes)))
    top = [class_ref(vocab, c) | {"score": float(p)} for c, p in list(zip(s.classes, scores))[:k]]
    return {"model": s.model, "run": s.run, "top": top}


def answer_payload(vocab: Vocabulary, e: HistoryEntry) -> dict[str, Any]:
    """A decision: who, the verdict, its classes, flags, note and when."""
    return {
        "id": e.annotation_id,
        "who": e.user,
        "lead": e.is_adjudication,
        "verdict": e.verdict.value,
        "classes": [class_ref(vocab, c) for c in e.classes],
        "what": views.event_summary(vocab, e),
        "flags": list(e.flags),
        "note": e.note,
        "when": e.created_at.strftime("%Y-%m-%d %H:%M"),
    }


def own_answer(vocab: Vocabulary, card: Card) -> dict[str, Any] | None:
    """The viewer's own answer, to pre-fill the form: the standing one, or the one they just undid."""
    own = card.own()
    if own is not None:
        return answer_payload(vocab, own) | {"undone": False}
    mine = [e for e in card.history if e.user == card.viewer and not e.is_adjudication]
    if mine and mine[-1].retracts_id is not None:
        undone = next((e for e in mine if e.annotation_id == mine[-1].retracts_id), None)
        if undone is not None:
            return answer_payload(vocab, undone) | {"undone": True}
    return None


def example_payload(studio: Studio, card: Card) -> dict[str, Any]:
    """A reference photo of the original class and of the suggested class, when the dataset has one."""
    out: dict[str, Any] = {}
    wanted = {"original": card.original[0] if card.original else None, "suggested": card.suggested_class}
    for role, index in wanted.items():
        example = pick_example(studio.examples, index, exclude=card.image_id)
        if example is None:
            continue
        try:
            path = studio.display.path_for(example, side=EXAMPLE_SIDE)
        except Exception:  # an example that cannot be shown is left out; the card itself still works
            continue
        out[role] = {
            "url": file_url(path),
            "image_id": example.image_id,
            "label": views.class_text(studio.vocab, index),
        }
    return out


def image_payload(studio: Studio, image: StoredImage) -> dict[str, Any]:
    """The display image's address, or why it cannot be shown (a file gone or broken since ingest)."""
    try:
        return {"url": file_url(studio.display.path_for(image)), "image_error": ""}
    except Exception as exc:
        return {"url": "", "image_error": f"image {image.image_id} cannot be shown: {exc}"}


def card_payload(
    studio: Studio,
    card: Card,
    token: str,
    status: str,
    *,
    reveal: bool = False,
    prefetch: list[str] | None = None,
) -> dict[str, Any]:
    """Everything the page draws for one card. `reveal` shows other users' answers before the viewer decided
    (adjudication); otherwise they stay hidden until the viewer has an answer of their own (blind review)."""
    vocab = studio.vocab
    size = f"{card.width}×{card.height}" if card.width and card.height else "size unknown"
    return {
        "image_id": card.image_id,
        "key": f"{card.image_id}:{token}",
        **image_payload(studio, card.image),
        "dataset": card.dataset,
        "path": card.image.path,
        "size": size,
        "notes": card.notes,
        "original": [class_detail(vocab, c) for c in card.original],
        "suggestion": suggestion_payload(vocab, card.suggestion),
        "classifier": classifier_payload(vocab, card.classifier),
        "suggested": None if card.suggested_class is None else class_ref(vocab, card.suggested_class),
        "priors": [
            {"source": p.source, "classes": [class_ref(vocab, c) for c in p.classes], "detail": detail}
            for p, (_, _, detail) in zip(card.priors, views.prior_rows(vocab, card))
        ],
        "examples": example_payload(studio, card),
        "others": [answer_payload(vocab, e) for e in card.others(reveal=reveal)],
        "own": own_answer(vocab, card),
        "status": status,
        "reason": studio.review_reason(card.image_id),  # why the queue ranks it here; None: not by its benefit
        "prefetch": prefetch or [],
    }
