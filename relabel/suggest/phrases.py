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
    r"^\s*(?:[-•>]\s*)?(?:final answer|answer|object|main object|label|class|category)\s*[:\-—–]\s*", re.IGNORECASE
)
_SENTENCE_END = re.compile(r"(?<=[a-z0-9)\]][a-z0-9)\]][a-z0-9)\]])[.!?]+\s+(?=[A-Z0-9\"'(])|[!?]+\s+|\n+")
_SCENE = re.compile(
    r"\s*(?:,|;|\(| - | -- |\s*[—–]\s*|\b(?:on|in|at|inside|under|beside|near|next to|against|by|behind|over|among|"
    r"across|along|through|into|onto|atop)\s+(?:a|an|the|its|his|her|their|some|this|that|top of)\b|\b(?:sitting|"
    r"standing|lying|laying|perched|resting|parked|placed|displayed|shown|seen|floating|hanging|running|swimming|flying|"
    r"walking|sleeping|asleep|grazing|wading|hovering|gliding|soaring|basking|hiding|looking|posing|waiting)\b|"
    r"\b(?P<ing>[a-z]{3,}ing)\s+"
    r"(?:(?:on|in|at|into|onto|over|across|along|around|through|up|down|out of|off|from|under)\s+)?"
    r"(?:a|an|the|its|his|her|their|some|this|that)\s)"
)
_FIRST_WORD = re.compile(r"[\w'-]+")
_POSTMODIFIER = re.compile(
    r"\s+(?:with|without|that|which|who|whose|for|of|from|like|having|in|on|at|under|near|to|by)\s.*$"
)
# a person doing something with the object: the object is what the answer is about ("a man wearing a cowboy hat")
_PERSON = re.compile(
    r"^(?:(?:young|old|older|elderly|little|small|smiling|tall)\s+)*(?:man|men|woman|women|person|people|boy|boys|"
    r"girl|girls|child|children|kid|kids|lady|guy|gentleman|someone|somebody|model|toddler|teenager|baby|hand|hands|"
    r"bride|chef|soldier|worker|tourist|hiker|cyclist|skier|student|nurse|doctor|farmer)\s+"
    r"(?:who is\s+|is\s+)?(?:wearing|dressed in|holding|carrying|riding|playing|using|pushing|with|"
    r"(?:(?:sitting|lying|standing)\s+)?(?:in|on|inside)(?=\s+(?:an?|the|some|his|her|their|a pair of)\s))\s+"
)
# colours and sizes: words before a comma that make it a list of adjectives ("an orange, striped cat"), not an
# aside ("a tench, a fish")
PLAIN_ADJECTIVES = frozenset(
    re.findall(
        r"\S+",
        """red orange yellow green blue purple violet pink brown black white grey gray golden silver tan beige cream
    ivory olive maroon navy teal turquoise crimson scarlet lavender bronze copper rusty dark light bright pale deep
    big small large tiny huge little old young tall long short round fat thin flat new giant""",
    )
)
ADJECTIVE_END = re.compile(r"[a-z]{2,}(?:y|ish|ed|en|ful|ous|ic|al|less|ive)$")
_ASIDE_START = re.compile(
    r"\s*(?:(?:and|or)\s+)?(?:an?|the|this|that|its|his|her|their|some|which|who|where|probably|likely|possibly|"
    r"perhaps|maybe|i|it|[a-z]+ing)\b"
)
# amounts whose "of" phrase names the object ("a head of broccoli"); a container's does not ("a pail of water")
_MEASURES = frozenset(
    re.findall(
        r"\S+",
        """head heads piece pieces slice slices bunch pile stack heap handful scoop serving portion sprig wedge chunk
    loaf bale kind type sort variety species breed close-up closeup photo picture image""",
    )
)
_POSTMODIFIER_WORDS = (
    r"with|without|that|which|who|whose|having|plus|&|of|for|from|like|in|on|at|under|near|to|by|used|made|"
    r"between|among|against|inside|beside|behind|over|across|along|around|through|into|onto|atop|full"
)
_PARTICIPLE = (
    r"[a-z]{3,}(?:ed|ing)\s+(?:with|in|on|at|by|from|into|onto|over|under|across|around|against|to|up|down|out|off)"
)
_CONJUNCT = re.compile(rf"\s+(?:{_POSTMODIFIER_WORDS}|and|or|{_PARTICIPLE})\s.*$")
_CONJUNCT_BUT_AND = re.compile(rf"\s+(?:{_POSTMODIFIER_WORDS}|{_PARTICIPLE})\s.*$")
_PLACE = re.compile(
    r"\s*(?:(?:sitting|standing|lying|laying|perched|resting|parked|placed|displayed|floating|hanging|sleeping|"
    r"curled up|curled|waiting|posing)\s+)?(?:on|in|at|inside|under|beside|near|next to|by|behind|among|atop|on top of"
    r"|in front of)\s+[^,;(—–]*"
)
_APPOSITIVE = re.compile(r"[,—–]\s*(?:an?|the|probably an?|likely an?|possibly an?)\s+([^,—–]+)$")
_EDGE = " \t\n.,;:!?\"'“”‘’()[]{}—–-"


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
        t = _PERSON.sub("", t, count=1).strip(_EDGE) or t
        if t == before:
            break
    return t or cleaned


def core_phrase(phrase: str, is_name: Callable[[str], bool] | None = None) -> str:
    """`phrase` without the scene after its first word: 'puma sitting on a rock' -> 'puma'; unchanged when it
    names no scene. An "-ing" word that ends a name (`is_name` of the last one to four words up to it) is part of
    the object, not a scene: 'cliff dwelling in the canyon' -> 'cliff dwelling'; so is a comma after adjectives
    alone: 'orange, striped tabby cat on a sofa' -> 'orange, striped tabby cat'. A dash sets an aside off as a comma
    does: 'gondola — a long narrow boat — on a canal' -> 'gondola'."""
    first = _FIRST_WORD.match(phrase)
    pos = first.end() if first else 0
    while m := _SCENE.search(phrase, pos):
        if m.group("ing") and is_name is not None and _ends_name(phrase[: m.end("ing")], is_name):
            pos = m.end("ing")
        elif m.group().strip() == "," and _adjectives_only(phrase[: m.start()], phrase[m.end() :], is_name):
            pos = m.end()
        else:
            break
    return phrase[: m.start()].strip(_EDGE) if m and m.start() > 0 else phrase


def _ends_name(said: str, is_name: Callable[[str], bool]) -> bool:
    """Whether the last one to four words of `said` are a name ("cliff dwelling")."""
    said_words = said.split()
    return any(is_name(" ".join(said_words[-k:])) for k in range(1, min(len(said_words), 4) + 1))


def _adjectives_only(before: str, after: str, is_name: Callable[[str], bool] | None) -> bool:
    """Whether a comma between `before` and `after` separates adjectives ("orange, striped tabby cat", "golden,
    crispy pretzel"): every word before it is a colour or size, or ends like an adjective and names no class, and no
    aside ("a ...", "which ...", "sitting ...") follows it."""
    said = [w for w in re.split(r"[\s,]+", before) if w and w not in ("and", "or")]
    if not said or len(said) > 4 or _ASIDE_START.match(after) or not after.strip():
        return False
    return all(w in PLAIN_ADJECTIVES or (is_adjective_shaped(w) and not (is_name and is_name(w))) for w in said)


def is_adjective_shaped(word: str) -> bool:
    """Whether `word` is a colour or size, or ends like an adjective ('sleepy', 'striped', 'wooden', 'long-haired',
    'black-and-white')."""
    last = word.rsplit("-", 1)[-1]
    return last in PLAIN_ADJECTIVES or ADJECTIVE_END.fullmatch(last) is not None


def head_phrase(phrase: str) -> str:
    """`phrase` before its first postmodifier, so that its last word is the phrase's head: 'bull with horns' ->
    'bull', 'truck that collects rubbish' -> 'truck', 'chest of drawers' -> 'chest'; unchanged when it has none."""
    return _POSTMODIFIER.sub("", phrase)


def head_of_name(core: str) -> str:
    """The words of a core phrase before any "with", "that", "and", "of", "for" or "... -ed in": where a class is
    named plainly ('desk with a laptop and a lamp' -> 'desk')."""
    return _CONJUNCT.sub("", core) or core


def scene_part(phrase: str, core: str) -> str:
    """The place the object is in, as the words after `core` say it ('tabby on a patchwork quilt' -> 'on a
    patchwork quilt'), up to a comma; empty where they say something else ('dog wearing a muzzle')."""
    rest = phrase[len(core) :] if phrase.startswith(core) else ""
    m = _PLACE.match(rest)
    return rest[: m.end()].strip(_EDGE) if m else ""


def appositive(phrase: str) -> str:
    """The name an answer gives after describing the object ('small finch on a branch, a goldfinch' ->
    'goldfinch'), or empty."""
    m = _APPOSITIVE.search(phrase)
    return m.group(1).strip(_EDGE) if m else ""


def name_candidates(core: str, is_modifier: Callable[[str], bool] = lambda w: True) -> list[str]:
    """Word spans of a core phrase that may name its class plainly, in the order to try them, each from its
    longest suffix down: the words before any "with", "that", "and", "of", "for" or "... -ed in" ('wooden chest with
    a brass padlock' -> 'wooden chest', 'chest'; 'sleepy tabby' -> ..., 'tabby'; 'ear of corn' -> 'ear'), or after a
    measure's "of" ('head of broccoli' -> 'broccoli'); then, after an "and" with no article, the words up to the
    next cut ('black and tan rottie' -> ..., 'rottie'). A shorter suffix is offered only while the words left out
    are modifiers (`is_modifier`: not 'porcini' in 'porcini mushroom'), and never as a colour word alone."""
    head = _CONJUNCT.sub("", core)
    after = core[len(head) :]
    spans = [head]
    if after.startswith(" of ") and head.split()[-1] in _MEASURES:
        spans = [_CONJUNCT.sub("", after[4:].strip())]
    elif re.match(r" (?:and|or) (?!(?:an?|the|some|his|her|its|their|two)\s)", after):  # 'black and tan ...'
        spans.append(_CONJUNCT_BUT_AND.sub("", core))
    out: list[str] = []
    for span in spans:
        said = span.split()
        for k in range(len(said)):
            if k and not is_modifier(said[k - 1].strip(",")):
                break
            suffix = " ".join(said[k:])
            if suffix not in out and not (k and suffix in PLAIN_ADJECTIVES):
                out.append(suffix)
    return out


def _clean(text: str) -> str:
    """Markdown, a label, filler sentences and all but the first sentence removed; lower-cased."""
    t = _LABEL.sub("", _MARKUP.sub("", text.replace("’", "'"))).strip()
    sentences = [s.strip(_EDGE) for s in _SENTENCE_END.split(t) if s.strip(_EDGE)]
    while len(sentences) > 1 and re.fullmatch(_FILLERS, sentences[0].lower()):
        sentences.pop(0)
    first = sentences[0] if sentences else t.strip(_EDGE)
    return " ".join(first.lower().split())
