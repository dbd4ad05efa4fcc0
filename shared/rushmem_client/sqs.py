"""The write path from an agent backend: validate a "conversation ended" message and send it to
the ingest queue (SQS)."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from http import HTTPStatus
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from rushmem_client.common import conversation_fields, region_from_host
from rushmem_contract.errors import ConfigurationError, InvalidInput, ServiceUnavailable
from rushmem_contract.models import ChatMessage, ConversationEnded, NewMemory, describe_errors

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

_SQS_HOST = re.compile(r"^sqs\.([a-z0-9-]+)\.amazonaws\.com(\.cn)?$")


@lru_cache(maxsize=8)
def _sqs_client(region: str | None) -> SQSClient:
    try:
        import boto3
    except ImportError:
        raise ConfigurationError(
            "publish_conversation_ended needs boto3: pip install 'rushmem-client[aws]' (or pass sqs=)"
        ) from None

    return boto3.client("sqs", region_name=region)


def publish_conversation_ended(
    queue_url: str,
    *,
    user_id: str,
    messages: Sequence[Mapping[str, Any] | ChatMessage] = (),
    memories: Sequence[str | Mapping[str, Any] | NewMemory] = (),
    project_id: str | None = None,
    conversation_id: str | None = None,
    ended_at: dt.datetime | None = None,
    region: str | None = None,
    sqs: SQSClient | None = None,
) -> str:
    """Validate the write-path message (rushmem_contract.models.ConversationEnded) and send it to
    the ingest queue; returns the SQS MessageId. FIFO queues get the user as message group and
    the conversation (or the message's hash) as deduplication id."""
    try:
        message = ConversationEnded.model_validate(
            conversation_fields(
                user_id=user_id,
                project_id=project_id,
                conversation_id=conversation_id,
                ended_at=ended_at,
                messages=messages,
                memories=memories,
            )
        )
    except ValidationError as exc:
        field = ".".join(str(p) for p in exc.errors()[0]["loc"]) or None
        raise InvalidInput(describe_errors(exc, "message"), field=field) from exc
    body = message.model_dump_json(exclude_none=True)
    params: dict[str, Any] = {"QueueUrl": queue_url, "MessageBody": body}
    if queue_url.endswith(".fifo"):
        params["MessageGroupId"] = message.user_id
        params["MessageDeduplicationId"] = hashlib.sha256((message.conversation_id or body).encode("utf-8")).hexdigest()
    client = sqs or _sqs_client(region or region_from_host(urlsplit(queue_url).hostname or "", _SQS_HOST))
    return _send_sqs(client, params)


_SQS_THROTTLED = {"RequestThrottled", "ThrottlingException", "KmsThrottled"}
_SQS_CONFIGURATION = {
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
    "AccessDenied",
    "AccessDeniedException",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "InvalidAddress",
    "KmsAccessDenied",
    "KmsDisabled",
    "KmsNotFound",
}


def _send_sqs(client: SQSClient, params: dict[str, Any]) -> str:
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

    try:
        answer = client.send_message(**params)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code, text = str(error.get("Code", "")), str(error.get("Message", exc))
        status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
        if status >= HTTPStatus.INTERNAL_SERVER_ERROR or code in _SQS_THROTTLED:
            raise ServiceUnavailable(f"SQS: {code}: {text}") from exc
        if code in _SQS_CONFIGURATION or status == HTTPStatus.FORBIDDEN:
            raise ConfigurationError(f"SQS: {code}: {text}") from exc
        # The rest is about the message itself (e.g. longer than the queue's MaximumMessageSize).
        raise InvalidInput(f"SQS: {code}: {text}") from exc
    except (NoCredentialsError, NoRegionError) as exc:
        raise ConfigurationError(f"SQS: {exc}") from exc
    except BotoCoreError as exc:
        raise ServiceUnavailable(f"SQS: {exc}") from exc
    return str(answer["MessageId"])
