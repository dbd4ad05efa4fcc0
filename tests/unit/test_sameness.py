"""The same-fact check consolidation merges by (agent_memory.ingest.sameness): a changed number,
date, name order or negation is never the same fact, however close the vectors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_memory.ingest.sameness import normalized, same_fact

NAMES = ["Anna", "Ben", "Chloe", "Dmitri", "Acme", "Globex"]
MONTHS = ["January", "March", "July", "October"]


def test_texts_equal_once_normalized_are_the_same_fact_at_any_similarity() -> None:
    assert normalized("  The user\u2019s editor is   Vim. ") == "the user's editor is vim"
    assert same_fact("The user's editor is Vim", "the user\u2019s editor is vim.", 0.0, threshold=0.95)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The user is 31 years old", "The user is 32 years old"),
        ("The user moved to Lyon on 3 March 2024", "The user moved to Lyon on 4 March 2024"),
        ("The user moved to Lyon in March", "The user moved to Lyon in July"),
        ("Anna employs Ben", "Ben employs Anna"),
        ("Anna owes Ben 50 euros", "Ben owes Anna 50 euros"),
        ("The user likes coffee", "The user does not like coffee"),
        ("The user has two cats", "The user has three cats"),
        ("The user eats meat", "The user never eats meat"),
    ],
)
def test_a_changed_anchor_is_never_the_same_fact(first: str, second: str) -> None:
    assert not same_fact(first, second, 0.999, threshold=0.9)


def test_close_texts_with_the_same_anchors_are_the_same_fact_only_above_the_threshold() -> None:
    a, b = "The user prefers TypeScript for web work", "The user prefers TypeScript for web work too"
    assert same_fact(a, b, 0.93, threshold=0.9)
    assert not same_fact(a, b, 0.85, threshold=0.9)


@given(
    st.sampled_from(NAMES),
    st.sampled_from(NAMES),
    st.integers(min_value=0, max_value=10_000),
    st.integers(min_value=1, max_value=10_000),
    st.sampled_from(MONTHS),
    st.booleans(),
)
def test_changing_any_number_name_order_month_or_negation_never_merges(
    a: str, b: str, amount: int, delta: int, month: str, negated: bool
) -> None:
    def fact(first: str, second: str, value: int, when: str, neg: bool) -> str:
        return f"{first} {'did not pay' if neg else 'paid'} {second} {value} euros in {when}"

    base = fact(a, b, amount, month, negated)
    changed = [
        fact(a, b, amount + delta, month, negated),
        fact(a, b, amount, MONTHS[(MONTHS.index(month) + 1) % len(MONTHS)], negated),
        fact(a, b, amount, month, not negated),
    ]
    if a != b:
        changed.append(fact(b, a, amount, month, negated))
    for other in changed:
        assert not same_fact(base, other, 1.0, threshold=0.5), (base, other)
