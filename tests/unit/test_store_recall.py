"""The recall query's pure parts (rushmem.store.memories.recall, .filters)."""

from __future__ import annotations

import datetime as dt

import pytest

from rushmem.store.memories.filters import FILTERS, filter_params, filter_shape, filters_sql
from rushmem.store.memories.recall import text_query
from rushmem_contract.models import MemoryFilters


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("When did Caroline go?", "When or did or Caroline or go"),
        ("a & b | !c ':* (((", "a or b or c"),
        ('-not "quoted" OR or', "not or quoted"),
        ("", ""),
        # The subject of almost every memory: searched, it matched them all (issue 45's absence cases).
        ("Who teaches the user's boy?", "Who or teaches or the or s or boy"),
        ("What do users of the User page see?", "What or do or of or the or page or see"),
    ],
)
def test_text_query_keeps_only_words_joined_by_or(text: str, expected: str) -> None:
    assert text_query(text) == expected


def test_every_filter_the_contract_accepts_has_its_row_in_the_store() -> None:
    """A field of MemoryFilters without a row would be accepted at every door and then ignored:
    the recall would not narrow."""
    assert [f.name for f in FILTERS] == list(MemoryFilters.model_fields)
    full = MemoryFilters(
        categories=["fact"], metadata={"a": 1}, created_after=dt.datetime(2026, 1, 1, tzinfo=dt.UTC),
        created_before=dt.datetime(2026, 2, 1, tzinfo=dt.UTC),
    )  # fmt: skip
    assert [f.name for f in filter_shape(full)] == ["categories", "metadata", "created_after", "created_before"]
    assert filter_shape(MemoryFilters()) == filter_shape(None) == ()
    assert filters_sql(filter_shape(full)).count(" AND ") == 4
    assert set(filter_params(None)) == {f.param for f in FILTERS}


def test_a_long_query_searches_each_word_once_and_at_most_the_bound() -> None:
    """Issue 32: the text leg's cost grew with the words of a pasted message times the rows they match."""
    from rushmem.store.memories.recall import MAX_TEXT_TERMS

    assert text_query("Tea tea TEA coffee tea") == "Tea or coffee"
    long = " ".join(f"word{i}" for i in range(10 * MAX_TEXT_TERMS))
    assert text_query(long).split(" or ") == [f"word{i}" for i in range(MAX_TEXT_TERMS)]
