"""publish_conversation_ended validates the write-path message and sends it with boto3 (moto SQS)."""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from rushmem_client.sqs import _sqs_client, publish_conversation_ended
from rushmem_contract.errors import ConfigurationError, InvalidInput
from rushmem_contract.models import ChatMessage, ConversationEnded

REGION = "eu-west-1"
CHAT = [
    {"role": "user", "content": "We use TypeScript for the SVG editor."},
    {"role": "assistant", "content": "Noted."},
]


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": REGION,
    }.items():
        monkeypatch.setenv(key, value)
    _sqs_client.cache_clear()  # a client cached by another test would bypass this mock
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)
    _sqs_client.cache_clear()


def received(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    answer = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"])
    return list(answer.get("Messages", []))


def test_the_message_is_the_write_paths_model(sqs: Any) -> None:
    queue_url = sqs.create_queue(QueueName="ingest")["QueueUrl"]
    ended = dt.datetime(2025, 3, 12, 19, 3, tzinfo=dt.UTC)
    message_id = publish_conversation_ended(
        queue_url,
        user_id="u1",
        project_id="svg-editor",
        conversation_id="c-42",
        ended_at=ended,
        messages=[*CHAT, ChatMessage(role="user", content="Thanks!")],
        memories=["Deploys on Fridays"],
        sqs=sqs,
    )
    (message,) = received(sqs, queue_url)
    assert message["MessageId"] == message_id
    parsed = ConversationEnded.model_validate_json(message["Body"])
    assert parsed.user_id == "u1" and parsed.conversation_id == "c-42" and parsed.ended_at == ended
    assert [m.content for m in parsed.messages][-1] == "Thanks!"
    assert [m.content for m in parsed.memories] == ["Deploys on Fridays"]
    assert "null" not in message["Body"]  # absent fields are left out, not sent as null


def test_the_region_comes_from_the_queue_url(sqs: Any) -> None:
    queue_url = sqs.create_queue(QueueName="ingest")["QueueUrl"]
    assert REGION in queue_url
    publish_conversation_ended(queue_url, user_id="u1", messages=CHAT)
    assert len(received(sqs, queue_url)) == 1


def test_fifo_queues_group_by_user_and_deduplicate_by_conversation(sqs: Any) -> None:
    queue_url = sqs.create_queue(QueueName="ingest.fifo", Attributes={"FifoQueue": "true"})["QueueUrl"]
    publish_conversation_ended(queue_url, user_id="u1", conversation_id="c-1", messages=CHAT, sqs=sqs)
    publish_conversation_ended(queue_url, user_id="u1", conversation_id="c-1", messages=CHAT, sqs=sqs)
    (message,) = received(sqs, queue_url)
    assert message["Attributes"]["MessageGroupId"] == "u1"
    assert json.loads(message["Body"])["conversation_id"] == "c-1"


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"user_id": "u1"}, None),
        ({"user_id": "  ", "messages": CHAT}, "user_id"),
        ({"user_id": "u1", "messages": [{"role": "narrator", "content": "x"}]}, "messages.0.role"),
        ({"user_id": "u1", "memories": [{"content": ""}]}, "memories.0.content"),
    ],
)
def test_invalid_messages_are_refused_before_sending(sqs: Any, fields: dict[str, Any], field: str | None) -> None:
    queue_url = sqs.create_queue(QueueName="ingest")["QueueUrl"]
    with pytest.raises(InvalidInput) as refused:
        publish_conversation_ended(queue_url, sqs=sqs, **fields)
    assert refused.value.field == field
    assert received(sqs, queue_url) == []


def test_a_missing_queue_is_a_configuration_error(sqs: Any) -> None:
    missing = f"https://sqs.{REGION}.amazonaws.com/123456789012/nope"
    with pytest.raises(ConfigurationError, match="SQS"):
        publish_conversation_ended(missing, user_id="u1", messages=CHAT, sqs=sqs)


def test_without_boto3_publishing_is_one_configuration_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)  # as in a venv with the client alone (no [aws])
    _sqs_client.cache_clear()
    try:
        with pytest.raises(ConfigurationError, match=r"needs boto3: pip install 'rushmem-client\[aws\]'"):
            publish_conversation_ended(
                "https://sqs.eu-west-1.amazonaws.com/123456789012/ingest", user_id="u1", messages=CHAT
            )
    finally:
        _sqs_client.cache_clear()
