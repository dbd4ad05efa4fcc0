"""How a statement reads, whoever worded it: the form the same-fact and same-slot checks of
:mod:`rushmem.ingest.facts` compare (no I/O).

People state a fact in the first person ("I live in Berlin", "I'm 32", "my dog's name is Rex"),
an extractor in the third ("The user lives in Berlin."), and a change with a word that marks it
("now", "these days", "since March", "actually", "anymore") or with a verb that says what ended
("I moved from Berlin to Munich", "I switched to Emacs", "I quit smoking", "I broke up with Tom").
:func:`read` gives one reading for all of them: the statement in the third person, about "the
user", its verb in its base form ("the user live in Berlin"), an age as "is N years old", a move
read as where the user lives since, the change words taken out and noted (``change``), and what
the statement says ended (``ended``). It also notes what keeps a statement from ending another:
a hypothesis ("might move", "if I moved", "thinking about"), or an addition ("also", "too").

Reading only: the stored text stays as the caller gave it.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import unicodedata

_FLAGS = re.IGNORECASE

# Not (yet) so: a plan, a wish, a condition. "may" is left out: it is also a month.
_HYPOTHETICAL = re.compile(
    r"\b(?:if|might|maybe|perhaps|could|would|will|'ll|'d|going to|plan(?:s|ning)? to|planning|thinking (?:about|of)|"
    r"considering|hope|hopes|hoping|wish|wishes|want to|wants to|would like|dream(?:s|ing)? of|someday|one day)\b",
    _FLAGS,
)
# Said beside what holds, not instead of it.
_ADDITIVE = re.compile(r"\b(?:also|too|as well|another|in addition|besides|both)\b", _FLAGS)
_TIMES = (
    r"\d{4}|january|february|march|april|may|june|july|august|september|october|november|december|jan|feb|mar|"
    r"apr|jun|jul|aug|sept?|oct|nov|dec|spring|summer|autumn|fall|winter|week|month|year|then|yesterday"
)
# Words and phrases that mark a statement as a change of what held, taken out of the reading (a
# time phrase would otherwise read as another value: "since March").
_CHANGE_PHRASES = re.compile(
    r"\b(?:these days|nowadays|lately|at the moment|right now|now|actually|in fact|instead|any more|"
    rf"(?:since|as of) (?:(?:last|early|late|this) )?(?:{_TIMES})(?: \d{{4}})?)\b",
    _FLAGS,
)
# Marks of a change that stay in the reading (the polarity code reads them).
_CHANGE_WORDS = re.compile(r"\b(?:anymore|no longer)\b", _FLAGS)

# The first person, as the user's own statement about themselves.
_FIRST_PERSON = [
    (re.compile(r"\bI'm\b|\bI am\b", _FLAGS), "the user is"),
    (re.compile(r"\bI've\b", _FLAGS), "the user has"),
    (re.compile(r"\bI'd\b", _FLAGS), "the user would"),
    (re.compile(r"\bI'll\b", _FLAGS), "the user will"),
    (re.compile(r"\b(?:my|mine)\b", _FLAGS), "the user's"),
    (re.compile(r"\b(?:me|myself)\b", _FLAGS), "the user"),
    (re.compile(r"(?<![\w/'-])I\b(?![/'-])"), "the user"),
]
# A word every one of _FIRST_PERSON's patterns needs: without one, none of them can match.
_ANY_FIRST_PERSON = re.compile(r"\b(?:i|me|my|mine|myself)\b", _FLAGS)
# The verb after "the user" (adverbs between) in its base form, so that "I live" and "the user
# lives" read alike; the auxiliaries whose forms are not a trailing -s.
_ADVERBS = (
    r"(?:(?:always|never|usually|often|mostly|really|still|also|only|just|recently|finally|generally|mainly|"
    r"currently|no longer|rarely|typically|normally|sometimes|even)\s+)*"
)
_SUBJECT_VERB = re.compile(rf"\b(the user\s+{_ADVERBS})([a-z]+n't|[a-z]+)\b", _FLAGS)
_BASE = {
    "has": "have", "does": "do", "doesn't": "don't", "hasn't": "haven't", "goes": "go", "am": "is",
    "is": "is", "was": "was", "isn't": "isn't", "wasn't": "wasn't",
}  # fmt: skip
# An age however it is said: "is 32", "is 32 years old", "turned 32".
_AGE = re.compile(
    r"\b(?:is|has (?:just )?turned|just turned|turned)\s+(\d{1,3})(?:\s+years?(?:\s+old)?)?(?=\s*(?:[.!,;]|$))",
    _FLAGS,
)
_ENDS_AT = r"(?=\s*(?:$|[.,;!]|\band\b|\bbut\b|\bso\b|\bbecause\b|\bin \d{4}\b|\blast\b|\bthis\b|\bon\b))"
# A move said as done: where the subject lives since (a plan to move is a hypothesis, above).
_MOVED = re.compile(
    r"\b(the user(?:'s [a-z]+)?|(?-i:[A-Z][a-z]+))\s+(?:has\s+|have\s+)?(?:just\s+|recently\s+|finally\s+)?"
    r"moved(?:\s+back)?"
    r"(?:\s+(?:from|out of)\s+(?P<away>.+?))?\s+(?:to|into)\s+(?P<to>.+?)" + _ENDS_AT,
    _FLAGS,
)
# A switch: "switched (from Vim) to Emacs".
_SWITCHED = re.compile(
    r"\b(?:switched|changed|swapped|moved on|moved over)(?:\s+over)?(?:\s+from\s+(?P<away>.+?))?\s+to\s+(?P<to>.+?)"
    + _ENDS_AT,
    _FLAGS,
)
# What a statement says stopped: its object.
_CEASED = re.compile(
    r"\b(?:quit|quits|stopped|stops|gave up|gives up|give up|broke up with|left|ended)\s+(?P<what>.+?)" + _ENDS_AT,
    _FLAGS,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Reading:
    """One statement as :mod:`rushmem.ingest.facts` compares it (see the module docstring)."""

    text: str  # third person, base verb, change phrases out, a move read as where one lives
    change: bool  # marked as a change of what held
    additive: bool  # said beside what holds ("also", "too")
    hypothetical: bool  # not (yet) so
    ended: tuple[str, ...]  # what it says stopped ("smoking", "Berlin", "Tom")
    switched_to: str | None  # "switched to X" with no slot named: X (its slot is the one it ends)
    began: bool  # an event read as the state it began ("moved to Berlin": lives in Berlin)
    about_user: bool  # its subject is the user themselves (not the user's sister, not Ana)


def _base_verb(verb: str) -> str:
    low = verb.lower()
    if low in _BASE:
        return _BASE[low]
    if len(low) <= 3 or not low.endswith("s") or low.endswith(("ss", "us", "is")):
        return verb
    if low.endswith("ies"):
        return verb[:-3] + "y"
    if low.endswith(("sses", "shes", "ches", "xes", "zes", "oes")):
        return verb[:-2]
    return verb[:-1]


@functools.lru_cache(maxsize=4096)
def read(text: str) -> Reading:
    """The reading of ``text`` (see the module docstring); cached, as each text meets several others."""
    t = unicodedata.normalize("NFKC", text).replace("’", "'").strip()
    hypothetical = bool(_HYPOTHETICAL.search(t))
    additive = bool(_ADDITIVE.search(t))
    phrase = bool(_CHANGE_PHRASES.search(t))
    change = phrase or bool(_CHANGE_WORDS.search(t))
    if phrase:
        t = _CHANGE_PHRASES.sub(" ", t)
    if _ANY_FIRST_PERSON.search(t):  # most stored texts are in the third person already
        for pattern, replacement in _FIRST_PERSON:
            t = pattern.sub(replacement, t)
    t = re.sub(r"\s+", " ", t).strip(" ,;:-")
    t = _SUBJECT_VERB.sub(lambda m: m.group(1) + _base_verb(m.group(2)), t)
    t = _AGE.sub(lambda m: f"is {int(m.group(1))} years old", t)
    ended: list[str] = []
    switched_to: str | None = None
    began = False
    if not hypothetical:
        moved = _MOVED.search(t)
        if moved:
            if moved.group("away"):
                ended.append(moved.group("away"))
            t = t[: moved.start()] + f"{moved.group(1)} live in {moved.group('to')}" + t[moved.end() :]
            change = began = True
        switched = _SWITCHED.search(t)
        if switched:
            if switched.group("away"):
                ended.append(switched.group("away"))
            switched_to = switched.group("to")
            change = True
        ended += [m.group("what") for m in _CEASED.finditer(t)]
        change = change or bool(ended)
    about_user = bool(re.match(r"(?:the )?user\b(?!')", t, _FLAGS))
    return Reading(t, change, additive, hypothetical, tuple(ended), switched_to, began, about_user)
