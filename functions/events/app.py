"""EventsFunction: publishes the change events still in the outbox (every 5 minutes, EventBridge
Scheduler; only deployed with EventBusName).

Events are published right after each write's commit; this drain sends what that first attempt
could not (the bus throttled or was unreachable, the function timed out), so a failed publish
delays an event but never loses it. Nothing is built at import time.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from rushmem.observability import logger, metrics, tracer
from rushmem.service import get_service


@logger.inject_lambda_context
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    service = get_service()
    if not service.settings.event_bus:
        # Deployed only with a bus; invoked by hand without one, it says so instead of failing.
        logger.warning("no AGENT_MEMORY_EVENT_BUS: nothing to publish to")
        return {"published": 0, "failed": 0, "pending": service.admin.events_status().pending, "bus": None}
    result = service.admin.drain_events()
    status = service.admin.events_status()
    # Low cardinality on purpose: no user dimension.
    metrics.add_metric(name="ChangeEventsPublished", unit=MetricUnit.Count, value=result.published)
    metrics.add_metric(name="ChangeEventsFailed", unit=MetricUnit.Count, value=result.failed)
    metrics.add_metric(name="ChangeEventsPending", unit=MetricUnit.Count, value=status.pending)
    logger.info("outbox drained", extra={"published": result.published, "failed": result.failed})
    return {
        "published": result.published,
        "failed": result.failed,
        "pending": status.pending,
        "bus": service.settings.event_bus,
        "last_error": result.last_error or status.last_error,
    }
