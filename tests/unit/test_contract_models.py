"""The wire models (rushmem_contract.models): fact identity, the visible form, what the write
messages accept and refuse."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from rushmem_contract.inputs import visible_text
from rushmem_contract.models import (
    ConversationEnded,
    MemoryFilters,
    NewMemory,
    content_hash,
    normalize_content,
)


def test_the_same_fact_written_differently_has_one_hash() -> None:
    variants = ["Prefers TypeScript.", "prefers   typescript", "PREFERS TYPESCRIPT!", " Prefers\tTypeScript . "]
    assert len({content_hash(v) for v in variants}) == 1
    assert content_hash("Prefers TypeScript") != content_hash("Prefers JavaScript")


def test_normalize_keeps_case_and_collapses_whitespace() -> None:
    assert normalize_content("  The  tech\nstack is\tTypeScript ") == "The tech stack is TypeScript"


def test_timestamps_with_any_offset_become_utc() -> None:
    """Found by fuzzing the API: PostgreSQL refused an offset of -21:48 with a 500."""
    from pydantic import ValidationError

    from rushmem_contract.models import NewMemory

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

    from rushmem_contract.models import NewMemory

    with pytest.raises(ValidationError):
        NewMemory.model_validate(body)


@pytest.mark.parametrize("user_id", ["\x1f", "a\x00b", "bob\u200b", "\u202eevil"])
def test_ids_with_control_or_invisible_characters_are_refused(user_id: str) -> None:
    """Found by the message property test: '\\x1f' passed as a user id though it strips to nothing."""
    from pydantic import ValidationError

    from rushmem_contract.models import ConversationEnded

    with pytest.raises(ValidationError) as err:
        ConversationEnded.model_validate({"user_id": user_id, "memories": [{"content": "x"}]})
    assert "user_id" in str(err.value)


@pytest.mark.parametrize("content", ["\x1c", " \x1d\x1e\x1f ", "\x85", "\u2028\u3000"])
def test_content_that_is_only_whitespace_to_python_is_refused_as_empty(content: str) -> None:
    """Found by fuzzing the API (CI, stop 10): pydantic's strip keeps U+001C, which Python's
    split() treats as whitespace, so the stored content became '' and PostgreSQL's check
    constraint turned a bad request into a 500."""
    from pydantic import ValidationError

    from rushmem_contract.models import NewMemory

    with pytest.raises(ValidationError) as err:
        NewMemory.model_validate({"content": content})
    assert err.value.errors()[0]["loc"] == ("content",)


def test_content_is_kept_as_it_will_be_stored() -> None:
    from rushmem_contract.models import NewMemory

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


# ---- the "conversation ended" message ------------------------------------------------------


def test_the_issue_example_parses_with_unknown_fields_ignored() -> None:
    message = ConversationEnded.model_validate(
        {
            "user_id": "u-42",
            "project_id": "svg-editor",
            "conversation_id": "c-1",
            "ended_at": "2026-11-29T10:15:00Z",
            "messages": [{"role": "user", "content": "I prefer TypeScript.", "created_at": "2026-11-29T10:00:00"}],
            "tenant": "ignored",
        }
    )
    assert message.ended_at == dt.datetime(2026, 11, 29, 10, 15, tzinfo=dt.UTC)
    assert message.messages[0].created_at == dt.datetime(2026, 11, 29, 10, 0, tzinfo=dt.UTC)  # naive = UTC


def test_client_extracted_memories_alone_are_enough() -> None:
    message = ConversationEnded.model_validate({"user_id": "u", "memories": [{"content": "Uses pnpm"}]})
    assert message.memories[0].category == "fact" and message.messages == []


def test_openai_style_content_parts_become_text_and_blank_ids_become_none() -> None:
    message = ConversationEnded.model_validate(
        {
            "user_id": "u",
            "project_id": " ",
            "conversation_id": "",
            "messages": [
                {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "text", "text": "I use Vim."}, {"type": "image_url"}]},
            ],
        }
    )
    assert [m.content for m in message.messages] == ["Be brief.", "I use Vim."]
    assert message.project_id is None and message.conversation_id is None


@pytest.mark.parametrize(
    ("body", "where"),
    [
        ({"user_id": "", "messages": [{"role": "user", "content": "hi"}]}, "user_id"),
        ({"user_id": "   ", "memories": [{"content": "x"}]}, "user_id"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "user_id"),
        ({"user_id": "u"}, "messages"),
        ({"user_id": "u", "messages": [], "memories": []}, "messages"),
        ({"user_id": "u", "messages": [{"role": "narrator", "content": "hi"}]}, "messages.0.role"),
        ({"user_id": "u", "messages": [{"role": "user", "content": "x" * 20_001}]}, "messages.0.content"),
        ({"user_id": "u", "messages": [{"role": "user", "content": "hi"}] * 1001}, "messages"),
        ({"user_id": "u", "memories": [{"content": ""}]}, "memories.0.content"),
        ({"user_id": "u", "memories": [{"content": "x", "category": "gossip"}]}, "memories.0.category"),
        ({"user_id": "u", "ended_at": "yesterday", "memories": [{"content": "x"}]}, "ended_at"),
    ],
)
def test_invalid_messages_name_the_problem(body: dict[str, object], where: str) -> None:
    with pytest.raises(ValidationError) as info:
        ConversationEnded.model_validate(body)
    text = str(info.value)
    assert where.split(".")[0] in text
