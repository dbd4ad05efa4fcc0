"""Entity keys from text, offline: what recall links memories and questions by."""

from __future__ import annotations

import pytest

from agent_memory.extraction.entities import MAX_ENTITIES, entity_key, entity_keys, extract_entities


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("When did Caroline go to the LGBTQ support group?", ["caroline", "lgbtq"]),
        ("Tim loves writing about Harry Potter and Game of Thrones.", ["tim", "harry potter", "game of thrones"]),
        ("Which city have both Jean and John visited?", ["jean", "john"]),
        ("The user works at Acme Corp. In Rome they met Dr. Smith.", ["acme corp", "rome", "smith"]),
        ("I'm deploying on AWS Lambda in New York City", ["aws lambda", "new york city", "aws"]),
    ],
)
def test_names_acronyms_and_multi_word_names_are_entities(text: str, expected: list[str]) -> None:
    assert extract_entities(text) == expected


def test_a_quoted_title_is_one_entity_and_a_possessive_is_the_name() -> None:
    found = extract_entities("Caroline's favourite book is 'Becoming Nicole' by Amy Ellis Nutt.")
    assert found == ["becoming nicole", "caroline", "amy ellis nutt"]
    assert "nicole" not in found  # the name inside the title is not a second entity


@pytest.mark.parametrize(
    "text",
    [
        "What did the user decide last week?",
        "On Friday in March the team met.",
        "After lunch, Before dinner, When possible.",
        "the user prefers dark mode",
    ],
)
def test_sentence_starters_calendar_words_and_lower_case_text_are_not_entities(text: str) -> None:
    assert extract_entities(text) == []


def test_keys_are_case_and_space_insensitive_and_unique() -> None:
    assert entity_key("  New   York ") == entity_key("new york") == "new york"
    assert entity_key("The Alchemist") == "alchemist"
    assert entity_key("Monday") is None and entity_key("—") is None
    assert entity_keys(["Rome", "ROME", "rome's", "Paris"]) == ["rome", "paris"]


def test_at_most_the_limit_of_entities() -> None:
    text = " ".join(f"Name{i} met." for i in range(40))
    assert len(extract_entities(text)) == MAX_ENTITIES
