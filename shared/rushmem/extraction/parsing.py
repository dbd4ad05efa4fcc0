"""Tolerant parsing of an LLM's answer into memory records.

Models wrap JSON in code fences, add prose around it, return one object instead of an
array, wrap the array in an object, or stop mid-array at the token limit. We take what is
there: find the JSON, then validate item by item; invalid items are dropped (with a reason,
logged), and counts and lengths are capped.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any

from pydantic import ValidationError

from rushmem.extraction.records import ExtractedMemory, Extraction, fact_reference
from rushmem_contract.models import fact_key

logger = logging.getLogger(__name__)

MAX_OUTPUT_CHARS = 100_000  # longer answers are cut before parsing (bounded work on garbage)
MAX_JSON_STARTS = 200  # positions tried as the start of the JSON value
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_LIST_KEYS = ("memories", "facts", "items", "results", "data")
_CONTENT_KEYS = ("content", "memory", "fact", "text")


class UnparseableOutput(ValueError):
    """The answer holds no JSON that could be memory records."""


def parse_memories(text: str, *, max_items: int, max_chars: int) -> Extraction:
    """Memory records from an LLM answer; raises :class:`UnparseableOutput` when there is no JSON."""
    value = find_json(text)
    items = _items_of(value)
    if items is None:
        raise UnparseableOutput(f"the JSON is neither a list of memories nor an object holding one: {_excerpt(text)}")
    return validate_items(items, max_items=max_items, max_chars=max_chars)


# An earlier fact of the answer, by position, as depends_on names it ("f1" is the first).
_POSITION = re.compile(r"^\W*f\s*(\d{1,4})\W*$", re.IGNORECASE)


def validate_items(items: Iterable[Any], *, max_items: int, max_chars: int) -> Extraction:
    """Validate item by item; drop (and log) invalid, too long, repeated and surplus items."""
    result = Extraction()
    seen: set[str] = set()
    # Per item of the answer, the fact it became (for the "f<n>" references of depends_on).
    became: dict[int, str] = {}
    for index, item in enumerate(items):
        if isinstance(item, str):
            item = {"content": item}
        try:
            memory = ExtractedMemory.model_validate(item)
        except ValidationError as exc:
            reasons = (f"{'.'.join(map(str, e['loc'])) or 'item'}: {e['msg']}" for e in exc.errors())
            _drop(result, index, "; ".join(reasons))
            continue
        if len(memory.content) > max_chars:
            _drop(result, index, f"content is {len(memory.content)} characters; the limit is {max_chars}")
            continue
        key = fact_key(memory.content)
        became[index] = memory.content
        if key in seen:
            continue  # the same fact twice in one answer: one memory, nothing lost
        seen.add(key)
        if len(result.memories) >= max_items:
            _drop(result, index, f"more than {max_items} memories in one conversation")
            continue
        result.memories.append(memory)
    result.memories = [_by_content(m, became) for m in result.memories]
    return result


def _by_content(memory: ExtractedMemory, became: dict[int, str]) -> ExtractedMemory:
    """A memory whose ``depends_on`` names facts of the answer by position ("f2"), naming them by
    content instead (:func:`fact_reference`): later steps drop facts (too many, held for review,
    personal data) and positions would move. A position that became no fact is left as it is (it
    is then logged and dropped with the other unknown references)."""
    if not any(_POSITION.match(r) for r in memory.depends_on):
        return memory
    refs = []
    for reference in memory.depends_on:
        position = _POSITION.match(reference)
        index = int(position.group(1)) - 1 if position else None
        refs.append(fact_reference(became[index]) if index is not None and index in became else reference)
    return memory.model_copy(update={"depends_on": refs})


def _drop(result: Extraction, index: int, reason: str) -> None:
    result.dropped.append(f"item {index}: {reason}")
    logger.warning("extracted item %d dropped: %s", index, reason)


def find_json(text: str) -> Any:
    """The first JSON value in ``text`` that could hold memories (fences, prose and <think> tolerated)."""
    text = _THINK.sub("", text[:MAX_OUTPUT_CHARS]).strip()
    if not text:
        raise UnparseableOutput("the answer is empty")
    candidates = [m.group(1).strip() for m in _FENCE.finditer(text)] + [text]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            value = _scan(candidate)
        if value is not None and _items_of(value) is not None:
            return value
    raise UnparseableOutput(f"no JSON memories in the answer: {_excerpt(text)}")


def _scan(text: str) -> Any:
    """Decode from each '[' or '{' in turn; salvage the complete objects of a cut-off array."""
    decoder = json.JSONDecoder()
    failed_array = False
    for tries, match in enumerate(re.finditer(r"[\[{]", text)):
        if tries >= MAX_JSON_STARTS:
            break
        start = match.start()
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            failed_array = failed_array or text[start] == "["
            continue
        if isinstance(value, dict) and failed_array and not _items_of_object(value):
            # An array that never closed (token limit): keep its complete objects.
            return [value, *_following_objects(decoder, text, end)]
        if _items_of(value) is not None:
            return value
    return None


def _following_objects(decoder: json.JSONDecoder, text: str, pos: int) -> list[Any]:
    found: list[Any] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            return found
        try:
            value, pos = decoder.raw_decode(text, pos)
        except ValueError:
            return found
        found.append(value)


def _items_of_object(value: dict[str, Any]) -> list[Any] | None:
    """The list an object wraps ({"memories": [...]}, or its only list), if any."""
    for key in _LIST_KEYS:
        if isinstance(value.get(key), list):
            return list(value[key])
    lists = [v for v in value.values() if isinstance(v, list)]
    if len(lists) == 1 and not any(k in value for k in _CONTENT_KEYS):
        return list(lists[0])
    return None


def _items_of(value: Any) -> list[Any] | None:
    """The memory items in a decoded value, or None when it cannot be a memory answer."""
    if isinstance(value, list):
        # Empty is a valid answer ("nothing worth keeping"); a list of numbers is not memories.
        return value if not value or any(isinstance(v, dict | str) for v in value) else None
    if isinstance(value, dict):
        wrapped = _items_of_object(value)
        if wrapped is not None:
            return wrapped
        if any(k in value for k in _CONTENT_KEYS):
            return [value]  # one memory instead of an array
    return None


def _excerpt(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
