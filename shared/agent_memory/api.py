"""The HTTP API of the read path: request/response models, who the caller is, and how every
error becomes an HTTP answer (the one place where error types meet status codes).

Used by functions/recall/app.py (Powertools APIGatewayHttpResolver) and, in reverse, by
:mod:`agent_memory.client`, which turns an error answer back into the same exception type.
Light on purpose: no database or embedding code is imported here (the client imports it).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from agent_memory.errors import (
    AgentMemoryError,
    ConfigurationError,
    DatabaseUnavailable,
    Forbidden,
    InputTooLarge,
    InvalidInput,
    NotFound,
    ProviderError,
    ServiceUnavailable,
    StatementTimeout,
)
from agent_memory.models import AwareDatetime, Memory, MemoryEvent, NewMemory, ProjectId, UserId

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
    from aws_lambda_powertools.event_handler.openapi.types import OpenAPIResponse

# The service's limits (service.MAX_LIMIT, service.MAX_PAGE; a test keeps them equal). Not
# imported from there, so the client (this module, models, errors) imports no database code.
MAX_LIMIT = 50
MAX_PAGE = 500
DEFAULT_PAGE = 100

# --------------------------------------------------------------------------------------
# request and response models
# --------------------------------------------------------------------------------------


class ContentPart(BaseModel):
    """One part of a multi-part chat message (OpenAI style); only text parts are read."""

    model_config = ConfigDict(extra="ignore")

    type: str = "text"
    text: str | None = None


class RecallMessage(BaseModel):
    """A chat message as agent frameworks pass them around: any role, text or parts."""

    model_config = ConfigDict(extra="ignore")

    role: Annotated[str, StringConstraints(max_length=64)]
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content.strip()
        parts = self.content or []
        return " ".join(p.text.strip() for p in parts if p.type == "text" and p.text and p.text.strip())


def latest_user_query(messages: Sequence[RecallMessage]) -> str | None:
    """The text of the latest user message that has text (the article's extractUserQuery)."""
    for message in reversed(messages):
        if message.role == "user" and (text := message.text()):
            return text
    return None


class RecallRequest(BaseModel):
    """POST /recall. Give ``query``, or ``messages`` to recall for the latest user message."""

    model_config = ConfigDict(extra="forbid")

    user_id: UserId | None = Field(default=None, description="Required without a JWT; with one, the token's sub.")
    project_id: ProjectId | None = Field(default=None, description="Also recall this project's memories.")
    query: str | None = Field(default=None, description="What to recall memories for.")
    messages: list[RecallMessage] | None = Field(
        default=None, description="Chat messages; the query is the latest user message."
    )
    limit: int | None = Field(default=None, ge=1, le=MAX_LIMIT, description=f"1..{MAX_LIMIT}, default 10.")
    now: AwareDatetime | None = Field(default=None, description="Recall as of this time (reproducible decay).")
    include_inactive: bool = Field(default=False, description="Also superseded and expired memories (for debugging).")

    def query_text(self) -> str:
        """The query to use; InvalidInput naming the field when there is none or two."""
        if self.query is not None and self.messages is not None:
            raise InvalidInput("give either query or messages, not both", field="messages")
        if self.messages is not None:
            text = latest_user_query(self.messages)
            if text is None:
                raise InvalidInput("messages has no user message with text to recall for", field="messages")
            return text
        if self.query is None:
            raise InvalidInput("query (or messages) is required", field="query")
        return self.query


class AddRequest(BaseModel):
    """POST /memories: store facts now (no LLM; the same rules as the write path)."""

    model_config = ConfigDict(extra="forbid")

    user_id: UserId | None = None
    project_id: ProjectId | None = None
    memories: list[NewMemory] = Field(min_length=1)


class MemoryList(BaseModel):
    """GET /memories: a page of memories, newest first; pass next_cursor to get the next page."""

    memories: list[Memory]
    next_cursor: str | None


class MemoryHistory(BaseModel):
    """GET /memories/{id}/history: every recorded change of one memory, oldest first."""

    events: list[MemoryEvent]


class ErrorDetail(BaseModel):
    # Optional in the schema too: answers leave out a null field (found by schemathesis).
    field: str | None = None
    message: str


class ErrorBody(BaseModel):
    """Every error answer: what went wrong, which field, and the request id to find the logs."""

    code: str
    message: str
    field: str | None = None
    errors: list[ErrorDetail] | None = None
    request_id: str | None = None


def no_content(description: str) -> OpenAPIResponse:
    """A bodiless answer (204): an empty content map, or the resolver would document its return type."""
    return {"description": description, "content": {}}


def documented(description: str, model: type[BaseModel] | None = None) -> OpenAPIResponse:
    """One entry of a route's ``responses`` (OpenAPI)."""
    if model is None:
        return {"description": description}
    return {"description": description, "content": {"application/json": {"model": model}}}


# Error answers every route can give (others are listed per route).
COMMON_ERRORS: dict[int, OpenAPIResponse] = {
    400: documented("Invalid request: the message names the problem and the field", ErrorBody),
    403: documented("user_id is not the authenticated user (JWT)", ErrorBody),
    404: documented("No such route, or (DELETE one) no such memory for this user", ErrorBody),
    405: documented("Method not allowed on this path (see Allow)", ErrorBody),
    415: documented("The body is not JSON", ErrorBody),
    500: documented("Unexpected error (details only in the logs, under request_id)", ErrorBody),
    503: documented("Database unavailable or too slow; retry (Retry-After)", ErrorBody),
}

# --------------------------------------------------------------------------------------
# identity
# --------------------------------------------------------------------------------------


def caller_user_id(claims: Mapping[str, Any] | None, requested: str | None) -> str:
    """Whose memories this request may touch.

    With JWT claims the user is ``sub`` and a different ``user_id`` is refused; without claims
    the caller is a trusted (IAM-signed) backend and must name the user.
    """
    if claims:
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise Forbidden("the token has no 'sub' claim, so the user is unknown")
        if requested is not None and requested != sub:
            raise Forbidden("user_id is not the authenticated user; a token only acts for its own 'sub'")
        return sub
    if requested is None:
        raise InvalidInput("user_id is required (the request carries no JWT identity)", field="user_id")
    return requested


# --------------------------------------------------------------------------------------
# errors -> HTTP (and back, for the client)
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class ErrorKind:
    error: type[AgentMemoryError]
    status: int
    code: str
    # None: the exception's own message (it is about the request). Otherwise this fixed text,
    # because the real message names hosts, settings or providers (logged, never returned).
    public_message: str | None = None


# Most specific first: the first kind the exception is an instance of wins.
ERROR_KINDS: tuple[ErrorKind, ...] = (
    ErrorKind(InputTooLarge, 413, "input_too_large"),
    ErrorKind(InvalidInput, 400, "invalid_input"),
    ErrorKind(Forbidden, 403, "forbidden"),
    ErrorKind(NotFound, 404, "not_found"),
    ErrorKind(StatementTimeout, 503, "statement_timeout", "the database took too long to answer; try again"),
    ErrorKind(DatabaseUnavailable, 503, "database_unavailable", "the database is unavailable; try again shortly"),
    ErrorKind(ProviderError, 502, "provider_error", "the embedding provider failed; try again"),
    ErrorKind(ConfigurationError, 500, "configuration_error", "the service is misconfigured (see its logs)"),
    ErrorKind(AgentMemoryError, 500, "internal_error", "internal error (see the service logs)"),
)
INTERNAL = ErrorKind(AgentMemoryError, 500, "internal_error", "internal error (see the service logs)")
RETRY_AFTER_S = 1


def error_kind(exc: BaseException) -> ErrorKind:
    for kind in ERROR_KINDS:
        if isinstance(exc, kind.error):
            return kind
    return INTERNAL


def error_response(
    status: int,
    code: str,
    message: str,
    *,
    field: str | None = None,
    errors: list[ErrorDetail] | None = None,
    request_id: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Response[Any]:
    from aws_lambda_powertools.event_handler import Response, content_types

    body = ErrorBody(code=code, message=message, field=field, errors=errors, request_id=request_id)
    all_headers = dict(headers or {})
    if status == HTTPStatus.SERVICE_UNAVAILABLE:
        all_headers.setdefault("Retry-After", str(RETRY_AFTER_S))
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(exclude_none=True),
        headers=all_headers,
    )


def field_of(loc: Sequence[str | int]) -> str | None:
    """('body', 'memories', 0, 'content') -> 'memories[0].content'; ('query', 'limit') -> 'limit'."""
    out = ""
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header", "cookie") else loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or None


def describe_validation_errors(errors: Sequence[Mapping[str, Any]]) -> list[ErrorDetail]:
    """Powertools/pydantic validation errors as (field, message) pairs, without echoing input."""
    details = []
    for err in errors:
        loc = tuple(err.get("loc") or ())
        kind = err.get("type")
        if kind == "json_invalid":
            reason = (err.get("ctx") or {}).get("error") or "JSON decode error"
            details.append(ErrorDetail(field=None, message=f"the request body is not valid JSON: {reason}"))
            continue
        field = field_of(loc)
        if kind == "missing" and field is None:
            message = "a JSON object is required as the request body"
        else:
            message = str(err.get("msg") or "invalid value")
        details.append(ErrorDetail(field=field, message=f"{field}: {message}" if field else message))
    return details


def is_json_content_type(value: str | None) -> bool:
    """What the API accepts: JSON, or no Content-Type at all."""
    if not value:
        return True
    media = value.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def allowed_methods(app: APIGatewayHttpResolver, path: str) -> list[str]:
    """Methods that have a route for ``path`` (for 405 and its Allow header)."""
    # The resolver keeps its routes privately; it has no 405 of its own.
    routes = [*getattr(app, "_static_routes", []), *getattr(app, "_dynamic_routes", [])]
    return sorted({route.method for route in routes if route.rule.match(path)})


def install_error_handlers(app: APIGatewayHttpResolver, log: Any) -> None:
    """Every error answer of the resolver, in one place: typed errors, validation, 404/405, the rest."""
    from aws_lambda_powertools.event_handler.exceptions import NotFoundError, ServiceError
    from aws_lambda_powertools.event_handler.openapi.exceptions import (
        RequestUnsupportedContentType,
        RequestValidationError,
    )

    def request_id() -> str | None:
        event = app.current_event
        return event.request_context.request_id if event is not None else None

    def typed(exc: AgentMemoryError) -> Response[Any]:
        kind = error_kind(exc)
        field = exc.field if isinstance(exc, InvalidInput) else None
        if kind.status >= HTTPStatus.INTERNAL_SERVER_ERROR:
            log.error("request failed", extra={"error": type(exc).__name__, "detail": str(exc), "code": kind.code})
        else:
            log.info("request refused", extra={"error": type(exc).__name__, "detail": str(exc), "field": field})
        message = kind.public_message or str(exc)
        return error_response(kind.status, kind.code, message, field=field, request_id=request_id())

    def invalid(exc: RequestValidationError | RequestUnsupportedContentType) -> Response[Any]:
        content_type = app.current_event.headers.get("content-type")
        if isinstance(exc, RequestUnsupportedContentType) or not is_json_content_type(content_type):
            return error_response(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                f"the body must be JSON with Content-Type: application/json (got {content_type!r})",
                request_id=request_id(),
            )
        details = describe_validation_errors(exc.errors())
        first = details[0] if details else ErrorDetail(field=None, message="invalid request")
        log.info("request invalid", extra={"errors": [d.model_dump() for d in details]})
        return error_response(
            HTTPStatus.BAD_REQUEST,
            "invalid_input",
            "; ".join(d.message for d in details) or first.message,
            field=first.field,
            errors=details,
            request_id=request_id(),
        )

    def not_text(exc: UnicodeDecodeError) -> Response[Any]:
        # Only reading the (base64) body decodes bytes in this API.
        return error_response(
            HTTPStatus.BAD_REQUEST, "invalid_input", "the request body is not UTF-8 JSON", request_id=request_id()
        )

    def no_route(exc: NotFoundError) -> Response[Any]:
        event = app.current_event
        allowed = allowed_methods(app, event.path)
        if allowed:
            return error_response(
                HTTPStatus.METHOD_NOT_ALLOWED,
                "method_not_allowed",
                f"{event.http_method} is not allowed on {event.path}; use {', '.join(allowed)}",
                request_id=request_id(),
                headers={"Allow": ", ".join(allowed)},
            )
        message = f"no route {event.http_method} {event.path}"
        return error_response(HTTPStatus.NOT_FOUND, "route_not_found", message, request_id=request_id())

    def service_error(exc: ServiceError) -> Response[Any]:
        message = exc.msg if isinstance(exc.msg, str) else json.dumps(exc.msg)
        return error_response(exc.status_code, f"http_{exc.status_code}", message, request_id=request_id())

    def unexpected(exc: Exception) -> Response[Any]:
        # The traceback goes to the log (with the request id as correlation id), never to the caller.
        log.exception("unhandled error", extra={"error": type(exc).__name__})
        return error_response(
            INTERNAL.status, INTERNAL.code, INTERNAL.public_message or "internal error", request_id=request_id()
        )

    # Registered here rather than as decorators (the resolver's decorators are untyped).
    # The resolver picks the handler by the exception's MRO, so Exception only gets the rest;
    # a missing route is NotFoundError, which has its own handler (else it would be a 500).
    app.exception_handler(AgentMemoryError)(typed)
    app.exception_handler([RequestValidationError, RequestUnsupportedContentType])(invalid)
    app.exception_handler(UnicodeDecodeError)(not_text)
    app.not_found(no_route)
    app.exception_handler(ServiceError)(service_error)
    app.exception_handler(Exception)(unexpected)


# --------------------------------------------------------------------------------------
# the client's side: an error answer back into the exception the service raised
# --------------------------------------------------------------------------------------


def error_from_answer(status: int, body: Any) -> AgentMemoryError:
    """The typed error for a non-2xx answer of this API (or of API Gateway in front of it)."""
    fields = body if isinstance(body, dict) else {}
    code, field = fields.get("code"), fields.get("field")
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "error"
    message = str(fields.get("message") or phrase)
    for kind in ERROR_KINDS:
        if code == kind.code:
            if issubclass(kind.error, InvalidInput):
                return kind.error(message, field=field if isinstance(field, str) else None)
            if issubclass(kind.error, ProviderError):
                return ProviderError("agent-memory API", message)
            return kind.error(message)
    if code in ("route_not_found", "method_not_allowed"):
        return ConfigurationError(f"{message} (is the API URL right?)")
    # Answers without our code come from API Gateway itself (auth, throttling, Lambda failures).
    if status in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
        return Forbidden(f"HTTP {status}: {message}")
    if status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE:
        return InputTooLarge(message)
    if status in (HTTPStatus.BAD_REQUEST, HTTPStatus.UNPROCESSABLE_ENTITY, HTTPStatus.UNSUPPORTED_MEDIA_TYPE):
        return InvalidInput(message)
    if status == HTTPStatus.NOT_FOUND:
        return ConfigurationError(f"HTTP 404: {message} (is the API URL right?)")
    if status == HTTPStatus.TOO_MANY_REQUESTS or status >= HTTPStatus.INTERNAL_SERVER_ERROR:
        return ServiceUnavailable(f"the memory API answered HTTP {status}: {message}")
    return AgentMemoryError(f"HTTP {status}: {message}")
