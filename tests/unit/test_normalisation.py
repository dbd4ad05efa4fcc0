"""Fact identity, the text query, the hash embedder, cursors."""

from __future__ import annotations

import datetime as dt
import uuid

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_memory.embeddings.hashing import HashEmbedder
from agent_memory.service.pages import decode_cursor, encode_cursor
from agent_memory.store.recall import text_query
from agent_memory_contract.errors import InvalidInput
from agent_memory_contract.inputs import visible_text
from agent_memory_contract.models import MemoryFilters, MemoryRecord, NewMemory, content_hash, normalize_content


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
    assert text_query(text) == expected


def test_hash_embedder_is_deterministic_unit_and_lexical() -> None:
    embedder = HashEmbedder(dimension=64)
    a, b, c = embedder.embed(["TypeScript editor", "typescript EDITOR", "ramen in Lisbon"])
    assert np.allclose(a, b)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    assert float(a @ c) < float(a @ b)
    assert np.linalg.norm(embedder.embed_query("!!!")) == pytest.approx(1.0, abs=1e-6)


def test_cursor_round_trip_and_garbage() -> None:
    at = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    last = MemoryRecord(
        id=uuid.uuid4(),
        user_id="u",
        project_id=None,
        content="x",
        category="fact",
        is_evergreen=False,
        created_at=at,
        updated_at=at,
    )
    assert decode_cursor(encode_cursor(last)) == (at, last.id)
    with pytest.raises(InvalidInput) as err:
        decode_cursor("not-a-cursor")
    assert err.value.field == "cursor"


def test_timestamps_with_any_offset_become_utc() -> None:
    """Found by fuzzing the API: PostgreSQL refused an offset of -21:48 with a 500."""
    from pydantic import ValidationError

    from agent_memory_contract.models import NewMemory

    memory = NewMemory.model_validate({"content": "x", "expires_at": "3870-04-22T00:17:41-21:48"})
    assert memory.expires_at is not None
    assert memory.expires_at.utcoffset() == dt.timedelta(0)
    assert memory.expires_at == dt.datetime(3870, 4, 22, 22, 5, 41, tzinfo=dt.UTC)
    with pytest.raises(ValidationError):
        NewMemory.model_validate({"content": "x", "created_at": "9999-12-31T23:00:00-05:00"})


@pytest.mark.parametrize(
    "body",
    [
        {"content": "a\x00b"},
        {"content": "ok", "project_id": "p\x00"},
        {"content": "ok", "metadata": {"k": "v\x00"}},
        {"content": "ok", "metadata": {"k\x00": 1}},
        {"content": "ok", "metadata": {"big": "x" * 20_000}},
    ],
)
def test_text_postgres_cannot_hold_is_a_validation_error(body: dict[str, object]) -> None:
    """Found by fuzzing the API: NUL characters reached PostgreSQL and came back as a 500."""
    from pydantic import ValidationError

    from agent_memory_contract.models import NewMemory

    with pytest.raises(ValidationError):
        NewMemory.model_validate(body)


@pytest.mark.parametrize("user_id", ["\x1f", "a\x00b", "bob\u200b", "\u202eevil"])
def test_ids_with_control_or_invisible_characters_are_refused(user_id: str) -> None:
    """Found by the message property test: '\\x1f' passed as a user id though it strips to nothing."""
    from pydantic import ValidationError

    from agent_memory_contract.models import ConversationEnded

    with pytest.raises(ValidationError) as err:
        ConversationEnded.model_validate({"user_id": user_id, "memories": [{"content": "x"}]})
    assert "user_id" in str(err.value)


@pytest.mark.parametrize("content", ["\x1c", " \x1d\x1e\x1f ", "\x85", "\u2028\u3000"])
def test_content_that_is_only_whitespace_to_python_is_refused_as_empty(content: str) -> None:
    """Found by fuzzing the API (CI, stop 10): pydantic's strip keeps U+001C, which Python's
    split() treats as whitespace, so the stored content became '' and PostgreSQL's check
    constraint turned a bad request into a 500."""
    from pydantic import ValidationError

    from agent_memory_contract.models import NewMemory

    with pytest.raises(ValidationError) as err:
        NewMemory.model_validate({"content": content})
    assert err.value.errors()[0]["loc"] == ("content",)


def test_content_is_kept_as_it_will_be_stored() -> None:
    from agent_memory_contract.models import NewMemory

    memory = NewMemory.model_validate({"content": " Prefers\x1cTypeScript\u3000 "})
    assert memory.content == normalize_content(memory.content) == "Prefers TypeScript"


# ---- the visible form: what is stored is what a reader sees (issue 23) ---------------------


@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("ana\u200b.lima@example.com", "ana.lima@example.com"),  # zero-width space
        ("\uff41\uff4e\uff41 \u2460 \ufb01le", "ana 1 file"),  # fullwidth, circled digit, ligature (NFKC)
        ("ig\u034fnore", "ignore"),  # combining grapheme joiner: a mark that shows nothing
        ("ig\ufe0fnore", "ignore"),  # a variation selector inside a word
        ("pass\U000e0041\U000e0042word", "password"),  # tag characters
        ("\u202eevil\u202c", "evil"),  # bidi override
        ("\u0301 tea", " tea"),  # a mark with no base
        ("e\u200b\u0301", "\u00e9"),  # the invisible gone, the accent composes with its base
        ("caf\u00e9", "caf\u00e9"),
        ("\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f468\u200d\U0001f469\u200d\U0001f467"),  # an emoji
        (
            "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
            "\u0645\u06cc\u200c\u062e\u0648\u0627\u0647\u0645",
        ),  # Persian
        ("a\u200db", "ab"),  # a joiner inside a Latin word hides a split, it joins nothing
    ],
)
def test_the_visible_form(text: str, visible: str) -> None:
    assert visible_text(text) == visible


@given(st.text(max_size=60))
def test_the_visible_form_is_a_fixed_point(text: str) -> None:
    once = visible_text(text)
    assert visible_text(once) == once
    assert normalize_content(normalize_content(text)) == normalize_content(text)


def test_content_metadata_and_filters_are_stored_in_the_visible_form() -> None:
    memory = NewMemory(
        content="Mail \uff41na\u200b@example.com", metadata={"who": ["b\u200bob", {"x": "\uff11"}], "n": 1}
    )
    assert memory.content == "Mail ana@example.com"
    assert memory.metadata == {"who": ["bob", {"x": "1"}], "n": 1}
    assert MemoryFilters(metadata={"who": ["b\u200bob"]}).metadata == {"who": ["bob"]}
