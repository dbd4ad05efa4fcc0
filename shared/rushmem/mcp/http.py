"""MCP over Streamable HTTP inside a Lambda function: one HTTP request in, one answer out.

API Gateway hands RecallFunction the request as a format 2.0 event; the ``/mcp`` route passes its
method, headers and body here. The request is served by the SDK's own Streamable HTTP code
(``StreamableHTTPSessionManager`` in stateless, JSON-response mode) driven in-process through a
synthesized ASGI scope: no web server, no session, no SSE, and both protocol eras the SDK speaks
(the ``initialize`` handshake of 2025-xx clients, and 2026-07-28's self-contained requests).

Whose memories a request touches is settled before the SDK sees it (:func:`caller_identity`) and
travels in the ASGI scope, where the tools read it back (:func:`identity_of`); no client-sent
header or tool argument can change it afterwards.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from pydantic import TypeAdapter, ValidationError
from starlette.types import Message

from rushmem.mcp.tools import Identity, MemoryTools, Surface, build_server
from rushmem.observability import logger
from rushmem.service import Caller, Memory
from rushmem_contract.errors import AgentMemoryError, ConfigurationError, Forbidden, InvalidInput
from rushmem_contract.kinds import error_kind
from rushmem_contract.models import ProjectId, UserId

USER_HEADER = "x-memory-user"
PROJECT_HEADER = "x-memory-project"
SCOPE_KEY = "rushmem.identity"
# An MCP request is one tool call; far below this, but a stuck request must not hold the function.
DEFAULT_TIMEOUT_S = 30.0
JSONRPC_INVALID_REQUEST = -32600

_user_id: TypeAdapter[str] = TypeAdapter(UserId)
_project_id: TypeAdapter[str] = TypeAdapter(ProjectId)


@dataclasses.dataclass(frozen=True)
class HttpAnswer:
    status: int
    headers: dict[str, str]
    body: bytes


# --------------------------------------------------------------------------------------
# identity
# --------------------------------------------------------------------------------------


def _header_id(headers: Mapping[str, str], name: str, adapter: TypeAdapter[str]) -> str | None:
    value = headers.get(name)
    if value is None or not value.strip():
        return None
    try:
        return adapter.validate_python(value)
    except ValidationError as exc:
        reason = exc.errors()[0].get("msg", "invalid value")
        raise InvalidInput(f"the {name} header is not a valid id: {reason}", field=name) from exc


def caller_identity(claims: Mapping[str, Any] | None, headers: Mapping[str, str]) -> Identity:
    """Who the caller acts for, from what API Gateway verified (``headers`` keys in lower case).

    JWT: the token's ``sub`` (an ``X-Memory-User`` naming someone else is refused).
    IAM (no claims): the trusted backend names the user in ``X-Memory-User``, set once on its MCP
    client, not by the model. ``X-Memory-Project`` is the session's default project.
    """
    requested = _header_id(headers, USER_HEADER, _user_id)
    project = _header_id(headers, PROJECT_HEADER, _project_id)
    caller = Caller.for_request(claims, door="mcp")  # a sub that breaks the user-id rules: 403 naming the claim
    if caller.user is not None:
        if requested is not None and requested != caller.user:
            raise Forbidden(f"the {USER_HEADER} header names another user; a token only acts for its own 'sub'")
        return Identity(user_id=caller.user, project_id=project)
    if requested is None:
        raise InvalidInput(
            f"the {USER_HEADER} header is required: a request without a JWT must name the user it acts for",
            field=USER_HEADER,
        )
    return Identity(user_id=requested, project_id=project)


def identity_of(ctx: Context) -> Identity:
    """The identity :class:`McpEndpoint` put into the request's ASGI scope."""
    request = ctx.request_context.request
    identity = request.scope.get(SCOPE_KEY) if request is not None else None
    if not isinstance(identity, Identity):
        raise ConfigurationError("MCP request without a caller identity (not served through McpEndpoint)")
    return identity


def refusal(status: int, message: str, data: dict[str, Any], headers: Mapping[str, str] | None = None) -> HttpAnswer:
    """A request refused before the SDK saw it, as MCP clients read it: the HTTP status and a
    JSON-RPC error body without an id, whose message the SDK's client surfaces (a plain JSON body
    would become a generic error)."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": JSONRPC_INVALID_REQUEST, "message": message, "data": data}}
    return HttpAnswer(status, {"content-type": "application/json", **(headers or {})}, json.dumps(body).encode())


def error_answer(exc: AgentMemoryError, request_id: str | None = None) -> HttpAnswer:
    """A service error's refusal: the error table's status, code and public wording."""
    kind = error_kind(exc)
    data: dict[str, Any] = {"code": kind.code}
    if isinstance(exc, InvalidInput) and exc.field:
        data["field"] = exc.field
    if request_id:
        data["request_id"] = request_id
    return refusal(kind.status, kind.message(exc), data)


def not_allowed(method: str, request_id: str | None = None) -> HttpAnswer:
    """GET (the server-to-client stream) and DELETE (ending a session) have no meaning without
    sessions; the SDK would hold a GET open as an SSE stream, which a Lambda cannot."""
    return refusal(
        HTTPStatus.METHOD_NOT_ALLOWED.value,
        f"{method.upper()} is not allowed: this MCP endpoint is stateless, POST each JSON-RPC request",
        {"code": "method_not_allowed", **({"request_id": request_id} if request_id else {})},
        {"allow": "POST"},
    )


# --------------------------------------------------------------------------------------
# one request through the SDK's Streamable HTTP transport
# --------------------------------------------------------------------------------------


def _rpc_summary(body: bytes) -> dict[str, Any]:
    """The JSON-RPC method (and tool name) of a request, for the log; never arguments."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    if not isinstance(message, dict):
        return {}
    out: dict[str, Any] = {"rpc": str(message.get("method"))[:64]}
    params = message.get("params")
    if out["rpc"] == "tools/call" and isinstance(params, dict):
        out["tool"] = str(params.get("name"))[:64]
    return out


class McpEndpoint:
    """The memory tools behind one HTTP path; built once per process, serves one request per call."""

    def __init__(
        self, service: Callable[[], Memory], *, surface: Surface = "core", timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.server: MCPServer[Any] = build_server(MemoryTools(service, identity_of), surface)
        self.timeout_s = timeout_s
        # The SDK logs three INFO lines per stateless request (manager started, session
        # terminated, manager stopped): noise in a function's log.
        logging.getLogger("mcp").setLevel(logging.WARNING)

    def answer(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        claims: Mapping[str, Any] | None,
        *,
        client: tuple[str, int] | None = None,
        request_id: str | None = None,
    ) -> HttpAnswer:
        """Answer one HTTP request to the MCP path (blocking; runs its own event loop).

        ``headers`` keys in lower case; ``claims`` are the JWT authorizer's (None for IAM callers);
        ``request_id`` (API Gateway's) goes into refusals, as in the REST API's error bodies.
        """
        started = time.perf_counter()
        identity: Identity | None = None
        if method.upper() != "POST":
            answer = not_allowed(method, request_id)
        else:
            try:
                identity = caller_identity(claims, headers)
            except AgentMemoryError as exc:
                answer = error_answer(exc, request_id)
            else:
                answer = anyio.run(self._serve, method, path, headers, body, identity, client)
        logger.info(
            "mcp",
            extra={
                "user_id": identity.user_id if identity else None,
                "status": answer.status,
                "ms": round((time.perf_counter() - started) * 1000, 1),
                **_rpc_summary(body),
            },
        )
        return answer

    async def _serve(
        self,
        method: str,
        path: str,
        headers: Mapping[str, str],
        body: bytes,
        identity: Identity,
        client: tuple[str, int] | None,
    ) -> HttpAnswer:
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0", "spec_version": "2.3"},
            "http_version": "1.1",
            "method": method.upper(),
            "scheme": "https",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [
                (k.lower().encode("latin-1", "replace"), v.encode("latin-1", "replace")) for k, v in headers.items()
            ],
            "client": client,
            "server": None,
            SCOPE_KEY: identity,
        }
        status = HTTPStatus.INTERNAL_SERVER_ERROR.value
        answer_headers: dict[str, str] = {}
        chunks: list[bytes] = []
        body_sent = False
        finished = anyio.Event()

        async def receive() -> Message:
            nonlocal body_sent
            if not body_sent:
                body_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await finished.wait()  # the client "disconnects" only once the answer is out
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                for key, value in message.get("headers", []):
                    answer_headers[key.decode("latin-1").lower()] = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False):
                    finished.set()

        # A manager runs once (its run() can't be re-entered), so each request gets its own:
        # stateless and JSON-only, nothing outlives the request.
        manager = StreamableHTTPSessionManager(self.server._lowlevel_server, stateless=True, json_response=True)
        with anyio.fail_after(self.timeout_s):
            async with manager.run():
                await manager.handle_request(scope, receive, send)
        return HttpAnswer(status, answer_headers, b"".join(chunks))
