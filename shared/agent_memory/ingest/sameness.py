"""Whether two stored texts say the same fact: the check consolidation merges by. Pure (no I/O).

Conservative on purpose: a merge hides one of the two memories from current recall, so two
texts are the same fact only when they are equal after normalization, or when they are close in
meaning (cosine at least the threshold) *and* every anchor a correction would change is the
same: the numbers (digits and number words), the names in their order (so "Anna pays Ben" is not
"Ben pays Anna"), the months and weekdays, and the negations. "The user is 31" and "The user is
32" differ in a number and are never merged, however close their vectors.
"""

from __future__ import annotations

import re
import unicodedata

# Words that flip or bound a statement's truth.
_NEGATIONS = frozenset(
    {"not", "no", "never", "none", "nobody", "nothing", "neither", "nor", "without", "cannot", "nowhere"}
)
_NUMBER_WORDS = frozenset(
    [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
        "thirty",
        "forty",
        "fifty",
        "sixty",
        "seventy",
        "eighty",
        "ninety",
        "hundred",
        "thousand",
        "million",
        "billion",
        "first",
        "second",
        "third",
        "fourth",
        "fifth",
        "sixth",
        "seventh",
        "eighth",
        "ninth",
        "tenth",
        "half",
        "twice",
        "once",
        "dozen",
    ]
)
_CALENDAR = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "jan",
        "feb",
        "mar",
        "apr",
        "jun",
        "jul",
        "aug",
        "sep",
        "sept",
        "oct",
        "nov",
        "dec",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "today",
        "tomorrow",
        "yesterday",
    ]
)
_TOKEN = re.compile(r"\d+(?:[.,:/-]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)?", re.UNICODE)
_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!?;,:]+$")
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "`": "'"})


def normalized(text: str) -> str:
    """The form two texts are compared in: NFKC, case folded, quotes unified, whitespace
    collapsed, the closing punctuation dropped ("The user likes tea." is "the user likes tea")."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    return _TRAILING.sub("", _SPACE.sub(" ", text).strip())


def anchors(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], int]:
    """What a correction changes: (numbers, names in order, calendar words, negation count)."""
    tokens = _TOKEN.findall(unicodedata.normalize("NFKC", text).translate(_QUOTES))
    numbers: list[str] = []
    names: list[str] = []
    calendar: list[str] = []
    negations = 0
    for i, token in enumerate(tokens):
        lower = token.casefold()
        if token[0].isdigit():
            numbers.append(token.replace(",", ""))
        elif lower in _NUMBER_WORDS:
            numbers.append(lower)
        elif lower in _CALENDAR:
            calendar.append(lower)
        elif lower in _NEGATIONS or lower.endswith("n't"):
            negations += 1
        elif token[0].isupper() and i > 0:
            # A capitalised word past the first is a name (the first is the sentence's start).
            names.append(lower)
    return tuple(numbers), tuple(names), tuple(sorted(calendar)), negations


def same_fact(first: str, second: str, similarity: float, *, threshold: float) -> bool:
    """True only when ``first`` and ``second`` state the same fact (see the module docstring);
    ``similarity``: the cosine similarity of their embeddings."""
    if normalized(first) == normalized(second):
        return True
    if similarity < threshold:
        return False
    return anchors(first) == anchors(second)
