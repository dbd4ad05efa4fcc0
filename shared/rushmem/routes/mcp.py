"""``/mcp``: MCP over Streamable HTTP (stateless, JSON answers), the memory tools for the caller's
user (the tools RUSHMEM_MCP_TOOLS names). The MCP SDK loads on the first request here, never
for the REST routes."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.api_gateway import Router

from rushmem.http.body import base64_body
from rushmem.lifecycle import get_service
from rushmem.routes.request import claims, headers, http_event

if TYPE_CHECKING:
    from rushmem.mcp.http import McpEndpoint

router = Router()


@functools.cache
def _endpoint(surface: Literal["core", "all"]) -> McpEndpoint:
    from rushmem.mcp.http import McpEndpoint

    return McpEndpoint(get_service, surface=surface)


@router.route("/mcp", method=["POST", "GET", "DELETE"], include_in_schema=False)
def mcp() -> Response[str]:
    event = http_event(router)
    body = event.body or ""
    answer = _endpoint(get_service().settings.mcp_tools).answer(
        event.http_method,
        event.path,
        headers(router),
        base64_body(body) if event.is_base64_encoded else body.encode("utf-8"),
        claims(router),
        client=(event.request_context.http.source_ip, 0),
        request_id=event.request_context.request_id,
    )
    kept = {k: v for k, v in answer.headers.items() if k not in ("content-type", "content-length")}
    return Response(
        status_code=answer.status,
        content_type=answer.headers.get("content-type", "application/json"),
        body=answer.body.decode("utf-8"),
        headers=kept,
    )
