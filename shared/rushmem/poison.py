"""Memories that carry instructions for the model (memory poisoning): the one place that says
what looks like an instruction, a chat-turn marker or a fake block delimiter in a memory's text.

:func:`findings` runs once at write time on every write path
(:func:`rushmem.ingest.rows.build_rows`); the reasons are stored with the memory (column
``injection``) and the prompt block (:mod:`rushmem.recall.block`) replaces the same spans,
also in rows stored before the mark existed. The patterns read the detection form
(:mod:`rushmem.folding`). Patterns, not understanding: what is marked, what is missed and
why is in SECURITY.md ("Memory poisoning and prompt injection").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Literal, get_args

from rushmem.folding import fold

Reason = Literal["instruction_override", "prompt_request", "role_marker", "block_marker", "template_token"]
REASONS: tuple[str, ...] = get_args(Reason)

# Between two words of an instruction: spaces, or punctuation standing in for them
# ("ignore.previous.instructions", "ignore_all-previous instructions", "ignore / previous"), but
# not a sentence's end ("I forget. The rules were clear" is two sentences, not an instruction).
# Possessive: a word always follows, so giving back part of a run of punctuation never helps, and
# trying each shorter part made a long run after "ignore" slow.
# A run of one character class is read in one step, a run of alternatives a character at a time.
_G = r"(?:\s++|(?:[^\w\s]++|_++)++(?=\w)|\s*+(?:[^\w\s.!?;,:]++|_++)++\s*+)"
# Word edges that also hold next to an underscore ("_ignore_previous_instructions_").
_B0 = r"(?<![^\W_])"
_B1 = r"(?![^\W_])"
# Punctuation and symbols that can stand for a bracket: any but a sentence's own.
_BRACKET = r"[^\w\s.,;:!?'\"]"
# The block's own markers in any spelling: any bracket pair ([...], (...), {...}, <...>, 【...】
# and the lookalikes the detection form folds to them), a slash, spaces, joiners, case; a closing
# marker without its brackets; the marker's word itself.
BLOCK_MARKER = re.compile(
    rf"(?:{_BRACKET}\s*/?\s*|/\s*)rush[\W_]{{0,5}}memory(?:\s*{_BRACKET})?"
    rf"|rush[\W_]{{0,5}}memory\s*{_BRACKET}"
    r"|rush_memory",
    re.IGNORECASE,
)
_RUSH = re.compile("rush", re.IGNORECASE)
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
    rf"{_B0}relevant{_G}memories\s*:"
    # A fence is read from its first character, once (possessive): tried from each character of a long
    # run of dashes, the run was read again from there every time (quadratic).
    rf"|(?<![-=#*])[-=#*]{{3,}}+\s*(?:begin|end){_G}(?:of{_G})?(?:the{_G})?"
    rf"(?:system{_G}prompt|system|prompt|instructions?|memor(?:y|ies)|context){_B1}"
    r"|</?\s*(?:memor(?:y|ies)|context|rush_memory)\s*>",
    re.IGNORECASE,
)
_DETERMINERS = rf"(?:(?:all|any|every|each|the|your|my|these|those|of|its){_G}){{0,3}}"
_EARLIER = rf"(?:(?:previous|prior|above|earlier|preceding|former|original|initial|existing|system|safety|other){_G})?"
# Each pattern that starts at a word starts with a lookahead for its words' first letters: the
# regex engine turns every other position away at once (a run of punctuation passes the word edge
# at each character, and trying each alternative there made it several times slower than prose).
_OVERRIDE = re.compile(
    r"(?=[abdfghijnoruy])(?:"
    rf"{_B0}(?:ignore|disregard|forget|override|bypass|abandon){_G}"
    + _DETERMINERS
    + _EARLIER
    + rf"(?:instructions?|prompts?|rules|directions|directives|guidelines|guardrails|constraints|programming){_B1}"
    rf"(?!{_G}(?:of|for|about|in){_B1})"  # "forget the rules of chess" is a fact, not an attack
    rf"|{_B0}(?:ignore|disregard|forget){_G}(?:(?:everything|all|anything){_G})?(?:the{_G})?"
    rf"(?:above|before|you{_G}were{_G}told){_B1}"
    rf"|{_B0}(?:new|updated|real|actual|hidden){_G}(?:system{_G})?instructions?\s*:"
    rf"|{_B0}you{_G}are{_G}no{_G}longer{_B1}"
    rf"|{_B0}(?:developer|dan|jailbreak|god){_G}mode{_B1})",
    re.IGNORECASE,
)
_PROMPT_REQUEST = re.compile(
    r"(?=[dloprs])"
    rf"{_B0}(?:reveal|print|show|repeat|output|leak|disclose|dump){_G}(?:[^\W_]+{_G}){{0,3}}?"
    rf"(?:system{_G}prompt|hidden{_G}(?:prompt|instructions)|initial{_G}prompt|(?:your|the){_G}instructions){_B1}",
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
# What the block writes instead of an instruction or a fake delimiter, and of a block marker.
REMOVED = "(instruction removed)"
MARKER_REMOVED = "(marker removed)"


@dataclasses.dataclass(frozen=True)
class Finding:
    reason: Reason
    start: int
    end: int


def findings(text: str) -> list[Finding]:
    """Every span of ``text`` that looks like it speaks to the model, in text order. The patterns
    read the detection form (:func:`rushmem.folding.fold`: lookalike letters, marks, invisible
    characters); the spans are of ``text`` as given."""
    folded = fold(text)
    found = [
        Finding(reason, *folded.span(m.start(), m.end()))
        for reason, pattern in _PATTERNS
        for m in pattern.finditer(folded.text)
    ]
    return sorted(found, key=lambda f: (f.start, f.end))


def reasons(text: str) -> list[str]:
    """Why ``text`` looks like it carries instructions (empty: nothing found), in REASONS' order:
    each pattern's first match is enough, so the time does not grow with how many there are."""
    folded = fold(text).text
    found = {reason for reason, pattern in _PATTERNS if pattern.search(folded) is not None}
    return [r for r in REASONS if r in found]


def substitute(pattern: re.Pattern[str], text: str, replacement: str | Callable[[re.Match[str]], str]) -> str:
    """``pattern.sub`` matched on the detection form of ``text``: each match's span of ``text``
    replaced (a callable replacement gets the match in the detection form)."""
    folded = fold(text)
    if folded.origin is None:
        return pattern.sub(replacement, text)
    out: list[str] = []
    pos = 0
    for m in pattern.finditer(folded.text):
        start, end = folded.span(m.start(), m.end())
        if start < pos:
            continue
        out.append(text[pos:start])
        out.append(replacement(m) if callable(replacement) else replacement)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def defuse_instructions(text: str) -> str:
    """``text`` with its instructions, requests for the prompt and fake delimiters replaced by
    :data:`REMOVED` (markers, role tags and template tokens the block rewrites itself)."""
    # To a fixed point: a replacement can join what stood around it into a new instruction
    # ("ignore" + "(instruction removed)").
    for _ in range(8):
        before = text
        for pattern in (_OVERRIDE, _PROMPT_REQUEST, _FAKE_DELIMITERS):
            text = substitute(pattern, text, REMOVED)
        if text == before:
            break
    return text


def strip_memory_blocks(text: str) -> str:
    """``text`` without the recalled-memory blocks it holds (``[RUSH_MEMORY] ... [/RUSH_MEMORY]``,
    in any spelling :data:`BLOCK_MARKER` knows): what an agent hands back to the write path with
    the block still in its prompt must not be stored again as new facts (a recall loop).

    A block whose end is missing runs to the end of the text; an end marker without its start
    ends a block that began before the text did, so the text before it goes too. Only bracketed
    markers count: the bare word ("rush_memory") in a sentence removes nothing."""
    folded = fold(text)
    if _RUSH.search(folded.text) is None:  # every marker spells the word: most texts end here
        return text
    markers: list[tuple[int, int, bool]] = []  # (start, end, closing) in ``text``
    for m in BLOCK_MARKER.finditer(folded.text):
        found = m.group()
        if found[:1].isalnum():  # no bracket or slash before the word: not a marker
            continue
        markers.append((*folded.span(m.start(), m.end()), "/" in found))
    if not markers:
        return text
    out: list[str] = []
    pos = 0
    inside = False
    for start, end, closing in markers:
        if closing:
            pos, inside = max(pos, end), False
        elif not inside:
            out.append(text[pos:start])
            pos, inside = end, True
    if not inside:
        out.append(text[pos:])
    return "".join(out)
