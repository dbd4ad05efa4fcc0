"""Tolerant parsing of LLM answers: whatever shape the JSON comes in, valid items survive."""

from __future__ import annotations

import json

import pytest

from rushmem.extraction.parsing import UnparseableOutput, parse_memories

ITEMS = [
    {"content": "The user prefers TypeScript.", "category": "preference", "is_evergreen": True},
    {"content": "The user is building an SVG editor.", "category": "project", "is_evergreen": True},
]


def parse(text: str, *, max_items: int = 20, max_chars: int = 2000) -> list[tuple[str, str, bool]]:
    result = parse_memories(text, max_items=max_items, max_chars=max_chars)
    return [(m.content, m.category, m.is_evergreen) for m in result.memories]


EXPECTED = [
    ("The user prefers TypeScript.", "preference", True),
    ("The user is building an SVG editor.", "project", True),
]


@pytest.mark.parametrize(
    "answer",
    [
        json.dumps(ITEMS),
        json.dumps({"memories": ITEMS}),
        json.dumps({"facts": ITEMS}),
        "```json\n" + json.dumps(ITEMS, indent=2) + "\n```",
        "Here are the memories I found:\n```\n" + json.dumps({"memories": ITEMS}) + "\n```\nLet me know!",
        "Sure! " + json.dumps(ITEMS) + " Hope this helps.",
        "[Note] the output follows: " + json.dumps(ITEMS),
        "<think>The user said they like TS [maybe]. {not json}</think>\n" + json.dumps({"memories": ITEMS}),
    ],
    ids=["array", "wrapped", "other-key", "fenced", "fence-and-prose", "prose", "bracket-in-prose", "think-block"],
)
def test_the_json_is_found_whatever_surrounds_it(answer: str) -> None:
    assert parse(answer) == EXPECTED


def test_one_object_instead_of_an_array() -> None:
    assert parse(json.dumps(ITEMS[0])) == EXPECTED[:1]


def test_an_array_cut_at_the_token_limit_keeps_its_complete_items() -> None:
    full = json.dumps({"memories": [*ITEMS, {"content": "The user lives in Lisbon.", "category": "identity"}]})
    cut = full[: full.index("Lisbon")]
    assert parse(cut) == EXPECTED
    assert parse(json.dumps(ITEMS)[:-30]) == EXPECTED[:1]


def test_an_empty_list_is_a_valid_answer() -> None:
    assert parse('{"memories": []}') == []
    assert parse("[]") == []


@pytest.mark.parametrize(
    "garbage",
    ["", "   ", "I'm sorry, I can't help with that.", "[1, 2, 3]", '{"status": "ok"}', "null", "{{{{[[[["],
)
def test_an_answer_without_memories_is_unparseable(garbage: str) -> None:
    with pytest.raises(UnparseableOutput):
        parse_memories(garbage, max_items=20, max_chars=2000)


def test_items_are_validated_one_by_one_and_invalid_ones_dropped_with_a_reason() -> None:
    answer = json.dumps(
        [
            ITEMS[0],
            {"category": "fact"},  # no content
            {"content": "   "},  # blank
            {"content": 42},  # not text
            None,
            "The user uses pnpm.",  # a bare string is a fact
            {"memory": "The user lives in Lisbon.", "category": "Identity ", "evergreen": "true"},
            {"content": "The user likes ramen.", "category": "hobby"},  # unknown category: kept as other
        ]
    )
    result = parse_memories(answer, max_items=20, max_chars=2000)
    assert [(m.content, m.category, m.is_evergreen) for m in result.memories] == [
        ("The user prefers TypeScript.", "preference", True),
        ("The user uses pnpm.", "fact", False),
        ("The user lives in Lisbon.", "identity", True),
        ("The user likes ramen.", "other", False),
    ]
    assert len(result.dropped) == 4
    assert result.dropped[0].startswith("item 1:") and "content" in result.dropped[0]


def test_counts_and_lengths_are_capped() -> None:
    many = [{"content": f"The user knows fact number {i}."} for i in range(30)]
    many.insert(3, {"content": "The user " + "really " * 400 + "likes tea."})
    result = parse_memories(json.dumps(many), max_items=5, max_chars=500)
    assert [m.content for m in result.memories] == [f"The user knows fact number {i}." for i in range(5)]
    assert any("characters; the limit is 500" in reason for reason in result.dropped)
    assert sum("more than 5 memories" in reason for reason in result.dropped) == 25


def test_the_same_fact_twice_in_one_answer_is_kept_once() -> None:
    answer = json.dumps([ITEMS[0], {**ITEMS[0], "content": "the user prefers typescript"}])
    result = parse_memories(answer, max_items=20, max_chars=2000)
    assert len(result.memories) == 1 and result.dropped == []


@pytest.mark.timeout(30)
def test_hostile_input_is_rejected_without_endless_work() -> None:
    # Only so many start positions are tried and the answer is cut first: this returns quickly.
    with pytest.raises(UnparseableOutput):
        parse_memories("[{" * 200_000, max_items=20, max_chars=2000)
