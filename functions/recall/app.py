"""RecallFunction: the read path behind API Gateway HTTP API (payload format 2.0).

Routes parse the request (pydantic, via the resolver's validation), work out whose memories
they may touch, call one Memory method and shape the answer. Errors become HTTP in
agent_memory.http.handlers. Nothing is built at import time: the service (settings, connection,
embedder) is imported and created on the first request and reused while the container lives
(with SnapStart, before the snapshot: agent_memory.lifecycle).
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import time
import uuid
import warnings
from typing import TYPE_CHECKING, Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.utilities.typing import LambdaContext

from agent_memory import __version__
from agent_memory.http.body import base64_body, parse_json_body
from agent_memory.http.handlers import error_response, install_error_handlers
from agent_memory.http.identity import caller_user_id, jwt_claims, requester
from agent_memory.http.oauth import (
    AUTHORIZATION_SERVER_PATH,
    METADATA_PATHS,
    authorization_server_metadata,
    protected_resource_metadata,
    public_base_url,
)
from agent_memory.http.openapi import openapi_document, swagger_html
from agent_memory.http.page import HEADERS as PAGE_HEADERS
from agent_memory.http.page import page_file
from agent_memory.lifecycle import get_service, register_shutdown_hooks, register_snapstart_hooks
from agent_memory.observability import logger, metrics, tracer
from agent_memory_contract import schemas
from agent_memory_contract.errors import InvalidInput, NotFound
from agent_memory_contract.models import (
    DEFAULT_PAGE,
    MAX_PAGE,
    Consistency,
    ExportPage,
    IngestOutcome,
    MemoryChanges,
    MemoryPage,
    MemoryRecord,
    ProjectId,
    RecallResult,
    StoredIds,
    UserId,
)

if TYPE_CHECKING:
    from agent_memory.mcp.http import McpEndpoint

# The body reader refuses lone surrogates, NaN and runaway nesting with a 400 (json.loads takes them).
app = APIGatewayHttpResolver(enable_validation=True, json_body_deserializer=parse_json_body)
app.configure_openapi(
    title="agent-memory",
    version=__version__,
    description="Long-term memory for AI agents: recall relevant memories as a [RUSH_MEMORY] prompt block; "
    "add, list, filter, read, change, export and forget memories; hand over finished conversations; read a "
    "user's usage and erasure receipts. Callers are either JWT-authenticated users (the user is the token's "
    "'sub') or IAM-signed trusted backends (which name the user with user_id).",
)
install_error_handlers(app, logger)
# With SnapStart, every route's request validation is built before the snapshot, not on a first request.
register_snapstart_hooks(warm=app.get_openapi_schema)
# Usage counts of reads on a reader wait in the container: written at SIGTERM or exit too.
register_shutdown_hooks()
# Only recall publishes metrics; the other routes flushing nothing is expected, not a problem.
# A metadata filter travels in the URL: kept well under URL limits (a longer one fits POST /recall).
MAX_FILTER_PARAM = 2048
warnings.filterwarnings("ignore", message="No application metrics to publish", category=UserWarning)


def _claims() -> dict[str, Any] | None:
    """The JWT's claims; None when no JWT authorizer vouched for the request (an IAM caller)."""
    return jwt_claims(app.current_event.raw_event)


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
    rerank_fallbacks = service.admin.rerank_fallbacks
    result = service.recall(
        query,
        user_id=user_id,
        project_id=request.project_id,
        limit=request.limit,
        now=request.now,
        filters=request.filters,
        consistency=request.consistency,
        as_of=request.as_of,
        include_inactive=request.include_inactive,
    )
    elapsed_ms = (time.perf_counter() - started) * 1000
    metrics.add_metric(name="RecallLatency", unit=MetricUnit.Milliseconds, value=elapsed_ms)
    metrics.add_metric(name="MemoriesReturned", unit=MetricUnit.Count, value=len(result.memories))
    metrics.add_metric(name="EmptyRecalls", unit=MetricUnit.Count, value=0 if result.memories else 1)
    # A reranker that timed out or failed (the recall kept the fused order); 0 without a reranker.
    metrics.add_metric(
        name="RerankFallbacks", unit=MetricUnit.Count, value=service.admin.rerank_fallbacks - rerank_fallbacks
    )
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
    return get_service().add(request.memories, user_id=user_id, project_id=request.project_id, source="api")


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
    categories: Annotated[str | None, Query(max_length=512, description="Any of these, comma-separated.")] = None,
    metadata: Annotated[
        str | None, Query(max_length=MAX_FILTER_PARAM, description='Containing this JSON object: {"team":"web"}')
    ] = None,
    created_after: Annotated[str | None, Query(max_length=64, description="Created at or after (ISO 8601).")] = None,
    created_before: Annotated[str | None, Query(max_length=64, description="Created before (ISO 8601).")] = None,
    consistency: Annotated[Consistency, Query(description=schemas.CONSISTENCY_HELP)] = "eventual",
    as_of: Annotated[str | None, Query(max_length=64, description=schemas.AS_OF_HELP)] = None,
) -> MemoryPage:
    owner = caller_user_id(_claims(), user_id)
    filters = schemas.list_filters(categories, metadata, created_after, created_before)
    return get_service().list(
        user_id=owner,
        project_id=project_id,
        limit=limit,
        cursor=cursor,
        include_inactive=include_inactive,
        filters=filters,
        consistency=consistency,
        as_of=schemas.as_of_param(as_of),
    )


@app.get(
    "/memories/export",
    summary="Everything the caller has, as import lines (a page; follow next_cursor)",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("A page of import lines", ExportPage)},
)
def export_memories(
    user_id: Annotated[UserId | None, Query()] = None,
    history: Annotated[bool, Query(description="Each line with its memory's recorded changes.")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_PAGE,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
    consistency: Annotated[Consistency, Query(description=schemas.CONSISTENCY_HELP)] = "eventual",
    as_of: Annotated[str | None, Query(max_length=64, description=schemas.AS_OF_HELP)] = None,
) -> ExportPage:
    owner = caller_user_id(_claims(), user_id)
    return get_service().export(
        user_id=owner,
        history=history,
        limit=limit,
        cursor=cursor,
        consistency=consistency,
        as_of=schemas.as_of_param(as_of),
    )


@app.get(
    "/memories/<memory_id>",
    summary="One of the caller's memories",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("The memory (live or not)", MemoryRecord)},
)
def get_memory(
    memory_id: Annotated[uuid.UUID, Path()],
    user_id: Annotated[UserId | None, Query()] = None,
    consistency: Annotated[Consistency, Query(description=schemas.CONSISTENCY_HELP)] = "eventual",
) -> MemoryRecord:
    owner = caller_user_id(_claims(), user_id)
    return get_service().get(memory_id, user_id=owner, consistency=consistency)


@app.patch(
    "/memories/<memory_id>",
    summary="Change one of the caller's memories (fields left out stay; null clears expires_at or metadata)",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("The memory as it now is", MemoryRecord),
        409: schemas.documented("Another memory of the same scope already states this content", schemas.ErrorBody),
        413: schemas.documented("The content is longer than AGENT_MEMORY_MAX_MEMORY_CHARS", schemas.ErrorBody),
    },
)
def update_memory(
    memory_id: Annotated[uuid.UUID, Path()],
    changes: MemoryChanges,
    user_id: Annotated[UserId | None, Query()] = None,
) -> MemoryRecord:
    owner = caller_user_id(_claims(), user_id)
    return get_service().update(memory_id, changes, user_id=owner, source="api")


@app.post(
    "/conversations",
    summary="Hand a finished conversation to the write path now and get what it stored",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("What the message did (duplicate: it was written before)", IngestOutcome),
        413: schemas.documented("Too many messages or memories, or one too long", schemas.ErrorBody),
        502: schemas.documented("The extraction or embedding provider failed", schemas.ErrorBody),
    },
)
def add_conversation(request: schemas.ConversationRequest) -> IngestOutcome:
    user_id = caller_user_id(_claims(), request.user_id)
    outcome = get_service().ingest_conversation(request.message(user_id))
    logger.info("conversation ingested", extra={"outcome": outcome.model_dump(mode="json", exclude={"ids"})})
    return outcome


def _not_served(setting: str) -> Response[Any]:
    event = app.current_event
    return error_response(
        404,
        "route_not_found",
        f"no route {event.http_method} {event.path}" + (f" ({setting} is off)" if setting else ""),
        request_id=event.request_context.request_id,
    )


def _docs_off() -> Response[Any] | None:
    """With AGENT_MEMORY_API_DOCS off, the docs routes answer as an unknown path does."""
    return None if get_service().settings.api_docs else _not_served("AGENT_MEMORY_API_DOCS")


@app.get("/openapi.json", include_in_schema=False)
def openapi_json() -> Response[Any]:
    return _docs_off() or Response(status_code=200, content_type="application/json", body=openapi_document(app))


@app.get("/docs", include_in_schema=False)
def swagger_page() -> Response[Any]:
    return _docs_off() or Response(status_code=200, content_type="text/html; charset=utf-8", body=swagger_html(app))


def _page(name: str) -> Response[Any]:
    """One of the memory page's files, when AGENT_MEMORY_WEB_PAGE is on (the page calls the routes above)."""
    if not get_service().settings.web_page:
        return _not_served("AGENT_MEMORY_WEB_PAGE")
    found = page_file(name)
    if found is None:
        return _not_served("")
    content_type, body = found
    return Response(status_code=200, content_type=content_type, body=body, headers=dict(PAGE_HEADERS))


@app.get("/", include_in_schema=False)
def memory_page() -> Response[Any]:
    return _page("index.html")


@app.get("/page/<name>", include_in_schema=False)
def memory_page_file(name: str) -> Response[Any]:
    return _page(name)


def _no_oauth(setting: str) -> Response[Any]:
    event = app.current_event
    return error_response(
        404,
        "route_not_found",
        f"no route {event.http_method} {event.path} (this API serves no OAuth metadata: {setting} is unset)",
        request_id=event.request_context.request_id,
    )


def _public_json(document: dict[str, Any]) -> Response[Any]:
    return Response(
        status_code=200,
        content_type="application/json",
        body=json.dumps(document),
        headers={"Cache-Control": "public, max-age=3600"},
    )


def _base_url() -> str:
    event = app.current_event
    return public_base_url({k.lower(): v for k, v in (event.headers or {}).items()}, event.request_context.domain_name)


def protected_resource() -> Response[Any]:
    """OAuth protected-resource metadata (RFC 9728) for MCP hosts: where to sign in. No authorizer in
    front of it (template.yaml); 404 when the API accepts no tokens (AGENT_MEMORY_OAUTH_ISSUER unset)."""
    settings = get_service().settings
    if not settings.oauth_issuer:
        return _no_oauth("AGENT_MEMORY_OAUTH_ISSUER")
    return _public_json(
        protected_resource_metadata(
            _base_url(), settings.oauth_issuer, settings.oauth_scopes, facade=settings.oauth_facade
        )
    )


for _path in METADATA_PATHS:
    app.get(_path, include_in_schema=False)(protected_resource)


@app.get(AUTHORIZATION_SERVER_PATH, include_in_schema=False)
def authorization_server() -> Response[Any]:
    """RFC 8414 metadata naming the issuer's endpoints with S256 PKCE (agent_memory.http.oauth says why)."""
    settings = get_service().settings
    if not settings.oauth_facade or not settings.oauth_authorization_endpoint or not settings.oauth_token_endpoint:
        return _no_oauth("AGENT_MEMORY_OAUTH_AUTHORIZATION_ENDPOINT")
    return _public_json(
        authorization_server_metadata(
            _base_url(), settings.oauth_authorization_endpoint, settings.oauth_token_endpoint, settings.oauth_scopes
        )
    )


@app.get(
    "/memories/<memory_id>/history",
    summary="Every recorded change of one of the caller's memories, oldest first",
    responses={**schemas.COMMON_ERRORS, 200: schemas.documented("The memory's history", schemas.MemoryHistory)},
)
def memory_history(
    memory_id: Annotated[uuid.UUID, Path()],
    user_id: Annotated[UserId | None, Query()] = None,
    consistency: Annotated[Consistency, Query(description=schemas.CONSISTENCY_HELP)] = "eventual",
) -> schemas.MemoryHistory:
    owner = caller_user_id(_claims(), user_id)
    events = get_service().history(memory_id, user_id=owner, consistency=consistency)
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
    if not get_service().delete(memory_id, user_id=owner, source="api"):
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
    authorizer = app.current_event.raw_event.get("requestContext", {}).get("authorizer") or {}
    iam = authorizer.get("iam") if isinstance(authorizer, dict) else None
    iam_arn = iam.get("userArn") if isinstance(iam, dict) else None
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
    own = caller_user_id(claims, None) if claims is not None else None
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


@functools.cache
def _mcp_endpoint() -> McpEndpoint:
    # Imported here: the MCP SDK loads on the first /mcp request, never for the REST routes.
    from agent_memory.mcp.http import McpEndpoint

    return McpEndpoint(get_service)


@app.route("/mcp", method=["POST", "GET", "DELETE"], include_in_schema=False)
def mcp() -> Response[str]:
    """MCP (Streamable HTTP, stateless, JSON answers): the memory tools, for the caller's user."""
    event = app.current_event
    body = event.body or ""
    answer = _mcp_endpoint().answer(
        event.http_method,
        event.path,
        {k.lower(): v for k, v in (event.headers or {}).items()},
        base64_body(body) if event.is_base64_encoded else body.encode("utf-8"),
        _claims(),
        client=(event.request_context.http.source_ip, 0),
        request_id=event.request_context.request_id,
    )
    headers = {k: v for k, v in answer.headers.items() if k not in ("content-type", "content-length")}
    return Response(
        status_code=answer.status,
        content_type=answer.headers.get("content-type", "application/json"),
        body=answer.body.decode("utf-8"),
        headers=headers,
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_HTTP)
@tracer.capture_lambda_handler(capture_response=False)  # the answer holds a user's memories
@metrics.log_metrics(capture_cold_start_metric=True)
def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    response = app.resolve(event, context)
    fallbacks = get_service().admin.reader_fallbacks()
    if fallbacks:  # the reader endpoint failed: the writer served these reads
        metrics.add_metric(name="ReaderFallback", unit=MetricUnit.Count, value=fallbacks)
    return response
