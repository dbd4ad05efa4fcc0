"""Named things in a memory or a question, offline: the keys recall links memories by.

Rules, no model: runs of capitalised words ("Harry Potter", "New York City", "Caroline"),
acronyms ("LGBTQ", "NYC"), and quoted titles ('Becoming Nicole', "The Name of the Wind").
Function words that are capitalised only because a sentence starts with them ("The", "When",
"After"), pronouns, and calendar words (days, months: dates are the date hints' business)
are not entities. A possessive "'s" is dropped, so "Caroline's" and "Caroline" are one key.

Keys are case-folded and space-normalised: the same thing written the same way gets the same
key. Nothing resolves aliases ("Mel" and "Melanie" stay two keys) or tells people from places;
an LLM extractor that names entities passes them through :func:`entity_keys` as well.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

MAX_ENTITIES = 16
MAX_KEY_CHARS = 80


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_FUNCTION_WORDS = _words(
    """
    a an the i i'm i've i'd i'll it it's its this that these those he she they we you his her hers him their theirs
    them our ours my mine your yours me us who whom whose what when where which why how whatever whenever wherever
    is are was were be been being am do does did doing have has had having will would shall should can could may
    might must not no yes and but or nor so if then than because as at by for from in into of off on onto out over
    to up with within without about above after before below between during since until while also besides despite
    although though however still just yet already again ever never always sometimes often usually recently lately
    there here now today yesterday tomorrow tonight once all any both each either every few many more most much
    neither none other others some such own same only very too
    let let's please thanks thank hi hello hey ok okay yeah yep oh well sure
    according based given including like unlike
    mr mrs ms dr st
    last next first second third later earlier remember note user users assistant
    """
)
_CALENDAR = _words(
    """
    monday tuesday wednesday thursday friday saturday sunday mon tue tues wed thu thur thurs fri sat sun
    january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec
    christmas easter thanksgiving halloween
    """
)
# Inside a multi-word name these may stand between capitalised words: "Lord of the Rings".
# ("and" is no joiner: "Jon and Gina" are two people; a title with "and" is usually quoted.)
_JOINERS = frozenset({"of", "the", "de", "la", "le", "von", "van", "da", "del", "du"})

_WORD = r"[A-Z][\w'’.&-]*"
_NAME_RUN = re.compile(rf"(?<![\w'’])({_WORD}(?:\s+(?:(?:of|the|de|la|le|von|van|da|del|du)\s+)*{_WORD})*)")
_ACRONYM = re.compile(r"(?<![\w'’])([A-Z]{2,}[0-9]*s?)(?![\w'’])")
_QUOTED = re.compile(r"(?:^|(?<=[\s(\[:;,]))[\"“‘'](?P<title>[^\"“”‘’'\n]{2,60}?)[\"”’'](?=[\s.,;:!?)\]]|$)")
_POSSESSIVE = re.compile(r"['’]s?$")


def entity_key(name: str) -> str | None:
    """The key of one name: NFKC, case-folded, spaces collapsed, possessive and edge punctuation
    dropped. None when nothing is left or it is a function or calendar word."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = " ".join(text.replace("’", "'").split())
    text = text.strip(" \t\"'.,;:!?()[]{}-")
    text = _POSSESSIVE.sub("", text).strip(" '-")
    text = re.sub(r"^(?:the|a|an) ", "", text)
    if not text or len(text) > MAX_KEY_CHARS:
        return None
    if text in _FUNCTION_WORDS or text in _CALENDAR:
        return None
    if not any(ch.isalpha() for ch in text):
        return None
    return text


def entity_keys(names: Iterable[str], *, limit: int = MAX_ENTITIES) -> list[str]:
    """Keys of the given names, each once, in order, at most ``limit`` (what an LLM named)."""
    out: list[str] = []
    for name in names:
        key = entity_key(name)
        if key is not None and key not in out:
            out.append(key)
            if len(out) >= limit:
                break
    return out


def _trim(run: str) -> str:
    """Drop leading and trailing words that cannot be part of a name ("When Caroline" -> "Caroline")."""
    words = run.split()
    while words and (_bare(words[0]) in _FUNCTION_WORDS or _bare(words[0]) in _CALENDAR or words[0] in _JOINERS):
        words.pop(0)
    while words and (_bare(words[-1]) in _FUNCTION_WORDS or _bare(words[-1]) in _CALENDAR or words[-1] in _JOINERS):
        words.pop()
    return " ".join(words)


def _bare(word: str) -> str:
    return _POSSESSIVE.sub("", word.casefold().replace("’", "'")).strip(".,;:!?")


def extract_entities(text: str, *, limit: int = MAX_ENTITIES) -> list[str]:
    """Entity keys named in ``text``, in order of first appearance, at most ``limit``."""
    names: list[str] = []
    for match in _QUOTED.finditer(text):
        names.append(match.group("title"))
    # A quoted title is one entity, not also the names inside it.
    text = _QUOTED.sub(" ; ", text)
    for match in _NAME_RUN.finditer(text):
        run = match.group(1)
        # A run that crosses a sentence end ("... in Rome. The trip") is two runs.
        for part in re.split(r"(?<=[a-z0-9])\.\s+", run):
            trimmed = _trim(part)
            if trimmed:
                names.append(trimmed)
    for match in _ACRONYM.finditer(text):
        names.append(match.group(1))
    return entity_keys(names, limit=limit)
