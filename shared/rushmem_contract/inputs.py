"""Checks on untrusted text and JSON values: what PostgreSQL, pydantic's serializer and the JSON
encoders on the way back can all hold, so that whatever a write path accepts can be read back.

Used by the models (the wire format's ceilings), the service (the configured limits, see
:func:`rushmem.ingest.rows.check_lengths`) and the HTTP API's body reader. Pure functions,
no I/O; deep values are walked iteratively, never by recursion.
"""

from __future__ import annotations

import dataclasses
import math
import re
import unicodedata
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

# Letters, numbers, punctuation and symbols (emoji are symbols, CJK ideographs letters) show on
# screen; separators (Z*), controls and format characters (Cc, Cf), marks with no base (M*),
# surrogates, private use and unassigned code points (Cs, Co, Cn) do not, or not reliably.
_VISIBLE_CATEGORIES = ("L", "N", "P", "S")
# Letters and symbols by category that render as nothing: Hangul fillers, the braille blank, a
# musical null notehead. Content made of these alone looks empty to a reviewer.
BLANK_GRAPHICS = frozenset("\u115f\u1160\u3164\uffa0\u2800\U0001d159")
_ASCII_VISIBLE = re.compile(r"[!-~]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): what renders as nothing
# unless a font chooses otherwise. Beyond the format characters (Cf) it holds marks (variation
# selectors, the combining grapheme joiner) and letters (Hangul fillers) that hide inside a word.
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# Joiners that shape scripts and emoji (Persian words, Indic conjuncts, the family emoji): kept
# between two characters that are not ASCII, where they can split no Latin word.
_JOINERS = frozenset("\u200c\u200d")


def is_visible(ch: str) -> bool:
    return unicodedata.category(ch)[0] in _VISIBLE_CATEGORIES and ch not in BLANK_GRAPHICS


def has_visible(text: str) -> bool:
    """Whether ``text`` shows anything: at least one letter, digit, punctuation mark or symbol
    (CJK and emoji included) that is not a blank filler."""
    if text.isascii():
        return _ASCII_VISIBLE.search(text) is not None
    return any(is_visible(ch) for ch in text)


def is_ignorable(ch: str) -> bool:
    """Whether ``ch`` is a default-ignorable code point (renders as nothing)."""
    return _IGNORABLE.match(ch) is not None


# The default-ignorable code points that are letters, numbers, punctuation, symbols or separators
# (the others are format characters, marks or unassigned): any other character of those classes is
# kept as it is, without the ignorable pattern (tests/unit/test_defence_shapes.py checks the set).
IGNORABLE_GRAPHICS = frozenset("\u115f\u1160\u3164\uffa0")
# ... and the marks among them (variation selectors, the grapheme joiner, Khmer and Mongolian ones).
IGNORABLE_MARKS = frozenset(
    chr(c)
    for first, end in (
        (0x34F, 0x34F),
        (0x17B4, 0x17B5),
        (0x180B, 0x180D),
        (0x180F, 0x180F),
        (0xFE00, 0xFE0F),
        (0xE0100, 0xE01EF),
    )
    for c in range(first, end + 1)
)


def _drop_invisible(text: str) -> tuple[str, bool]:
    """``text`` without what shows nothing, and whether a joiner was kept for a next character that
    was removed (then another pass may drop the joiner)."""
    out: list[str] = []
    append = out.append
    last = len(text) - 1
    category_of = unicodedata.category
    # Whether the last character kept is visible or a mark: what a combining mark can draw on.
    # Kept as the loop goes (asking it of out[-1] at each mark was several times slower on a stack of them).
    shows = visible = False  # ... and whether it is visible
    joined = -2  # where the last joiner kept is
    unsettled = False
    for i, ch in enumerate(text):
        category = category_of(ch)
        major = category[0]
        if major in "LNPS" and ch not in IGNORABLE_GRAPHICS:  # most characters: kept, one test
            append(ch)
            shows = visible = ch not in BLANK_GRAPHICS
            continue
        if ch in _JOINERS:
            if visible and not out[-1].isascii() and i < last and not text[i + 1].isascii():
                append(ch)
                shows = visible = False
                joined = i
                continue
        elif major == "Z":
            append(ch)
            shows = visible = False
            continue
        elif major == "M":
            # A mark with no visible base shows nothing (or draws on the space before it).
            if shows and ch not in IGNORABLE_MARKS:
                append(ch)
                visible = False
                continue
        elif ch not in IGNORABLE_GRAPHICS and category != "Cf" and not is_ignorable(ch):
            append(ch)
            shows = visible = False
            continue
        unsettled = unsettled or joined == i - 1  # removed right after a joiner kept for it
    return "".join(out), unsettled


def visible_text(text: str) -> str:
    """``text`` as a reader sees it, the form every text a caller or a model gives is stored and
    checked in: compatibility forms folded (NFKC: fullwidth letters, ligatures, styled digits),
    format and default-ignorable characters removed (zero-width spaces, bidi controls, tags,
    variation selectors), and combining marks with no visible base removed. Whitespace is kept
    as it is (content collapses it itself). Idempotent."""
    if text.isascii():  # nothing to fold or remove (the common case)
        return text
    for _ in range(4):  # removing a character can let NFKC compose its neighbours: to a fixed point
        normal = unicodedata.normalize("NFKC", text)
        text, unsettled = _drop_invisible(normal)
        # Nothing removed, or nothing left that another pass would change (NFKC has nothing to compose
        # and no kept joiner's next character was removed): the fixed point, without a pass to find it.
        if text == normal or (not unsettled and unicodedata.is_normalized("NFKC", text)):
            break
    return text


# What shows nothing in a text shown for review, by category: format characters (zero-width,
# bidi controls, tags), controls (but tab and newline, which show as space), private use,
# unassigned, surrogates, and the line and paragraph separators (a line break nothing shows).
_HIDDEN_CATEGORIES = frozenset({"Cf", "Cc", "Co", "Cn", "Cs", "Zl", "Zp"})


def reveal_hidden(text: str) -> str:
    """``text`` as a reviewer must see it: each character that shows nothing (format characters such
    as zero-width spaces, bidi controls and tags, other default-ignorable ones such as variation
    selectors and Hangul fillers, controls, blank symbols, unassigned code points) written as
    ``<U+200B>``, so that what a person approves is what is there. A joiner between two characters
    that are not ASCII stays as it is: it shapes an emoji or a script, as :func:`visible_text`
    keeps it. For display only: stored and compared text is :func:`visible_text`'s form."""
    if text.isascii() and text.isprintable():  # the common case: nothing hidden
        return text
    out: list[str] = []
    last = len(text) - 1
    for i, ch in enumerate(text):
        hidden = ch not in "\t\n" and (
            unicodedata.category(ch) in _HIDDEN_CATEGORIES or ch in BLANK_GRAPHICS or is_ignorable(ch)
        )
        if hidden and ch in _JOINERS and 0 < i < last:
            before, after = text[i - 1], text[i + 1]
            hidden = before.isascii() or after.isascii() or not (is_visible(before) and is_visible(after))
        out.append(f"<U+{ord(ch):04X}>" if hidden else ch)
    return "".join(out)


def lone_surrogate(text: str) -> str | None:
    """The first lone surrogate in ``text`` as an escape (``\\ud800``), or None. A JSON escape
    such as "\\ud800" decodes to one in Python; it is not text, and no UTF-8 encoder (PostgreSQL,
    an embedding provider, the response) can carry it."""
    found = _SURROGATE.search(text)
    return f"\\u{ord(found.group()):04x}" if found else None


def field_path(parts: Sequence[str | int]) -> str:
    """('memories', 0, 'metadata', 'a') -> 'memories[0].metadata.a' (the API's field names)."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class JsonValueError(ValueError):
    """A JSON value that cannot be stored or read back; ``path`` is where, inside the value."""

    def __init__(self, message: str, path: Sequence[str | int] = ()) -> None:
        super().__init__(message)
        self.path = tuple(path)

    def __str__(self) -> str:
        message = super().__str__()
        return f"{message} (at {field_path(self.path)})" if self.path else message


@dataclasses.dataclass(frozen=True)
class JsonShape:
    depth: int  # nested containers: {} is 1, {"a": [1]} is 2, a scalar 0
    keys: int  # object keys at every level


def inspect_json(value: Any, *, max_depth: int) -> JsonShape:
    """The depth and key count of a JSON value; :class:`JsonValueError` (with the path inside the
    value) for what PostgreSQL's jsonb or the way back cannot hold: lone surrogates, NUL, NaN and
    infinities, non-string keys, non-JSON types, nesting past ``max_depth``."""
    depth = keys = 0
    stack: list[tuple[Any, tuple[str | int, ...], int]] = [(value, (), 0)]
    while stack:
        item, path, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            level += 1
            if level > max_depth:
                raise JsonValueError(f"is nested more than {max_depth} levels deep")
            depth = max(depth, level)
            if isinstance(item, dict):
                keys += len(item)
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise JsonValueError(f"has a key that is not a string ({type(key).__name__})", path)
                    _check_text(key, path, "a key")
                    stack.append((child, (*path, key), level))
            else:
                stack.extend((child, (*path, i), level) for i, child in enumerate(item))
        elif isinstance(item, str):
            _check_text(item, path, "a string")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise JsonValueError(f"holds {item}, which is not a JSON number", path)
        elif item is not None and not isinstance(item, bool | int):
            raise JsonValueError(f"holds a {type(item).__name__}, which is not a JSON value", path)
    return JsonShape(depth=depth, keys=keys)


def _check_text(text: str, path: tuple[str | int, ...], what: str) -> None:
    if "\x00" in text:
        raise JsonValueError(f"{what} contains a NUL character (U+0000), which PostgreSQL cannot hold", path)
    if (escape := lone_surrogate(text)) is not None:
        raise JsonValueError(f"{what} contains a lone surrogate ({escape}), which is not text", path)


def as_stored(value: Any) -> Any:
    """``value`` as it reads back from jsonb, which keeps numbers as numerics and writes them
    without exponents: a float written with a positive exponent (1e+16, 1.5e+300) reads back as
    the integer it is. Converted before the size is counted, so that a value accepted at the
    limit is still within it when it is exported and imported again. Depth must be checked first."""
    if isinstance(value, float) and "e+" in repr(value):
        return int(Decimal(repr(value)))
    if isinstance(value, dict):
        return {k: as_stored(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [as_stored(v) for v in value]
    return value


def visible_strings(value: Any, path: tuple[str | int, ...] = ()) -> Any:
    """``value`` with every string in it, keys included, in its :func:`visible_text` form: a key
    is read as a reader sees it ("te\u200bam" is "team"), so a filter, the redaction record and a
    reader all name the same key. :class:`JsonValueError` (with the path) for a key that shows
    nothing once its invisible characters are gone, or that becomes another key of the same
    object (which of the two values to keep is not ours to guess). Depth must be checked first."""
    if isinstance(value, str):
        return visible_text(value)
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, child in value.items():
            seen = visible_text(key)
            if seen != key:
                if not has_visible(seen):
                    raise JsonValueError("has a key with no visible character", path)
                if seen in value or seen in out:
                    raise JsonValueError(f"has two keys that read as {seen!r}", path)
            out[seen] = visible_strings(child, (*path, seen))
        return out
    if isinstance(value, list | tuple):
        return [visible_strings(v, (*path, i)) for i, v in enumerate(value)]
    return value


CUT = "(nested too deep)"


def cut_deep(value: Any, max_depth: int) -> Any:
    """``value`` with every container deeper than ``max_depth`` replaced by :data:`CUT`: how
    rows stored before the depth limit existed are answered, so that one of them never makes
    its user's reads fail (pydantic's serializer stops at ~250 levels). Unchanged (the same
    object) when nothing is that deep."""
    try:
        inspect_json(value, max_depth=max_depth)
    except JsonValueError:
        pass
    else:
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, list[Any] | dict[Any, Any], Any, int]] = [(value, root, 0, 0)]
    while stack:
        item, parent, slot, level = stack.pop()
        if isinstance(item, dict | list | tuple):
            if level >= max_depth:
                parent[slot] = CUT
                continue
            if isinstance(item, dict):
                copy: dict[Any, Any] | list[Any] = {}
                for key, child in item.items():
                    copy[key] = None
                    stack.append((child, copy, key, level + 1))
            else:
                copy = [None] * len(item)
                stack.extend((child, copy, i, level + 1) for i, child in enumerate(item))
            parent[slot] = copy
        else:
            parent[slot] = item
    return root[0]
