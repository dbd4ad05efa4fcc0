"""``POST /recall``: memories relevant to a query, and the prompt block; the one route that
publishes metrics (latency, memories returned, empty recalls, reranker fallbacks)."""

from __future__ import annotations

import time

from aws_lambda_powertools.event_handler.api_gateway import Router
from aws_lambda_powertools.metrics import MetricUnit

from rushmem.http.identity import caller_user_id
from rushmem.lifecycle import get_service
from rushmem.observability import logger, metrics
from rushmem.routes.request import claims
from rushmem_contract import schemas
from rushmem_contract.models import RecallResult

router = Router()


@router.post(
    "/recall",
    summary="Memories relevant to a query, and the prompt block",
    responses={
        **schemas.COMMON_ERRORS,
        200: schemas.documented("The memories, best first, and the prompt block", RecallResult),
        413: schemas.documented("The query is longer than AGENT_MEMORY_MAX_QUERY_CHARS", schemas.ErrorBody),
    },
)
def recall(request: schemas.RecallRequest) -> RecallResult:
    user_id = caller_user_id(claims(router), request.user_id)
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
        explain=request.explain,
        explain_ids=request.explain_ids,
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
