"""The client's side of :mod:`rushmem_contract.kinds`: an error answer back into the exception
the service raised (or, for answers API Gateway gives itself, the closest one)."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from rushmem_contract.errors import (
    AgentMemoryError,
    ConfigurationError,
    Forbidden,
    InputTooLarge,
    InvalidInput,
    ProviderError,
    ServiceUnavailable,
)
from rushmem_contract.kinds import kind_of_code


def error_from_answer(status: int, body: Any) -> AgentMemoryError:
    """The typed error for a non-2xx answer of this API (or of API Gateway in front of it)."""
    fields = body if isinstance(body, dict) else {}
    code, field = fields.get("code"), fields.get("field")
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "error"
    message = str(fields.get("message") or phrase)
    kind = kind_of_code(code)
    if kind is not None:
        if issubclass(kind.error, InvalidInput):
            return kind.error(message, field=field if isinstance(field, str) else None)
        if issubclass(kind.error, ProviderError):
            return ProviderError("rushmem API", message)
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
