"""Facts over time as people state them (issue 32), on the real embedded PostgreSQL: a correction
inside one conversation supersedes, with valid time at the later message; consolidation never
settles an unordered pair by a coin flip; "current" is "valid now" at every door; a content edit
never rewrites the past; one slot has one current value across user-wide and project scope."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from agent_memory.service import Memory, get_service
from agent_memory_contract.models import ChatMessage, ConversationEnded, ImportLine
from agent_memory_tools.local import runtime as lambda_local
from tests.support.ingest import sqs_event, sqs_record
from tests.support.recall import TEMPLATE, body_of, invoke, with_body

USER = "facts-user"
T0 = dt.datetime(2026, 3, 1, 9, 0, tzinfo=dt.UTC)


def _said(*texts: str, start: dt.datetime = T0) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": text, "created_at": (start + dt.timedelta(minutes=5 * i)).isoformat()}
        for i, text in enumerate(texts)
    ]


def _current(service: Memory, user: str = USER, **kw: Any) -> list[str]:
    return sorted(m.content for m in service.list(user_id=user, **kw).memories)


# ---- 1. corrections inside one conversation --------------------------------------------------------


def test_a_correction_later_in_the_conversation_supersedes_the_earlier_value(lambda_env: str) -> None:
    """Before: both "is 6" and "is 7" were current, each dated at the conversation's end."""
    body = {
        "user_id": USER,
        "conversation_id": "c-daughter",
        "ended_at": (T0 + dt.timedelta(hours=1)).isoformat(),
        "messages": _said("My daughter is 6.", "She loves drawing horses.", "Actually, my daughter is 7."),
    }
    response = lambda_local.invoke(TEMPLATE, "IngestFunction", sqs_event(sqs_record(body)))
    assert response == {"batchItemFailures": []}
    service = get_service()
    assert _current(service) == ["The user's daughter is 7."]
    # Valid time at the messages: 6 held from the first message until the correction.
    then = service.list(user_id=USER, as_of=T0 + dt.timedelta(minutes=5)).memories
    assert [m.content for m in then] == ["The user's daughter is 6."]
    assert then[0].valid_from == T0 and then[0].valid_until == T0 + dt.timedelta(minutes=10)
    recalled = service.recall("How old is the user's daughter?", user_id=USER)
    assert [m.content for m in recalled.memories] == ["The user's daughter is 7."]


def test_post_conversations_chains_corrections_of_a_stored_value(lambda_env: str) -> None:
    service = get_service()
    service.add("The user's daughter is 5.", user_id=USER, observed_at=T0 - dt.timedelta(days=400))
    body = {"user_id": USER, "messages": _said("My daughter is 6.", "No wait, my daughter is 7 now.")}
    result = invoke(with_body("http-conversation.json", body))
    assert result["statusCode"] == 200, result
    outcome = body_of(result)
    assert outcome["superseded"] == 2, outcome
    assert _current(service) == ["The user's daughter is 7 now."]
    # The chain as it was said: 5 until 6 was said, 6 until 7 was.
    assert _current(service, as_of=T0 - dt.timedelta(days=1)) == ["The user's daughter is 5."]
    assert _current(service, as_of=T0 + dt.timedelta(minutes=1)) == ["The user's daughter is 6."]


def test_without_message_times_the_later_message_still_wins(service: Memory) -> None:
    ended = T0 + dt.timedelta(hours=1)
    outcome = service.ingest_conversation(
        ConversationEnded(
            user_id=USER,
            ended_at=ended,
            messages=[
                ChatMessage(role="user", content="I live in Lisbon."),
                ChatMessage(role="user", content="Sorry, I live in Porto."),
            ],
        )
    )
    assert outcome.superseded == 1
    assert _current(service) == ["The user lives in Porto."]
    assert json.dumps(outcome.model_dump(mode="json"))  # the outcome still serialises


# ---- 2. consolidation orders by valid time, and leaves what it cannot order -------------------------


def test_consolidation_leaves_values_said_at_the_same_instant_and_orders_the_rest_by_valid_time(
    service: Memory,
) -> None:
    """Before: ordered by created_at then id, so equal times were settled by the uuids (a coin flip),
    and a value true earlier but stored later superseded the one true after it."""
    pairs = [
        (f"The user's child number {n} is 6 years old", f"The user's child number {n} is 7 years old")
        for n in range(1, 4)
    ]
    lines = [ImportLine(user_id=USER, content=t, created_at=T0) for pair in pairs for t in pair]
    # True from June, stated in January; true from March, stated in February: June's is current.
    lines += [
        ImportLine(user_id=USER, content="The user lives in Porto", created_at=T0, valid_from=T0.replace(month=6)),
        ImportLine(user_id=USER, content="The user lives in Lisbon", created_at=T0.replace(month=2), valid_from=T0),
    ]
    service.import_(lines)
    report = service.admin.consolidate(restart=True)
    assert report.superseded == 1, report
    assert _current(service) == sorted([t for pair in pairs for t in pair] + ["The user lives in Porto"])
