"""The error mapping of the HTTP API: how the Powertools resolver answers every error (typed errors
by the contract's table, :mod:`rushmem_contract.kinds`; request validation, unknown routes and
methods, routes switched off, undecodable bodies) and the rest (500, logged)."""

from __future__ import annotations

import binascii
import json
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from rushmem.http import media
from rushmem.http.body import NOT_BASE64
from rushmem_contract.errors import AgentMemoryError, InvalidInput
from rushmem_contract.inputs import field_path
from rushmem_contract.kinds import INTERNAL, error_kind
from rushmem_contract.models import refusal
from rushmem_contract.retry import RETRY_AFTER_S
from rushmem_contract.schemas import ErrorBody, ErrorDetail

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
    from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEventV2


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

    # A message may quote the request (an unknown path, a field name from the body): a lone
    # surrogate there would make the error itself fail to serialize, a 500 for a 404.
    body = ErrorBody(
        code=code,
        message=_encodable(message),
        field=None if field is None else _encodable(field),
        errors=[
            ErrorDetail(field=None if e.field is None else _encodable(e.field), message=_encodable(e.message))
            for e in errors
        ]
        if errors
        else errors,
        request_id=request_id,
    )
    all_headers = dict(headers or {})
    if status == HTTPStatus.SERVICE_UNAVAILABLE:
        all_headers.setdefault("Retry-After", str(RETRY_AFTER_S))
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body.model_dump_json(exclude_none=True),
        headers=all_headers,
    )


def route_not_found(event: APIGatewayProxyEventV2, why: str = "") -> Response[Any]:
    """404 for the request's path: no such route, or (``why``) one this deployment does not serve."""
    message = f"no route {event.http_method} {event.path}" + (f" ({why})" if why else "")
    return error_response(HTTPStatus.NOT_FOUND, "route_not_found", message, request_id=event.request_context.request_id)


def _encodable(text: str) -> str:
    """``text`` with what UTF-8 cannot carry (lone surrogates) written as escapes."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def field_of(loc: Sequence[str | int]) -> str | None:
    """('body', 'memories', 0, 'content') -> 'memories[0].content'; ('query', 'limit') -> 'limit'."""
    return field_path(loc[1:] if loc and loc[0] in ("body", "query", "path", "header", "cookie") else loc) or None


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


def unsupported_media_type(found: str | None, request_id: str | None) -> Response[Any]:
    return error_response(
        HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        f"the body must be JSON with Content-Type: application/json (got {found!r})",
        request_id=request_id,
    )


def json_bodies_only(app: APIGatewayHttpResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """Powertools middleware (every route): 415 for a request that must be JSON and does not say so
    (:mod:`rushmem.http.media` says which and why)."""
    event = app.current_event
    found = media.content_type(event.headers)
    if media.needs_json(event.http_method, event.body) and not media.is_json_content_type(found):
        return unsupported_media_type(found, event.request_context.request_id)
    return next_middleware(app)


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
        return error_response(kind.status, kind.code, kind.message(exc), field=field, request_id=request_id())

    def invalid(exc: RequestValidationError | RequestUnsupportedContentType) -> Response[Any]:
        event = app.current_event
        found = media.content_type(event.headers)
        if isinstance(exc, RequestUnsupportedContentType) or (
            media.needs_json(event.http_method, event.body) and not media.is_json_content_type(found)
        ):
            return unsupported_media_type(found, request_id())
        details = describe_validation_errors(exc.errors())
        log.info("request invalid", extra={"errors": [d.model_dump() for d in details]})
        if any(e.get("type") == "json_invalid" or not e.get("loc")[1:] for e in exc.errors()):
            # Not a field's problem (no JSON, or no body at all): said as the body's.
            message = "; ".join(d.message for d in details) or "invalid request"
            return error_response(
                HTTPStatus.BAD_REQUEST, "invalid_input", message, errors=details, request_id=request_id()
            )
        # A field's: worded as every door words it (rushmem_contract.models.refusal), its path
        # without the resolver's location (body, query, path).
        refused = refusal([{**e, "loc": tuple(e["loc"])[1:]} for e in exc.errors()], "request")
        kind = error_kind(refused)
        return error_response(
            kind.status, kind.code, str(refused), field=refused.field, errors=details, request_id=request_id()
        )

    def not_text(exc: UnicodeDecodeError) -> Response[Any]:
        # Only reading the (base64) body decodes bytes in this API.
        return error_response(
            HTTPStatus.BAD_REQUEST, "invalid_input", "the request body is not UTF-8 JSON", request_id=request_id()
        )

    def not_base64(exc: binascii.Error) -> Response[Any]:
        # Only the resolver's reading of a body flagged base64 decodes base64 unguarded in this API.
        return error_response(HTTPStatus.BAD_REQUEST, "invalid_input", NOT_BASE64, request_id=request_id())

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
        return route_not_found(event)

    def service_error(exc: ServiceError) -> Response[Any]:
        message = exc.msg if isinstance(exc.msg, str) else json.dumps(exc.msg)
        return error_response(exc.status_code, f"http_{exc.status_code}", message, request_id=request_id())

    def unexpected(exc: Exception) -> Response[Any]:
        # The traceback goes to the log (with the request id as correlation id), never to the caller.
        log.exception("unhandled error", extra={"error": type(exc).__name__})
        return error_response(INTERNAL.status, INTERNAL.code, INTERNAL.message(exc), request_id=request_id())

    # Registered here rather than as decorators (the resolver's decorators are untyped).
    # The resolver picks the handler by the exception's MRO, so Exception only gets the rest;
    # a missing route is NotFoundError, which has its own handler (else it would be a 500).
    app.exception_handler(AgentMemoryError)(typed)
    app.exception_handler([RequestValidationError, RequestUnsupportedContentType])(invalid)
    app.exception_handler(UnicodeDecodeError)(not_text)
    app.exception_handler(binascii.Error)(not_base64)
    app.not_found(no_route)
    app.exception_handler(ServiceError)(service_error)
    app.exception_handler(Exception)(unexpected)
