"""The recall query's pure parts (agent_memory.store.memories.recall)."""

from __future__ import annotations

import pytest

from agent_memory.store.memories.recall import text_query


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("When did Caroline go?", "When or did or Caroline or go"),
        ("a & b | !c ':* (((", "a or b or c"),
        ('-not "quoted" OR or', "not or quoted"),
        ("", ""),
    ],
)
def test_text_query_keeps_only_words_joined_by_or(text: str, expected: str) -> None:
    assert text_query(text) == expected
