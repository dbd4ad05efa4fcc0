"""Fact identity, the text query, the hash embedder, cursors."""

from __future__ import annotations

import datetime as dt
import uuid

import numpy as np
import pytest

from agent_memory.embeddings.hashing import HashEmbedder
from agent_memory.errors import InvalidInput
from agent_memory.service import _decode_cursor, _encode_cursor, content_hash, normalize_content
from agent_memory.store import _or_query


def test_the_same_fact_written_differently_has_one_hash() -> None:
    variants = ["Prefers TypeScript.", "prefers   typescript", "PREFERS TYPESCRIPT!", " Prefers\tTypeScript . "]
    assert len({content_hash(v) for v in variants}) == 1
    assert content_hash("Prefers TypeScript") != content_hash("Prefers JavaScript")


def test_normalize_keeps_case_and_collapses_whitespace() -> None:
    assert normalize_content("  The  tech\nstack is\tTypeScript ") == "The tech stack is TypeScript"


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
    assert _or_query(text) == expected


def test_hash_embedder_is_deterministic_unit_and_lexical() -> None:
    embedder = HashEmbedder(dimension=64)
    a, b, c = embedder.embed(["TypeScript editor", "typescript EDITOR", "ramen in Lisbon"])
    assert np.allclose(a, b)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    assert float(a @ c) < float(a @ b)
    assert np.linalg.norm(embedder.embed_query("!!!")) == pytest.approx(1.0, abs=1e-6)


def test_cursor_round_trip_and_garbage() -> None:
    row = {"created_at": dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC), "id": uuid.uuid4()}
    assert _decode_cursor(_encode_cursor(row)) == (row["created_at"], row["id"])
    with pytest.raises(InvalidInput) as err:
        _decode_cursor("not-a-cursor")
    assert err.value.field == "cursor"
