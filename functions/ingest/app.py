"""IngestFunction: "conversation ended" SQS messages -> long-term memories.

Thin on purpose: parse each record's body, hand it to the service, log the outcome. Each
record succeeds or fails alone; the return value is SQS's partial batch response, so only
the failed messages are retried (and reach the DLQ after maxReceiveCount). The event source
mapping needs FunctionResponseTypes: [ReportBatchItemFailures].

The records are ingested in the service's batch (``ingest_batch``), which makes them durable
once, before the answer acknowledges them. When it could not (the database restarted in
between), every record of the batch is reported failed and SQS delivers them again; the
receipts turn the messages that did survive into no-ops.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import ValidationError

from rushmem.lifecycle import get_service, register_snapstart_hooks
from rushmem.observability import logger, metrics, tracer
from rushmem_contract.errors import AgentMemoryError, DatabaseUnavailable, InvalidInput, ProviderError
from rushmem_contract.models import ConversationEnded, refusal

if TYPE_CHECKING:
    from rushmem.service import IngestBatch


register_snapstart_hooks()


class InvalidMessage(InvalidInput):
    """The record's body is not a valid "conversation ended" message (it will never become one)."""


def _sent_at(record: SQSRecord) -> dt.datetime | None:
    """When SQS first received the message: the same on every redelivery."""
    raw = record.attributes.sent_timestamp
    return dt.datetime.fromtimestamp(int(raw) / 1000, tz=dt.UTC) if raw and raw.isdigit() else None


def _failure_kind(exc: Exception) -> str:
    if isinstance(exc, InvalidInput):
        return "invalid"
    if isinstance(exc, DatabaseUnavailable):
        return "database"
    if isinstance(exc, ProviderError):
        return "provider"
    return "error"


@tracer.capture_method
def record_handler(record: SQSRecord, batch: IngestBatch | None = None) -> dict[str, Any]:
    where = {"message_id": record.message_id, "receive_count": record.attributes.approximate_receive_count}
    try:
        try:
            message = ConversationEnded.model_validate_json(record.body)
        except ValidationError as exc:
            refused = refusal(exc, "body")
            raise InvalidMessage(f"{refused} (not a conversation-ended message)", field=refused.field) from exc
        ingest = batch.ingest_conversation if batch is not None else get_service().ingest_conversation
        outcome = ingest(message, observed_at=_sent_at(record))
    except Exception as exc:
        kind = _failure_kind(exc)
        metrics.add_metric(name="RecordsFailed", unit=MetricUnit.Count, value=1)
        if isinstance(exc, AgentMemoryError):
            logger.error("record failed", extra={**where, "failure": kind, "error": str(exc)})
        else:
            logger.exception("record failed", extra={**where, "failure": kind})
        raise
    result = outcome.model_dump(mode="json", exclude={"ids"})
    logger.info("record ingested", extra={**where, "outcome": result})  # nested: "created" is reserved
    metrics.add_metric(name="MemoriesCreated", unit=MetricUnit.Count, value=outcome.created)
    metrics.add_metric(name="MemoriesRefreshed", unit=MetricUnit.Count, value=outcome.refreshed)
    metrics.add_metric(name="ExtractedItemsDropped", unit=MetricUnit.Count, value=outcome.dropped)
    metrics.add_metric(name="MemoriesSuperseded", unit=MetricUnit.Count, value=outcome.superseded)
    # References to existing memories the guards refused (invented, unrelated, claimed twice, gone).
    metrics.add_metric(name="UpdatesIgnored", unit=MetricUnit.Count, value=outcome.updates_ignored)
    # Memories stored with personal data replaced, and not stored for it (RUSHMEM_PII).
    metrics.add_metric(name="MemoriesRedacted", unit=MetricUnit.Count, value=outcome.pii_redacted)
    metrics.add_metric(name="MemoriesDroppedForPii", unit=MetricUnit.Count, value=outcome.pii_dropped)
    if outcome.status == "duplicate":
        metrics.add_metric(name="DuplicateDeliveries", unit=MetricUnit.Count, value=1)
    return result


@logger.inject_lambda_context
@tracer.capture_lambda_handler
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    metrics.add_metric(name="RecordsReceived", unit=MetricUnit.Count, value=len(event.get("Records") or []))
    # Every failed record is reported, even when all fail: the response stays the partial
    # batch response and SQS retries exactly those messages. One processor per invocation
    # (it holds the batch's state), so in-process callers may invoke concurrently.
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    from rushmem.service import BatchNotDurable  # with the service: not needed to load the handler

    try:
        with get_service().ingest_batch() as batch:
            response = process_partial_response(
                event, functools.partial(record_handler, batch=batch), processor, context
            )
    except BatchNotDurable as exc:
        # The batch's writes may be lost: none of its messages may be acknowledged.
        metrics.add_metric(name="BatchFlushFailed", unit=MetricUnit.Count, value=1)
        logger.error("batch not flushed; every record will be delivered again", extra={"error": str(exc)})
        records = event.get("Records") or []
        return {"batchItemFailures": [{"itemIdentifier": r["messageId"]} for r in records]}
    return dict(response)
