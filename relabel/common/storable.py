"""Text a user types (a note, a snapshot or user name, a filter) checked before it reaches the database: both
SQLite and PostgreSQL refuse an unpaired UTF-16 surrogate, PostgreSQL refuses NUL, and a name that is blank or
runs over a line is never what was meant."""

from __future__ import annotations

from relabel.common.errors import InputError

CONTROL = {chr(c) for c in range(32)} - {"\t"}  # line breaks, NUL and other control characters


def storable_text(text: str, what: str, *, max_length: int) -> str:
    """`text` when a database can store it: no NUL, no unpaired surrogate, at most `max_length` characters."""
    if len(text) > max_length:
        raise InputError(f"{what} has {len(text)} characters; at most {max_length} are kept")
    if "\0" in text:
        raise InputError(f"{what} holds a NUL character, which cannot be stored")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{what} holds an unpaired surrogate {text[exc.start]!r}, which cannot be stored") from None
    return text


def one_line_name(text: str, what: str, *, max_length: int = 200) -> str:
    """A name: storable, one line of printable characters, not blank, no spaces around it."""
    storable_text(text, what, max_length=max_length)
    if not text.strip():
        raise InputError(f"{what} is empty")
    if text != text.strip():
        raise InputError(f"{what} {text!r} starts or ends with a space")
    bad = sorted({ch for ch in text if ch in CONTROL or ch == "\x7f"})
    if bad:
        raise InputError(f"{what} {text[:60]!r} holds control characters {''.join(bad)!r}; use one printable line")
    return text
