"""RecallFunction: the read path behind API Gateway HTTP API (payload format 2.0).

Routes parse the request (pydantic, via the resolver's validation), work out whose memories
they may touch, call one MemoryService method and shape the answer. Errors become HTTP in
agent_memory.http.handlers. Nothing is built at import time: the service (settings, connection,
embedder) is created on the first request and reused while the container lives.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
import warnings
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory import __version__
from agent_memory.errors import InvalidInput, NotFound
from agent_memory.http import schemas
from agent_memory.http.handlers import install_error_handlers
from agent_memory.http.identity import caller_user_id, requester
from agent_memory.models import DEFAULT_PAGE, MAX_PAGE, MemoryPage, ProjectId, RecallResult, StoredIds, UserId
from agent_memory.observability import logger, metrics, tracer
from agent_memory.service import get_service

app = APIGatewayHttpResolver(enable_validation=True)
app.configure_openapi(
    title="agent-memory",
    version=__version__,
    description="Long-term memory for AI agents: recall relevant memories as a [RUSH_MEMORY] prompt block, "
    "add, list and forget memories, read a user's usage and erasure receipts. Callers are either "
    "JWT-authenticated users (the user is the token's "
    "'sub') or IAM-signed trusted backends (which name the user with user_id).",
)
install_error_handlers(app, logger)
# Only recall publishes metrics; the other routes flushing nothing is expected, not a problem.
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


def _claims() -> dict[str, Any]:
    return app.current_event.request_context.authorizer.jwt_claim


@app.post(
    "/recall",
    summary="Memories relevant to a query, and the prompt block",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("The memories, best first, and the prompt block", RecallResult),
        413: schemas.documented("The query is longer than AGENT_MEMORY_MAX_QUERY_CHARS", schemas.ErrorBody),
    },
)
def recall(request: schemas.RecallRequest) -> RecallResult:
    user_id = caller_user_id(_claims(), request.user_id)
    query = request.query_text()
    started = time.perf_counter()
    service = get_service()
    options = service.recall_options.but(include_inactive=True) if request.include_inactive else None
    result = service.recall(
        user_id, query, project_id=request.project_id, limit=request.limit, now=request.now, options=options
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    metrics.add_metric(name="RecallLatency", unit=MetricUnit.Milliseconds, value=elapsed_ms)
    metrics.add_metric(name="MemoriesReturned", unit=MetricUnit.Count, value=len(result.memories))
    metrics.add_metric(name="EmptyRecalls", unit=MetricUnit.Count, value=0 if result.memories else 1)
    logger.info(
        "recalled",
        extra={
            "user_id": user_id,
            "memories": len(result.memories),
            "ms": round(elapsed_ms, 1),
            "from_messages": request.messages is not None,
        },
    )
    return result


@app.post(
    "/memories",
    status_code=201,
    summary="Store memories now (no LLM)",
    responses={
        **schemas.COMMON_ERRORS,
        201: schemas.documented("Stored; ids in input order", StoredIds),
        413: schemas.documented("Too many memories, or one too long", schemas.ErrorBody),
    },
)
def add_memories(request: schemas.AddRequest) -> StoredIds:
    user_id = caller_user_id(_claims(), request.user_id)
    return get_service().remember(user_id, request.memories, project_id=request.project_id, source="api")


@app.get(
    "/memories",
    summary="A page of the caller's memories, newest first",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("A page and the next cursor", MemoryPage)},
)
def list_memories(
    user_id: Annotated[UserId | None, Query()] = None,
    project_id: Annotated[ProjectId | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    include_inactive: Annotated[bool, Query(description="Also superseded and expired memories.")] = False,
) -> MemoryPage:
    owner = caller_user_id(_claims(), user_id)
    return get_service().list_memories(
        owner, project_id=project_id, limit=limit, cursor=cursor, include_inactive=include_inactive
    )


@app.get(
    "/memories/<memory_id>/history",
    summary="Every recorded change of one of the caller's memories, oldest first",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("The memory's history", schemas.MemoryHistory)},
)
def memory_history(
    memory_id: Annotated[uuid.UUID, Path()],
    user_id: Annotated[UserId | None, Query()] = None,
) -> schemas.MemoryHistory:
    owner = caller_user_id(_claims(), user_id)
    events = get_service().history(owner, memory_id)
    if not events:
        # Same answer for another user's memory and for none at all: nothing leaks.
        raise NotFound("no history for this memory and user")
    return schemas.MemoryHistory(events=events)


@app.delete(
    "/memories/<memory_id>",
    summary="Forget one of the caller's memories",
    responses={**schemas.COMMON_ERRORS, 204: schemas.no_content("Deleted")},
)
def forget_memory(
    memory_id: Annotated[uuid.UUID, Path()],
    user_id: Annotated[UserId | None, Query()] = None,
) -> Response[None]:
    owner = caller_user_id(_claims(), user_id)
    if not get_service().forget_memory(owner, memory_id, source="api"):
        # The same answer whether the id exists for another user or not at all: nothing leaks.
        raise NotFound("no memory with this id for this user")
    return Response(status_code=204)


@app.delete(
    "/memories",
    summary="Forget everything stored about a user (user_id is required, also with a JWT); the erasure receipt",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented(
            "All deleted: the receipt (counts, time, requester; the user only as a keyed hash), also "
            "readable later at /erasures/{id}",
            schemas.ErasureReceipt,
        ),
    },
)
def forget_all(user_id: Annotated[UserId | None, Query()] = None) -> schemas.ErasureReceipt:
    if user_id is None:
        # Naming the user is required even with a token, so a stray DELETE never wipes anything.
        raise InvalidInput("user_id is required to forget all memories", field="user_id")
    claims = _claims()
    owner = caller_user_id(claims, user_id)
    iam_arn = app.current_event.request_context.authorizer.iam.user_arn
    return get_service().forget_user(owner, requested_by=requester(claims, iam_arn))


@app.get(
    "/erasures/<erasure_id>",
    summary="An erasure receipt: what forgetting a user deleted, when, at whose request",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("The receipt", schemas.ErasureReceipt),
    },
)
def erasure(erasure_id: Annotated[uuid.UUID, Path()]) -> schemas.ErasureReceipt:
    claims = _claims()
    # A token reads only its own user's receipts (the same 404 otherwise); an IAM caller any.
    own = caller_user_id(claims, None) if claims else None
    return get_service().erasure(erasure_id, user_id=own)


@app.get(
    "/usage",
    summary="A user's usage per day (recalls, conversations, writes, LLM and embedding calls, tokens) and its cost",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("Usage lines and estimated cost", schemas.UsageReport)},
)
def usage(
    user_id: Annotated[UserId | None, Query()] = None,
    start: Annotated[dt.date | None, Query(alias="from", description="First UTC day (default: 29 days ago).")] = None,
    end: Annotated[dt.date | None, Query(alias="to", description="Last UTC day, included (default: today).")] = None,
) -> schemas.UsageReport:
    owner = caller_user_id(_claims(), user_id)
    return get_service().usage(owner, start=start, end=end)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler(capture_response=False)  # the answer holds a user's memories
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
