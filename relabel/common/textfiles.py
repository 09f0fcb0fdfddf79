"""Reading the text files users hand us: one decoder, one JSON parser and one CSV reader for every reader.

Label files, prediction files, order files, manifests and vocabularies all come through here, so they accept the
same encodings and fail the same way: one `InputError` line that names the file, the line (or byte offset) and
the value, never a traceback and never a silently mangled value.

Encodings: UTF-8 with or without a byte-order mark, and UTF-16 or UTF-32 announced by their byte-order mark.
Anything else that does not decode (latin-1, UTF-16 without a BOM) is refused with the byte offset.

Text that cannot be stored never gets through: a NUL is refused in the bytes and, spelled \u0000, in a JSON
string, and so is an unpaired surrogate (\ud800). Numbers are ASCII decimals with at most MAX_DIGITS digits
before the point, in JSON (`parse_json`) as in a text cell (`parse_decimal`).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from relabel.common.errors import InputError, brief

# Longest first: the UTF-32-LE mark starts with the UTF-16-LE one.
BYTE_ORDER_MARKS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
ENCODING_HINT = "save it as UTF-8 (or UTF-16 with a byte-order mark)"


def detect_encoding(data: bytes) -> tuple[str, int]:
    """(codec, length of the byte-order mark) for `data`: the codec its BOM announces, else UTF-8 without one."""
    for mark, codec in BYTE_ORDER_MARKS:
        if data.startswith(mark):
            return codec, len(mark)
    return "utf-8", 0


def decode_text(data: bytes, source: str) -> str:
    """`data` decoded by `detect_encoding`, without its BOM. `source` names the file in errors.

    Raises InputError at the first byte that does not decode, or at the first NUL: a text file holds none, and
    a NUL in "UTF-8" is the usual sign of UTF-16 written without a byte-order mark.
    """
    codec, start = detect_encoding(data)
    try:
        text = data[start:].decode(codec)
    except UnicodeDecodeError as exc:
        offset = start + exc.start
        line = _line_at(data[start:offset], codec)
        bad = data[offset : start + exc.end][:8].hex()
        raise InputError(
            f"{source}: not {codec.upper()} text: byte offset {offset} (line {line}) holds 0x{bad}, which does "
            f"not decode; {ENCODING_HINT}"
        ) from None
    nul = text.find("\0")
    if nul >= 0:
        offset = start + len(text[:nul].encode(codec))
        raise InputError(
            f"{source}: byte offset {offset} (line {text.count(chr(10), 0, nul) + 1}) is a NUL character, which "
            f"a text file does not hold; {ENCODING_HINT}"
        )
    return text


def _line_at(prefix: bytes, codec: str) -> int:
    return prefix.decode(codec, errors="replace").count("\n") + 1


def read_text(path: Path) -> str:
    """The text of the user's file at `path` (see `decode_text`). Raises InputError; never OSError."""
    try:
        data = path.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise InputError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})") from None
    return decode_text(data, str(path))


NEWLINE = re.compile(r"\r\n|\r|\n")


def text_lines(text: str) -> list[str]:
    """`text` split at \\n, \\r\\n or \\r only, as an editor counts lines; str.splitlines also splits at \\x1c,
    \\x85 and U+2028, which may sit inside a JSON string or a class name."""
    return NEWLINE.split(text)


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) for each line of the user's file at `path` that is not blank."""
    for lineno, line in enumerate(text_lines(read_text(path)), start=1):
        if line.strip():
            yield lineno, line


# --- JSON -----------------------------------------------------------------------------------------------------


MAX_DIGITS = 20  # an index, count or id in our files has at most 19 digits; a score's whole part far fewer
DECIMAL = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")  # ASCII only, no "1_0"
NUMBER_HINT = f"numbers are ASCII decimals (like 3, 0.25 or 1e-4) with at most {MAX_DIGITS} digits before the point"


class _BadNumber(ValueError):
    pass


def _whole_digits(text: str) -> int:
    """Digits before the decimal point (or exponent) of a decimal literal."""
    return len(re.split(r"[.eE]", text.lstrip("+-"), maxsplit=1)[0])


def _too_long(text: str) -> str:
    shown = text if len(text) <= 24 else f"{text[:12]}…({len(text):,} chars)"
    return f"{shown} has {_whole_digits(text):,} digits before the point; {NUMBER_HINT}"


def parse_decimal(text: str, where: str, what: str = "number") -> float:
    """The finite float a text cell holds; anything but an ASCII decimal (see DECIMAL) is one InputError.

    float() alone would also read "1_0" as 10, fullwidth "０.５" as 0.5, "nan" and "inf": none of them is how a
    number is written in a data file, and each has been a silently wrong value.
    """
    stripped = text.strip()
    if not DECIMAL.fullmatch(stripped):
        raise InputError(f"{where}: {what} {brief(text, 40)} is not a number; {NUMBER_HINT} (NaN and infinity are not)")
    if _whole_digits(stripped) > MAX_DIGITS:
        raise InputError(f"{where}: {what} {_too_long(stripped)}")
    value = float(stripped)
    if not math.isfinite(value):
        raise InputError(f"{where}: {what} {brief(text, 40)} is beyond the range of a number; numbers must be finite")
    return value


def _refuse_constant(name: str) -> float:
    raise _BadNumber(f"{name} is not a number JSON allows; numbers must be finite")


def _json_int(text: str) -> int:
    if _whole_digits(text) > MAX_DIGITS:
        raise _BadNumber(f"number {_too_long(text)}")
    return int(text)


def _json_float(text: str) -> float:
    if _whole_digits(text) > MAX_DIGITS:
        raise _BadNumber(f"number {_too_long(text)}")
    value = float(text)
    if not math.isfinite(value):
        raise _BadNumber(f"{brief(text)} is beyond the range of a number; numbers must be finite")
    return value


# A JSON escape: \uXXXX or a backslash and one character. In valid JSON every backslash starts one, so scanning
# left to right pairs them correctly (an escaped backslash is consumed whole).
JSON_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.DOTALL)


UNPAIRED = "an unpaired surrogate (half of a character)"
NUL = "a NUL character"


def _refuse_unstorable_escapes(text: str, where: str, one_line: bool) -> None:
    """Refuse a \\u escape that decodes to no storable text: an unpaired surrogate or a NUL.

    The decoder refuses such bytes in the file itself, but JSON can still spell them as escapes; they would reach
    the database (which refuses them with a traceback) or a file name. A pair (\\ud83d\\ude00) is one character.
    """
    if "\\u" not in text:
        return
    high: re.Match[str] | None = None  # a high surrogate waiting for its low half
    for m in JSON_ESCAPE.finditer(text):
        code = int(m.group(1), 16) if m.group(1) else -1
        if high is not None:
            if 0xDC00 <= code <= 0xDFFF and m.start() == high.end():
                high = None
                continue
            raise _escape_error(text, high, where, one_line, UNPAIRED)
        if code == 0:
            raise _escape_error(text, m, where, one_line, NUL)
        if 0xD800 <= code <= 0xDBFF:
            high = m
        elif 0xDC00 <= code <= 0xDFFF:
            raise _escape_error(text, m, where, one_line, UNPAIRED)
    if high is not None:
        raise _escape_error(text, high, where, one_line, UNPAIRED)


def _escape_error(text: str, m: re.Match[str], where: str, one_line: bool, what: str) -> InputError:
    line = text.count("\n", 0, m.start()) + 1
    column = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    at = f"column {column}" if one_line else f"line {line} column {column}"
    fix = "remove it" if what == NUL else "write the whole character (in UTF-8, or as both halves of the pair)"
    return InputError(f"{where}: {at}: the string escape {m.group(0)} is {what}, which text cannot hold; {fix}")


# Text in which every number is one the strict reading accepts as it stands: no run of more than MAX_DIGITS
# digits (a number's whole part is such a run) and no exponent of three or more digits (without one, a number of at
# most MAX_DIGITS whole digits is below 1e120, far from infinity). A match may sit inside a string ("e100" in a file
# name): such text is only read the slow way, never accepted wrongly.
SUSPECT_NUMBER = re.compile(rf"[0-9]{{{MAX_DIGITS + 1}}}|[0-9][eE][-+]?[0-9]{{3}}")
# The same test for ASCII text, ten times faster than the pattern: digits become 0 and signs go, so a long number
# reads as a run of zeros and an exponent of three digits or more as "0e000" (anywhere else too: then slow, not wrong).
_NUMBER_SHAPE = str.maketrans({**dict.fromkeys("0123456789", "0"), "E": "e", "+": None, "-": None})
_LONG_RUN, _LONG_EXPONENT = "0" * (MAX_DIGITS + 1), "0e000"
# The C decoder without per-number hooks; it still calls parse_constant, for NaN and Infinity only.
_PLAIN_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def parse_json(text: str, where: str, *, one_line: bool = False) -> Any:
    """Standard JSON from `text`; `where` ("file" or "file:line") starts every error.

    Refused, each as one InputError: invalid JSON (with its line and column, unless `one_line`), NaN and
    Infinity (not JSON, though Python writes them), numbers with more than MAX_DIGITS digits before the point or
    too large for a float, strings escaping a NUL or an unpaired surrogate (\\u0000, \\ud800), nesting too
    deep to read.

    Text without a \\u escape or a suspect number (SUSPECT_NUMBER) is read by the C decoder alone, about four times
    faster than with a check on each number; it accepts exactly what the strict reading accepts, and anything it
    refuses is read again the strict way, which names the problem.
    """
    return _parse_json(text, where, one_line, plain=_is_plain(text))


def _is_plain(text: str) -> bool:
    """True when `text` holds no \\u escape and no suspect number (see SUSPECT_NUMBER): nothing but what the C
    decoder alone refuses."""
    if "\\u" in text:
        return False
    if not text.isascii():
        return not SUSPECT_NUMBER.search(text)
    shape = text.translate(_NUMBER_SHAPE)
    return _LONG_RUN not in shape and _LONG_EXPONENT not in shape


def _parse_json(text: str, where: str, one_line: bool, *, plain: bool) -> Any:
    if plain:
        try:
            return _PLAIN_DECODER.decode(text)
        except (ValueError, RecursionError):
            pass  # the strict reading below refuses it too, with the message
    return _parse_json_strict(text, where, one_line)


def _parse_json_strict(text: str, where: str, one_line: bool) -> Any:
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_json_float, parse_int=_json_int)
    except json.JSONDecodeError as exc:
        at = f"column {exc.colno}" if one_line else f"line {exc.lineno} column {exc.colno}"
        raise InputError(f"{where}: invalid JSON at {at}: {exc.msg}") from None
    except _BadNumber as exc:
        raise InputError(f"{where}: {exc}") from None
    except RecursionError:
        raise InputError(f"{where}: JSON nested too deeply to read (no format of ours nests past 3 levels)") from None
    _refuse_unstorable_escapes(text, where, one_line)
    return value


def read_json(path: Path) -> Any:
    """The JSON document in the file at `path` (see `read_text` and `parse_json`)."""
    return parse_json(read_text(path), str(path))


def json_lines(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, value) for each non-blank line of a JSON Lines file (each read as `parse_json` reads it)."""
    text = read_text(path)
    plain = _is_plain(text)  # one look at the whole file: a line of a plain file is plain
    for lineno, line in enumerate(text_lines(text), start=1):
        if line.strip():
            where = f"{path}:{lineno}"
            yield lineno, _parse_json(line, where, True, plain=plain or _is_plain(line))


# --- CSV ------------------------------------------------------------------------------------------------------

CSV_PROBLEMS = {  # the csv module's terse messages, in words a user can act on
    "unexpected end of data": "a quoted field is not closed before the file ends (was the file cut short?)",
    "',' expected after '\"'": "a closing quote must be followed by ',' or the end of the line",
    "field larger than field limit": f"a field is longer than {csv.field_size_limit():,} characters",
    "new-line character seen in unquoted field": "a line break inside an unquoted field",
}


def csv_rows(path: Path) -> Iterator[tuple[int, list[str]]]:
    """(first line, fields) of each non-blank CSV record, parsed strictly; line numbers count physical lines.

    Raises InputError for an unclosed quoted field (a file cut inside a quoted list), a stray quote, or a field
    over the csv module's size limit, naming the line where the record starts.
    """
    reader = csv.reader(io.StringIO(read_text(path), newline=""), strict=True)
    start = 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            message = str(exc)
            problem = next((v for k, v in CSV_PROBLEMS.items() if message.startswith(k)), f"malformed CSV ({message})")
            raise InputError(f"{path}:{start}: {problem}") from None
        if fields:
            yield start, fields
        start = reader.line_num + 1
