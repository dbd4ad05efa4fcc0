"""Memories that carry instructions for the model (memory poisoning): the one place that says
what looks like an instruction, a chat-turn marker or a fake block delimiter in a memory's text.

A memory is stored from a conversation the user controls and later pasted into a system
prompt, so "ignore previous instructions", "system: ..." or "[/RUSH_MEMORY]" inside one is an
attempt to speak to the model with the system's voice. Such memories are kept (the facts in
them stay recallable) but marked: :func:`findings` runs once at write time, on every write path
(:func:`agent_memory.ingest.rows.build_rows`), the reasons are stored with the memory (column
``injection``, migration 0008) and answered with it; the prompt block
(:mod:`agent_memory.recall.block`) replaces the same spans whenever it writes a memory line, so
the instruction never reaches the model verbatim, also for rows stored before the mark existed.

Patterns, not understanding: a paraphrased instruction ("the assistant should reveal its
configuration when asked") is not found, and a fact that quotes an attack ("the user asked how
'ignore previous instructions' attacks work") is marked. See SECURITY.md.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from typing import Literal, get_args

Reason = Literal["instruction_override", "prompt_request", "role_marker", "block_marker", "template_token"]
REASONS: tuple[str, ...] = get_args(Reason)

# Any spelling of the block's own markers: brackets, optional slash, spaces, case.
BLOCK_MARKER = re.compile(r"\[\s*/?\s*rush[\s_-]*memory\s*\]", re.IGNORECASE)
# Chat-template tokens and instruction tags of common model families.
TEMPLATE_TOKENS = re.compile(r"<\|[^|<>]{0,40}\|>|\[/?INST\]|<</?SYS>>|</?s>", re.IGNORECASE)
# <system>, </assistant>, <instructions ...>: a turn or a section of a prompt.
ROLE_TAGS = re.compile(r"</?\s*(system|assistant|user|developer|human|tool|instructions?)\b[^<>]{0,40}>", re.IGNORECASE)
# "system: ..." and friends anywhere (the block rewrites them all, which costs nothing).
ROLE_PREFIX = re.compile(r"\b(system|assistant|developer|human|tool)\s*:", re.IGNORECASE)
# As a mark, narrower: a role word that starts the text or a sentence ("Assistant: Sure"),
# not one inside a phrase ("the operating system: Linux", "favourite tool: vim").
_ROLE_TURN = re.compile(r"(?:^|[.!?;\"'\])>}#*|-]\s*)\b(system|assistant|developer|human)\s*:", re.IGNORECASE)
# Imitations of a prompt's structure: the block's title, BEGIN/END fences, memory tags.
_FAKE_DELIMITERS = re.compile(
    r"\brelevant memories\s*:"
    r"|[-=#*]{3,}\s*(?:begin|end)\s+(?:of\s+)?(?:the\s+)?(?:system\s+prompt|system|prompt|instructions?|memor(?:y|ies)|context)\b"
    r"|</?\s*(?:memor(?:y|ies)|context|rush_memory)\s*>",
    re.IGNORECASE,
)
_DETERMINERS = r"(?:(?:all|any|every|each|the|your|my|these|those|of|its)\s+){0,3}"
_EARLIER = r"(?:(?:previous|prior|above|earlier|preceding|former|original|initial|existing|system|safety|other)\s+)?"
_OVERRIDE = re.compile(
    r"\b(?:ignore|disregard|forget|override|bypass|abandon)\s+"
    + _DETERMINERS
    + _EARLIER
    + r"(?:instructions?|prompts?|rules|directions|directives|guidelines|guardrails|constraints|programming)\b"
    r"(?!\s+(?:of|for|about|in)\b)"  # "forget the rules of chess" is a fact, not an attack
    r"|\b(?:ignore|disregard|forget)\s+(?:(?:everything|all|anything)\s+)?(?:the\s+)?"
    r"(?:above|before|you\s+were\s+told)\b"
    r"|\b(?:new|updated|real|actual|hidden)\s+(?:system\s+)?instructions?\s*:"
    r"|\byou\s+are\s+no\s+longer\b"
    r"|\b(?:developer|dan|jailbreak|god)\s+mode\b",
    re.IGNORECASE,
)
_PROMPT_REQUEST = re.compile(
    r"\b(?:reveal|print|show|repeat|output|leak|disclose|dump)\s+(?:\w+\s+){0,3}?"
    r"(?:system\s+prompt|hidden\s+(?:prompt|instructions)|initial\s+prompt|(?:your|the)\s+instructions)\b",
    re.IGNORECASE,
)
_PATTERNS: tuple[tuple[Reason, re.Pattern[str]], ...] = (
    ("instruction_override", _OVERRIDE),
    ("prompt_request", _PROMPT_REQUEST),
    ("role_marker", ROLE_TAGS),
    ("role_marker", _ROLE_TURN),
    ("block_marker", BLOCK_MARKER),
    ("block_marker", _FAKE_DELIMITERS),
    ("template_token", TEMPLATE_TOKENS),
)
# What the block writes instead of an instruction or a fake delimiter.
REMOVED = "(instruction removed)"


@dataclasses.dataclass(frozen=True)
class Finding:
    reason: Reason
    start: int
    end: int


def visible_form(text: str) -> str:
    """``text`` as a reader (or a model) sees it: format characters (zero-width spaces, bidi
    overrides) dropped, compatibility forms folded (NFKC: fullwidth letters, ligatures)."""
    if text.isascii():  # no format character or compatibility form is ASCII (the common case)
        return text
    return unicodedata.normalize("NFKC", "".join(ch for ch in text if unicodedata.category(ch) != "Cf"))


def findings(text: str) -> list[Finding]:
    """Every span of ``text`` that looks like it speaks to the model, in text order (spans of
    ``text`` as given: callers that need them pass :func:`visible_form` first)."""
    found = [Finding(reason, m.start(), m.end()) for reason, pattern in _PATTERNS for m in pattern.finditer(text)]
    return sorted(found, key=lambda f: (f.start, f.end))


def reasons(text: str) -> list[str]:
    """Why ``text`` looks like it carries instructions (empty: nothing found), in REASONS' order."""
    found = {f.reason for f in findings(visible_form(text))}
    return [r for r in REASONS if r in found]


def defuse_instructions(text: str) -> str:
    """``text`` with its instructions, requests for the prompt and fake delimiters replaced by
    :data:`REMOVED` (markers, role tags and template tokens the block rewrites itself)."""
    for pattern in (_OVERRIDE, _PROMPT_REQUEST, _FAKE_DELIMITERS):
        text = pattern.sub(REMOVED, text)
    return text
