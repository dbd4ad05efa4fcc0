"""EventsFunction: publishes the change events still in the outbox (every 5 minutes, EventBridge
Scheduler; only deployed with EventBusName).

Events are published right after each write's commit; this drain sends what that first attempt
could not (the bus throttled or was unreachable, the function timed out), so a failed publish
delays an event but never loses it. With cells, each cell's outbox is drained (the events stay in
the cell that wrote them); a cell that fails does not keep the others' events waiting, and the run
then fails naming it. Nothing is built at import time.
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
        logger.warning("no RUSHMEM_EVENT_BUS: nothing to publish to")
        return {"published": 0, "failed": 0, "pending": service.admin.events_status().pending, "bus": None}
    published = failed = pending = 0
    errors: list[str | None] = []
    broken: dict[str, Exception] = {}
    for cell, admin in service.cell_admins().items():
        try:
            result = admin.drain_events()
            status = admin.events_status()
        except Exception as exc:
            if not service.cells.configured:
                raise
            logger.exception("outbox not drained", extra={"cell": cell})
            broken[cell] = exc
            continue
        published, failed, pending = published + result.published, failed + result.failed, pending + status.pending
        errors += [result.last_error, status.last_error]
    # Low cardinality on purpose: no user dimension.
    metrics.add_metric(name="ChangeEventsPublished", unit=MetricUnit.Count, value=published)
    metrics.add_metric(name="ChangeEventsFailed", unit=MetricUnit.Count, value=failed)
    metrics.add_metric(name="ChangeEventsPending", unit=MetricUnit.Count, value=pending)
    logger.info("outbox drained", extra={"published": published, "failed": failed})
    if broken:
        raise RuntimeError("outbox not drained in " + ", ".join(f"cell {c!r} ({e})" for c, e in broken.items()))
    return {
        "published": published,
        "failed": failed,
        "pending": pending,
        "bus": service.settings.event_bus,
        "last_error": next((e for e in errors if e), None),
    }
