"""Take the object phrase out of a free answer before it is embedded.

Chat models answer "What is the main object?" in sentences: "It looks like a slip-on shoe in the picture.",
"This photo shows a mountain.", "**Golden Retriever**". Embedded whole, the frame ("It looks like", "This photo
shows", "in the picture") pulls the answer toward classes whose names share its words (a *slide* rule, a *mountain*
bike). `object_phrase` removes, by fixed rules and in this order:

1. markdown and labels: `**bold**`, backticks, a leading "Answer:" / "Object:" / "- ", surrounding quotes;
2. a first sentence that is only a filler ("Sure!", "Certainly."), then every sentence after the first;
3. leading frames, repeatedly: hedges ("I think", "probably", "most likely"), "It looks like", "It appears to be",
   "This/The photo|image|picture shows|depicts|contains", "The main object/subject (in the image) is",
   "I (can) see", "There is/are", "It is", "That's", "This is", "A photo/close-up of", and the like;
4. trailing frames: "in the picture/image/photo", ", I think", "(probably)", end punctuation;
5. a leading article or count ("a", "the", "two", "some") and a collective ("a group/pair/bunch of").

`core_phrase` also cuts the scene the object is in ("a copier on a table" -> "copier", "a puma sitting on a
rock" -> "puma"): a place preposition followed by an article ("on a", "in the", ...), a comma, a participle that
describes a pose from a fixed list ("sitting", "perched", "parked", ...), or any other "-ing" word before an
article ("a rooster crowing on a fence", "a husky pulling a sled") unless that word ends a name the caller knows
("a cliff dwelling in the canyon", "an indigo bunting on a branch"). Words that describe the object itself ("with a
red tail", "for pressing clothes") stay; `head_phrase` cuts those too, for the word the phrase is about ("bull with
horns" is a bull). The rules are plain regular expressions; an answer they do not recognise passes through
unchanged but for case and punctuation.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_FILLERS = r"(?:sure|certainly|okay|ok|of course|yes|absolutely|great question|here you go)"
_MEDIA = r"(?:image|photo|photograph|picture|pic|scene|shot|snapshot|frame|illustration|drawing|painting)"
_HEDGE = (
    r"(?:i think|i believe|i'd say|i would say|i guess|in my opinion|probably|most likely|likely|possibly|"
    r"perhaps|maybe|definitely|clearly|certainly|apparently|seemingly|it seems|it seems that)"
)
_SUBJECT = (
    rf"(?:it|this|that|these|those|they|he|she|the (?:main |primary |central |prominent )?(?:object|subject|item|"
    rf"thing|animal|creature|bird|dog|cat|plant|food|dish|vehicle|focus|content)(?: (?:in|of) (?:the|this) {_MEDIA})?"
    rf"|what (?:i|we|you) (?:can )?see|what is shown|what's shown)"
)
_VERB = (
    r"(?:is|are|was|'s|looks like|look like|appears to be|appear to be|seems to be|seem to be|resembles|"
    r"could be|might be|may be|must be|would be|should be|is likely|is probably|is most likely)"
)
_LEADING = [
    re.compile(rf"^{_HEDGE}\b[,:]?\s*"),
    re.compile(
        rf"^(?:this|the|that|in (?:this|the)) {_MEDIA} (?:shows|depicts|contains|features|displays|"
        r"captures|presents|is of|has|includes|portrays)\s+"
    ),  # fmt: skip
    re.compile(rf"^(?:in|within|from) (?:this|the) {_MEDIA},?\s*(?:there (?:is|are)\s+|i (?:can )?see\s+)?"),
    re.compile(rf"^{_SUBJECT} {_VERB}\s+(?:an? )?(?:(?:image|photo|picture) of\s+)?"),
    re.compile(r"^(?:i|we|you) (?:can )?(?:see|notice|spot|observe)\s+"),
    re.compile(r"^(?:there (?:is|are|'s)|here (?:is|are|'s)|here we have|we have|i have)\s+"),
    re.compile(r"^(?:looks like|look like|appears to be|seems to be|resembles|shows|depicts)\s+"),
    re.compile(
        rf"^(?:an? |the )?(?:close-?up|closeup|photo|picture|image|shot|view|snapshot|{_MEDIA})"
        r"(?: photo| shot| view)? of\s+"
    ),  # fmt: skip
    re.compile(r"^(?:it's|that's|this's|its|thats)\s+"),
]
_TRAILING = [
    re.compile(rf"\s*,?\s*\b(?:in|on|from|of|within) (?:the|this|that) {_MEDIA}\b.*$"),
    re.compile(rf"\s*,?\s*\b{_HEDGE}$"),
    re.compile(r"\s*\((?:probably|likely|maybe|i think|possibly)\)$"),
]
_ARTICLE = re.compile(
    r"^(?:an?|the|some|one|two|three|four|five|several|many|a few|few|multiple|various|pair of|couple of)\s+"
)
_COLLECTIVE = re.compile(
    r"^(?:an? )?(?:group|pair|couple|bunch|flock|herd|pack|school|swarm|colony|set|collection|pile|row|close-?up)"
    r" of\s+"
)
_MARKUP = re.compile(r"[*_`#]+")
_LABEL = re.compile(
    r"^\s*(?:[-•>]\s*)?(?:final answer|answer|object|main object|label|class|category)\s*[:\-]\s*", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]][a-z0-9)\]][a-z0-9)\]])[.!?]+\s+(?=[A-Z0-9\"'(])|[!?]+\s+|\n+")
_SCENE = re.compile(
    r"\s*(?:,|;|\(| - |\b(?:on|in|at|inside|under|beside|near|next to|against|by|behind|over|among|across|along|"
    r"through|into|onto|atop)\s+(?:a|an|the|its|his|her|their|some|this|that|top of)\b|\b(?:sitting|standing|"
    r"lying|laying|perched|resting|parked|placed|displayed|shown|seen|floating|hanging|running|swimming|flying|"
    r"walking|sleeping|grazing|wading|hovering|gliding|soaring|basking|hiding|looking|posing|waiting)\b|"
    r"\b(?P<ing>[a-z]{3,}ing)\s+"
    r"(?:(?:on|in|at|into|onto|over|across|along|around|through|up|down|out of|off|from|under)\s+)?"
    r"(?:a|an|the|its|his|her|their|some|this|that)\s)"
)
_FIRST_WORD = re.compile(r"[\w'-]+")
_POSTMODIFIER = re.compile(
    r"\s+(?:with|without|that|which|who|whose|for|of|from|like|having|in|on|at|under|near|to|by)\s.*$"
)
_EDGE = " \t\n.,;:!?\"'“”‘’()[]{}"


def object_phrase(text: str) -> str:
    """The object phrase of an answer, lower-cased: 'It looks like a Slip-on shoe in the picture.' -> 'slip-on
    shoe'. Returns the cleaned answer when no rule applies, and never an empty string for a non-empty answer."""
    cleaned = _clean(text)
    t = cleaned
    for _ in range(6):  # frames nest ("I think it looks like a ..."); each pass removes one layer
        before = t
        for pattern in _LEADING:
            t = pattern.sub("", t, count=1).strip(_EDGE)
        for pattern in _TRAILING:
            t = pattern.sub("", t, count=1).strip(_EDGE)
        t = _COLLECTIVE.sub("", _ARTICLE.sub("", t)).strip(_EDGE)
        if t == before:
            break
    return t or cleaned


def core_phrase(phrase: str, is_name: Callable[[str], bool] | None = None) -> str:
    """`phrase` without the scene after its first word: 'puma sitting on a rock' -> 'puma'; unchanged when it
    names no scene. An "-ing" word that ends a name (`is_name` of the last one to four words up to it) is part of
    the object, not a scene: 'cliff dwelling in the canyon' -> 'cliff dwelling'."""
    first = _FIRST_WORD.match(phrase)
    pos = first.end() if first else 0
    while (m := _SCENE.search(phrase, pos)) and m.group("ing") and is_name is not None:
        said = phrase[: m.end("ing")].split()
        if not any(is_name(" ".join(said[-k:])) for k in range(1, min(len(said), 4) + 1)):
            break
        pos = m.end("ing")
    return phrase[: m.start()].strip(_EDGE) if m and m.start() > 0 else phrase


def head_phrase(phrase: str) -> str:
    """`phrase` before its first postmodifier, so that its last word is the phrase's head: 'bull with horns' ->
    'bull', 'truck that collects rubbish' -> 'truck', 'chest of drawers' -> 'chest'; unchanged when it has none."""
    return _POSTMODIFIER.sub("", phrase)


def _clean(text: str) -> str:
    """Markdown, a label, filler sentences and all but the first sentence removed; lower-cased."""
    t = _LABEL.sub("", _MARKUP.sub("", text.replace("’", "'"))).strip()
    sentences = [s.strip(_EDGE) for s in _SENTENCE_END.split(t) if s.strip(_EDGE)]
    while len(sentences) > 1 and re.fullmatch(_FILLERS, sentences[0].lower()):
        sentences.pop(0)
    first = sentences[0] if sentences else t.strip(_EDGE)
    return " ".join(first.lower().split())
