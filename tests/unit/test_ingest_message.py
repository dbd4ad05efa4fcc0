"""The "conversation ended" message: what makes it valid, what makes it invalid."""

from __future__ import annotations

import datetime as dt

import pytest
from pydantic import ValidationError

from agent_memory_contract.models import ConversationEnded


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
