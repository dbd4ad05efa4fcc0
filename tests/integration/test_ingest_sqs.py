"""The SQS round trip with moto: real messages go into a queue, the Lambda event is built from
what SQS returned, IngestFunction runs, what succeeded is deleted, the poison message is
delivered again and finally lands in the dead-letter queue."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import psycopg
import pytest
from moto import mock_aws

from rushmem_tools.local import runtime as lambda_local
from tests.support.environment import use_lambda_environment
from tests.support.ingest import REPO, TEMPLATE, conversation, failures

REGION = "eu-west-1"
VISIBILITY_S = 1


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch, database_url: str) -> Iterator[Any]:
    use_lambda_environment(monkeypatch, database_url)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.setenv(key, "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


def lambda_event(messages: list[dict[str, Any]], queue_arn: str) -> dict[str, Any]:
    """What the Lambda SQS poller hands the function for messages ReceiveMessage returned."""
    return {
        "Records": [
            {
                "messageId": m["MessageId"],
                "receiptHandle": m["ReceiptHandle"],
                "body": m["Body"],
                "attributes": m["Attributes"],
                "messageAttributes": {
                    name: {
                        "stringValue": value.get("StringValue"),
                        "binaryValue": value.get("BinaryValue"),
                        "stringListValues": [],
                        "binaryListValues": [],
                        "dataType": value["DataType"],
                    }
                    for name, value in (m.get("MessageAttributes") or {}).items()
                },
                "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs",
                "eventSourceARN": queue_arn,
                "awsRegion": REGION,
            }
            for m in messages
        ]
    }


def poll_once(sqs: Any, queue_url: str, queue_arn: str) -> tuple[list[str], list[str]]:
    """One poll of the event source mapping: receive, invoke, delete what succeeded."""
    received = sqs.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageAttributeNames=["All"]
    ).get("Messages", [])
    if not received:
        return [], []
    response = lambda_local.invoke(TEMPLATE, "IngestFunction", lambda_event(received, queue_arn))
    failed = failures(response)
    done = [m for m in received if m["MessageId"] not in failed]
    if done:
        sqs.delete_message_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
        )
    return [m["MessageId"] for m in received], failed


def test_only_the_poison_message_is_retried_and_dead_lettered(sqs: Any, database_url: str) -> None:
    dlq_url = sqs.create_queue(QueueName="conversations-dlq")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue_url = sqs.create_queue(
        QueueName="conversations",
        Attributes={
            "VisibilityTimeout": str(VISIBILITY_S),
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"}),
        },
    )["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]

    article = json.loads((REPO / "events" / "conversation-ended.json").read_text())["Records"][0]["body"]
    poison = '{"user_id": "u-9", "messages": [{"role": "user", "content": "I prefer tabs'
    sent = [
        sqs.send_message(QueueUrl=queue_url, MessageBody=article)["MessageId"],
        sqs.send_message(
            QueueUrl=queue_url,
            MessageBody=poison,
            MessageAttributes={"origin": {"DataType": "String", "StringValue": "chat-backend"}},
        )["MessageId"],
        sqs.send_message(QueueUrl=queue_url, MessageBody=json.dumps(conversation("u-7")))["MessageId"],
    ]

    received, failed = poll_once(sqs, queue_url, queue_arn)
    assert sorted(received) == sorted(sent) and failed == [sent[1]]
    with psycopg.connect(database_url) as conn:
        users = conn.execute("SELECT user_id, count(*) FROM user_memories GROUP BY 1 ORDER BY 1").fetchall()
    assert users == [("u-42", 3), ("u-7", 1)]

    time.sleep(VISIBILITY_S + 0.2)  # the failed message becomes visible again; the others were deleted
    received, failed = poll_once(sqs, queue_url, queue_arn)
    assert received == failed == [sent[1]]

    time.sleep(VISIBILITY_S + 0.2)  # received twice (maxReceiveCount): SQS moves it to the DLQ
    assert poll_once(sqs, queue_url, queue_arn) == ([], [])
    (dead,) = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10)["Messages"]
    assert dead["Body"] == poison
