"""Property tests (hypothesis): whatever arrives, the models and the parser either accept it within
their limits or reject it with a validation error; they never crash or let oversized input through."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from rushmem.extraction.parsing import UnparseableOutput, parse_memories
from rushmem_contract.models import CATEGORIES, MAX_CONTENT_CHARS, ConversationEnded, normalize_content

# Separators and control characters: whitespace to Python's split() but not all of it to pydantic.
blanks = st.text(alphabet=st.characters(categories=("Cc", "Zs", "Zl", "Zp")), max_size=6)
json_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=20,
)
roles = st.sampled_from(["user", "assistant", "system", "tool", "developer", "function", "robot", ""])
messages = st.lists(
    st.fixed_dictionaries(
        {"role": roles, "content": st.text(max_size=200)},
        optional={"created_at": st.sampled_from(["2026-11-29T10:15:00Z", "yesterday", "2026-11-29", 17])},
    ),
    max_size=5,
)
memories = st.lists(
    st.fixed_dictionaries(
        {"content": st.text(max_size=200) | blanks | st.builds("{}{}{}".format, blanks, st.text(max_size=20), blanks)},
        optional={
            "category": st.sampled_from([*CATEGORIES, "secret", ""]),
            "is_evergreen": st.booleans() | st.just("yes"),
            "metadata": st.dictionaries(st.text(max_size=5), json_scalars, max_size=3),
        },
    ),
    max_size=5,
)
bodies = st.fixed_dictionaries(
    {},
    optional={
        "user_id": st.text(max_size=30) | st.integers(),
        "project_id": st.none() | st.text(max_size=20),
        "conversation_id": st.none() | st.text(max_size=20),
        "ended_at": st.sampled_from(["2026-11-29T10:15:00Z", "not a date", None]),
        "messages": messages,
        "memories": memories,
        "unknown_field": json_values,
    },
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
def test_a_message_is_valid_within_limits_or_a_validation_error(body: dict[str, Any]) -> None:
    try:
        message = ConversationEnded.model_validate_json(json.dumps(body))
    except ValidationError:
        return
    assert message.user_id.strip() and len(message.user_id) <= 256
    assert message.messages or message.memories
    for memory in message.memories:
        # The content is already what the store will write: never empty once normalised.
        assert memory.content and memory.content == normalize_content(memory.content)
        assert len(memory.content) <= MAX_CONTENT_CHARS
        assert memory.category in CATEGORIES
    if message.ended_at is not None:
        assert message.ended_at.tzinfo is not None


@settings(max_examples=300)
@given(st.text(max_size=2000))
def test_any_text_is_json_to_the_parser_or_a_clear_error(text: str) -> None:
    try:
        extraction = parse_memories(text, max_items=5, max_chars=100)
    except UnparseableOutput:
        return
    assert len(extraction.memories) <= 5
    assert all(0 < len(m.content) <= 100 for m in extraction.memories)
    assert all(m.content == normalize_content(m.content) for m in extraction.memories)


@settings(max_examples=300)
@given(json_values, st.sampled_from(["{}", "```json\n{}\n```", "Here you go: {} Thanks!", "<think>hmm</think>{}"]))
def test_any_json_wrapped_any_way_parses_or_fails_cleanly(value: Any, wrapper: str) -> None:
    text = wrapper.replace("{}", json.dumps(value), 1)
    try:
        extraction = parse_memories(text, max_items=3, max_chars=50)
    except UnparseableOutput:
        return
    assert len(extraction.memories) <= 3
    assert all(m.category in CATEGORIES for m in extraction.memories)


@given(st.lists(st.text(min_size=1, max_size=60).filter(str.strip), min_size=1, max_size=8))
def test_well_formed_arrays_keep_their_items_in_order(contents: list[str]) -> None:
    text = json.dumps([{"content": c, "category": "fact", "is_evergreen": False} for c in contents])
    extraction = parse_memories(text, max_items=20, max_chars=100)
    kept = [m.content for m in extraction.memories]
    assert kept == sorted(set(kept), key=kept.index)  # no repeats
    assert len(kept) <= len(contents)
