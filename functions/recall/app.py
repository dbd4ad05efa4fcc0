"""RecallFunction: the read path behind API Gateway HTTP API (payload format 2.0).

This file only wires: the resolver (request validation, the OpenAPI document), the error mapping
(rushmem.http.errors), the routers by resource (rushmem.routes), SnapStart's hooks and the
one Logger/Tracer/Metrics. Nothing is built at import time: the service (settings, connection,
embedder) is imported and created on the first request and reused while the container lives (with
SnapStart, before the snapshot: rushmem.lifecycle).
"""

from __future__ import annotations

import warnings
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from rushmem import __version__
from rushmem.http.body import parse_json_body
from rushmem.http.errors import install_error_handlers, json_bodies_only
from rushmem.lifecycle import get_service, register_shutdown_hooks, register_snapstart_hooks
from rushmem.observability import logger, metrics, tracer
from rushmem.routes import docs, mcp, oauth, operations, page

# The body reader refuses lone surrogates, NaN and runaway nesting with a 400 (json.loads takes them).
app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=parse_json_body)
app.configure_openapi(
    title="rushmem",
    version=__version__,
    description="Long-term memory for AI agents: recall relevant memories as a [RUSH_MEMORY] prompt block; "
    "add, list, filter, read, change, export and forget memories; hand over finished conversations; read a "
    "user's usage and erasure receipts. Callers are either JWT-authenticated users (the user is the token's "
    "'sub') or IAM-signed trusted backends (which name the user with user_id).",
)
install_error_handlers(app, logger)
# POST, PUT, PATCH and any body only as declared JSON (415): what a cross-site page cannot send.
app.use(middlewares=[json_bodies_only])
for routes in (operations, docs, page, oauth, mcp):
    app.include_router(routes.router)
# With SnapStart, every route's request validation is built before the snapshot, not on a first request.
register_snapstart_hooks(warm=app.get_openapi_schema)
# Usage counts of reads on a reader wait in the container: written at SIGTERM or exit too.
register_shutdown_hooks()
# Only recall publishes metrics; the other routes flushing nothing is expected, not a problem.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler(capture_response=False)  # the answer holds a user's memories
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = app.resolve(event, context)
    fallbacks = get_service().admin.reader_fallbacks()
    if fallbacks:  # the reader endpoint failed: the writer served these reads
        metrics.add_metric(name="ReaderFallback", unit=MetricUnit.Count, value=fallbacks)
    return response
