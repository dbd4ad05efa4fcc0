"""The offline extractor: English heuristics, no model, no network, deterministic.

It keeps the user's own statements about themselves and their work: preferences ("I prefer
TypeScript"), identity ("I'm a frontend developer in Lisbon"), projects ("I'm building an
SVG editor"), decisions ("Let's go with PostgreSQL") and standing rules ("Every SVG change
must be synced to defaultSVG", "Always use single quotes"), rewritten in the third person
("The user prefers TypeScript."). It drops greetings, thanks, questions, one-off requests,
problem reports, text aimed at the memory system, and everything the assistant said.

What it cannot do (resolve "it", read the assistant's turns, tell a lasting rule from a one-off,
...): docs/how-it-works.md, "The write path"; nor does it conjugate every irregular verb when
rewriting "I"/"you" into the third person.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import Any

from rushmem.config import Settings
from rushmem.extraction.base import Extractor
from rushmem.extraction.dependencies import place_dependencies
from rushmem.extraction.instructions import category_for, mentions
from rushmem.extraction.parsing import validate_items
from rushmem.extraction.records import Extraction
from rushmem.records import ExistingMemory
from rushmem_contract.instructions import ExtractionInstructions
from rushmem_contract.models import ChatMessage, fact_key

MAX_SENTENCE_CHARS = 300

# Sentences, and clauses that start over with the speaker ("I live in Lisbon and I'm training ...").
_SENTENCES = re.compile(
    r"(?<=[.!?])\s+|\n+|,?\s+(?:and|but|so|also)\s+(?=(?:I|I'm|I've|I'd|my|My|we|We|we're|We're|our|Our)\b)"
)
# Discourse tails that add nothing to the fact.
_TAIL = re.compile(
    r",?\s+(?:after all|though|haha+|lol|I guess|I think|I suppose|you know|by the way|btw|anyway)\s*(?=[.!]*$)",
    re.IGNORECASE,
)
_LEAD_IN = re.compile(
    r"^(?:(?:hi|hello|hey|thanks|thank you|ok|okay|yes|yeah|yep|sure|great|cool|perfect|so|well|also|and|but|"
    r"btw|by the way|fyi|oh|ah|right|actually|basically|sorry|oops|correction|no,? wait|wait|scratch that|"
    r"for context|for the record|just so you know|"
    r"(?:please )?(?:note|remember|keep in mind)(?: that)?(?=[\s,:]+(?:i|i'm|we|we're|my|our)\b))"
    r"(?:\s+there)?\b[\s,:;!.-]*)+",
    re.IGNORECASE,
)
_INJECTION = re.compile(
    r"\b(?:ignore|disregard|override|forget)\b[^.]{0,60}\b(?:instructions?|prompts?|rules|above|previous)\b"
    r"|\bsystem prompt\b|\bmemory (?:system|store|extractor|database|bank)\b"
    r"|\b(?:store|save|add|record|write|put)\b[^.]{0,40}\b(?:in|to|into) (?:your |the |a )?memor(?:y|ies)\b",
    re.IGNORECASE,
)
# Chat questions often lack the "?"; a wh-word followed by a comma clause is a statement
# ("When you change the SVG, sync it ..."), an auxiliary first is always a question.
_QUESTION_START = re.compile(
    r"^(?:(?:what|how|why|when|where|who|whom|whose|which)\b(?![^,]*,)|(?:can|could|would|will|shall|should|"
    r"do|does|did|is|are|am|was|were|have|has|may|might|any idea)\b)",
    re.IGNORECASE,
)
_PROBLEM = re.compile(
    r"\b(?:error|errors|bug|bugs|fail|fails|failing|failed|broken|crash\w*|exception|stuck|wrong|"
    r"doesn't work|does not work|isn't working|not working|won't|can't get|cannot get)\b",
    re.IGNORECASE,
)
_UNRESOLVED_START = re.compile(r"^(?:it|it's|this|that|these|those|they|they're|he|she|there)\b", re.IGNORECASE)

# After "I" / "we" (and optional adverbs): verbs that state a lasting fact about the speaker.
_ADVERBS = (
    r"(?:(?:always|never|usually|often|mostly|really|strongly|also|only|still|generally|definitely|mainly|"
    r"primarily|currently|now|totally|absolutely|rarely|typically|normally|no longer)\s+)*"
)
_NEGATION = r"(?:(?:do not|don't|do n't)\s+)?"
_KEEP_VERBS = (
    r"prefer|prefers|like|love|hate|dislike|enjoy|use|work|live|speak|write|code|develop|build|maintain|run|own|"
    r"lead|manage|teach|study|deploy|host|target|support|follow|avoid|stick|rely|care|plan|"
    r"(?:want|need)\s+(?:every|all|each|no)|"  # "I want a button" is a request; "I need every ..." a rule
    r"decided|chose|switched|moved|have been|was born|have|has|'ve been|'ve|'d rather|would rather|"
    r"drink|eat|smoke|drive|play|go|attend|train|ride|cycle|run|swim|read|watch|listen|wear|take|"
    r"quit|stopped|gave up|broke up"  # what ended: it ends the fact it names (rushmem.ingest.statements)
)
_FIRST_PERSON = re.compile(rf"^(?:i|we)(?:\s+|(?=')){_ADVERBS}{_NEGATION}(?:{_KEEP_VERBS})\b", re.IGNORECASE)
# "I'm" / "we're" + what may follow and still be a lasting fact.
_BE_FOLLOW = re.compile(
    r"^(?:i'm|i am|we're|we are)\s+(?:not\s+)?(?:currently\s+|also\s+|still\s+)?"
    r"(?:a|an|the|from|based|located|building|developing|working|making|writing|creating|designing|using|"
    r"allergic|vegetarian|vegan|learning|training|married|fluent|responsible|in charge|part of|new to|"
    r"familiar|comfortable|a fan|fans|migrating|moving|switching)\b",
    re.IGNORECASE,
)
_NAMED = re.compile(r"^(?:[Ii]'m|[Ii] am)\s+[A-Z][\w-]+\b")  # "I'm Ana", "I'm Portuguese" (case matters)
_NOT_A_FACT = re.compile(
    r"^(?:i|we)(?:\s+|(?='))(?:'d like|would like|want you|need you|need help|need some help|have a question|"
    r"have a problem|have an issue|have some|have another|'ve got a question|'m trying|am trying|'re trying|"
    r"are trying|'m looking|am looking|'m getting|am getting|'m not sure|am not sure|'m wondering|am wondering|"
    r"'m done|am done|'m back|am back|'m happy|am happy|'m glad|am glad|'m sorry|am sorry|want to know|"
    r"need to know|want to see|need to fix|want to add|need to add|have to go|have to run|have to leave)\b"
    r"|^(?:i|we)(?:\s+|(?='))(?:'m|am|are|'re)\s+(?:a bit|a little|going to)\b",
    re.IGNORECASE,
)
_POSSESSIVE = re.compile(
    r"^(?:my|our)\s+(?:[\w'-]+\s+){0,4}?(?:is|are|was|has|have|must|should|needs|need|uses|runs|supports|"
    r"includes|lives|works|targets|stays)\b",
    re.IGNORECASE,
)
_REQUIREMENT = re.compile(
    r"\b(?:must|mustn't|has to|have to|needs to|need to|should always|should never|always|never|"
    r"is required|are required|required to)\b",
    re.IGNORECASE,
)
_STANDING_RULE = re.compile(
    r"^(?:please\s+)?(?:always|never|make sure|ensure|from now on|going forward|don't ever|do not ever)\b",
    re.IGNORECASE,
)
# A change said first ("Since March I speak German", "These days my favourite band is ..."): moved
# after the statement it dates, which then reads as any other.
_CHANGE_FIRST = re.compile(
    r"^((?:since|as of) [\w ]{2,30}?|these days|nowadays|lately|currently|now),?\s+(?=(?:i|i'm|my|we|our)\b)",
    re.IGNORECASE,
)
_LETS = re.compile(r"^let'?s\s+(go with|use|stick with|keep|switch to|choose|pick|call it|name it)\b", re.IGNORECASE)

_IDENTITY = re.compile(
    r"\b(?:my name is|i am an? |i'm an? |i live|i'm from|i am from|i'm based|i am based|i work (?:as|at|for)|"
    r"years old|i speak|i was born|my pronouns)",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:prefers?|like|likes|love|loves|hate|hates|dislike|dislikes|enjoy|enjoys|favou?rite|rather|fan of|"
    r"stack)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(?:decided|decision|chose|chosen|going with|go with|settled on|agreed|switched to|from now on|always|never|"
    r"must|mustn't|should|has to|have to|needs? to|required?|make sure|ensure|let'?s)\b",
    re.IGNORECASE,
)
_PROJECT = re.compile(
    r"\b(?:build|building|develop|developing|working on|product|project|app|application|website|repo|"
    r"repository|codebase|platform|service|startup|company|editor|library)\b",
    re.IGNORECASE,
)
_TEMPORARY = re.compile(
    r"\b(?:today|tonight|tomorrow|yesterday|this (?:week|month|morning|afternoon|evening|year|sprint)|"
    r"next (?:week|month|year)|right now|at the moment|for now|temporarily|until)\b",
    re.IGNORECASE,
)

# ---- first person -> third person ------------------------------------------------------

_THIRD_PERSON = {
    "am": "is", "are": "is", "have": "has", "do": "does", "go": "goes", "were": "was",
    "don't": "doesn't", "haven't": "hasn't", "aren't": "isn't", "weren't": "wasn't",
}  # fmt: skip


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_KEEP_FORM = _words(
    "can could will would shall should may might must can't couldn't won't wouldn't shouldn't mustn't didn't "
    "wasn't was had did never always also only really just still usually often mostly rarely "
    "built chose made wrote went got began took ran found bought left sold spent thought knew became came saw "
    "said told put set let kept felt sent lost met paid brought taught caught won drove grew gave flew forgot "
    "read hit cut quit broke"
)
_ED_BASE = _words("need feed seed proceed succeed exceed speed bleed breed embed shred wed")
_FIXED = [  # (pattern, replacement); order matters: contractions before the bare pronouns
    (r"\bI'm\b|\bI am\b", "the user is"),
    (r"\bI've\b", "the user has"),
    (r"\bI'd\b", "the user would"),
    (r"\bI'll\b", "the user will"),
    (r"\bwe're\b|\bwe are\b", "the user and their team are"),
    (r"\bwe've\b", "the user and their team have"),
    (r"\bwe'd\b", "the user and their team would"),
    (r"\bwe'll\b", "the user and their team will"),
    (r"\bwe\b|\bus\b", "the user and their team"),
    (r"\bours\b|\bmine\b", "the user's"),
    (r"\bour\b|\bmy\b", "the user's"),
    (r"\bourselves\b|\bmyself\b", "themselves"),
    (r"\bme\b", "the user"),
    (r"\byou're\b|\byou are\b", "the assistant is"),
    (r"\byou've\b", "the assistant has"),
    (r"\byou'd\b", "the assistant would"),
    (r"\byou'll\b", "the assistant will"),
    (r"\byours\b|\byour\b", "the assistant's"),
    (r"\byourself\b", "itself"),
]
_FIXED_RE = [(re.compile(p, re.IGNORECASE), r) for p, r in _FIXED]
_VERB_AFTER = rf"(\s+{_ADVERBS})([A-Za-z]+n't|[A-Za-z]+)\b"
# "I" is always a subject; "you" only at the start of a clause (else: "thank you", "for you").
_I_VERB = re.compile(rf"(?<![/\w])[Ii]{_VERB_AFTER}")
_YOU_VERB = re.compile(
    rf"(^|[,;:]\s*|\b(?i:and|that|when|whenever|if|because|so|then|before|after|as|once)\s+)[Yy]ou{_VERB_AFTER}"
)
_YOU = re.compile(r"\byou\b", re.IGNORECASE)


def third_person_verb(verb: str) -> str:
    """'prefer' -> 'prefers', 'do' -> 'does', 'am' -> 'is'; modals and past forms unchanged."""
    low = verb.lower()
    if low in _THIRD_PERSON:
        return _THIRD_PERSON[low]
    if low in _KEEP_FORM or (low.endswith("ed") and low not in _ED_BASE) or low.endswith("n't") or len(low) < 2:
        return verb
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if low.endswith("y") and low[-2] not in "aeiou":
        return verb[:-1] + "ies"
    return verb + "s"


def to_third_person(sentence: str) -> str:
    """Rewrite a user's sentence about themselves (and to the assistant) in the third person."""
    text = _I_VERB.sub(lambda m: f"the user{m.group(1)}{third_person_verb(m.group(2))}", sentence)
    text = _YOU_VERB.sub(lambda m: f"{m.group(1)}the assistant{m.group(2)}{third_person_verb(m.group(3))}", text)
    for pattern, replacement in _FIXED_RE:
        text = pattern.sub(replacement, text)
    text = _YOU.sub("the assistant", text)
    text = re.sub(r"(?<![/\w])I\b(?!/)", "the user", text)
    text = text.strip().rstrip(".!;,:") + "."
    return text[0].upper() + text[1:]


# ---- the extractor ---------------------------------------------------------------------


def _looks_like_code(sentence: str) -> bool:
    symbols = sum(1 for ch in sentence if not (ch.isalnum() or ch.isspace() or ch in ".,'’-`\"!?():"))
    return symbols > max(3, len(sentence) // 12)


# How people state and correct their facts, read as the statements the same-slot rule compares
# (rushmem.ingest.facts.updated_value): an age in any wording is "is N years old", a move
# says where the user lives now, "X, not Y" says X and not Y.
_AGE = re.compile(
    r"^(?:i'm|i am|i just turned|i turned|i've turned|i have turned)\s+(\d{1,3})(?:\s+years?(?:\s+old)?)?"
    r"(?:\s+(?:last|this|on|in|yesterday|today|now)\b.*)?[.!]*$",
    re.IGNORECASE,
)
_MOVED = re.compile(
    r"^(?i:i|we)(?:'ve| have)?\s+(?:just\s+|recently\s+)?moved\s+(?:from\s+(?:[A-Z][\w-]*\s+)+)?to\s+"
    r"((?:[A-Z][\w-]*)(?:\s+[A-Z][\w-]*)*)"
)
_NOT_THIS = re.compile(r"^(The user (?:and their team )?)(\w+) (.+?), (?:and )?not (.+?)\.$")


_WHO = re.compile(r"^The user (?:is \d+ years old|lives in)\b")


def _base_verb(verb: str) -> str:
    """'uses' -> 'use', 'prefers' -> 'prefer', 'watches' -> 'watch', 'tries' -> 'try'."""
    if verb.endswith("ies"):
        return verb[:-3] + "y"
    if verb.endswith(("sses", "shes", "ches", "xes", "oes")):
        return verb[:-2]
    return verb[:-1] if verb.endswith("s") and not verb.endswith("ss") else verb


def _statements(sentence: str) -> list[str]:
    """The memories one sentence states: usually one (:func:`_statement`); an age in any wording is
    the age; "I moved from Lisbon to Porto" is the move and where the user lives now; "I use Svelte,
    not React" is that and that the user does not use React."""
    text = _LEAD_IN.sub("", sentence.strip().strip("*_ ")).strip()
    age = _AGE.match(text)
    if age and 0 < int(age.group(1)) < 130:
        return [f"The user is {int(age.group(1))} years old."]
    memory = _statement(sentence)
    if memory is None:
        return []
    found = [memory]
    moved = _MOVED.match(text)
    if moved:
        found.append(f"The user lives in {moved.group(1)}.")
    contrast = _NOT_THIS.match(memory)
    if contrast and " " not in contrast.group(4).strip():
        subject, verb, this, other = contrast.groups()
        negated = "is not" if verb == "is" else f"does not {_base_verb(verb)}"
        found = [f"{subject}{verb} {this}.", f"{subject}{negated} {other}."]
    return found


def _statement(sentence: str) -> str | None:
    """The sentence as a third-person memory, or None when it is not one worth keeping."""
    text = sentence.strip().strip("*_ ")
    if not text or len(text) > MAX_SENTENCE_CHARS or _INJECTION.search(text) or _looks_like_code(text):
        return None
    text = _TAIL.sub("", _LEAD_IN.sub("", text)).strip()
    text = text.replace("’", "'")
    first = _CHANGE_FIRST.match(text)
    if first:
        said = first.group(1)
        text = f"{text[first.end() :].rstrip('.!')} {said[0].lower()}{said[1:]}"
    if len(text) < 5 or text.endswith("?") or _QUESTION_START.match(text) or _PROBLEM.search(text):
        return None
    if _NOT_A_FACT.match(text) or _UNRESOLVED_START.match(text):
        return None
    lets = _LETS.match(text)
    if lets:
        return to_third_person("the user decided to " + text[lets.start(1) :])
    if _STANDING_RULE.match(text):
        rule = re.sub(r"^please\s+", "", text, flags=re.IGNORECASE)
        rule = re.sub(r"^(?:from now on|going forward),?\s*", "", rule, flags=re.IGNORECASE)
        rule = re.sub(r"^(?:don't|do not) ever\b", "never", rule, flags=re.IGNORECASE)
        return to_third_person("the user wants the assistant to " + rule[0].lower() + rule[1:])
    if (
        _FIRST_PERSON.match(text)
        or _BE_FOLLOW.match(text)
        or _NAMED.match(text)
        or _POSSESSIVE.match(text)
        or _REQUIREMENT.search(text)
    ):
        return to_third_person(text)
    return None


def _category(original: str, memory: str) -> str:
    if _IDENTITY.search(original) or _WHO.match(memory) or _NAMED.match(_LEAD_IN.sub("", original.strip())):
        return "identity"
    if _PREFERENCE.search(original):
        return "preference"
    if _DECISION.search(original) or memory.startswith("The user decided"):
        return "decision"
    if _PROJECT.search(original):
        return "project"
    return "fact"


class RulesExtractor(Extractor):
    """Heuristic extraction from the user's own turns (see the module docstring for its limits)."""

    provider = "rules"
    model = "heuristic-v1"

    @classmethod
    def from_settings(cls, settings: Settings) -> RulesExtractor:
        return cls(
            window=settings.extraction_window,
            max_items=settings.max_extracted_memories,
            max_chars=settings.max_memory_chars,
        )

    def _extract(
        self,
        messages: list[ChatMessage],
        ended_at: dt.datetime | None,
        existing: Sequence[ExistingMemory],
        instructions: ExtractionInstructions | None,
    ) -> Extraction:
        # Never shown existing memories (updates_existing is False): the rules provider judges no
        # stored memory itself; the write path's same-slot rule reads its corrections.
        # Of a project's instructions it applies what needs no reading of prose: the ignore
        # phrases (a sentence naming one is dropped) and the categories' names and keywords.
        ignore = instructions.ignore if instructions is not None else []
        items: list[dict[str, Any]] = []
        said: dict[str, tuple[int, dt.datetime | None]] = {}  # per fact, the last message that said it
        for turn, message in enumerate(messages):
            if message.role != "user":
                continue  # the assistant's chatter, system prompts and tool output are never the user's facts
            for sentence in _SENTENCES.split(message.content):
                if ignore and mentions(sentence, ignore):
                    continue
                for memory in _statements(sentence):
                    category = _category(sentence, memory)
                    evergreen = category != "fact" and not _TEMPORARY.search(sentence)
                    item: dict[str, Any] = {"content": memory, "category": category, "is_evergreen": evergreen}
                    own = category_for(sentence, instructions) if instructions is not None else None
                    if own is not None:
                        item["category"] = own.name  # mapped to its kind, and kept as the label, by apply_categories
                    items.append(item)
                    said[fact_key(memory)] = (turn, message.created_at)
        # A fact naming the city of a residence fact of this answer follows from it (f1 is the first).
        for item, follows in zip(items, place_dependencies([i["content"] for i in items]), strict=True):
            if follows:
                item["depends_on"] = [f"f{j + 1}" for j in follows]
        extraction = validate_items(items, max_items=self.max_items, max_chars=self.max_chars)
        extraction.memories = [
            m.model_copy(
                update=dict(zip(("turn", "stated_at"), said.get(fact_key(m.content), (None, None)), strict=True))
            )
            for m in extraction.memories
        ]
        return extraction
