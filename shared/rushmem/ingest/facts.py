"""Whether two statements are the same fact, and whether one updates the other's value: pure text
checks (no I/O) that the write path runs on a new memory and its nearest stored neighbours.

Embeddings say two texts are about the same thing, not that they say the same: "the user is 31
years old" and "... 32 years old" score about 0.97, "A employs B" and "B employs A" 0.98. So a
near neighbour is folded into (refreshed) only when :func:`same_fact` holds, and superseded only
when :func:`updated_value` does (what each checks: docs/how-it-works.md, Facts over time); anything
else is a new memory. Both err on the side of keeping: a paraphrase that moves words around is
stored as a second memory rather than folded. A text of more than :data:`MAX_FACT_WORDS` words is
a document rather than a statement: neither folds nor supersedes one (its time stays bounded
however densely its words are packed).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import functools
import itertools
import re
import unicodedata
from collections.abc import Collection, Sequence

from rushmem.ingest.statements import Reading, read


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_TOKEN = re.compile(r"\w+(?:[.,:/'’-]\w+)*")
# Past this many words a text is not compared (the module docstring): each word costs the
# matcher its own steps, and a field packed with one-letter words holds three times as many
# as prose of its size.
MAX_FACT_WORDS = 1000


@functools.lru_cache(maxsize=4096)  # asked of each text once per pair it is in (up to 8 a fact)
def _statement(text: str) -> bool:
    """Whether ``text`` is short enough to compare (at most MAX_FACT_WORDS words; stops counting there)."""
    return next(itertools.islice(_TOKEN.finditer(text), MAX_FACT_WORDS, None), None) is None


# Function words: they carry no role, value or polarity (negations are not among them).
_STOPWORDS = _words(
    """a an the of to in on at by for from with about as into over under after before between and or but
    is are was were be been being am do does did has have had will would shall should can could may might must
    this that these those there here it its it's he she they them his her their hers theirs we us our i me my
    you your yours who whom whose which what when where why how than then so also very really just
    user user's users"""
)
_NEGATIONS = _words("not no never none nobody nothing nowhere neither nor cannot without n't")
_NUMBER_WORDS = _words(
    """zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen
    seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred thousand million
    billion dozen half once twice thrice first second third fourth fifth sixth seventh eighth ninth tenth
    eleventh twelfth twentieth both several few many"""
)
_TIME_WORDS = _words(
    """january february march april may june july august september october november december jan feb mar apr
    jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday today tomorrow
    yesterday tonight morning afternoon evening night weekend spring summer autumn fall winter"""
)
_UNIT_WORDS = _words(
    """year years month months week weeks day days hour hours minute minutes second seconds decade decades
    century percent euro euros dollar dollars pound pounds yen cent cents usd eur gbp km kilometre kilometres
    kilometer kilometers mile miles metre metres meter meters kg kilo kilos kilogram kilograms gram grams lb
    lbs litre litres liter liters cm mm inch inches foot feet gb mb tb"""
)
_COLOUR_WORDS = _words("red orange yellow green blue purple violet pink brown black white grey gray silver gold beige")
_VALUE_WORDS = _NUMBER_WORDS | _TIME_WORDS | _UNIT_WORDS | _COLOUR_WORDS
_CURRENCY = re.compile(r"[$€£¥]")
# Statements of something that happened: a second one with another value is another event,
# not an update of the first.
_EVENT_VERBS = _words(
    """went met saw bought ate took made got gave ran flew came left wrote read sent won lost built began
    attended visited travelled traveled watched played adopted started finished joined bought sold"""
)
# Past participles that state a lasting attribute ("is married to", "is based in"), not an event.
_STATE_PARTICIPLES = _words(
    "married named called based located employed interested engaged allergic scheduled retired divorced"
)


_PRESENT = _words("now currently nowadays presently anymore actually")
# Which way, and when relative to what: "the flight from Paris" is not "the flight to Paris", "runs
# before work" not "after work". Function words, yet each says something the other does not.
_DIRECTIONS = _words("from to into onto towards toward via before after above below inbound outbound outward return")
# Qualifiers that make another fact of the same words: "the former manager" is not "the manager".
_QUALIFIERS = _words("former ex previous late future next last acting deputy vice step interim")
# Recurring days: "yoga on Monday" and "yoga on Wednesday" both hold, neither updates the other.
_WEEKDAYS = _words(
    "monday tuesday wednesday thursday friday saturday sunday mondays tuesdays wednesdays thursdays fridays "
    "saturdays sundays mon tue tues wed thu thur thurs fri sat sun weekend weekends weekday weekdays"
)

# A name or place is one value of the statement only with one of these around it: someone lives
# in one place and works at one employer at a time, but may be the parent of, own, speak or visit
# several (another name there is another fact).
_SINGLE_VALUED = _words(
    """lives live living located based currently works work working employer employed married name named
    called birthday born hometown favourite favorite age deadline capital headquartered"""
)


# A statement says something of its subject through a verb; a bare label ("fact number 3") or a
# number that names a thing ("ticket number 12", "room 4") is no value of an attribute.
_VERBS = _words("is are was were am be has have had holds costs weighs measures")
_LABELS = _words("number no id ticket order room item version issue step chapter page line level floor table")


@dataclasses.dataclass(frozen=True)
class _Token:
    word: str  # casefolded, apostrophes unified
    capitalised: bool


@functools.lru_cache(maxsize=4096)
def _tokens(text: str) -> tuple[_Token, ...]:
    text = unicodedata.normalize("NFKC", text).replace("’", "'")
    out: list[_Token] = []
    for match in _TOKEN.finditer(text):
        raw = match.group(0).strip(".,:/'-")
        if not raw:
            continue
        word = raw.casefold()
        if word.endswith("n't"):  # "doesn't" -> "does" + "n't": the negation is its own token
            out.append(_Token(word[:-3], False))
            out.append(_Token("n't", False))
            continue
        if word.endswith("'s") and word not in _STOPWORDS:  # "alice's" -> "alice": the possessive is a role
            word = word[:-2]
        out.append(_Token(word, raw[:1].isupper() and word not in _STOPWORDS))
    for symbol in _CURRENCY.findall(text):
        out.append(_Token(symbol, False))
    return tuple(out)


def _is_value(word: str) -> bool:
    return any(ch.isdigit() for ch in word) or word in _VALUE_WORDS or bool(_CURRENCY.fullmatch(word))


def _names(tokens: tuple[_Token, ...]) -> set[str]:
    return {t.word for t in tokens if t.capitalised and not _is_value(t.word)}


def _content(tokens: tuple[_Token, ...]) -> list[str]:
    return [t.word for t in tokens if t.word not in _STOPWORDS]


def wording(text: str) -> tuple[str, ...]:
    """The statement's words, case and punctuation aside: two texts with the same wording state
    the same fact whatever their embeddings ("The user's editor is Vim." / "the user's editor is vim")."""
    return tuple(t.word for t in _tokens(text))


def _directed(words: list[str]) -> set[tuple[str, str]]:
    """Each direction word with the word it governs ("from paris", "to paris")."""
    pairs: set[tuple[str, str]] = set()
    after = ""  # the next word after this one that is not a function word (or is a direction)
    # Right to left, once: looking ahead from each direction word was quadratic in "to to to ...".
    for word in reversed(words):
        if word in _DIRECTIONS and after:  # none after it ("as stated before"): an adverb, no direction
            pairs.add((word, after))
        if word not in _STOPWORDS or word in _DIRECTIONS:
            after = word
    return pairs


def _qualifiers(words: list[str]) -> list[str]:
    return [w for w in words if w in _QUALIFIERS or w.startswith("ex-")]


def _subject(words: list[str]) -> set[str]:
    """The content words before the first verb: who or what the statement is about."""
    end = next((i for i, w in enumerate(words) if w in _VERBS), None)
    return set() if end is None else {w for w in words[:end] if w not in _STOPWORDS}


def same_fact(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` state the same fact (see the module's docstring): a near duplicate
    may be folded into the other only then. Linear in the texts' lengths; a text past
    MAX_FACT_WORDS is the same fact only as the same text."""
    if not (_statement(a) and _statement(b)):
        return a == b
    ta, tb = _tokens(a), _tokens(b)
    wa, wb = [t.word for t in ta], [t.word for t in tb]
    if [w for w in wa if _is_value(w)] != [w for w in wb if _is_value(w)]:
        return False
    if sum(w in _NEGATIONS for w in wa) != sum(w in _NEGATIONS for w in wb):
        return False
    names = _names(ta) | _names(tb)
    if [w for w in wa if w in names] != [w for w in wb if w in names]:
        return False
    # Which way (from/to), which one (former, ex-) and about whom (the daughter, not the son).
    if _directed(wa) != _directed(wb) or _qualifiers(wa) != _qualifiers(wb):
        return False
    sa, sb = _subject(wa), _subject(wb)
    if sa - sb and sb - sa:
        return False
    # Who does what to whom: the content words both share, in the same order in both.
    ca, cb = _content(ta), _content(tb)
    counts_a, counts_b = collections.Counter(ca), collections.Counter(cb)
    shared = {w for w, n in counts_a.items() if n == 1 and counts_b[w] == 1}
    return [w for w in ca if w in shared] == [w for w in cb if w in shared]


# What turns a statement into its end ("no longer drinks", "does not use ... anymore"), and the
# auxiliaries a negation brings along.
_ENDING = _words("not no never n't longer does do did doesn")


def _stem(word: str) -> str:
    """A verb's third person and its base alike ("drinks"/"drink", "uses"/"use"): for comparing only."""
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


@dataclasses.dataclass(frozen=True, slots=True)
class _Slots:
    """What :func:`updated_value` reads of one text, worked out once per text rather than once per
    pair (recall compares every project candidate with every user-wide one)."""

    # The words of the statement's reading (rushmem.ingest.statements: third person, base verb,
    # change words out): "I live in Munich now" and "The user lives in Munich" have the same.
    words: tuple[str, ...]
    names: frozenset[str]
    negations: int
    reading: Reading
    verbs: frozenset[str]  # the word that says what the user does ("live", "work"): a verb by its place


@functools.lru_cache(maxsize=4096)
def _slots(text: str) -> _Slots:
    reading = read(text)
    tokens = _tokens(reading.text)
    words = tuple(t.word for t in tokens if t.word not in _PRESENT)
    verbs = {
        next((w for w in words[i + 1 :] if w not in _STOPWORDS and w not in _NEGATIONS and w not in _ENDING), "")
        for i, w in enumerate(words)
        if w == "user"
    }
    return _Slots(
        words, frozenset(_names(tokens)), sum(w in _NEGATIONS for w in words), reading, frozenset(verbs - {""})
    )


def _polarity_flipped(old: _Slots, new: _Slots) -> bool:
    """``new`` is ``old`` negated ("the user no longer drinks coffee" after "the user drinks coffee"),
    or the other way round: the same statement, only its polarity changed, so it ends (or starts
    again) what the other said."""
    if old.negations == new.negations:
        return False
    wo, wn = old.words, new.words
    core_old = [_stem(w) for w in wo if w not in _ENDING]
    core_new = [_stem(w) for w in wn if w not in _ENDING]
    return core_old == core_new and any(w not in _STOPWORDS for w in core_old)


def _root(word: str) -> str:
    """A word's rough root, for asking whether one statement names what another said
    ("smoking" / "smoke", "playing" / "plays"): for comparing only."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _roots(words: Sequence[str]) -> set[str]:
    return {_root(w) for w in words if w not in _STOPWORDS and w not in _ENDING and not _is_value(w)} - {"user"}


def _ends(old: _Slots, new: _Slots) -> bool:
    """``new`` says that what ``old`` says of the user stopped: "quit smoking" ends "smokes", "broke
    up with Tom" ends "has a boyfriend named Tom", "moved from Berlin" ends "lives in Berlin",
    "does not drink coffee anymore" ends "drinks coffee every morning". What stopped must be named
    by words of ``old``; both must be about the user, ``old`` stated as holding."""
    ro, rn = old.reading, new.reading
    if not rn.about_user or not ro.text.casefold().lstrip().startswith(("the user", "user")):
        return False
    if old.negations or ro.hypothetical or not rn.change:
        return False
    said = [" ".join(t.word for t in _tokens(e)) for e in rn.ended]
    if new.negations > old.negations:
        first = next(i for i, w in enumerate(new.words) if w in _NEGATIONS)
        said.append(" ".join(new.words[first + 1 :]))
    had = _roots(old.words)
    for what in said:
        roots = _roots(what.split())
        if roots and roots <= had:
            return True
    return False


def _appositive(words: Sequence[str], at: int, verbs: Collection[str]) -> bool:
    """The name at ``words[at]`` follows a noun that it names ("the user's friend Rita"): it says
    whom the statement is about, not a value of it."""
    if at == 0:
        return False
    before = words[at - 1]
    return not (
        before in _STOPWORDS
        or before in _SINGLE_VALUED
        or before in _STATE_PARTICIPLES
        or before in _VERBS
        or before in _DIRECTIONS
        or before in verbs
        or _is_value(before)
    )


def updated_value(old: str, new: str) -> bool:
    """Whether ``new`` restates ``old`` with another value in one slot (an age, a date, a number, a
    place or name): the same words around it, one contiguous span changed, made of values or
    names only (a name only where the statement holds one at a time: "lives in", "works at",
    and never a name that says whom the statement is about: "the user's friend Rita"); or the
    same statement with the other polarity ("no longer drinks coffee" ends "drinks coffee"); or,
    marked as a change ("now", "these days", "since March", "actually"), the same statement of
    the user with another object ("works as a teacher now" after "works as a nurse"); or a
    statement that what ``old`` said stopped ("quit smoking", "moved from Berlin to Munich").
    Both are read alike in the first and the third person (:mod:`rushmem.ingest.statements`).
    Then ``new`` supersedes ``old``. Events ("the user visited Paris") never qualify; nor does
    another weekday (another occurrence), a hypothesis ("might move to Munich") or an addition
    ("also speaks Spanish"), nor a text past MAX_FACT_WORDS."""
    return _statement(old) and _statement(new) and _updated_value(old, new)


def _updated_value(old: str, new: str) -> bool:
    so, sn = _slots(old), _slots(new)
    ro, rn = so.reading, sn.reading
    if rn.hypothetical and not ro.hypothetical:
        return False
    if _ends(so, sn):
        return True
    if rn.additive or so.words == sn.words:
        return False
    if _polarity_flipped(so, sn):
        return True
    return _another_value(so, sn)


def _changed_span(wo: Sequence[str], wn: Sequence[str]) -> tuple[int, int, int, int] | None:
    """The one contiguous change from ``wo`` to ``wn`` (``wo[i1:i2]`` became ``wn[j1:j2]``), or None
    when there is more than one or one side is empty (more or less said, not another value).
    Linear: what the two share at the start and at the end leaves one span each (a diff of two long
    number-heavy texts took seconds); several changes leave spans with words in common."""
    i1 = 0
    while i1 < min(len(wo), len(wn)) and wo[i1] == wn[i1]:
        i1 += 1
    tail = 0
    while tail < min(len(wo), len(wn)) - i1 and wo[-1 - tail] == wn[-1 - tail]:
        tail += 1
    i2, j1, j2 = len(wo) - tail, i1, len(wn) - tail
    if set(wo[i1:i2]) & set(wn[j1:j2]) or not wo[i1:i2] or not wn[j1:j2]:
        return None
    return i1, i2, j1, j2


def _another_value(so: _Slots, sn: _Slots) -> bool:
    """The same statement with another value in one slot (see :func:`updated_value`)."""
    wo, wn = so.words, sn.words
    names = so.names | sn.names
    # Marked as a change, a statement of the user may give its object any words.
    relaxed = sn.reading.change and sn.reading.about_user and so.reading.about_user
    # One contiguous change (required below) puts every word that only one text has in the
    # changed span, which may hold values and names only: checked first, as it turns most
    # neighbours away without the diff (the write path runs this on up to 8 neighbours a fact).
    if not relaxed and any(not _is_value(w) and w not in names for w in set(wo).symmetric_difference(wn)):
        return False
    spans = _changed_span(wo, wn)
    if spans is None:
        return False
    i1, i2, j1, j2 = spans
    span = wo[i1:i2] + wn[j1:j2]
    if any(w in _WEEKDAYS for w in span):  # another day: another occurrence, both hold
        return False
    frame = wo[:i1] + wo[i2:]
    if any(w in _NEGATIONS or w in _EVENT_VERBS or (w.endswith("ed") and w not in _STATE_PARTICIPLES) for w in frame):
        return False
    if not all(_is_value(w) or w in names for w in span):
        # Another object, said as a change, of an attribute that holds one at a time ("works as a
        # nurse" / "a teacher now", "favourite colour"): a few words change. Not of a verb that may
        # hold many ("prefers TypeScript" / "prefer dark mode now", "plays tennis" / "chess now").
        prefix = [w for w in wo[:i1] if w not in _STOPWORDS]
        single = any(w in _SINGLE_VALUED for w in prefix)
        return relaxed and single and max(i2 - i1, j2 - j1) <= 4
    if not [w for w in frame if w not in _STOPWORDS]:  # nothing said around it: not "the same thing"
        return False
    if i1 > 0 and wo[i1 - 1] in _LABELS:
        return False
    verbs = so.verbs | sn.verbs
    if not any(
        w in _VERBS or w in _SINGLE_VALUED or w in verbs or (w.endswith("s") and not _is_value(w)) for w in frame
    ):
        return False
    if any(w in names and not _is_value(w) for w in span):
        # ... and the name is what the statement says of its subject (after the cue), not the
        # subject, nor whom it is about.
        if _appositive(wo, i1, verbs) or _appositive(wn, j1, verbs):
            return False
        return any(w in _SINGLE_VALUED for w in wo[:i1]) or bool(relaxed and verbs & set(wo[:i1]))
    return True


def past_event(text: str) -> bool:
    """``text`` tells of something that happened ("visited Paris", "moved to Berlin", "I quit
    smoking"), in any person, rather than of a state that holds: the block shows its time with it."""
    slots = _slots(text)
    if slots.reading.began or slots.reading.ended:
        return True
    return any(
        v in _EVENT_VERBS or (v.endswith("ed") and not v.endswith("eed") and v not in _STATE_PARTICIPLES)
        for v in slots.verbs
    )


def switched_value(old: str, new: str) -> bool:
    """``new`` says the user switched to something ("I switched to Emacs") without naming the slot,
    and ``old`` is a statement of the user that such a switch ends: one holding, with an object,
    not an event, not a hypothesis, not already naming the new value. The write path lets it end
    only the nearest such neighbour (one switch ends one thing)."""
    so, sn = _slots(old), _slots(new)
    ro, rn = so.reading, sn.reading
    if rn.switched_to is None or rn.hypothetical or not rn.about_user or not ro.about_user:
        return False
    if so.negations or ro.hypothetical or ro.switched_to is not None or ro.began:
        return False
    if any(w in _EVENT_VERBS or (w.endswith("ed") and w not in _STATE_PARTICIPLES) for w in so.words):
        return False
    target = _roots([t.word for t in _tokens(rn.switched_to)])
    return bool(target) and not target <= _roots(so.words) and len(_roots(so.words) - so.verbs) > 0


def same_statement(a: str, b: str) -> bool:
    """``a`` and ``b`` read the same (:mod:`rushmem.ingest.statements`): "I live in Berlin" and "The
    user lives in Berlin."; the same fact, whatever the person it is said in."""
    sa, sb = _slots(a), _slots(b)
    return (
        sa.words == sb.words
        and sa.negations == sb.negations
        and sa.reading.began == sb.reading.began
        and sa.reading.hypothetical == sb.reading.hypothetical
        and bool([w for w in sa.words if w not in _STOPWORDS])
    )


def about_the_user(old: str, new: str) -> bool:
    """Both statements are of the user themselves ("I live in Munich", "The user is 32 years old"),
    not of something of theirs ("the user's team", "my dog") nor of another person: the user's own
    state is one value in every project, so a project's correction of it ends the user-wide value
    (something of the user's may differ from one project to another: resolved in that project)."""
    return read(old).about_user and read(new).about_user


def outdated_across_scopes(facts: Sequence[tuple[str | None, str, dt.datetime]]) -> set[int]:
    """Of facts a project's reader sees together, given as (project_id, content, valid from), the
    indexes of those a fact of the other scope (user-wide against the project's) gives a newer
    value in the same slot (:func:`updated_value`): a correction written user-wide while the old
    value sat in the project, or the other way round. Each scope's own updates are the write
    path's, and so are a project's corrections of the user's own state (:func:`about_the_user`):
    this resolves the rest (something of the user's, which may differ per project) and memories
    written before the write path did; a pair true from the same instant is left as it is. The
    pairs of the two scopes only: a recall's candidates, a few dozen."""
    project = [i for i, f in enumerate(facts) if f[0] is not None]
    wide = [i for i, f in enumerate(facts) if f[0] is None]
    gone: set[int] = set()
    for i in project:
        for j in wide:
            ta, tb = facts[i][2], facts[j][2]
            if ta == tb:
                continue
            older, newer = (i, j) if ta < tb else (j, i)
            if updated_value(facts[older][1], facts[newer][1]):
                gone.add(older)
    return gone
