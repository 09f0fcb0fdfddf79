"""The flags an annotator can set on a review card: the one place that knows them.

A flag is stored by its name in `Annotation.flags`; the card shows its label on a button and toggles it with its
key. The card's page receives the registry in its boot payload (`ui.card_api.page_info`) and builds its buttons,
keyboard shortcuts and help from it, so a new flag is one entry here.
"""

from __future__ import annotations

from dataclasses import dataclass

from relabel.common.errors import InputError

# Keys the card already uses for other actions (ui/static/card.js): a flag cannot take them.
RESERVED_KEYS = frozenset("123zxkunfh/rgo")


@dataclass(frozen=True)
class CardFlag:
    name: str  # as stored in Annotation.flags
    key: str  # one lower-case letter that toggles it on the card
    label: str  # the button's text


CARD_FLAGS: dict[str, CardFlag] = {
    f.name: f
    for f in (
        CardFlag("drawing", "d", "drawing or render"),
        CardFlag("multiple_objects", "m", "multiple objects"),
        CardFlag("duplicate", "c", "duplicate"),
        CardFlag("inappropriate", "i", "inappropriate"),
    )
}


def register_flag(flag: CardFlag) -> CardFlag:
    """Add `flag`; its name and key must be new, the key one letter the card does not use for anything else."""
    taken = {f.key for f in CARD_FLAGS.values()} | RESERVED_KEYS
    if flag.name in CARD_FLAGS:
        raise InputError(f"flag {flag.name!r} is already registered")
    if len(flag.key) != 1 or not flag.key.isalpha() or not flag.key.islower() or flag.key in taken:
        raise InputError(f"flag key {flag.key!r} must be a free lower-case letter; taken: {', '.join(sorted(taken))}")
    CARD_FLAGS[flag.name] = flag
    return flag


def check_flags(flags: list[str]) -> None:
    """Raise InputError naming the unknown flags and listing the known ones."""
    bad = [f for f in flags if f not in CARD_FLAGS]
    if bad:
        raise InputError(f"unknown flag(s) {bad}; known: {', '.join(CARD_FLAGS)}")
