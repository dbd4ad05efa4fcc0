"""The detection form: what every detector (personal data, instructions, block markers) reads.

Stored text is already in its visible form (:func:`rushmem_contract.inputs.visible_text`).
A reader, and a model, still reads through what that form keeps: letters of other scripts that
look like Latin ones ("іgnоrе" with Cyrillic і, о and е), accents, digits of other scripts
("٤١١١"). :func:`fold` maps each of them to the plain character it passes for (:func:`fold_char`;
SECURITY.md says what each hides).

The folded text is for matching only, never shown or stored: Cyrillic words fold into Latin
gibberish. :meth:`Folded.span` maps what a detector found back to the text it was given, so
that a redaction or the prompt block replaces the characters the reader sees.
"""

from __future__ import annotations

import dataclasses
import functools
import unicodedata
from collections.abc import Callable

from rushmem_contract.inputs import is_ignorable


@dataclasses.dataclass(frozen=True)
class Folded:
    """A text's detection form, and where each of its characters came from."""

    text: str
    source_length: int
    # Per character of ``text``, the index of the source character it came from (None: the same
    # text, an ASCII source).
    origin: tuple[int, ...] | None = None

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The source span of ``text[start:end]`` (invisible characters inside it included)."""
        if self.origin is None:
            return start, end
        if start >= len(self.origin):
            return self.source_length, self.source_length
        first = self.origin[start]
        last = self.origin[end - 1] + 1 if end > start else first
        return first, last


@functools.cache
def _prototypes() -> Callable[..., str]:
    # Loaded on the first non-ASCII text: the library and its tables cost ~60 ms to import,
    # which an all-ASCII write or recall never pays.
    from disarm import normalize_confusables

    return normalize_confusables


@functools.lru_cache(maxsize=8192)
def fold_char(ch: str) -> str:
    """One character's detection form: "" for what shows nothing, else what it passes for."""
    if ch.isascii():
        return ch
    out: list[str] = []
    for part in unicodedata.normalize("NFKD", ch):
        if part.isascii():
            out.append(part)
            continue
        if unicodedata.category(part)[0] == "M" or unicodedata.category(part) == "Cf" or is_ignorable(part):
            continue
        digit = unicodedata.decimal(part, None)
        if digit is not None:
            out.append(str(digit))
            continue
        prototype = _prototypes()(part)
        # The table's prototype may itself decompose or carry a mark ("ǆ" is d, z and a caron).
        out.extend(p for p in unicodedata.normalize("NFKD", prototype) if unicodedata.category(p)[0] != "M")
    return "".join(out)


def fold(text: str, char: Callable[[str], str] = fold_char) -> Folded:
    """``text`` in its detection form (see the module docstring), each character as ``char`` folds it."""
    if text.isascii():
        return Folded(text, len(text))
    chars: list[str] = []
    origin: list[int] = []
    for i, ch in enumerate(text):
        folded = char(ch)
        chars.append(folded)
        origin.extend([i] * len(folded))
    return Folded("".join(chars), len(text), tuple(origin))
